"""Partitioned variables where the network, not the CPU, is the limit.

Two workloads (--workload): "dense", a softmax whose W is partitioned over
the ps tasks; "sparse", a factorization machine (fm:16) on a click log whose
embedding tables' rows are spread over the ps tasks by id, each step moving
only the rows of the batch's ids (docs/sparse.md).

Every task runs on a "host" of its own: a Linux network namespace joined to
this one by a veth pair whose two ends are shaped with netem (a rate and a
delay each way, --rate and --delay; where the kernel lacks netem, a token
bucket shapes the rate alone), routed through this namespace as
through a switch. A softmax with 1,000,000 parameters (W [100000, 10]) is
trained by 4 workers in async mode over 1, 2 and 4 ps tasks; W is
partitioned over the ps tasks (--min_slice_bytes's default), so each ps
carries 1/n of the bytes. Configurations are interleaved over --rounds.

Per run it measures, over a window after a warm-up: global steps per second
(from ps:0's ClusterControl status), bytes per global step on each ps
task's link and on the workers' links (the veth counters), each link's
utilisation (its busier direction against --rate), and how busy the
machine's CPUs were (/proc/stat) -- the figure that says whether the
network was the limit.

Needs root (network namespaces, tc) and iproute2; without them it writes
{"skipped": reason} and exits 0. A benchmark, not a test: nothing here
passes or fails on a figure. Run by scripts/bench.sh; alone:
  PYTHONPATH=build/release/python /usr/bin/python3 bench/partition_scaling.py \\
      --node build/release/app/parasync-node/parasync-node --out /tmp/scaling.json
"""

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SUBNET = "10.232"  # tests/support/net_namespace uses 10.231
PS_PORT = 7000
WORKER_PORT = 7001


def run(*args, check=True):
    result = subprocess.run(args, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


class Hosts:
    """`count` namespaces, host i at SUBNET.i.2, its link shaped both ways."""

    def __init__(self, count, rate, delay, worker_rate=None):
        self.prefix = f"pz{os.getpid() % 10000}"
        self.count = count
        self.rate, self.delay = rate, delay
        self.worker_rate = worker_rate or rate  # hosts 4 and up hold the workers
        self.netem = None  # whether the kernel has it: probed once
        self.created = []
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            self.forward = f.read().strip()

    def rate_of(self, i):
        return self.worker_rate if i >= 4 else self.rate

    def shape_args(self, i):
        """A netem qdisc (rate and delay) where the kernel has netem, else a
        token bucket (rate only; self.delay becomes None: not emulated)."""
        if self.netem is None:
            probe = f"{self.prefix}probe"
            run("ip", "netns", "add", probe)
            try:
                self.netem = run("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
                                 "delay", "1ms", check=False).returncode == 0
            finally:
                run("ip", "netns", "del", probe, check=False)
            if not self.netem:
                self.delay = None
        if self.netem:
            # netem's queue holds packets, not bytes: room for several
            # megabytes in flight so that the shaper delays, never drops.
            return ("root", "netem", "delay", self.delay, "rate", self.rate_of(i), "limit", "100000")
        # A bucket of 128 KiB holds more than a timer tick's worth at 1 Gbit/s;
        # a 4 MB message may queue for up to a second rather than be dropped.
        return ("root", "tbf", "rate", self.rate_of(i), "burst", "128kb", "latency", "1s")

    def name(self, i):
        return f"{self.prefix}h{i}"

    def link(self, i):  # this side of host i's veth pair
        return f"{self.prefix}v{i}"

    def address(self, i):
        return f"{SUBNET}.{i}.2"

    def __enter__(self):
        try:
            for i in range(self.count):
                ns, here, there = self.name(i), self.link(i), f"{self.prefix}n{i}"
                run("ip", "netns", "add", ns)
                self.created.append(i)
                run("ip", "link", "add", here, "type", "veth", "peer", "name", there)
                run("ip", "link", "set", there, "netns", ns)
                run("ip", "addr", "add", f"{SUBNET}.{i}.1/24", "dev", here)
                run("ip", "link", "set", here, "up")
                inside = ("ip", "netns", "exec", ns)
                run(*inside, "ip", "addr", "add", f"{self.address(i)}/24", "dev", there)
                run(*inside, "ip", "link", "set", there, "up")
                run(*inside, "ip", "link", "set", "lo", "up")
                run(*inside, "ip", "route", "add", "default", "via", f"{SUBNET}.{i}.1")
                shape = self.shape_args(i)
                run("tc", "qdisc", "add", "dev", here, *shape)
                run(*inside, "tc", "qdisc", "add", "dev", there, *shape)
            with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
                f.write("1")
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for i in self.created:
            for pid in run("ip", "netns", "pids", self.name(i), check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            run("ip", "link", "del", self.link(i), check=False)
            run("ip", "netns", "del", self.name(i), check=False)
        self.created = []
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write(self.forward)
        return False

    def counters(self, i):
        """(bytes into host i, bytes out of it) so far."""
        base = f"/sys/class/net/{self.link(i)}/statistics/"
        with open(base + "tx_bytes") as tx, open(base + "rx_bytes") as rx:
            return int(tx.read()), int(rx.read())


def cpu_times():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields), idle


def rate_bytes_per_second(rate):
    units = {"kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8}
    for unit, factor in units.items():
        if rate.endswith(unit):
            return float(rate[:-len(unit)]) * factor
    raise ValueError(f"--rate={rate}: give it as e.g. 100mbit or 1gbit")


def global_step(address, token):
    import grpc
    from parasync.proto import parasync_pb2 as pb
    from parasync.proto import parasync_pb2_grpc as pb_grpc
    with grpc.insecure_channel(address) as channel:
        status = pb_grpc.ClusterControlStub(channel).GetClusterStatus(
            pb.ClusterStatusRequest(), metadata=(("parasync-cluster-token", token),), timeout=5)
    return status.global_step


# What each workload trains, and the words the report says it in.
WORKLOADS = {
    # 1,000,010 parameters, W [100000, 10] split over the ps tasks: every
    # step moves all of them each way.
    "dense": {"flags": ["--model=softmax", "--dataset=blobs:10:100000", "--samples_per_shard=40", "--batch_size=10",
                        "--learning_rate=0.01"],
              "model": "A softmax of 1,000,010 parameters (W [100000, 10] partitioned over the ps tasks)"},
    # 10 fields of 1,000,000 values drawn Zipf 1.1: a batch of 1,000 samples
    # touches about 5,500 distinct ids; each step pushes their rows'
    # gradients (17 floats: a weight and 16 factors) and pulls the next
    # batch's rows.
    "sparse": {"flags": ["--model=fm:16", "--dataset=clicklog:10:1000000:1.1", "--samples_per_shard=20000",
                         "--batch_size=1000", "--optimizer=adagrad", "--learning_rate=0.05"],
               "model": "A factorization machine of rank 16 (fm:16) on a click log of 10 fields of 1,000,000 "
                        "values drawn Zipf 1.1, batches of 1,000 samples (its tables' rows spread over the ps "
                        "tasks by id; a step moves the rows of the batch's ids)"},
}


def measure(hosts, node, workload, num_ps, num_workers, warmup_steps, seconds, logs):
    ps_hosts = [f"{hosts.address(i)}:{PS_PORT}" for i in range(num_ps)]
    worker_hosts = [f"{hosts.address(4 + j)}:{WORKER_PORT}" for j in range(num_workers)]
    token = secrets.token_hex(32)
    env = dict(os.environ, PARASYNC_CLUSTER_TOKEN=token)
    common = [f"--ps_hosts={','.join(ps_hosts)}", f"--worker_hosts={','.join(worker_hosts)}",
              *WORKLOADS[workload]["flags"], "--mode=async", "--last_step=0", "--display_step=100000000"]
    processes = []
    try:
        for job, count, host in (("ps", num_ps, lambda k: k), ("worker", num_workers, lambda k: 4 + k)):
            for k in range(count):
                log = open(os.path.join(logs, f"{num_ps}ps-{job}{k}.log"), "w")
                processes.append(subprocess.Popen(
                    ["ip", "netns", "exec", hosts.name(host(k)), node, f"--job_name={job}", f"--task_index={k}",
                     *common], stdout=log, stderr=subprocess.STDOUT, env=env))
        ps0 = ps_hosts[0]
        deadline = time.monotonic() + 120
        while True:  # the warm-up: every worker joined and stepping
            try:
                if global_step(ps0, token) >= warmup_steps:
                    break
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{num_ps} ps: the cluster did not reach global step {warmup_steps} in 120 s "
                                   f"(see {logs})")
            time.sleep(0.2)
        links = list(range(num_ps)) + [4 + j for j in range(num_workers)]
        before = {i: hosts.counters(i) for i in links}
        cpu_before = cpu_times()
        step_before, t_before = global_step(ps0, token), time.monotonic()
        time.sleep(seconds)  # the measuring window
        step_after, t_after = global_step(ps0, token), time.monotonic()
        cpu_after = cpu_times()
        after = {i: hosts.counters(i) for i in links}
    finally:
        for p in processes:
            p.send_signal(signal.SIGTERM)
        for p in processes:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    window = t_after - t_before
    steps = step_after - step_before
    def link_figures(i):
        into = after[i][0] - before[i][0]
        out = after[i][1] - before[i][1]
        return {"bytes_per_step": (into + out) / max(steps, 1),
                "busier_bytes_per_step": max(into, out) / max(steps, 1),
                "utilisation": max(into, out) / window / rate_bytes_per_second(hosts.rate_of(i))}

    ps_links = [link_figures(i) for i in range(num_ps)]
    worker_links = [link_figures(4 + j) for j in range(num_workers)]
    total, idle = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
    # The most steps/s the links allow, from the bytes measured: each ps
    # link carries its share of every global step in its busier direction;
    # each worker sends its gradient and then receives the parameters it
    # computes the next one from, in turn, so a worker's step takes at least
    # both through its own link, and the workers step side by side.
    ps_bound = min(rate_bytes_per_second(hosts.rate) / max(f["busier_bytes_per_step"], 1) for f in ps_links)
    worker_bytes_per_step = sum(f["bytes_per_step"] for f in worker_links)  # one worker's push and pull
    worker_bound = num_workers * rate_bytes_per_second(hosts.worker_rate) / max(worker_bytes_per_step, 1)
    return {
        "ps_link_bound": ps_bound,
        "worker_link_bound": worker_bound,
        "num_ps": num_ps,
        "steps_per_second": steps / window,
        "ps_bytes_per_step": statistics.mean(f["bytes_per_step"] for f in ps_links),
        "ps_link_utilisation": statistics.mean(f["utilisation"] for f in ps_links),
        "worker_link_utilisation": statistics.mean(f["utilisation"] for f in worker_links),
        "cpu_busy": 1 - idle / total if total else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", default=os.environ.get("PARASYNC_NODE", "parasync-node"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="one short round")
    parser.add_argument("--rate", default="100mbit", help="each host link's rate, each way (netem)")
    parser.add_argument("--delay", default="0.2ms", help="each host link's delay, each way (netem)")
    parser.add_argument("--worker_rate", default=None,
                        help="the workers' hosts' link rate, each way (default: --rate); faster than the ps "
                             "links makes the ps tasks' links the limit, as with many workers per ps")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="dense")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--ps", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 6
    ps_counts = [int(n) for n in args.ps.split(",")]
    document = {"rate": args.rate, "worker_rate": args.worker_rate or args.rate, "delay": args.delay,
                "workers": args.workers, "workload": args.workload, "model": WORKLOADS[args.workload]["model"],
                "rounds": args.rounds, "seconds": args.seconds, "runs": []}
    if os.geteuid() != 0:
        document["skipped"] = "needs root for network namespaces and tc"
    elif max(ps_counts) > 4 or args.workers > 4:
        document["skipped"] = "at most 4 ps tasks and 4 workers (8 hosts)"
    if "skipped" not in document:
        logs = os.environ.get("PARASYNC_BENCH_LOGS") or tempfile.mkdtemp(prefix="partition-scaling-")
        try:
            with Hosts(4 + args.workers, args.rate, args.delay, args.worker_rate) as hosts:
                document["delay"] = hosts.delay or "not emulated (this kernel has no netem: rate only, by tbf)"
                for round_ in range(args.rounds):
                    for num_ps in ps_counts:
                        figures = measure(hosts, args.node, args.workload, num_ps, args.workers, 10, args.seconds,
                                          logs)
                        figures["round"] = round_
                        document["runs"].append(figures)
                        print(f"round {round_}: {num_ps} ps: {figures['steps_per_second']:.2f} steps/s, "
                              f"{figures['ps_bytes_per_step'] / 1e6:.2f} MB per step per ps, ps links "
                              f"{figures['ps_link_utilisation']:.0%}, worker links "
                              f"{figures['worker_link_utilisation']:.0%}, CPU {figures['cpu_busy']:.0%}; the links "
                              f"allow {min(figures['ps_link_bound'], figures['worker_link_bound']):.2f} steps/s "
                              f"(ps {figures['ps_link_bound']:.2f}, workers {figures['worker_link_bound']:.2f})",
                              flush=True)
        except (RuntimeError, OSError) as e:
            document["skipped"] = str(e)
    if "skipped" in document:
        print(f"partition scaling skipped: {document['skipped']}")
    with open(args.out, "w") as f:
        json.dump(document, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
