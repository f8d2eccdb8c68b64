#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) with the compile database of a configured
# build (default build/dev).
#   scripts/tidy.sh [build dir] [files...]   every .cpp of core/, ui/ and app/
#                                            (or the files given), a report
#   scripts/tidy.sh --short [build dir]      the short form the suite's `tidy`
#                                            test runs: core/base and
#                                            core/config, every finding an
#                                            error (exit 1)
# The short form takes about a minute on two cores; the whole tree, whose
# files include gRPC's and Qt's headers, many times that: too long for
# every CI run.
set -euo pipefail
cd "$(dirname "$0")/.."
short=false
if [ "${1:-}" = --short ]; then short=true; shift; fi
build=${1:-build/dev}
shift || true
[ -f "$build/compile_commands.json" ] || { echo "tidy.sh: no $build/compile_commands.json: configure first (cmake --preset dev)" >&2; exit 2; }
if $short; then
  mapfile -t files < <(git ls-files 'core/base/*.cpp' 'core/config/*.cpp')
  # run-clang-tidy 14 has no --warnings-as-errors: one clang-tidy a file.
  # GCC's warning flags in the compile database (-Wshadow=local) are not clang's: not findings.
  if ! printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet --warnings-as-errors='*' \
    --extra-arg=-Wno-unknown-warning-option; then
    echo "tidy.sh: clang-tidy found the above in core/base or core/config: fix them (or, for a check that is wrong for this code, say why in .clang-tidy)" >&2
    exit 1
  fi
  echo "tidy.sh: ${#files[@]} files of core/base and core/config, no findings"
  exit 0
fi
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files 'core/*.cpp' 'ui/*.cpp' 'app/*.cpp'); fi
run-clang-tidy -quiet -p "$build" -j "$(nproc)" "${files[@]}"
