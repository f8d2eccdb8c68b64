#!/usr/bin/env bash
# Sets up Parasync and runs the whole test suite (unit and integration tests
# with real parasync-node processes on loopback ports).
# Usage: scripts/test.sh [cmake preset, default "ci"; "dev-asan" and
# "dev-tsan" run the suite under the sanitizers]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-ci}
"$here/scripts/setup.sh" "$preset"
cd "$here"
ctest --preset "$preset" --timeout 600 -j2
