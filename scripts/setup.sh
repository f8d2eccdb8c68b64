#!/usr/bin/env bash
# Installs what Parasync needs from Debian 12's packages (only what is
# missing), then configures and builds it. Idempotent: run it as often as you
# like. Usage: scripts/setup.sh [cmake preset, default "dev"] [targets...]
# (no targets: everything, tests included)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-dev}
shift || true
targets=("$@")

packages=(
  build-essential cmake ninja-build pkg-config git
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libeigen3-dev libssl-dev openssl libyaml-cpp-dev libboost-dev
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev qt6-svg-dev libgl-dev
  libqt6opengl6-dev  # qt6-charts-dev's CMake files need Qt6OpenGL's
  libgtest-dev libbenchmark-dev
  xvfb xauth
  openssh-server openssh-client iproute2
  dpkg-dev file librsvg2-bin desktop-file-utils appstream
  python3-crcmod poppler-utils
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "parasync setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cd "$here"
cmake --preset "$preset" >/dev/null
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build --preset "$preset" --target "${targets[@]}"
else
  cmake --build --preset "$preset"
fi
