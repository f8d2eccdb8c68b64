#!/usr/bin/env bash
# Builds the Debian package parasync_<version>_<arch>.deb: an optimised build
# of only what the package holds (the two programs, the Python package, the
# icons, the man pages) in its own build directory, then cpack.
# Usage: scripts/package.sh [OUT_DIR]   (default: build/package/out)
#   PARASYNC_PACKAGE_BUILD=DIR   the build directory (default: build/package)
# It prints the .deb's path on stdout, everything else on stderr.
# scripts/check-clean-install.sh installs it into a clean Debian 12 root;
# tests/integration/tst_package.sh (ctest -R package_deb) checks a package
# made from a development build.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=${PARASYNC_PACKAGE_BUILD:-$here/build/package}
out=${1:-$build/out}

say() { echo "package: $*" >&2; }
fail() { echo "package: $*" >&2; exit 1; }
case "${1:-}" in
  -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "package: unknown option $1: the one argument is the folder to write the .deb into (see --help)" >&2; exit 2 ;;
esac

# The build's own libraries are checked by cmake when it configures; these are
# the tools only packaging uses (scripts/setup.sh installs them all).
need=()
for tool_package in cmake:cmake ninja:ninja-build cpack:cmake dpkg-shlibdeps:dpkg-dev \
    rsvg-convert:librsvg2-bin help2man:help2man; do
  command -v "${tool_package%%:*}" >/dev/null || need+=("${tool_package#*:}")
done
[ ${#need[@]} -eq 0 ] || fail "missing ${need[*]}: run scripts/setup.sh, or apt-get install ${need[*]}"

# The tests are not in the package, so they are not built: cpack's own
# build step ("preinstall") would otherwise build everything, because it
# depends on "all" unless CMAKE_SKIP_INSTALL_ALL_DEPENDENCY is on.
mkdir -p "$build"
say "configuring $build (Release)"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPARASYNC_BUILD_APP=ON -DPARASYNC_BUILD_BENCH=OFF -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >"$build/package-configure.log" 2>&1 \
  || { cat "$build/package-configure.log" >&2; fail "cmake could not configure $build (scripts/setup.sh installs the libraries it needs)"; }
grep -q "help2man not found" "$build/package-configure.log" && fail "cmake did not find help2man: apt-get install help2man, then run this again"
targets=(parasync parasync-node parasync_icons parasync_man parasync_python)
say "building ${targets[*]}"
cmake --build "$build" --target "${targets[@]}" >&2

say "cpack into $out"
mkdir -p "$out"
rm -f "$out"/parasync_*.deb
cpack --config "$build/CPackConfig.cmake" -B "$out" >"$build/package-cpack.log" 2>&1 \
  || { cat "$build/package-cpack.log" >&2; fail "cpack failed (its log: $build/package-cpack.log)"; }
deb=$(find "$out" -maxdepth 1 -name 'parasync_*.deb' | head -n1)
[ -n "$deb" ] || { cat "$build/package-cpack.log" >&2; fail "cpack wrote no parasync_*.deb into $out"; }
say "$(dpkg-deb -f "$deb" Package Version Architecture Installed-Size | tr '\n' ' ')"
echo "$deb"
