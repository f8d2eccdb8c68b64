#!/usr/bin/env bash
# Before and after a change, on this machine under the same load: builds
# bench_roundtrip and parasync-node at REV (in a worktree under build/) and at
# the working tree, runs the round trips of both in turn ROUNDS times (3
# repetitions each) and prints bench/compare.py's table.
#   scripts/bench-compare.sh REV [ROUNDS] [FILTER]
#     REV      the commit before the change, e.g. HEAD or HEAD~1
#     ROUNDS   rounds of old, new (default 3)
#     FILTER   bench_roundtrip's --benchmark_filter (default '^(tcp|step)/')
# Benchmarks are not tests: nothing here passes or fails on a figure.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
rev=${1:?usage: scripts/bench-compare.sh REV [ROUNDS] [FILTER]}
rounds=${2:-3}
filter=${3:-'^(tcp|step)/'}
commit=$(git -C "$here" rev-parse --short "$rev")
old="$here/build/compare-$commit"
out="$here/build/compare-run"

targets=(bench_roundtrip parasync-node)
"$here/scripts/setup.sh" release "${targets[@]}"
if [ ! -d "$old/src" ]; then
  git -C "$here" worktree prune # a worktree of a build/ since removed
  git -C "$here" worktree add --detach "$old/src" "$commit"
fi
(cd "$old/src" && cmake --preset release > /dev/null && cmake --build --preset release --target "${targets[@]}")

rm -rf "$out"
mkdir -p "$out"
run() { # side build round
  uptime >> "$out/load.txt"
  PARASYNC_NODE="$2/app/parasync-node/parasync-node" "$2/bench/bench_roundtrip" \
    --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
    --benchmark_out="$out/$1-$3.json" --benchmark_out_format=json > /dev/null
}
for round in $(seq "$rounds"); do
  echo "== round $round of $rounds"
  run before "$old/src/build/release" "$round"
  run after "$here/build/release" "$round"
done
uptime >> "$out/load.txt"
echo "load during the runs:"
sed 's/.*load average/load average/' "$out/load.txt"
list() { ls "$out"/"$1"-*.json | paste -sd, -; }
/usr/bin/python3 "$here/bench/compare.py" --before="$(list before)" --after="$(list after)"
echo "before: $commit; after: the working tree ($(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet || echo ', changed'))"
