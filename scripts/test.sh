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
# The suite's fuzz_parsers test runs the libFuzzer targets (scripts/fuzz.sh).
# Build them first: compiled inside that test, next to the other tests on two
# cores, the clang build alone could use up the test's 15 minutes.
if [ "$preset" = ci ] && command -v clang++ >/dev/null; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz
fi
# Under ThreadSanitizer every process is 5-15 times slower and each test runs
# a cluster of them: two such tests side by side on two cores starve each
# other's tasks past the deadlines a user's loaded machine needs. One at a
# time, the suite tests races, not how much load the tests' waits absorb.
case "$preset" in
  *tsan*) jobs=1 ;;
  *) jobs=2 ;;
esac
ctest --preset "$preset" --timeout 600 -j"$jobs"
