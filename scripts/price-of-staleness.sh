#!/usr/bin/env bash
# What each update mode costs, measured: the staleness workload's mode
# comparison (16 workers, softmax with momentum on 10 blobs; async, sync,
# sync with a backup worker, ssp at two bounds) run once per seed, then a
# table of every contender's median and range over the seeds -- time to the
# target, global step there, final held-out accuracy and loss, staleness and
# what the workers' probes found a stale gradient worth. The app's own
# figure of the spread is $OUT/mode_comparison.png, its numbers
# $OUT/comparison_spread.csv.
# docs/price-of-staleness.md holds the table this wrote on our machines.
# Usage: scripts/price-of-staleness.sh [OUT_DIR] [SEEDS...]
#   (default: build/price-of-staleness, seeds 1 2 3; about 2.5 minutes a seed)
# Another workload in PARASYNC_WORKLOAD (default staleness; mlp: the same
# with a hidden layer, beside async with the learning rate / staleness).
# Extra flags for every comparison in PARASYNC_COMPARE_FLAGS, e.g.
#   PARASYNC_COMPARE_FLAGS="--modes=async,sync,ssp:4 --compare_seconds=60"
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/price-of-staleness}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
"$here/scripts/setup.sh" dev parasync parasync-node
app="$here/build/dev/app/parasync/parasync"

read -r -a extra <<<"${PARASYNC_COMPARE_FLAGS:-}"
workload=${PARASYNC_WORKLOAD:-staleness}
seed_list=$(IFS=,; echo "${seeds[*]}")
if [ -f "$out/comparison.csv" ]; then
  echo "already compared in $out (delete it to run again)"
else
  rm -rf "$out"
  mkdir -p "$out"
  # One comparison over every seed: the runs go to $out/seed-<s>/<contender>,
  # the figure draws each contender's median and range over the seeds.
  echo "comparing over seeds $seed_list into $out"
  "$app" --headless --compare_modes --workload="$workload" --seeds="$seed_list" --export="$out" "${extra[@]}" \
    >"$out/comparison.log" 2>&1 || { echo "the comparison failed: see $out/comparison.log" >&2; exit 1; }
fi

echo "load while measuring: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >"$out/table.md"
/usr/bin/python3 - "$out" "${seeds[@]}" >>"$out/table.md" <<'EOF'
import csv, statistics, sys

out, seeds = sys.argv[1], sys.argv[2:]
runs = {}   # contender -> list of rows, one per seed
order = []
with open(f"{out}/comparison.csv", newline="") as f:
    for row in csv.DictReader(f):
        name = row["mode_spec"] or row["mode"]
        if name not in runs:
            order.append(name)
        runs.setdefault(name, []).append(row)

def spread(rows, column, digits, none="not reached"):
    """median (min-max) over the seeds; `digits` decimals, or significant
    digits when given as a string ("3g": losses from 0.01 to 1e30)."""
    values = [float(r[column]) for r in rows if r.get(column, "") != ""]
    if not values:
        return none
    form = digits if isinstance(digits, str) else f".{digits}f"
    missing = len(rows) - len(values)
    text = f"{statistics.median(values):{form}} ({min(values):{form}}-{max(values):{form}})"
    return text + (f", {missing} of {len(rows)} not" if missing else "")

print(f"seeds {', '.join(seeds)}: median (min-max) over the seeds")
print()
print("| contender | time to target, s | global step there | final held-out accuracy | final held-out loss "
      "| staleness median | staleness max | probed gradient's cosine, median | global steps/s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name in order:
    rows = runs[name]
    print(f"| {name} | {spread(rows, 'time_to_target_s', 1)} | {spread(rows, 'global_step_at_target', 0)} "
          f"| {spread(rows, 'final_heldout_accuracy', 3, '-')} | {spread(rows, 'final_heldout_loss', '.3g', '-')} "
          f"| {spread(rows, 'staleness_median', 0)} | {spread(rows, 'staleness_max', 0)} "
          f"| {spread(rows, 'probe_cosine_median', 3, '-')} | {spread(rows, 'global_steps_per_s', 0)} |")
EOF
cat "$out/table.md"
