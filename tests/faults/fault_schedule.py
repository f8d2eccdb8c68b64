#!/usr/bin/python3
"""Trains a replicated cluster under a seeded schedule of faults, then checks
what it acknowledged (history_check.py).

Every process -- two ps tasks, each a primary and a backup, and three
workers -- runs in a network namespace of its own, routed through a hub
namespace; a partition is a set of blackhole rules in the hub between two
sets of processes, dropping their packets silently as a pulled cable does.
The schedule, drawn from --seed, repeats: kill a process (SIGKILL, started
again with the same command a moment later), pause one (SIGSTOP, then
SIGCONT), partition any set of processes from any other, or switch the
update mode; each fault is healed before the next. Afterwards the cluster
must train again, and the checker reads every worker's acknowledgement
log, the step log and every process's output.

Needs root (network namespaces) and iproute2. Nothing leaves this machine:
the addresses are 10.232.N.2 inside namespaces it makes and removes.

    sudo /usr/bin/python3 tests/faults/fault_schedule.py --seed 7 --minutes 30

It prints the faults injected by kind, the checker's verdict and where the
run's files are; the exit code is 0 when no violation was found.
"""

import argparse
import collections
import json
import os
import pathlib
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import history_check  # noqa: E402

SUBNET = 232  # 10.232.<n>.0/24 per process; tests/support/net_namespace.h takes 10.231
PORT = 2222
PREFIX = "pfs"  # namespace names: pfs<pid>-hub, pfs<pid>-<n>


def run(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


class Network:
    """A hub namespace that routes between one namespace per process."""

    def __init__(self, count):
        self.tag = f"{PREFIX}{os.getpid()}"
        self.hub = f"{self.tag}-hub"
        self.count = count
        self.rules = []  # (from, to) pairs blackholed in the hub now

    @staticmethod
    def remove_leftovers():
        """Namespaces of runs whose process is gone (killed before cleaning up)."""
        for line in run("ip", "netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if not name.startswith(PREFIX) or "-" not in name:
                continue
            pid = name[len(PREFIX):].split("-")[0]
            if pid.isdigit() and not pathlib.Path(f"/proc/{pid}").exists():
                run("ip", "netns", "delete", name, check=False)

    def namespace(self, n):
        return f"{self.tag}-{n}"

    def address(self, n):
        return f"10.{SUBNET}.{n + 1}.2"

    def create(self):
        run("ip", "netns", "add", self.hub)
        self.exec_in(self.hub, "ip", "link", "set", "lo", "up")
        # /proc/sys/net is the namespace's own: this router forwards, the host is untouched.
        self.exec_in(self.hub, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")
        for n in range(self.count):
            ns, hub_side = self.namespace(n), f"{self.tag}h{n}"
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", hub_side, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "link", "set", hub_side, "netns", self.hub)
            self.exec_in(self.hub, "ip", "addr", "add", f"10.{SUBNET}.{n + 1}.1/24", "dev", hub_side)
            self.exec_in(self.hub, "ip", "link", "set", hub_side, "up")
            self.exec_in(ns, "ip", "addr", "add", f"{self.address(n)}/24", "dev", "eth0")
            self.exec_in(ns, "ip", "link", "set", "eth0", "up")
            self.exec_in(ns, "ip", "link", "set", "lo", "up")
            self.exec_in(ns, "ip", "route", "add", "default", "via", f"10.{SUBNET}.{n + 1}.1")

    def exec_in(self, ns, *args, check=True):
        return run("ip", "netns", "exec", ns, *args, check=check)

    def partition(self, side_a, side_b):
        """Drops every packet between the two sets, both ways."""
        for a in side_a:
            for b in side_b:
                for pair in ((a, b), (b, a)):
                    self.exec_in(self.hub, "ip", "rule", "add", "from", self.address(pair[0]), "to",
                                 self.address(pair[1]), "blackhole")
                    self.rules.append(pair)

    def heal(self):
        for a, b in self.rules:
            self.exec_in(self.hub, "ip", "rule", "del", "from", self.address(a), "to", self.address(b), "blackhole",
                         check=False)
        self.rules = []

    def destroy(self):
        for n in range(self.count):
            run("ip", "netns", "delete", self.namespace(n), check=False)
        run("ip", "netns", "delete", self.hub, check=False)


class Process:
    """One parasync-node task in its namespace, started again with the same command."""

    def __init__(self, name, job, network, n, command, output_dir, environment):
        self.name = name
        self.job = job  # as started: ps, ps_backup or worker (a pair's roles swap at a failover)
        self.network = network
        self.n = n
        self.command = command
        self.output = output_dir / f"{name.replace(':', '-')}.log"
        self.environment = environment
        self.popen = None
        self.paused = False
        self.started_at = 0  # the output's size when last started

    @property
    def address(self):
        return f"{self.network.address(self.n)}:{PORT}"

    def start(self):
        self.started_at = self.output.stat().st_size if self.output.exists() else 0
        with open(self.output, "ab") as out:
            out.write(f"=== {self.name} started at {time.time():.6f}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                ["ip", "netns", "exec", self.network.namespace(self.n)] + self.command,
                stdout=out, stderr=subprocess.STDOUT, env=self.environment, start_new_session=True)
        self.paused = False

    def running(self):
        return self.popen is not None and self.popen.poll() is None

    def signal(self, number):
        if self.running():
            os.kill(self.popen.pid, number)  # ip netns exec execs the task: its pid is the task's

    def kill(self):
        self.signal(signal.SIGKILL)
        if self.popen:
            self.popen.wait()
        self.paused = False

    def pause(self):
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout=30):
        """SIGTERM, as a user stops a task; SIGKILL if it does not end."""
        self.resume()
        self.signal(signal.SIGTERM)
        if not self.popen:
            return None
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def said_since_start(self, words):
        if not self.output.exists():
            return False
        with open(self.output, "rb") as f:
            f.seek(self.started_at)
            return words.encode() in f.read()


class Cluster:
    """Two replicated ps tasks and three workers, each in its own namespace."""

    PS_TASKS = 2
    WORKERS = 3

    def __init__(self, node, run_dir, network, compute_ms):
        self.node = node
        self.run_dir = run_dir
        self.network = network
        self.processes = []
        (run_dir / "logdir").mkdir(parents=True)
        (run_dir / "acknowledged").mkdir()
        (run_dir / "output").mkdir()
        # Every call carries the cluster's token: the tasks listen on
        # addresses beyond loopback.
        self.environment = dict(os.environ, PARASYNC_CLUSTER_TOKEN=secrets.token_hex(32))
        slots = {("ps", i): i for i in range(self.PS_TASKS)}
        slots.update({("ps_backup", i): self.PS_TASKS + i for i in range(self.PS_TASKS)})
        slots.update({("worker", i): 2 * self.PS_TASKS + i for i in range(self.WORKERS)})

        def hosts(job, count):
            return ",".join(f"{network.address(slots[(job, i)])}:{PORT}" for i in range(count))

        self.cluster_flags = [
            f"--ps_hosts={hosts('ps', self.PS_TASKS)}",
            f"--ps_backup_hosts={hosts('ps_backup', self.PS_TASKS)}",
            f"--worker_hosts={hosts('worker', self.WORKERS)}",
        ]
        # The whole step log is kept (--logdir_max_mb=0): the checker reads
        # every record from the first.
        training = [f"--logdir={run_dir / 'logdir'}", "--logdir_max_mb=0", "--last_step=0",
                    f"--compute_ms={compute_ms}", "--heartbeat_ms=500", "--save_checkpoint_secs=10"]
        for (job, index), n in sorted(slots.items(), key=lambda item: item[1]):
            command = [node, f"--job_name={job}", f"--task_index={index}"] + self.cluster_flags + training
            if job == "worker":
                command.append(f"--acknowledgement_log={run_dir / 'acknowledged' / f'worker-{index}.jsonl'}")
            name = f"ps:{index} backup" if job == "ps_backup" else f"{job}:{index}"
            self.processes.append(Process(name, job, network, n, command, run_dir / "output", self.environment))

    def ps_pair(self, index):
        return self.processes[index], self.processes[self.PS_TASKS + index]

    def workers(self):
        return self.processes[2 * self.PS_TASKS:]

    def partner(self, process):
        for index in range(self.PS_TASKS):
            primary, backup = self.ps_pair(index)
            if process is primary:
                return backup
            if process is backup:
                return primary
        return None

    def control(self, *flags, timeout=20):
        """A control command (--status, --set_mode) from the hub, which reaches every process."""
        try:
            result = subprocess.run(
                ["ip", "netns", "exec", self.network.hub, self.node] + self.cluster_flags + list(flags),
                capture_output=True, text=True, env=self.environment, timeout=timeout)
            return result.returncode, result.stdout + result.stderr
        except subprocess.TimeoutExpired:
            return None, f"no answer within {timeout} s"

    def acknowledged(self):
        """Lines in every worker's acknowledgement log."""
        counts = []
        for index in range(self.WORKERS):
            path = self.run_dir / "acknowledged" / f"worker-{index}.jsonl"
            counts.append(sum(1 for _ in open(path, "rb")) if path.exists() else 0)
        return counts


def wait_until(condition, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


class Schedule:
    """Faults drawn from one seed, each healed before the next."""

    KINDS = ("kill", "pause", "partition", "mode")
    WEIGHTS = (3, 2, 3, 1)

    def __init__(self, cluster, network, seed, record):
        self.cluster = cluster
        self.network = network
        self.rng = random.Random(seed)
        self.record = record  # a file: one JSON line per fault
        self.counts = collections.Counter()  # faults by kind
        self.kinds_hit = collections.Counter()  # kills and pauses by the job they hit

    def log(self, **fault):
        fault["time"] = time.time()
        self.record.write(json.dumps(fault) + "\n")
        self.record.flush()

    def run(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            kind = self.rng.choices(self.KINDS, self.WEIGHTS)[0]
            getattr(self, kind)()
            time.sleep(self.rng.uniform(0.5, 2.0))

    def kill(self):
        """SIGKILL, then the process started again with its own command."""
        self.take_down("kill", Process.kill, Process.start, 0.2, 2.5)

    def pause(self):
        """SIGSTOP, then SIGCONT."""
        self.take_down("pause", Process.pause, Process.resume, 0.2, 3.5)

    def take_down(self, kind, stop, restart, shortest, longest):
        target = self.rng.choice(self.cluster.processes)
        seconds = self.rng.uniform(shortest, longest)
        self.log(kind=kind, process=target.name, seconds=round(seconds, 3))
        stop(target)
        time.sleep(seconds)
        restart(target)
        self.counts[kind] += 1
        self.kinds_hit[f"{kind} {target.job}"] += 1

    def partition(self):
        everyone = list(range(len(self.cluster.processes)))
        self.rng.shuffle(everyone)
        cut = self.rng.randint(1, len(everyone) - 1)
        side_a, rest = everyone[:cut], everyone[cut:]
        # Mostly a clean split; sometimes only part of the rest, so that
        # some processes still reach both sides (a bridge).
        side_b = rest if self.rng.random() < 0.6 else self.rng.sample(rest, self.rng.randint(1, len(rest)))
        lasts = self.rng.uniform(1.0, 6.0)
        names = [[self.cluster.processes[n].name for n in side] for side in (side_a, side_b)]
        self.log(kind="partition", side_a=names[0], side_b=names[1], seconds=round(lasts, 3))
        self.network.partition(side_a, side_b)
        time.sleep(lasts)
        self.network.heal()
        self.counts["partition"] += 1

    def mode(self):
        mode = self.rng.choice(("async", "sync", "ssp"))
        flags = [f"--set_mode={mode}"]
        if mode == "ssp":
            flags.append(f"--staleness={self.rng.randint(1, 8)}")
        code, output = self.cluster.control(*flags)
        self.log(kind="mode", flags=flags, answered=code == 0, words=output.strip()[-300:])
        self.counts["mode switch" if code == 0 else "mode switch refused"] += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="the schedule's seed: the same seed, the same faults")
    parser.add_argument("--minutes", type=float, default=3, help="how long faults are injected")
    parser.add_argument("--node", default=os.environ.get("PARASYNC_NODE", "build/dev/app/parasync-node/parasync-node"),
                        help="the parasync-node binary (default $PARASYNC_NODE, else the dev build's)")
    parser.add_argument("--compute_ms", type=int, default=5, help="each worker step's simulated compute time")
    parser.add_argument("--out", help="where the run's files go (default: a new directory under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the run's files when no violation was found")
    args = parser.parse_args()

    if os.geteuid() != 0:
        print("fault_schedule.py makes network namespaces: run it as root (sudo /usr/bin/python3 ...)")
        sys.exit(77)  # ctest's SKIP_RETURN_CODE
    node = shutil.which(args.node) or os.path.abspath(args.node)
    if not os.access(node, os.X_OK):
        sys.exit(f"no parasync-node at {args.node}: build it (cmake --build build/dev) or give --node=PATH")
    run_dir = pathlib.Path(args.out) if args.out else pathlib.Path(
        tempfile.mkdtemp(prefix=f"parasync-faults-seed{args.seed}-"))
    run_dir.mkdir(parents=True, exist_ok=True)

    # Stopped by the user (Ctrl-C, kill, ctest's timeout): the finally below
    # kills the cluster and removes the namespaces instead of leaving them.
    def stop(signum, _frame):
        raise SystemExit(f"stopped by {signal.Signals(signum).name}; the run's files: {run_dir}")

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    Network.remove_leftovers()
    network = Network(2 * Cluster.PS_TASKS + Cluster.WORKERS)
    cluster = None
    verdict = None
    try:
        network.create()
        cluster = Cluster(node, run_dir, network, args.compute_ms)
        for process in cluster.processes:
            process.start()
        # Training, with both backups following, before the first fault.
        if not wait_until(lambda: min(cluster.acknowledged()) >= 20, 120):
            raise SystemExit(f"the cluster did not start training within 120 s; see {run_dir}/output")
        for index in range(Cluster.PS_TASKS):
            backup = cluster.ps_pair(index)[1]
            if not wait_until(lambda: backup.said_since_start("follows its primary at"), 60):
                raise SystemExit(f"{backup.name} did not follow its primary within 60 s; see {backup.output}")

        started = time.monotonic()
        with open(run_dir / "schedule.jsonl", "w") as record:
            schedule = Schedule(cluster, network, args.seed, record)
            schedule.run(args.minutes * 60)
        injected = time.monotonic() - started

        # Healed: every worker acknowledges again.
        network.heal()
        before = cluster.acknowledged()
        recovered = wait_until(lambda: all(a >= b + 20 for a, b in zip(cluster.acknowledged(), before)), 120)
        code, status = cluster.control("--status")
        # Stopped as a user stops a run: the workers, the chief last (it is
        # the witness of the pairs' leases), then the ps processes.
        for worker in reversed(cluster.workers()):
            worker.stop()
        for process in cluster.processes[:2 * Cluster.PS_TASKS]:
            process.stop()

        verdict = history_check.check(run_dir)
        if not recovered:
            verdict.violate(f"after the last fault healed, not every worker trained again within 120 s "
                            f"(acknowledged {before} then {cluster.acknowledged()}); --status said:\n{status}")
        print(f"seed {args.seed}: {sum(schedule.counts.values())} faults in {injected / 60:.1f} min: "
              + ", ".join(f"{k} {v}" for k, v in sorted(schedule.counts.items()))
              + " (" + ", ".join(f"{k} {v}" for k, v in sorted(schedule.kinds_hit.items())) + ")")
        print(history_check.summary(verdict))
        print(f"--status at the end:\n{status.strip()}")
        with open(run_dir / "verdict.json", "w") as out:
            json.dump({"seed": args.seed, "minutes": args.minutes, "faults": dict(schedule.counts),
                       "hit": dict(schedule.kinds_hit),
                       "acknowledged": verdict.acknowledged, "reported_losses": verdict.reported_losses,
                       "violations": verdict.violations, "failover_gaps": verdict.failover_gaps}, out, indent=1)
    finally:
        if cluster:
            for process in cluster.processes:
                if process.running():
                    process.kill()
        network.destroy()
    failed = verdict is None or bool(verdict.violations)
    if failed or args.keep:
        print(f"the run's files: {run_dir}")
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
