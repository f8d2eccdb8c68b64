#!/usr/bin/env bash
# Builds the benchmarks with the release preset, runs them all, prints the
# table, writes it as JSON (build/bench-run/results.json) and regenerates
# BENCHMARKS.md with the machine it came from.
#   scripts/bench.sh            the full run (about 40 minutes on 2 cores, 4 to 5 of them
#                               for the clusters of 8 to 64 workers)
#   scripts/bench.sh --quick    one short repetition of everything (about 2 minutes);
#                               BENCHMARKS.md is left alone unless --write-md
# Benchmarks are not tests: nothing here passes or fails on a figure.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
quick=0
write_md=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1; write_md=0 ;;
    --write-md) write_md=1 ;;
    *) echo "usage: scripts/bench.sh [--quick] [--write-md]" >&2; exit 2 ;;
  esac
done

PARASYNC_SETUP_ALL_PACKAGES=1 "$here/scripts/setup.sh" release bench_roundtrip bench_cluster bench_app_ingest bench_sparse_step \
  bench_sparse_table parasync-node parasync_python
build="$here/build/release"
out=${PARASYNC_BENCH_OUT:-$here/build/bench-run}
rm -rf "$out"
mkdir -p "$out/logs"
export PARASYNC_NODE="$build/app/parasync-node/parasync-node"
export PARASYNC_BENCH_LOGS="$out/logs"

load() { cut -d' ' -f1-3 /proc/loadavg; }
command_line="scripts/bench.sh${*:+ $*}"
load_before=$(load)
echo "load before: $load_before"

quick_flag=()
gbench_flags=(--benchmark_repetitions=7 --benchmark_enable_random_interleaving=true)
if [ $quick -eq 1 ]; then
  quick_flag=(--quick)
  gbench_flags=(--benchmark_repetitions=2 --benchmark_enable_random_interleaving=true)
fi

echo "== round trips: raw TCP, raw gRPC, one worker step against a real ps"
"$build/bench/bench_roundtrip" "${quick_flag[@]}" "${gbench_flags[@]}" \
  --benchmark_counters_tabular=true --benchmark_out="$out/roundtrip.json" --benchmark_out_format=json
echo "== a Python worker's step (python/parasync) against the same ps"
PYTHONPATH="$build/python" /usr/bin/python3 "$here/bench/python_step.py" "${quick_flag[@]}" --out="$out/python_step.json"
echo "== clusters of real processes: updates/s, 1 vs 2 ps, time to accuracy, telemetry cost, 8 to 64 workers"
"$build/bench/bench_cluster" "${quick_flag[@]}" --out="$out/cluster.json"
echo "== partitioned variables in a shaped network: 1M parameters, 4 workers, 1 / 2 / 4 ps hosts"
PYTHONPATH="$build/python" /usr/bin/python3 "$here/bench/partition_scaling.py" "${quick_flag[@]}" \
  --node="$PARASYNC_NODE" --out="$out/partition_scaling.json"
echo "== the same with the workers' links at 1 Gbit/s: the ps links the limit, as with many workers per ps"
PYTHONPATH="$build/python" /usr/bin/python3 "$here/bench/partition_scaling.py" "${quick_flag[@]}" \
  --node="$PARASYNC_NODE" --worker_rate=1gbit --out="$out/partition_scaling_fast_workers.json"
echo "== a sparse model's step: 1,000 Zipf ids x 16 floats against 1M- and 10M-row tables, beside raw TCP"
"$build/bench/bench_sparse_step" "${quick_flag[@]}" "${gbench_flags[@]}" \
  --benchmark_counters_tabular=true --benchmark_out="$out/sparse_step.json" --benchmark_out_format=json
echo "== an embedding table in-process: a step's rows at 1M and 10M rows, a 10M x 16 table's memory over 4 ps"
"$build/bench/bench_sparse_table" --benchmark_repetitions=3 --benchmark_counters_tabular=true \
  --benchmark_out="$out/sparse_table.json" --benchmark_out_format=json
echo "== embedding tables in a shaped network: fm:16 on a click log, 4 workers, 1 / 2 / 4 ps hosts, the ps links the limit"
PYTHONPATH="$build/python" /usr/bin/python3 "$here/bench/partition_scaling.py" "${quick_flag[@]}" \
  --node="$PARASYNC_NODE" --workload=sparse --worker_rate=1gbit --out="$out/sparse_scaling.json"
if [ -x "$build/bench/bench_app_ingest" ]; then
  # Separate processes, so the memory figure is the app's alone.
  echo "== the app's ingest: GUI event-loop latency with the demo at full speed: 2 and 64 workers started from the window, 64 started outside the app"
  "$build/bench/bench_app_ingest" "${quick_flag[@]}" --only=latency --out="$out/app_latency.json"
  echo "== the app's ingest: resident memory after 1M and 10M step events"
  "$build/bench/bench_app_ingest" "${quick_flag[@]}" --only=memory --out="$out/app_memory.json"
fi
load_after=$(load)

# The machine the figures came from, for BENCHMARKS.md.
python3 - "$out/machine.json" <<PY
import json, os, platform, subprocess, sys
cpu = "unknown"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
def git(*args):
    try:
        return subprocess.check_output(["git", "-C", "$here", *args], text=True).strip()
    except Exception:
        return "unknown"
json.dump({
    "cpu": cpu,
    "cores": os.cpu_count(),
    "kernel": platform.release(),
    "load_before": "$load_before (1, 5, 15 min)",
    "load_after": "$load_after (1, 5, 15 min)",
    "date": subprocess.check_output(["date", "-u", "+%Y-%m-%d %H:%M UTC"], text=True).strip(),
    "commit": git("rev-parse", "--short", "HEAD") + (" (with local changes)" if git("status", "--porcelain") else ""),
    "preset": "release (CMAKE_BUILD_TYPE=Release)",
    "quick": bool($quick),
}, open(sys.argv[1], "w"), indent=2)
PY

md_args=()
if [ $write_md -eq 1 ]; then
  md_args=(--markdown="$here/BENCHMARKS.md" --analysis=bench/analysis.md)
fi
python3 "$here/bench/report.py" --dir="$out" --machine="$out/machine.json" --command="$command_line" "${md_args[@]}"
