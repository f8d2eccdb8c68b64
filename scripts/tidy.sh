#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) with the compile database of a configured
# build (default build/dev).
#   scripts/tidy.sh [build dir] [files...]   every .cpp of core/, ui/ and app/
#                                            (or the files given), a report
#   scripts/tidy.sh --short [build dir]      the short form the suite's `tidy`
#                                            test runs: the layers that reach
#                                            no gRPC header (core/base,
#                                            config, engine, formats, slurm,
#                                            kubeflow), every finding an
#                                            error (exit 1)
# The short form takes two to five minutes on two cores; a file that
# includes gRPC's and Qt's Widgets headers takes clang-tidy a minute or more,
# so the whole tree, some 170 such files, takes hours: not for every CI run.
set -euo pipefail
cd "$(dirname "$0")/.."
short=false
if [ "${1:-}" = --short ]; then short=true; shift; fi
build=${1:-build/dev}
shift || true
[ -f "$build/compile_commands.json" ] || { echo "tidy.sh: no $build/compile_commands.json: configure first (cmake --preset dev)" >&2; exit 2; }
if $short; then
  mapfile -t files < <(git ls-files 'core/base/*.cpp' 'core/config/*.cpp' 'core/engine/*.cpp' 'core/formats/*.cpp' \
    'core/slurm/*.cpp' 'core/kubeflow/*.cpp')
  # run-clang-tidy 14 has no --warnings-as-errors: one clang-tidy a file.
  # GCC's warning flags in the compile database (-Wshadow=local) are not clang's: not findings.
  if ! printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$build" --quiet --warnings-as-errors='*' \
    --extra-arg=-Wno-unknown-warning-option; then
    echo "tidy.sh: clang-tidy found the above: fix them (or, for a check that is wrong for this code, say why in .clang-tidy)" >&2
    exit 1
  fi
  echo "tidy.sh: ${#files[@]} files of core/base, config, engine, formats, slurm and kubeflow, no findings"
  exit 0
fi
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files 'core/*.cpp' 'ui/*.cpp' 'app/*.cpp'); fi
run-clang-tidy -quiet -p "$build" -j "$(nproc)" "${files[@]}"
