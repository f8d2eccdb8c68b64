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
  bad=0
  for f in "${files[@]}"; do
    if ! "$clang_format" --style=file "$f" | cmp -s - "$f"; then
      echo "not formatted: $f (run scripts/format.sh)"
      bad=1
    fi
  done
  [ $bad -eq 0 ] && echo "format: every source is as clang-format leaves it"
  exit $bad
fi
"$clang_format" --style=file -i "${files[@]}"
