#!/usr/bin/env bash
# Formats the C++ sources with clang-format and the checked-in .clang-format.
# Usage: scripts/format.sh           rewrites the files in place
#        scripts/format.sh --check   lists the files that differ, exits 1 if any
# (ctest's `format` test runs the check.)
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format}
command -v "$clang_format" >/dev/null || { echo "format.sh: $clang_format not found: install Debian's clang-format (scripts/setup.sh does)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.h' '*.cpp' 2>/dev/null || find core ui app tests bench fuzz -name '*.h' -o -name '*.cpp')
if [ "${1:-}" = "--check" ]; then
  # A clang-format a core, fifty files each: one process a file took 75 s of
  # CI's test time. --dry-run names each place that would change as
  # "FILE:LINE:COL: warning: code should be clang-formatted".
  "$clang_format" --style=file --dump-config >/dev/null || { echo "format.sh: clang-format cannot read .clang-format" >&2; exit 2; }
  mapfile -t bad < <(printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 50 "$clang_format" --style=file --dry-run 2>&1 \
    | sed -n 's/^\(.*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p' | sort -u)
  for f in "${bad[@]}"; do
    echo "not formatted: $f (run scripts/format.sh)"
  done
  [ ${#bad[@]} -eq 0 ] || exit 1
  echo "format: every source is as clang-format leaves it"
  exit 0
fi
"$clang_format" --style=file -i "${files[@]}"
