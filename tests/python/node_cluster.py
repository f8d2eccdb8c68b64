"""Real clusters for the Python workers' tests: parasync-node processes
($PARASYNC_NODE) and Python workers on free loopback ports, started as a user
starts them, with deadlines instead of sleeps."""

import csv
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NODE = os.environ.get("PARASYNC_NODE", "parasync-node")
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "python", "examples")
# Debian's python3-sklearn ships the 1,797 8x8 handwritten digits.
DIGITS_GZ = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"


# The ports free_ports() handed out, each still bound (pickFreePort in
# core/base/port_holder.cpp says why).
_RESERVED_PORTS = []


def free_ports(count):
    """Ports nobody listens on now, reserved while this process lives: each
    stays bound here, with SO_REUSEADDR and never listening, so that no other
    process (a test ctest runs beside this one) is given it for a port 0 of
    its own, while a task binds and listens on it as on a free port."""
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    _RESERVED_PORTS.extend(sockets)
    return [s.getsockname()[1] for s in sockets]


def digits_csv(directory):
    """The digits as parasync-node's csv: 64 features, then the class."""
    path = os.path.join(directory, "digits.csv")
    with gzip.open(DIGITS_GZ, "rt") as source, open(path, "w", newline="") as out:
        writer = csv.writer(out)
        for row in csv.reader(source):
            writer.writerow(row)
    return path


def wide_digits_csv(directory, repeat):
    """The digits with their 64 features repeated `repeat` times over: a
    softmax whose W is `repeat` times as big, learning the same thing."""
    path = os.path.join(directory, f"digits_x{repeat}.csv")
    with gzip.open(DIGITS_GZ, "rt") as source, open(path, "w", newline="") as out:
        writer = csv.writer(out)
        for row in csv.reader(source):
            writer.writerow(row[:-1] * repeat + row[-1:])
    return path


def read_metrics(logdir):
    with open(os.path.join(logdir, "metrics.csv")) as f:
        return list(csv.DictReader(f))


class Cluster:
    """Processes of one cluster; every one is killed when the test ends."""

    def __init__(self, test, num_ps=1, num_workers=2, backups=False):
        """With `backups`, every ps task has one (--ps_backup_hosts): start it
        with start_node("ps_backup", k)."""
        self.test = test
        self.dir = tempfile.mkdtemp(prefix="parasync-py-")
        ports = free_ports(2 * num_ps + num_workers)
        self.ps_hosts = ",".join(f"127.0.0.1:{p}" for p in ports[:num_ps])
        self.worker_hosts = ",".join(f"127.0.0.1:{p}" for p in ports[num_ps:num_ps + num_workers])
        self.ps_backup_hosts = ",".join(f"127.0.0.1:{p}" for p in ports[num_ps + num_workers:]) if backups else ""
        self.processes = {}
        # Cleanups run last-in first-out: the processes go before their folder.
        test.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        test.addCleanup(self.kill_all)

    def cluster_flags(self, job, index):
        backups = [f"--ps_backup_hosts={self.ps_backup_hosts}"] if self.ps_backup_hosts else []
        return [f"--job_name={job}", f"--task_index={index}", f"--ps_hosts={self.ps_hosts}",
                f"--worker_hosts={self.worker_hosts}", *backups]

    def _start(self, name, command, env=None):
        environment = dict(os.environ, **(env or {}))
        with open(os.path.join(self.dir, name.replace(":", "_") + ".log"), "w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
        self.processes[name] = (process, log.name)
        return process

    def start_node(self, job, index, *flags):
        return self._start(f"{job}:{index}", [NODE, *self.cluster_flags(job, index), *flags])

    def run_node(self, *flags, timeout=30):
        """A one-shot parasync-node command (--status, --set_mode): its exit code and output."""
        done = subprocess.run([NODE, f"--ps_hosts={self.ps_hosts}", *flags], capture_output=True, text=True,
                              timeout=timeout)
        return done.returncode, done.stdout + done.stderr

    def start_python_worker(self, index, script, *flags):
        python_path = os.environ.get("PYTHONPATH", "")
        return self._start(f"worker:{index}", ["/usr/bin/python3", os.path.join(EXAMPLES, script),
                                               *self.cluster_flags("worker", index), *flags],
                           env={"PYTHONPATH": python_path})

    def output(self, name):
        with open(self.processes[name][1]) as f:
            return f.read()

    def wait(self, name, timeout=120):
        """The task's exit code; fails the test, with its output, when it runs past `timeout` seconds."""
        process = self.processes[name][0]
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.test.fail(f"{name} still runs after {timeout} s; its output:\n{self.output(name)[-3000:]}")

    def wait_for_output(self, name, text, timeout=60):
        """Waits until the task printed `text` (a string, or a compiled regular expression)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            output = self.output(name)
            if (text.search(output) if hasattr(text, "search") else text in output):
                return
            if self.processes[name][0].poll() is not None:
                break
            time.sleep(0.05)
        self.test.fail(f"{name} never printed {text!r}; its output:\n{self.output(name)[-3000:]}")

    def kill(self, name, sig=signal.SIGKILL):
        self.processes[name][0].send_signal(sig)
        self.processes[name][0].wait(timeout=30)

    def kill_all(self):
        for process, _ in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def describe(cluster):
    return "\n".join(f"--- {name}:\n{cluster.output(name)[-2000:]}" for name in cluster.processes)


if __name__ == "__main__":
    sys.exit("a helper of the tests, not a test")
