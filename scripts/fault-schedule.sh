#!/usr/bin/env bash
# The long seeded fault schedule: a replicated cluster (two ps pairs, three
# workers, each process in a network namespace of its own) killed, paused
# and partitioned for MINUTES while it trains and switches update modes,
# then every acknowledged update checked against the surviving step log
# (tests/faults/fault_schedule.py, history_check.py). ctest runs a minute
# and a half of it (faults_schedule_short); this is the long form.
#   sudo scripts/fault-schedule.sh [MINUTES, default 30] [SEED, default 7]
# Prints the faults by kind, the acknowledged updates, the violations (none
# expected) and the failover gaps; keeps the run's files and says where.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-30}
seed=${2:-7}
PARASYNC_SETUP_ALL_PACKAGES=1 "$here/scripts/setup.sh" dev parasync-node
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
/usr/bin/python3 "$here/tests/faults/fault_schedule.py" --minutes="$minutes" --seed="$seed" --keep \
  --node="$here/build/dev/app/parasync-node/parasync-node" || status=$?
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
