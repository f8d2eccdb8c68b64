#!/usr/bin/env bash
# The Debian package, as a user gets it: cpack builds it from this build
# tree's binaries, it is installed (dpkg -i when run as root and parasync is
# not installed yet; otherwise unpacked into a fresh root, leaving an existing
# installation alone), the INSTALLED parasync-node and headless app run, the
# installed Python package imports with Debian's python3, the
# desktop entry, metainfo and icons are validated, and the package is removed
# again so the machine is left as it was.
# Usage: tst_package.sh BUILD_DIR   (ctest passes its own build directory)
set -euo pipefail

build=${1:?usage: tst_package.sh BUILD_DIR}
app_id=io.github.parasync.Parasync
# ctest passes the cmake and cpack of the build; by hand, those on PATH.
cmake=${CMAKE:-cmake}
cpack=${CPACK:-cpack}
work=$(mktemp -d "${TMPDIR:-/tmp}/parasync-package.XXXXXX")
installed_by_us=0

say() { echo "package test: $*"; }
fail() { echo "package test: FAIL: $*" >&2; exit 1; }

cleanup() {
  if [ "$installed_by_us" = 1 ]; then
    say "removing the package this test installed"
    dpkg_retrying --purge parasync >/dev/null || echo "package test: could not remove parasync: run 'dpkg --purge parasync'" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# dpkg refuses at once when apt or another dpkg holds its lock; wait for it.
dpkg_retrying() {
  local attempt output
  for attempt in $(seq 1 60); do
    if output=$(dpkg "$@" 2>&1); then
      printf '%s\n' "$output"
      return 0
    fi
    if ! grep -qE "lock-frontend|frontend lock|database is locked" <<<"$output"; then
      printf '%s\n' "$output" >&2
      return 1
    fi
    sleep 2
  done
  printf '%s\n' "$output" >&2
  return 1
}

for tool in "$cmake" "$cpack" dpkg-deb dpkg-shlibdeps desktop-file-validate appstreamcli file; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/setup.sh installs dpkg-dev, desktop-file-utils, appstream and file)"
done
[ -f "$build/CPackConfig.cmake" ] || fail "$build has no CPackConfig.cmake: configure it with the app (PARASYNC_BUILD_APP=ON)"

# --- 1. Build the package from the binaries this tree has built. ----------
# cpack first builds the tree's "preinstall" target (everything). The ctest
# run has built it already; a tree that is not built fails here, saying so,
# instead of building under the test's timeout while other tests run its
# binaries.
pending=$("$cmake" --build "$build" --target preinstall -- -n 2>&1 | grep -c '^\[' || true)
[ "$pending" -eq 0 ] || fail "$build is not fully built ($pending steps to go): run cmake --build on it first"
say "cpack in $build"
"$cpack" --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb=$(find "$work/out" -maxdepth 1 -name 'parasync_*.deb' | head -n1)
[ -n "$deb" ] || { cat "$work/cpack.log" >&2; fail "cpack wrote no parasync_*.deb"; }
say "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

version=$(dpkg-deb -f "$deb" Version)
depends=$(dpkg-deb -f "$deb" Depends)
say "Depends: $depends"
# dpkg-shlibdeps found the linked libraries; the run-time plugins are explicit.
for dep in libc6 libqt6widgets6 libqt6charts6 libgrpc++ libprotobuf libqt6svg6 libqt6gui6; do
  grep -q "$dep" <<<"$depends" || fail "Depends lacks $dep"
done
contents=$(dpkg-deb -c "$deb")
for path in ./usr/bin/parasync ./usr/bin/parasync-node \
    ./usr/share/applications/$app_id.desktop ./usr/share/metainfo/$app_id.metainfo.xml \
    ./usr/share/icons/hicolor/scalable/apps/$app_id.svg ./usr/share/doc/parasync/copyright \
    ./usr/share/icons/hicolor/48x48/apps/$app_id.png ./usr/share/icons/hicolor/256x256/apps/$app_id.png \
    ./usr/lib/python3/dist-packages/parasync/__init__.py \
    ./usr/lib/python3/dist-packages/parasync/proto/parasync_pb2.py \
    ./usr/lib/python3/dist-packages/parasync/proto/parasync_pb2_grpc.py; do
  grep -q " $path\$" <<<"$contents" || fail "the package does not hold $path"
done
# The man pages are made by help2man when the build found it.
for program in parasync parasync-node; do
  grep -q " ./usr/share/man/man1/$program.1.gz\$" <<<"$contents" \
    || fail "the package has no man page $program.1.gz: install help2man (scripts/setup.sh does) and configure again"
done

# --- 2. Install it. --------------------------------------------------------
status=$(dpkg-query -W -f='${Status}' parasync 2>/dev/null || true)
# A parasync installed by dpkg or by hand (make install to /usr) stays as it is.
if [ "$(id -u)" -eq 0 ] && [[ "$status" != *" installed" && "$status" != *" half-"* && "$status" != *" unpacked" ]] \
    && [ ! -e /usr/bin/parasync ] && [ ! -e /usr/bin/parasync-node ]; then
  # Two checkouts testing at once must not install over each other.
  exec 9>"${TMPDIR:-/tmp}/parasync-package-test.lock"
  flock -w 600 9 || fail "another package test holds ${TMPDIR:-/tmp}/parasync-package-test.lock"
  installed_by_us=1
  say "installing with dpkg -i (its Depends must be satisfied on this machine)"
  dpkg_retrying -i "$deb" >"$work/dpkg.log" || { cat "$work/dpkg.log" >&2; fail "dpkg -i failed"; }
  dpkg-query -W -f='${Status}' parasync | grep -q "install ok installed" || fail "dpkg does not list parasync as installed"
  root=
else
  if [ "$(id -u)" -ne 0 ]; then
    say "not root: unpacking into a fresh root instead of installing (dpkg -i needs root)"
  else
    say "parasync is already installed (${status:-/usr/bin/parasync exists}): left alone, unpacking into a fresh root instead"
  fi
  root=$work/root
  dpkg-deb -x "$deb" "$root"
fi
bin=$root/usr/bin
share=$root/usr/share
for program in parasync parasync-node; do
  zgrep -q '^\.SH ENVIRONMENT' "$share/man/man1/$program.1.gz" \
    || fail "the $program(1) man page has no ENVIRONMENT section (its --help's Environment:)"
done

# --- 3. The installed binaries. --------------------------------------------
"$bin/parasync-node" --help >"$work/help.txt" || fail "installed parasync-node --help exited $?"
grep -q -- "--ps_hosts" "$work/help.txt" || fail "parasync-node --help does not list --ps_hosts"
# "parasync-node 0.1.0 (protocol 1)": the version, then the wire protocol.
case "$("$bin/parasync-node" --version)" in "parasync-node $version "*|"parasync-node $version") true ;; *) false ;; esac \
  || fail "parasync-node --version is not the package's version $version"

# Three free loopback ports for the demo cluster (it must not need 2222-2224).
ports=()
while [ ${#ports[@]} -lt 3 ]; do
  port=$((20000 + RANDOM % 30000))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ " ${ports[*]} " != *" $port "* ]]; then
    ports+=("$port")
  fi
done
export PARASYNC_DEMO_PORTS="${ports[0]},${ports[1]},${ports[2]}"
say "installed headless demo on ports $PARASYNC_DEMO_PORTS"
# No display: the app picks the offscreen platform plugin, which the package
# must bring in; the tasks are the installed parasync-node beside it.
env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM \
  timeout 300 "$bin/parasync" --headless --demo --last_step=300 --timeout=240 --export="$work/export" \
  >"$work/demo.log" 2>&1 || { cat "$work/demo.log" >&2; fail "installed parasync --headless --demo exited $?"; }
for pattern in '*.png' '*.svg' '*.csv'; do
  [ -n "$(find "$work/export" -name "$pattern" -size +0 | head -n1)" ] \
    || { cat "$work/demo.log" >&2; fail "the headless demo exported no $pattern into $work/export"; }
done
first_png=$(find "$work/export" -name '*.png' | head -n1)
file "$first_png" | grep -q "PNG image data" || fail "$first_png is not a PNG"
say "the headless demo exported $(find "$work/export" -type f | wc -l) files"

# The Python package: installed, python3 finds it on its own path; unpacked,
# through PYTHONPATH at the fresh root's dist-packages. Either way it must be
# the package's copy that imports (not a build tree's), protocol modules too.
site=$root/usr/lib/python3/dist-packages
[ -z "$root" ] && python_path= || python_path=$site
imported=$(cd "$work" && env -u PYTHONPATH ${python_path:+PYTHONPATH=$python_path} /usr/bin/python3 -c \
  'import parasync, parasync.proto.parasync_pb2_grpc; print(parasync.__file__)' 2>&1) \
  || fail "the installed Python package does not import: $imported"
[ "$imported" = "$site/parasync/__init__.py" ] || fail "python3 imported parasync from $imported, not $site/parasync"
say "python3 imports parasync from $imported"

# --- 4. Desktop entry, metainfo, icons. ------------------------------------
desktop-file-validate "$share/applications/$app_id.desktop" || fail "desktop-file-validate rejects the desktop entry"
appstreamcli validate --no-net "$share/metainfo/$app_id.metainfo.xml" || fail "appstreamcli rejects the metainfo"
grep -q "<project_license>Apache-2.0</project_license>" "$share/metainfo/$app_id.metainfo.xml" \
  || fail "the metainfo names no licence (Apache-2.0, LICENSE)"
grep -q "<release version=\"$version\"" "$share/metainfo/$app_id.metainfo.xml" \
  || fail "the metainfo's release is not the package's version $version"
exec_line=$(grep '^Exec=' "$share/applications/$app_id.desktop")
[ -x "$bin/${exec_line#Exec=}" ] || fail "the desktop entry's $exec_line is not an installed binary"
grep -q "^Icon=$app_id\$" "$share/applications/$app_id.desktop" || fail "the desktop entry's Icon is not $app_id"
for size in 48 256; do
  file "$share/icons/hicolor/${size}x${size}/apps/$app_id.png" | grep -q "PNG image data, $size x $size" \
    || fail "the ${size}x${size} icon is not a ${size}x${size} PNG"
done
file "$share/icons/hicolor/scalable/apps/$app_id.svg" | grep -q "SVG" || fail "the scalable icon is not SVG"

# --- 5. Remove it again. ---------------------------------------------------
if [ "$installed_by_us" = 1 ]; then
  dpkg_retrying --purge parasync >"$work/dpkg.log" || { cat "$work/dpkg.log" >&2; fail "dpkg --purge failed"; }
  installed_by_us=0
  [ ! -e /usr/bin/parasync ] && [ ! -e /usr/bin/parasync-node ] || fail "removing the package left its binaries"
  [ ! -e "/usr/share/applications/$app_id.desktop" ] || fail "removing the package left its desktop entry"
  say "installed, ran and removed the package"
else
  say "ran the package unpacked in a fresh root"
fi
