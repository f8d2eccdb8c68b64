#!/usr/bin/env bash
# Sets up Parasync and runs the three-port demo cluster of the seeds:
# ps 127.0.0.1:2222, workers 127.0.0.1:2223 and 127.0.0.1:2224, training
# y = 2x + 10 + noise until w and b converge. Extra arguments are passed to
# every task (e.g. --mode=sync, --last_step=20000).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# The demo needs only the two programs, not the tests.
"$here/scripts/setup.sh" dev parasync parasync-node
node="$here/build/dev/app/parasync-node/parasync-node"
app="$here/build/dev/app/parasync/parasync"
logdir=${PARASYNC_DEMO_LOGDIR:-$here/build/demo-run}

if [ -x "$app" ]; then
  if [ -n "${DISPLAY:-}" ]; then
    exec "$app" --demo "$@"
  fi
  # No display: the same orchestration, headless, with the charts exported.
  exec "$app" --headless --demo --export="$here/build/demo-export" "$@"
fi

# Without the desktop app: the three tasks as the seeds start them by hand.
rm -rf "$logdir"
flags=(--ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --logdir="$logdir" "$@")
"$node" "${flags[@]}" --job_name=ps --task_index=0 | sed 's/^/[ps:0]     /' &
"$node" "${flags[@]}" --job_name=worker --task_index=1 | sed 's/^/[worker:1] /' &
"$node" "${flags[@]}" --job_name=worker --task_index=0 | sed 's/^/[worker:0] /' &
trap 'kill $(jobs -p) 2>/dev/null' INT TERM
wait
echo "run directory: $logdir (metrics.csv, steps.jsonl, cluster.json, checkpoints)"
