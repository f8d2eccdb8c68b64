#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) over the sources of core/, ui/ and app/ with
# the compile database of a configured build (default build/dev).
# Usage: scripts/tidy.sh [build dir] [files...]   (default: every .cpp)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
shift || true
[ -f "$build/compile_commands.json" ] || { echo "tidy.sh: no $build/compile_commands.json: configure first (cmake --preset dev)" >&2; exit 2; }
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files 'core/*.cpp' 'ui/*.cpp' 'app/*.cpp'); fi
run-clang-tidy -quiet -p "$build" -j "$(nproc)" "${files[@]}"
