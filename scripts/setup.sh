#!/usr/bin/env bash
# Installs what Parasync needs from Debian 12's packages (only what is
# missing), then configures and builds it. Idempotent: run it as often as you
# like.
# Usage: scripts/setup.sh [cmake preset, default "dev"] [targets...]
#   no targets: everything, tests included, and the packages the tests use;
#   targets (scripts/demo.sh builds parasync and parasync-node): only the
#   packages the build needs, unless PARASYNC_SETUP_ALL_PACKAGES=1.
# scripts/setup.sh --list-packages prints every package it may install.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)

# Every Debian package the build, the tests, the benchmarks and the Debian
# package use. ../shared/tools/check-setup-packages reads this list (CI runs
# it after the build, so a package missing here fails CI); it ends the list
# at the first closing parenthesis, so the comments inside have none.
packages=(
  # the build: the libraries and tools of both programs
  build-essential cmake ninja-build pkg-config git
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libeigen3-dev libssl-dev openssl libyaml-cpp-dev libboost-dev zlib1g-dev
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev qt6-svg-dev libgl-dev
  libqt6opengl6-dev  # qt6-charts-dev's CMake files need Qt6OpenGL's
  libcpp-httplib-dev  # the metrics endpoint, --metrics_port
  libabsl-dev  # a sparse table's index of ids, abseil's flat_hash_set
  # the tests, the benchmarks and the Debian package: a display server for
  # the window's tests, a real sshd for the remote ones, a real one-node
  # Slurm - slurmctld, slurmd, its client commands - with munge for tst_slurm,
  # the packaging tools, the readers the tests check exports with, and the sanitizer
  # runtime of the fuzz targets, which ctest runs through scripts/fuzz.sh,
  # and clang-format and clang-tidy, whose checks are tests; Debian's Python with gRPC,
  # protobuf, NumPy and crcmod - the CRC of their TensorBoard files - for
  # the Python workers, PyTorch for their torch
  # helper, and scikit-learn for the handwritten digits their tests train on;
  # venv, pip, setuptools and wheel, with which a test pip-installs the
  # package into a virtual environment, offline; a real Prometheus server
  # and promtool that scrape a cluster and check the recording rules
  libgtest-dev libbenchmark-dev
  prometheus
  xvfb xauth
  openssh-server openssh-client iproute2
  slurm-wlm munge
  dpkg-dev file librsvg2-bin desktop-file-utils appstream help2man
  python3-crcmod poppler-utils
  libclang-rt-14-dev clang-format clang-tidy
  python3-grpcio python3-protobuf python3-numpy python3-sklearn python3-torch
  python3-venv python3-pip python3-setuptools python3-wheel
)
# Of those, the ones only the tests need: scripts/demo.sh (which builds just
# the two programs) does without them.
test_packages=(
  libgtest-dev libbenchmark-dev xvfb xauth openssh-server openssh-client iproute2 slurm-wlm munge
  dpkg-dev file librsvg2-bin desktop-file-utils appstream help2man python3-crcmod poppler-utils
  libclang-rt-14-dev clang-format clang-tidy
  python3-grpcio python3-protobuf python3-numpy python3-sklearn python3-torch
  python3-venv python3-pip python3-setuptools python3-wheel
  prometheus
)
for p in "${test_packages[@]}"; do
  [[ " ${packages[*]} " == *" $p "* ]] || { echo "scripts/setup.sh: $p is in test_packages but not in packages" >&2; exit 2; }
done

if [ "${1:-}" = "--list-packages" ]; then
  echo "${packages[@]}"
  exit 0
fi

preset=${1:-dev}
shift || true
targets=("$@")
wanted=("${packages[@]}")
# PARASYNC_SETUP_ALL_PACKAGES=1: every package even with targets given, for
# scripts/bench.sh, whose targets need Google Benchmark and Debian's Python.
if [ ${#targets[@]} -gt 0 ] && [ "${PARASYNC_SETUP_ALL_PACKAGES:-0}" != 1 ]; then
  wanted=()
  for p in "${packages[@]}"; do
    [[ " ${test_packages[*]} " == *" $p "* ]] || wanted+=("$p")
  done
fi

missing=()
for p in "${wanted[@]}"; do
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
