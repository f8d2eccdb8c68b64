"""Two PyTorch workers and a parasync-node ps train a small MLP on the
handwritten digits (python/examples/torch_digits_mlp.py, started as a user
starts it) and score it on digits no worker trained on: in async, sync and
ssp, and in one run whose mode is switched while it trains."""

import json
import os
import re
import subprocess
import unittest

import node_cluster
from node_cluster import Cluster, describe, read_metrics
from parasync import checkpoints

DECODER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "tools", "decode_tfevents.py")
HELD_OUT = re.compile(r"^held-out accuracy ([0-9.]+) at global step (\d+)", re.M)
# The chief's line for each held-out score it measures (torch_digits_mlp.py).
SCORED = re.compile(r"^worker:0 step (\d+) \(local \d+\) loss .* held-out accuracy", re.M)


class TorchWorkersTest(unittest.TestCase):
    def start(self, last_step, *ps_flags, worker_flags=(), cluster=None, chief_checkpoints=False):
        cluster = cluster or Cluster(self)
        self.logdir = os.path.join(cluster.dir, "run")
        self.start_ps(cluster, last_step, *ps_flags)
        for index in (0, 1):
            own = (f"--logdir={self.logdir}",) if chief_checkpoints and index == 0 else ()
            cluster.start_python_worker(index, "torch_digits_mlp.py", "--batch_size=64", *worker_flags, *own)
        return cluster

    def start_ps(self, cluster, last_step, *ps_flags):
        cluster.start_node("ps", 0, "--optimizer=adam", "--learning_rate=0.005", f"--last_step={last_step}",
                           f"--logdir={self.logdir}", *ps_flags)

    def held_out_accuracy(self, cluster, last_step):
        for name in ("worker:0", "worker:1", "ps:0"):
            self.assertEqual(cluster.wait(name, timeout=180), 0, describe(cluster))
        match = HELD_OUT.search(cluster.output("worker:0"))
        self.assertIsNotNone(match, describe(cluster))
        self.assertEqual(int(match.group(2)), last_step)
        return float(match.group(1))

    def first_score_after(self, global_step):
        """The chief's first held-out accuracy past global_step, from the
        run directory's metrics.csv: a restored run's is the trained model's."""
        scores = [float(r["heldout_accuracy"]) for r in read_metrics(self.logdir)
                  if r.get("heldout_accuracy") and int(r["global_step"]) > global_step]
        self.assertTrue(scores, f"no held-out score after global step {global_step}")
        return scores[0]

    def step_events(self):
        with open(os.path.join(self.logdir, "steps.jsonl")) as f:
            return [json.loads(line) for line in f]

    def test_async_reaches_95_percent_on_held_out_digits(self):
        cluster = self.start(1500, "--mode=async")
        self.assertGreaterEqual(self.held_out_accuracy(cluster, 1500), 0.95)
        # The chief's held-out score reached ps:0 as named metrics: the step
        # log's metrics.csv has one per 100 of the chief's steps, its own.
        scored = [r for r in read_metrics(self.logdir) if r.get("heldout_accuracy")]
        scores = [float(r["heldout_accuracy"]) for r in scored]
        self.assertGreaterEqual(len(scores), 4, scores)
        self.assertEqual({r["worker"] for r in scored}, {"0"})
        self.assertGreaterEqual(max(scores[-3:]), 0.9, scores)
        # The run directory names the model the Python chief declared.
        with open(os.path.join(self.logdir, "model.json")) as f:
            model = json.load(f)
        self.assertEqual(model["model"], "digits-mlp-32")
        self.assertEqual(model["metric_names"], ["heldout_loss", "heldout_accuracy"])
        self.assertEqual([v["name"] for v in model["variables"]], ["0.weight", "0.bias", "2.weight", "2.bias"])
        # How each tensor moved, as the Python chief measured it: in the step
        # log, on the chief's measuring steps; the first layer left its start.
        summarized = [e for e in self.step_events() if e["type"] == "step" and "variables" in e]
        self.assertGreaterEqual(len(summarized), 4)
        self.assertEqual({e["worker"] for e in summarized}, {0})
        last = summarized[-1]["variables"]
        self.assertEqual(list(last), ["0.weight", "0.bias", "2.weight", "2.bias"])
        self.assertGreater(last["0.weight"]["norm"], 0)
        self.assertGreater(last["0.weight"]["distance_from_start"], 0.1)
        self.assertGreater(last["0.weight"]["update_per_step"], 0)

    def test_sync_reaches_95_percent_on_held_out_digits(self):
        cluster = self.start(1000, "--mode=sync")
        self.assertGreaterEqual(self.held_out_accuracy(cluster, 1000), 0.95)
        outcomes = {e["outcome"] for e in self.step_events() if e["type"] == "step"}
        self.assertLessEqual(outcomes, {"aggregated", "dropped_stale"})

    def test_ssp_reaches_95_percent_on_held_out_digits(self):
        cluster = self.start(1500, "--mode=ssp", "--staleness=2")
        self.assertGreaterEqual(self.held_out_accuracy(cluster, 1500), 0.95)

    def test_switching_modes_while_training_still_reaches_95_percent(self):
        cluster = self.start(3000, "--mode=async")
        cluster.wait_for_output("worker:0", re.compile(r"step \d*[3-9]\d\d \("), timeout=120)
        code, said = cluster.run_node("--set_mode=sync")
        self.assertEqual(code, 0, said)
        cluster.wait_for_output("worker:0", re.compile(r"step \d*1[3-9]\d\d \("), timeout=120)
        code, said = cluster.run_node("--set_mode=ssp", "--staleness=2")
        self.assertEqual(code, 0, said)
        self.assertGreaterEqual(self.held_out_accuracy(cluster, 3000), 0.95)
        events = self.step_events()
        changes = [e for e in events if e["type"] == "mode_change"]
        self.assertEqual([c["current"]["mode"] for c in changes], ["sync", "ssp"], changes)
        to_sync, to_ssp = (c["global_step"] for c in changes)
        # Each update between the switches followed sync; after them, ssp.
        for e in events:
            if e["type"] == "step" and to_sync + 1 < e["global_step"] <= to_ssp:
                self.assertIn(e["outcome"], ("aggregated", "dropped_stale"), e)
            elif e["type"] == "step" and e["global_step"] > to_ssp + 1:
                self.assertEqual(e["outcome"], "applied", e)

    def test_the_python_chief_checkpoints_and_a_new_run_restores_from_them(self):
        # The chief scores every 50 of its own steps: its share of the 600
        # is however the two workers happen to share the cores (CI once saw
        # its 100th step at global step 433, and two scores at
        # --display_step=100).
        cluster = self.start(600, "--mode=async", worker_flags=("--display_step=50",), chief_checkpoints=True)
        self.assertGreaterEqual(self.held_out_accuracy(cluster, 600), 0.9)
        # The final checkpoint, in parasync-node's format: every variable
        # with Adam's slots, and ps:0's step log records it.
        path = os.path.join(self.logdir, "model.ckpt-600.pckpt")
        self.assertTrue(os.path.exists(path), describe(cluster))
        saved = checkpoints.read(path)
        self.assertEqual(saved.global_step, 600)
        self.assertEqual(saved.signature.model, "digits-mlp-32")
        self.assertEqual([v.name for v in saved.variables], ["0.weight", "0.bias", "2.weight", "2.bias"])
        self.assertEqual(set(saved.variables[0].slots), {"m", "v"})
        self.assertGreater(saved.variables[0].update_count, 0)
        recorded = [e for e in self.step_events() if e["type"] == "checkpoint"]
        self.assertIn("model.ckpt-600.pckpt", [e["path"] for e in recorded], recorded)

        # The chief's TensorBoard event file, as an independent decoder
        # (TFRecord framing, masked CRC-32C, TensorFlow's field numbers) reads it.
        files = [f for f in os.listdir(self.logdir) if f.startswith("events.out.tfevents.")]
        self.assertEqual(len(files), 1, files)
        decoded = subprocess.run(["/usr/bin/python3", DECODER, os.path.join(self.logdir, files[0])],
                                 capture_output=True, text=True)
        self.assertEqual(decoded.returncode, 0, decoded.stderr)
        events = json.loads(decoded.stdout)
        self.assertEqual(events[0].get("file_version"), "brain.Event:2")
        scored = [e for e in events[1:] if "heldout/accuracy" in e.get("scalars", {})]
        # Every score the chief printed is in the file, at its global step.
        printed = [int(step) for step in SCORED.findall(cluster.output("worker:0"))]
        self.assertEqual([e["step"] for e in scored], printed, events)
        self.assertGreaterEqual(len(scored), 3, events)
        self.assertGreaterEqual(scored[-1]["scalars"]["heldout/accuracy"], 0.8)
        for tag in ("loss", "heldout/loss", "variables/0.weight/norm", "variables/2.bias/distance_from_start",
                    "variables/0.weight/update_per_step", "updates_per_sec"):
            self.assertIn(tag, scored[-1]["scalars"], scored[-1])
        self.assertEqual(events[-1]["step"], 600)  # and one at the last step

        # parasync-node's chief reads the file: it names the model in it.
        cluster.start_node("ps", 0, "--last_step=700")
        cluster.start_node("worker", 0, f"--logdir={self.logdir}", "--last_step=700")
        self.assertEqual(cluster.wait("worker:0", timeout=60), 2, describe(cluster))
        self.assertIn("model.ckpt-600.pckpt was saved by a 'digits-mlp-32' model; this cluster trains 'linear'",
                      cluster.output("worker:0"))
        cluster.kill("ps:0")
        cluster.wait("ps:0")

        # A new run on the same directory goes on from step 600, Adam's
        # moments and all, and ends at its own last step. Reaching 95 % is
        # the mode tests' claim; 300 async steps on a loaded machine may end
        # a few digits short of it (CI once scored 0.94), so this one holds
        # the restored run to what the run it restores from reached.
        self.start(900, "--mode=async", cluster=cluster, chief_checkpoints=True)
        self.assertGreaterEqual(self.held_out_accuracy(cluster, 900), 0.9)
        self.assertIn("chief: variables initialised (restored from model.ckpt-600.pckpt) at global step 600",
                      cluster.output("worker:0"))
        self.assertGreaterEqual(self.first_score_after(600), 0.9)  # a fresh model scores 0.1
        self.assertTrue(os.path.exists(os.path.join(self.logdir, "model.ckpt-900.pckpt")))

    def test_a_model_split_over_two_ps_tasks_is_checkpointed_whole_and_restored_into_one(self):
        # 0.weight (32 x 64, 8 KiB) is split in two at 1 KiB; the other
        # three are smaller than two slices and stay whole.
        split = "--min_slice_bytes=1024"
        cluster = Cluster(self, num_ps=2)
        self.logdir = os.path.join(cluster.dir, "run")
        self.start_ps(cluster, 600, "--mode=async", split)
        cluster.start_node("ps", 1, "--optimizer=adam", "--learning_rate=0.005", "--last_step=600", "--mode=async",
                           split)
        for index in (0, 1):
            own = (f"--logdir={self.logdir}",) if index == 0 else ()
            cluster.start_python_worker(index, "torch_digits_mlp.py", "--batch_size=64", split, *own)
        self.assertGreaterEqual(self.held_out_accuracy(cluster, 600), 0.9)
        self.assertIn("ps:0 holds 0.weight rows 0-15 of 32 (4.0 KiB), 0.bias (128 bytes), 2.bias (40 bytes); "
                      "ps:1 holds 0.weight rows 16-31 of 32 (4.0 KiB), 2.weight (1.2 KiB)", cluster.output("worker:0"))
        # The Python chief's checkpoint: every variable whole, Adam's moments
        # of the split one joined as its values are.
        saved = checkpoints.read(os.path.join(self.logdir, "model.ckpt-600.pckpt"))
        self.assertEqual([(v.name, list(v.value.shape)) for v in saved.variables],
                         [("0.weight", [32, 64]), ("0.bias", [32]), ("2.weight", [10, 32]), ("2.bias", [10])])
        self.assertEqual([sorted(v.slots) for v in saved.variables], [["m", "v"]] * 4)
        self.assertEqual([list(v.slots["v"].shape) for v in saved.variables], [[32, 64], [32], [10, 32], [10]])
        self.assertGreater(saved.variables[0].update_count, 0)
        self.assertEqual(len(saved.shards), 0)

        # A run on one ps task restores the whole model from it and goes on
        # from step 600, Adam's moments and all.
        again = Cluster(self, num_ps=1)
        self.start_ps(again, 900, "--mode=async", split)
        for index in (0, 1):
            own = (f"--logdir={self.logdir}",) if index == 0 else ()
            again.start_python_worker(index, "torch_digits_mlp.py", "--batch_size=64", split, *own)
        self.assertGreaterEqual(self.held_out_accuracy(again, 900), 0.9)
        self.assertIn("chief: variables initialised (restored from model.ckpt-600.pckpt) at global step 600",
                      again.output("worker:0"))
        self.assertNotIn("variables partitioned", again.output("worker:0"))
        self.assertGreaterEqual(self.first_score_after(600), 0.9)  # a fresh model scores 0.1

    def test_a_ps_killed_mid_run_gets_its_variables_again_from_the_python_chief(self):
        # Long enough that a checkpoint every second comes before the end:
        # unloaded, the two workers make 1,500 steps in about a second.
        last_step = 6000
        cluster = self.start(last_step, "--mode=async", worker_flags=("--save_checkpoint_secs=1",),
                             chief_checkpoints=True)
        saved = re.compile(r"chief: saved checkpoint .*model\.ckpt-([1-9]\d*)\.pckpt")
        cluster.wait_for_output("worker:0", saved, timeout=120)
        self.assertLess(int(saved.search(cluster.output("worker:0")).group(1)), last_step,
                        "the run ended before its first periodic checkpoint: make it longer")
        cluster.kill("ps:0")
        cluster.wait("ps:0")
        self.start_ps(cluster, last_step, "--mode=async")
        # Both workers waited for the new ps; the chief gave it the newest
        # checkpoint, and the run finished with the model still learning.
        self.assertGreaterEqual(self.held_out_accuracy(cluster, last_step), 0.95)
        restored = re.search(r"chief: variables initialised \(restored from model\.ckpt-(\d+)\.pckpt\) at global "
                             r"step (\d+)", cluster.output("worker:0"))
        self.assertIsNotNone(restored, describe(cluster))
        self.assertEqual(restored.group(1), restored.group(2))
        self.assertGreater(int(restored.group(2)), 0)
        self.assertIn("worker:1 state finished", cluster.output("worker:1"))

    def test_a_torch_worker_and_a_cpp_chief_train_the_builtin_mlp_together(self):
        """parasync-node's --model=mlp and parasync.pytorch.BuiltinMLP declare
        one model: ps:0 takes both workers' gradients into it, and it learns."""
        last_step = 600
        cluster = Cluster(self)
        data = node_cluster.digits_csv(cluster.dir)
        self.logdir = os.path.join(cluster.dir, "run")
        common = ["--model=mlp", f"--dataset=csv:{data}", "--optimizer=adam", "--learning_rate=0.005",
                  "--batch_size=64", f"--last_step={last_step}", "--display_step=10"]
        cluster.start_node("ps", 0, *common, f"--logdir={self.logdir}")
        cluster.start_python_worker(1, "torch_builtin_mlp.py", f"--dataset=csv:{data}", "--optimizer=adam",
                                    "--batch_size=64", "--display_step=50")
        cluster.wait_for_output("worker:1", "state waiting: waiting for")
        # A millisecond of compute a step keeps the C++ chief near PyTorch's pace.
        cluster.start_node("worker", 0, *common, "--compute_ms=1")
        for name in ("worker:1", "worker:0", "ps:0"):
            self.assertEqual(cluster.wait(name, timeout=180), 0, describe(cluster))
        rows = read_metrics(self.logdir)
        for worker in ("0", "1"):
            self.assertGreater(sum(1 for r in rows if r["worker"] == worker), last_step // 5, describe(cluster))
        # The chief's full-shard loss ends far below an untrained model's
        # ln 10 = 2.30 (the median of its last ten measurements).
        losses = [float(r["full_loss"]) for r in rows if r["full_loss"]]
        self.assertGreaterEqual(len(losses), 10)
        final = sorted(losses[-10:])[5]
        self.assertLess(final, 0.6, f"full loss at the end {final}; {describe(cluster)}")

    def test_a_builtin_mlp_of_another_width_is_refused_by_the_cluster(self):
        """A PyTorch worker whose hidden layer is not the cluster's is turned
        away with the difference named, not trained into the wrong shapes."""
        cluster = Cluster(self)
        data = node_cluster.digits_csv(cluster.dir)
        common = ["--model=mlp", f"--dataset=csv:{data}", "--last_step=100"]
        cluster.start_node("ps", 0, *common)
        cluster.start_node("worker", 0, *common, "--compute_ms=5")
        cluster.start_python_worker(1, "torch_builtin_mlp.py", f"--dataset=csv:{data}", "--hidden_units=16")
        self.assertEqual(cluster.wait("worker:1", timeout=120), 2, describe(cluster))
        self.assertIn("hidden/W", cluster.output("worker:1"), describe(cluster))
        cluster.kill_all()

    def test_a_chief_that_declares_another_optimizer_than_the_ps_runs_is_refused(self):
        cluster = self.start(1000, "--mode=async", worker_flags=("--optimizer=sgd",))
        self.assertEqual(cluster.wait("worker:0", timeout=120), 2, describe(cluster))
        self.assertIn("ps:0 runs optimizer 'adam' but the chief declares 'sgd': give every task the same "
                      "--optimizer", cluster.output("worker:0"))


if __name__ == "__main__":
    unittest.main()
