#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/: clang, address + undefined sanitizers)
# and runs each for a bounded time on a copy of its seed corpus, so that the
# checked-in corpus does not grow. Fails if any target finds a crash, a
# sanitizer report, a hang (an input over 5 s) or runaway memory (2 GB); the
# input that did it is kept in build/fuzz/artifacts/<target>/ and replays
# with: build/fuzz/fuzz/<target> build/fuzz/artifacts/<target>/crash-...
# Installs clang and libFuzzer from Debian 12's packages if missing.
# Usage: scripts/fuzz.sh [target...]   (default: all; PARASYNC_FUZZ_SECONDS
# sets the time per target, default 10)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
seconds=${PARASYNC_FUZZ_SECONDS:-10}
targets=(fuzz_host_list fuzz_slurm_environment fuzz_tf_config fuzz_cluster_file fuzz_checkpoint fuzz_csv fuzz_idx fuzz_node_flags
  fuzz_requests fuzz_event_file)
[ $# -gt 0 ] && targets=("$@")

packages=(clang libclang-rt-14-dev cmake ninja-build)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "parasync fuzz: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cd "$here"
# Others build on the same machine: stay out of their way.
nice cmake --preset fuzz >/dev/null
nice cmake --build --preset fuzz

work=$(mktemp -d /tmp/parasync-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work # targets that need a directory make theirs here
artifacts=$here/build/fuzz/artifacts
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

failed=()
started=$SECONDS
for target in "${targets[@]}"; do
  mkdir -p "$artifacts/$target"
  cp -r "$here/fuzz/corpus/$target" "$work/$target"
  log=$work/$target.log
  seeds=$(find "$work/$target" -type f | wc -l)
  status=ok
  if ! nice "$here/build/fuzz/fuzz/$target" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$target/" "$work/$target" >"$log" 2>&1; then
    status=FAILED
    failed+=("$target")
    echo "---- $target: $(grep -m1 -o 'INFO: Seed: [0-9]*' "$log" || true)" >&2
    grep -v -E '^#[0-9]+\s+(NEW|REDUCE|pulse|INITED)' "$log" | tail -n 80 >&2 || true
  fi
  # A target that dies before its first report leaves these empty.
  execs=$(grep -o 'number_of_executed_units: [0-9]*' "$log" | tail -n1 | awk '{print $2}' || true)
  coverage=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n1 | awk '{print $2 " edges, " $4 " features"}' || true)
  corpus=$(find "$work/$target" -type f | wc -l)
  printf '%-18s %-6s %9s execs  %-28s corpus %s -> %s\n' "$target" "$status" "${execs:-?}" \
    "${coverage:-no coverage line}" "$seeds" "$corpus"
done
echo "fuzzed ${#targets[@]} targets for ${seconds} s each in $((SECONDS - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "parasync fuzz: ${failed[*]} found a bug; the inputs are in $artifacts" >&2
  exit 1
fi
