"""A NumPy worker and a C++ worker train parasync-node's softmax in one
cluster: real processes on loopback ports, the Python worker started as a
user starts python/examples/numpy_softmax.py. The protocol is the protocol,
whoever speaks it."""

import json
import math
import os
import signal
import unittest

import node_cluster
from node_cluster import Cluster, describe, read_metrics
from parasync import checkpoints


class NumpyWorkerTest(unittest.TestCase):
    def start_softmax_cluster(self, last_step, *mode_flags, python_flags=(), node_flags=(), num_ps=1, logdir=None,
                              backup=False, repeat_features=1, start_backup=True):
        """ps:0 (and ps:1.. given the same flags; with `backup`, ps:0's
        backup too), the NumPy worker:1, then the C++ chief worker:0;
        node_flags go to every parasync-node task. With repeat_features, the
        digits' features are repeated that many times over (a bigger W).
        With start_backup=False the backup is declared but left to the test
        (self.ps_flags are the flags to start it with)."""
        cluster = Cluster(self, num_ps=num_ps, backups=backup)
        if repeat_features == 1:
            data = node_cluster.digits_csv(cluster.dir)
        else:
            data = node_cluster.wide_digits_csv(cluster.dir, repeat_features)
        self.logdir = logdir or os.path.join(cluster.dir, "run")
        # Features repeated n times make each gradient n times as strong.
        common = ["--model=softmax", f"--dataset=csv:{data}", f"--learning_rate={0.05 / repeat_features}",
                  "--batch_size=50", f"--last_step={last_step}", "--display_step=10", *node_flags]
        self.ps_flags = [*common, *mode_flags, f"--logdir={self.logdir}"]
        cluster.start_node("ps", 0, *self.ps_flags)
        if backup and start_backup:
            cluster.start_node("ps_backup", 0, *self.ps_flags)
        for k in range(1, num_ps):
            cluster.start_node("ps", k, *common, *mode_flags)
        cluster.start_python_worker(1, "numpy_softmax.py", f"--dataset=csv:{data}", "--batch_size=50",
                                    "--display_step=50", *python_flags)
        # The Python worker waits for the chief to initialise the variables;
        # the chief, at full speed, would finish a short run before Python has
        # imported NumPy. A millisecond of simulated compute per step keeps
        # the two at a comparable pace.
        cluster.wait_for_output("worker:1", "state waiting: waiting for")
        cluster.start_node("worker", 0, *common, "--compute_ms=1", f"--logdir={self.logdir}")
        return cluster

    def check_trained_together(self, cluster, last_step):
        for name in ("worker:1", "worker:0", "ps:0"):
            self.assertEqual(cluster.wait(name), 0, describe(cluster))
        rows = read_metrics(self.logdir)
        by_worker = {w: [r for r in rows if r["worker"] == w] for w in ("0", "1")}
        # Both workers' gradients went into the model, each a fair share.
        self.assertGreater(len(by_worker["1"]), last_step // 5, describe(cluster))
        self.assertGreater(len(by_worker["0"]), last_step // 5, describe(cluster))
        self.assertEqual(max(int(r["global_step"]) for r in rows), last_step)
        # And the model learnt: the chief's full-shard loss got far below an
        # untrained softmax's ln 10 = 2.30 in its last ten evaluations, and
        # their median is below ln 10. Plain SGD on raw pixels spikes in
        # async, several evaluations in a row far up: 0.84, 4.07, 2.41 in one
        # run of the wide softmax before it fell to 0.17; 1.58, 3.62, 1.33,
        # 2.78, 1.42 in another (CI) before 0.32 ... 0.23, which put the
        # median of the last ten at 1.33. Not against its own first
        # evaluation: the chief may join after the Python worker has trained
        # for dozens of steps, when the loss has already fallen.
        full = [float(r["full_loss"]) for r in rows if r["full_loss"] not in ("", "nan")]
        self.assertGreaterEqual(len(full), 5, describe(cluster))  # every 10 of its at least 80 steps
        recent = sorted(full[-10:])
        self.assertLess(recent[0], math.log(10) / 3, (full, describe(cluster)))
        self.assertLess(recent[len(recent) // 2], math.log(10), (full, describe(cluster)))
        self.assertIn("worker:1 state finished", cluster.output("worker:1"))

    def test_python_and_cpp_workers_train_one_softmax_async(self):
        cluster = self.start_softmax_cluster(400, "--mode=async")
        self.check_trained_together(cluster, 400)
        # parasync-node's chief wrote its final checkpoint in the format a
        # Python chief reads and writes; a damaged copy is refused, saying how.
        path, saved = checkpoints.CheckpointStore(self.logdir).newest_valid()
        self.assertEqual((os.path.basename(path), saved.global_step), ("model.ckpt-400.pckpt", 400))
        self.assertEqual(saved.signature.model, "softmax")
        with open(path, "rb") as f:
            data = f.read()
        flipped = data[:40] + bytes([data[40] ^ 1]) + data[41:]
        for damaged, reason in ((flipped, "checksum mismatch"), (data[:-5], "truncated"),
                                (b"PSYNCKP0" + data[8:], "bad magic")):
            with self.assertRaisesRegex(checkpoints.CheckpointError, reason):
                checkpoints.parse(damaged, path)

    def test_a_wide_softmax_moves_its_values_on_data_links(self):
        # 2,048 features: W is 80 KiB, so both workers' joins offer a data
        # link (core/wire/data_link.h), and both train on theirs.
        cluster = self.start_softmax_cluster(300, "--mode=async", repeat_features=32)
        self.check_trained_together(cluster, 300)
        # The C++ worker:0 sends its whole step as frames on its link; the
        # Python worker:1 its tensors' values.
        for name, link in (("worker:1", "(tensor values on data links to ps:0)"),
                           ("worker:0", "(steps on data links to ps:0)")):
            self.assertIn("joined the cluster at global step", cluster.output(name))
            self.assertIn(link, cluster.output(name), describe(cluster))
        self.assertNotIn("no data link", cluster.output("worker:1"))

    def test_in_sync_each_step_averages_a_python_and_a_cpp_gradient(self):
        cluster = self.start_softmax_cluster(300, "--mode=sync")
        self.check_trained_together(cluster, 300)
        # Sync aggregates over the live workers: the first to join makes
        # steps of its own until the other joins; from the step after, every
        # global step averages one gradient of each.
        joined, workers_of_step = {}, {}
        with open(os.path.join(self.logdir, "steps.jsonl")) as f:
            for event in map(json.loads, f):
                if event["type"] == "worker_state" and event["phase"] == "training":
                    joined.setdefault(event["worker"], max(workers_of_step, default=0))
                elif event["type"] == "step":
                    workers_of_step.setdefault(event["global_step"], []).append(event["worker"])
        self.assertEqual(sorted(joined), [0, 1], "the step log did not see both workers join")
        joined_at = max(joined.values())
        self.assertLess(joined_at, 200, describe(cluster))
        for step in range(joined_at + 2, 301):
            self.assertEqual(sorted(workers_of_step[step]), [0, 1], f"global step {step}")

    def test_in_ssp_the_python_worker_is_held_to_the_staleness_bound(self):
        staleness = 2
        cluster = self.start_softmax_cluster(300, "--mode=ssp", f"--staleness={staleness}")
        self.check_trained_together(cluster, 300)
        # ps:0 counts a worker towards the slowest clock from its first push
        # until its stream breaks. Before that the other trains on (the chief
        # alone until the Python worker joins, or the Python worker while the
        # chief is still starting), then waits for it to come level. A hold
        # follows the update, so a push already on its way when the other
        # became live may land one beyond the bound. Once the clocks are
        # within the staleness, neither is more than staleness + 1 (the step
        # just taken) ahead of the other until one of them is dead.
        clocks, held, dead, level, states, gaps, beyond = {}, 0, set(), False, [], [], []
        with open(os.path.join(self.logdir, "steps.jsonl")) as f:
            for event in map(json.loads, f):
                if event["type"] == "worker_state":
                    states.append(f'{event["worker"]}:{event["phase"]}')
                    if event["phase"] == "dead":
                        dead.add(event["worker"])
                        level = False
                    continue
                if event["type"] != "step":
                    continue
                dead.discard(event["worker"])
                clocks[event["worker"]] = event["worker_clock"]
                held += event.get("wait_reason") == "blocked_by_staleness"
                if len(clocks) < 2 or dead:
                    continue
                gap = clocks[0] - clocks[1]
                gaps.append(gap)
                level = level or abs(gap) <= staleness
                if level and abs(gap) > staleness + 1:
                    beyond.append((event["global_step"], gap))
        self.assertTrue(gaps, "the step log never had both workers' clocks")
        self.assertEqual(beyond, [], f"gaps {gaps}\nworker states {states}\n{describe(cluster)}")
        self.assertGreater(held, 0, "no worker was ever held by the staleness bound")

    def test_a_softmax_split_over_two_ps_tasks_trains_and_restores_into_one(self):
        # The digits' W is 64 x 10, 2,560 bytes: two slices at 1 KiB, one per ps task.
        split = "--min_slice_bytes=1024"
        cluster = self.start_softmax_cluster(400, "--mode=async", python_flags=(split,), node_flags=(split,), num_ps=2)
        self.check_trained_together(cluster, 400)
        # The NumPy worker and the C++ chief placed the slices alike.
        self.assertIn("variables partitioned (--min_slice_bytes=1024): ps:0 holds W rows 0-31 of 64 (1.2 KiB), "
                      "b (40 bytes); ps:1 holds W rows 32-63 of 64 (1.2 KiB)", cluster.output("worker:1"))
        for k, holds in enumerate(("W rows 0-31 of 64 (1.2 KiB), b (40 bytes)", "W rows 32-63 of 64 (1.2 KiB)")):
            self.assertIn(f"worker:0: ps:{k} holds {holds}\n", cluster.output("worker:0"))
        # The chief's checkpoint holds every variable whole, however it was split.
        _, saved = checkpoints.CheckpointStore(self.logdir).newest_valid()
        self.assertEqual(saved.global_step, 400)
        self.assertEqual([list(v.slice_rows) for v in saved.signature.variables], [[32, 32], []])
        self.assertEqual([(v.name, list(v.value.shape)) for v in saved.variables], [("W", [64, 10]), ("b", [10])])
        self.assertEqual(len(saved.shards), 0)

        # A run on one ps task restores it whole and goes on from step 400
        # with the trained model: its first steps' losses are already far
        # below an untrained softmax's ln 10 (a fresh start's first ten
        # batches lose 2 to 40 here: raw pixels, plain SGD).
        logdir = self.logdir
        cluster = self.start_softmax_cluster(600, "--mode=async", python_flags=(split,), node_flags=(split,),
                                             logdir=logdir)
        for name in ("worker:1", "worker:0", "ps:0"):
            self.assertEqual(cluster.wait(name), 0, describe(cluster))
        self.assertIn("variables initialised (restored from model.ckpt-400.pckpt) at global step 400",
                      cluster.output("worker:0"))
        self.assertNotIn("variables partitioned", cluster.output("worker:1"))
        rows = sorted((r for r in read_metrics(logdir) if int(r["global_step"]) > 400),
                      key=lambda r: int(r["global_step"]))
        self.assertEqual(int(rows[0]["global_step"]), 401, describe(cluster))
        self.assertEqual(max(int(r["global_step"]) for r in rows), 600)
        self.assertGreater(len([r for r in rows if r["worker"] == "1"]), 200 // 5, describe(cluster))
        first = sorted(float(r["loss"]) for r in rows[:10])
        self.assertLess(first[5], math.log(10) / 3, (first, describe(cluster)))
        # The first full-data losses measured after the restore show the
        # restored model itself; async SGD on raw pixels may spike for a few
        # steps right after (two workers' gradients on one fresh model: CI saw
        # 0.027, 2.9, 3.9, then 0.09 on), so the best of the first three is
        # what tells a restored model from a fresh one.
        full = [float(r["full_loss"]) for r in rows if r["full_loss"] not in ("", "nan")]
        self.assertGreaterEqual(len(full), 3, describe(cluster))
        self.assertLess(min(full[:3]), math.log(10) / 3, (full, describe(cluster)))
        self.assertIn("worker:1 state finished", cluster.output("worker:1"))
        self.assertEqual(checkpoints.CheckpointStore(logdir).newest_valid()[1].global_step, 600)

    def test_a_python_worker_that_splits_differently_is_refused_and_told_why(self):
        cluster = self.start_softmax_cluster(100000, "--mode=async", python_flags=("--min_slice_bytes=0",),
                                             node_flags=("--min_slice_bytes=1024",), num_ps=2)
        self.assertEqual(cluster.wait("worker:1", timeout=60), 2, describe(cluster))
        output = cluster.output("worker:1")
        self.assertIn("refuses worker:1: variable 'W': it keeps it whole but the cluster splits it into 2 slices "
                      "(rows 32, 32). Give every worker the same --min_slice_bytes", output)
        cluster.wait_for_output("worker:0", "step 100 ")

    def test_a_python_worker_of_another_model_is_refused_and_told_why(self):
        cluster = self.start_softmax_cluster(100000, "--mode=async", python_flags=("--optimizer=adam",))
        self.assertEqual(cluster.wait("worker:1", timeout=60), 2, describe(cluster))
        output = cluster.output("worker:1")
        self.assertIn("refused worker:1", output)
        self.assertIn("optimizer 'adam' but the cluster uses 'sgd'", output)
        # The cluster did not count it: the chief trains on alone.
        cluster.wait_for_output("worker:0", "step 100 ")

    def test_a_killed_python_worker_costs_the_cluster_nothing_in_sync(self):
        cluster = self.start_softmax_cluster(600, "--mode=sync")
        cluster.wait_for_output("worker:1", " (local ")  # it trains: its first loss line
        cluster.kill("worker:1")
        # ps:0 sees the stream break, the sync steps go on with the chief alone.
        self.assertEqual(cluster.wait("worker:0"), 0, describe(cluster))
        self.assertEqual(cluster.wait("ps:0"), 0, describe(cluster))
        self.assertEqual(max(int(r["global_step"]) for r in read_metrics(self.logdir)), 600)

    def test_sigterm_stops_a_python_worker_cleanly(self):
        # As Stop in the app and the end of a Slurm job send it: the NumPy
        # worker ends its step, says goodbye and exits 0, and ps:0 counts it
        # stopped, not dead (its stream did not just break).
        cluster = self.start_softmax_cluster(1000000, "--mode=async")
        cluster.wait_for_output("worker:1", " (local ")  # it trains: its first loss line
        cluster.kill("worker:1", signal.SIGTERM)
        self.assertEqual(cluster.wait("worker:1"), 0, describe(cluster))
        self.assertIn("worker:1 state stopped: received SIGTERM", cluster.output("worker:1"))
        cluster.wait_for_output("ps:0", "worker:1 left")
        self.assertNotIn("worker:1 is dead", cluster.output("ps:0"))
        # The chief trains on alone; stopped the same way, it exits 0 too.
        cluster.wait_for_output("worker:0", "step 200 ")
        cluster.kill("worker:0", signal.SIGTERM)
        self.assertEqual(cluster.wait("worker:0"), 0, describe(cluster))

    def test_a_python_worker_trains_on_when_ps0_dies_and_its_backup_takes_over(self):
        # ps:0 has a backup (--ps_backup_hosts, which the Python worker takes
        # as parasync-node does). ps:0 is SIGKILLed while both workers train:
        # the NumPy worker turns to the backup by itself, and the run ends at
        # its last step with every step in the step log once. With the
        # digits' W on the gRPC stream, and with an 80 KiB W on data links,
        # which both workers make anew to the backup.
        for repeat in (1, 32):
            with self.subTest(features=64 * repeat):
                cluster = self.start_softmax_cluster(3000, "--mode=async", backup=True, repeat_features=repeat)
                cluster.wait_for_output("ps_backup:0", "follows its primary at")
                cluster.wait_for_output("worker:1", " (local ")  # it trains: its first loss line
                cluster.kill("ps:0")
                cluster.wait_for_output("worker:1", "ps:0 is served by " + cluster.ps_backup_hosts + " now")
                for name in ("worker:1", "worker:0", "ps_backup:0"):
                    self.assertEqual(cluster.wait(name), 0, describe(cluster))
                self.assertIn("worker:1 state finished", cluster.output("worker:1"))
                self.assertIn("takes over as the pair's primary", cluster.output("ps_backup:0"))
                steps = [int(r["global_step"]) for r in read_metrics(self.logdir)]
                self.assertEqual(max(steps), 3000)
                # The Python worker's gradients went in after the failover too.
                after = [r for r in read_metrics(self.logdir) if r["worker"] == "1"]
                self.assertGreater(max(int(r["global_step"]) for r in after), 2000, describe(cluster))
                linked = cluster.output("worker:1").count("(tensor values on data links to ps:0)")
                self.assertEqual(linked, 0 if repeat == 1 else 2, describe(cluster))

    def test_a_python_worker_trains_on_when_ps0_dies_before_its_backup_attached(self):
        # ps:0 trains alone: its backup is started only after it was
        # SIGKILLed, so nobody holds the pair's state. The NumPy worker turns
        # to the backup all the same; the backup serves in its place without
        # the state, the C++ chief gives it its own last values, and the run
        # ends at its last step, the lost updates said in words.
        cluster = self.start_softmax_cluster(3000, "--mode=async", backup=True, start_backup=False)
        cluster.wait_for_output("worker:1", " (local ")  # it trains: its first loss line
        self.assertIn("trains WITHOUT its backup", cluster.output("ps:0"))
        cluster.kill("ps:0")
        cluster.start_node("ps_backup", 0, *self.ps_flags)
        cluster.wait_for_output("worker:1", "ps:0 is served by " + cluster.ps_backup_hosts + " now")
        for name in ("worker:1", "worker:0", "ps_backup:0"):
            self.assertEqual(cluster.wait(name), 0, describe(cluster))
        backup = cluster.output("ps_backup:0")
        self.assertIn("takes over as the pair's primary WITHOUT its state", backup)
        self.assertIn("variables initialised (the chief's own parameters at global step", cluster.output("worker:0"))
        self.assertIn("worker:1 state finished", cluster.output("worker:1"))
        self.assertEqual(max(int(r["global_step"]) for r in read_metrics(self.logdir)), 3000)


if __name__ == "__main__":
    unittest.main()
