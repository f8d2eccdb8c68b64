#!/usr/bin/env bash
# Does the Debian package install and run on a clean Debian 12? A fresh
# minimal bookworm root (debootstrap --variant=minbase, from the Debian mirror
# this machine's apt uses) gets the package with `apt-get install
# --no-install-recommends ./parasync_*.deb`, so only its declared Depends come
# in: a library it needs but does not declare fails the run here, where on a
# developer's machine something else would have installed it. Inside the root
# it then runs parasync-node --version, man parasync-node and the app's
# headless demo with export, and checks the exported charts.
#
# Usage (as root): scripts/check-clean-install.sh [PACKAGE.deb]
#   no PACKAGE.deb: scripts/package.sh builds one first.
#   PARASYNC_CLEAN_ROOT_CACHE=DIR  where the debootstrapped root is kept as a
#     tarball (default /var/cache/parasync-clean-root); delete it to bootstrap
#     anew. The root the package is installed into is unpacked fresh every run.
# Not part of ctest: it takes minutes (docs/development.md gives the times).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
suite=bookworm
cache=${PARASYNC_CLEAN_ROOT_CACHE:-/var/cache/parasync-clean-root}
# man-db only for `man parasync-node`: the package needs none of it.
include=man-db

say() { echo "clean install: $*"; }
fail() { echo "clean install: FAIL: $*" >&2; exit 1; }
usage() { echo "clean install: $*" >&2; exit 2; }

case "${1:-}" in
  -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) usage "unknown option $1: give a parasync_*.deb, or nothing to build one (see --help)" ;;
esac
[ "$(id -u)" -eq 0 ] || usage "needs root (debootstrap, chroot and mounts): run it with sudo"
deb=${1:-}
if [ -n "$deb" ]; then
  [ -f "$deb" ] || usage "$deb is not a file: give a parasync_*.deb, or nothing to build one with scripts/package.sh"
  deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
fi

phase_start=0
phase_name=
phases=()
phase() {
  local now
  now=$(date +%s)
  if [ -n "$phase_name" ]; then
    phases+=("$(printf '%-22s %4d s' "$phase_name" $((now - phase_start)))")
    say "$phase_name: $((now - phase_start)) s"
  fi
  phase_name=$1
  phase_start=$now
  [ -z "$phase_name" ] || say "--- $phase_name"
}
started=$(date +%s)

work=$(mktemp -d /var/tmp/parasync-clean-install.XXXXXX)
root=$work/root
mounted=()
cleanup() {
  local i
  [ -d "$work" ] || return 0
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" 2>/dev/null \
      || echo "clean install: could not unmount ${mounted[$i]}: umount -l it by hand" >&2
  done
  mounted=()
  # Never delete through a mount that is still there.
  if findmnt -rn -o TARGET | grep "^$root" >/dev/null; then
    echo "clean install: something is still mounted under $root: left $work in place" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The mirror apt uses here (deb822 .sources or one-line sources.list), so that
# the check works where only that mirror is reachable.
mirror_of() {
  local suite_pattern=$1 file
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    # deb822 stanzas are separated by blank lines; the first whose Suites
    # has the suite gives its first URI.
    awk -v want="$suite_pattern" '
      /^[[:space:]]*$/ { if (uri != "" && hit) { print uri; exit } uri = ""; hit = 0; next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == want) hit = 1 }
      END { if (uri != "" && hit) print uri }' "$file"
  done
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    awk -v want="$suite_pattern" '$1 == "deb" && $3 == want { print $2; exit }' "$file"
  done
}
mirror=$(mirror_of "$suite" | head -n1)
security=$(mirror_of "$suite-security" | head -n1)
[ -n "$mirror" ] || usage "no Debian $suite mirror in /etc/apt/sources.list or /etc/apt/sources.list.d: add one (e.g. http://deb.debian.org/debian)"
say "mirror $mirror${security:+, security $security}"

# --- the package -------------------------------------------------------------
if [ -z "$deb" ]; then
  phase "scripts/package.sh"
  deb=$("$here/scripts/package.sh" | tail -n1)
  [ -f "$deb" ] || fail "scripts/package.sh made no package"
fi
say "package $deb ($(dpkg-deb -f "$deb" Version), $(du -k "$deb" | cut -f1) KiB)"
say "Depends: $(dpkg-deb -f "$deb" Depends)"

# --- the clean root ------------------------------------------------------------
if ! command -v debootstrap >/dev/null; then
  phase "install debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
    || fail "apt-get could not install debootstrap: run apt-get update, then this again"
fi
# The tarball is of the finished root (not debootstrap's --make-tarball of
# its downloads), so a later run only unpacks it. Its name holds what made
# it: another mirror or another include list makes another root.
key=$(printf '%s %s %s minbase' "$suite" "$mirror" "$include" | sha256sum | cut -c1-12)
tarball=$cache/$suite-minbase-$key.tar.gz
mkdir -p "$root"
if [ -f "$tarball" ]; then
  phase "unpack cached root"
  say "from $tarball"
  tar -xzf "$tarball" -C "$root" || fail "$tarball does not unpack: delete it and run this again"
else
  phase "debootstrap"
  say "$suite, minbase, from $mirror"
  debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; fail "debootstrap failed (is $mirror reachable?)"; }
  phase "cache the root"
  say "into $tarball"
  # Written aside and renamed, so that a run stopped half-way or another
  # run at the same time never leaves a half tarball under the cache's name.
  mkdir -p "$cache"
  if tar -czf "$tarball.$$.partial" -C "$root" --numeric-owner .; then
    mv "$tarball.$$.partial" "$tarball"
  else
    rm -f "$tarball.$$.partial"
    say "could not write $tarball: the next run bootstraps again"
  fi
fi

# A real Debian 12 also has its updates and security suites: the package is
# built against this machine's libraries, which may come from them.
{
  echo "deb $mirror $suite main"
  echo "deb $mirror $suite-updates main"
  [ -z "$security" ] || echo "deb $security $suite-security main"
} >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No service of a package may start inside the root.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"

# The tasks' gRPC and Qt need /proc, pseudo-terminals and shared memory; the
# host's /dev is not bound in, so nothing the root does can reach it.
mount_in_root() {
  local type=$1 target=$root$2
  shift 2
  mkdir -p "$target"
  mount -t "$type" "$@" "$type" "$target"
  mounted+=("$target")
}
mount_in_root proc /proc
mount_in_root devpts /dev/pts -o newinstance,ptmxmode=0666
mount_in_root tmpfs /dev/shm -o mode=1777
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# --- install -------------------------------------------------------------------
phase "apt-get update"
in_root apt-get update -qq >"$work/apt-update.log" 2>&1 \
  || { cat "$work/apt-update.log" >&2; fail "apt-get update failed in the clean root"; }

phase "apt-get install"
say "apt-get install --no-install-recommends ./$(basename "$deb")"
cp "$deb" "$root/tmp/"
in_root DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "/tmp/$(basename "$deb")" \
  >"$work/apt-install.log" 2>&1 || { tail -n 40 "$work/apt-install.log" >&2; fail "apt-get could not install the package"; }
say "$(grep -E '^[0-9]+ upgraded, [0-9]+ newly installed' "$work/apt-install.log" || true)"
in_root dpkg-query -W -f='${Status}\n' parasync | grep -q "install ok installed" || fail "dpkg does not list parasync as installed"

# --- run it --------------------------------------------------------------------
phase "version, man page"
version=$(in_root parasync-node --version 2>&1) || fail "parasync-node --version exited $? in the clean root: $version"
say "$version"
[[ "$version" == "parasync-node $(dpkg-deb -f "$deb" Version)"* ]] || fail "parasync-node --version is not the package's version"
in_root test -f /usr/share/man/man1/parasync-node.1.gz || fail "the package installed no /usr/share/man/man1/parasync-node.1.gz"
in_root test -f /usr/share/man/man1/parasync.1.gz || fail "the package installed no /usr/share/man/man1/parasync.1.gz"
in_root MANPAGER=cat MANWIDTH=80 man parasync-node >"$work/man.txt" 2>"$work/man.err" \
  || { cat "$work/man.err" >&2; fail "man parasync-node failed in the clean root"; }
grep -q "ENVIRONMENT" "$work/man.txt" && grep -q -- "--ps_hosts" "$work/man.txt" \
  || { head -n 20 "$work/man.txt" >&2; fail "man parasync-node has no ENVIRONMENT or no --ps_hosts"; }
say "man parasync-node: $(wc -l <"$work/man.txt") lines, $(grep -c '^[A-Z]' "$work/man.txt") sections"

phase "headless demo"
# Three free loopback ports (the root shares this machine's network), so
# that a demo or cluster already on 2222-2224 does not get in the way.
ports=()
while [ ${#ports[@]} -lt 3 ]; do
  port=$((20000 + RANDOM % 30000))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ " ${ports[*]} " != *" $port "* ]]; then
    ports+=("$port")
  fi
done
in_root QT_QPA_PLATFORM=offscreen PARASYNC_DEMO_PORTS="${ports[0]},${ports[1]},${ports[2]}" \
  timeout 300 parasync --headless --demo --last_step=200 --timeout=240 --export=/tmp/export \
  >"$work/demo.log" 2>&1 || { rc=$?; tail -n 40 "$work/demo.log" >&2; fail "parasync --headless --demo exited $rc in the clean root"; }
exported=$(cd "$root/tmp/export" && find . -type f -size +0 | sed 's|^\./||' | sort)
# The charts, and the run directory the demo writes into the export.
for file in loss.png loss.svg loss.csv run/metrics.csv; do
  grep -qx "$file" <<<"$exported" || { tail -n 20 "$work/demo.log" >&2; fail "the demo exported no $file (it wrote: $(tr '\n' ' ' <<<"$exported"))"; }
done
[ "$(head -c 4 "$root/tmp/export/loss.png" | tail -c 3)" = PNG ] || fail "the exported loss.png is not a PNG"
say "the demo exported $(wc -l <<<"$exported") files ($(grep -c '^run/' <<<"$exported") of them its run directory)"
say "$(grep '^global step' "$work/demo.log" | tail -n 1)"

# Timed as its own phase: removing a root of some 600 MiB takes a while.
phase "remove the root"
cleanup
trap - EXIT

phase ""
say "times:"
printf '  %s\n' "${phases[@]}"
say "passed in $(($(date +%s) - started)) s"
