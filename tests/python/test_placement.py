"""Partitioned variables on the Python side: a Python worker splits a model
over the ps tasks exactly as parasync-node decides and places it
(core/engine/variable_placement.h), refuses a partitioning it cannot place,
and its checkpoints hold whole variables that restore into any number of ps
tasks -- old per-ps checkpoints too. The last tests train against in-process
ps tasks that record what they were sent."""

import argparse
import os
import re
import tempfile
import threading
import unittest
from concurrent import futures

import grpc
import numpy as np

import parasync
from parasync import checkpoints, placement, tensors
from parasync import cluster as cluster_module
from parasync.placement import Placement, PlacementError
from parasync.proto import parasync_pb2 as pb
from parasync.proto import parasync_pb2_grpc as pb_grpc

KIB = 1024


def signature(*variables):
    """A signature of (name, shape) or (name, shape, slice_rows) variables."""
    return parasync.Signature(model="m", variables=[parasync.VariableSpec(*v) for v in variables])


def state(name, value, slots=(), update_count=0):
    out = pb.VariableState(name=name, update_count=update_count)
    out.value.ParseFromString(tensors.encode_tensor(value))
    for slot, slot_value in dict(slots).items():
        out.slots[slot].ParseFromString(tensors.encode_tensor(slot_value))
    return out


def array(tensor_message):
    return tensors.decode_tensor(tensor_message.SerializeToString())


class PartitionRuleTest(unittest.TestCase):
    def test_a_large_variable_gets_one_slice_per_ps_task_the_first_ones_a_row_longer(self):
        # 4,000,000 bytes: fifteen 256 KiB slices' worth, so one per ps task.
        self.assertEqual(placement.slice_rows((100000, 10), 2), (50000, 50000))
        self.assertEqual(placement.slice_rows((100000, 10), 3), (33334, 33333, 33333))
        self.assertEqual(placement.slice_rows((100000, 10), 4), (25000,) * 4)
        self.assertEqual(placement.slice_rows((1000000,), 2), (500000, 500000))

    def test_each_slice_holds_at_least_min_slice_bytes(self):
        # The softmax's W: 31,360 bytes, whole at the default 256 KiB.
        self.assertEqual(placement.slice_rows((784, 10), 2), ())
        self.assertEqual(placement.slice_rows((784, 10), 2, 1 * KIB), (392, 392))
        self.assertEqual(placement.slice_rows((784, 10), 3, 1 * KIB), (262, 261, 261))
        # 600 KiB over 4 ps tasks at 256 KiB a slice: two slices, not four.
        self.assertEqual(placement.slice_rows((600, 256), 4), (300, 300))
        # Just under two slices' worth stays whole.
        self.assertEqual(placement.slice_rows((2, 65535), 2), ())

    def test_small_scalar_and_one_ps_variables_stay_whole(self):
        self.assertEqual(placement.slice_rows((), 4, 1), ())
        self.assertEqual(placement.slice_rows((10,), 4), ())
        self.assertEqual(placement.slice_rows((100000, 10), 1), ())
        self.assertEqual(placement.slice_rows((100000, 10), 2, 0), ())
        self.assertEqual(placement.slice_rows((0, 10), 2, 1), ())

    def test_never_more_slices_than_rows(self):
        self.assertEqual(placement.slice_rows((3, 100000), 4), (1, 1, 1))
        self.assertEqual(placement.slice_rows((1, 1000000), 4), ())

    def test_partition_decides_for_every_variable_and_replaces_what_was_there(self):
        given = signature(("W", (784, 10), (700, 84)), ("b", (10,)), ("E", (100000, 10)))
        decided = placement.partition(given, 2, 1 * KIB)
        self.assertEqual([v.slice_rows for v in decided.variables], [(392, 392), (), (50000, 50000)])
        self.assertEqual(given.variables[0].slice_rows, (700, 84))  # a copy: the caller's is left alone
        # The message the ps tasks compare carries the decision.
        self.assertEqual([list(v.slice_rows) for v in decided.to_proto().variables], [[392, 392], [], [50000, 50000]])
        # And a ModelSignature message is decided the same way.
        message = placement.partition(given.to_proto(), 2, 1 * KIB)
        self.assertEqual([list(v.slice_rows) for v in message.variables], [[392, 392], [], [50000, 50000]])
        self.assertEqual(list(given.to_proto().variables[0].slice_rows), [700, 84])


class PlacementTest(unittest.TestCase):
    def test_pieces_go_round_robin_in_declaration_order(self):
        softmax = placement.partition(signature(("W", (784, 10)), ("b", (10,))), 2, 1 * KIB)
        placed = Placement.from_signature(softmax, 2)
        self.assertEqual([(s.name, s.ps) for s in placed.slices], [("W/part_0", 0), ("W/part_1", 1), ("b", 0)])
        self.assertEqual([s.name for s in placed.on(0)], ["W/part_0", "b"])
        self.assertEqual([s.name for s in placed.on(1)], ["W/part_1"])
        second = placed.slices[1]
        self.assertEqual((second.first_row, second.rows, second.offset, second.size, second.shape),
                         (392, 392, 3920, 3920, (392, 10)))
        self.assertTrue(placed.partitioned)
        self.assertEqual(placed.describe(0), "W rows 0-391 of 784 (15.3 KiB), b (40 bytes)")
        self.assertEqual(placed.describe(1), "W rows 392-783 of 784 (15.3 KiB)")

    def test_without_partitioning_variable_i_lives_on_ps_i_mod_num_ps(self):
        placed = Placement.from_signature(signature(("a", (2, 2)), ("b", (2,)), ("c", ()), ("d", (5,))), 3)
        self.assertEqual([[s.name for s in placed.on(k)] for k in range(3)], [["a", "d"], ["b"], ["c"]])
        self.assertFalse(placed.partitioned)
        # More ps tasks than pieces: the last hold nothing.
        self.assertEqual(Placement.from_signature(signature(("a", (2,))), 3).describe(2), "")

    def test_a_placement_reads_the_same_from_the_signature_message(self):
        decided = placement.partition(signature(("E", (100000, 10)), ("b", (10,))), 3)
        from_object = Placement.from_signature(decided, 3)
        from_message = Placement.from_signature(decided.to_proto(), 3)
        self.assertEqual(from_object.slices, from_message.slices)
        self.assertEqual([s.name for s in from_message.on(0)], ["E/part_0", "b"])

    def test_a_partitioning_that_cannot_be_placed_is_refused_saying_what_is_wrong(self):
        cases = [
            (signature(("W", (784, -10))), "variable 0 \\('W'\\) has a negative dimension -10"),
            (signature(("b", (10,)), ("W", (784, 10), (392, 300))),
             "variable 1 \\('W'\\) declares slices of 692 rows in all, but it has 784: the slices must cover "
             "dimension 0 exactly"),
            (signature(("W", (784, 10), (392, 500))),
             "declares slice 1 of 500 rows, but its 784 rows leave 392: each slice needs at least one row"),
            (signature(("W", (784, 10), (784, 0))), "declares slice 1 of 0 rows"),
            (signature(("W", (784, 10), (784,))), "declares a single slice: leave slice_rows empty"),
            (signature(("s", (), (1, 1))), "variable 0 \\('s'\\) is a scalar but declares slices"),
            (signature(("W", (1 << 20, 1 << 12))), "claims more than 2\\^31 values"),
            (signature(("W", (5000, 1), (1,) * 5000)), "more than 4096 variable slices"),
            (signature(*[(f"v{i}", (1,)) for i in range(4097)]), "more than 4096 variables and slices"),
        ]
        for given, message in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(PlacementError, message):
                    Placement.from_signature(given, 2)
                with self.assertRaisesRegex(PlacementError, message):
                    Placement.from_signature(given.to_proto(), 2)
        with self.assertRaisesRegex(PlacementError, "at least one ps task"):
            Placement.from_signature(signature(("b", (1,))), 0)
        with self.assertRaisesRegex(PlacementError, "variable 0 \\('W'\\) has a negative dimension"):
            placement.partition(signature(("W", (-1, 10))), 2, 1)

    def test_gradients_split_into_views_and_parameters_join_into_whole_copies(self):
        placed = Placement.from_signature(placement.partition(signature(("W", (784, 10)), ("b", (10,))), 2, KIB), 2)
        w = np.arange(7840, dtype=np.float32).reshape(784, 10)
        b = np.arange(10, dtype=np.float32)
        pieces = placed.split([w, b])
        self.assertEqual([[p.shape for p in on] for on in pieces], [[(392, 10), (10,)], [(392, 10)]])
        # Slices of the rows, not copies: a 1 GB gradient is not copied to be pushed.
        self.assertTrue(all(np.shares_memory(p, w) for p in (pieces[0][0], pieces[1][0])))
        np.testing.assert_array_equal(pieces[1][0], w[392:])

        # Answers arrive as read-only views of the message; the parameters
        # handed out are whole, writable, and the answers' own memory no more.
        answers = [[self.read_only(p) for p in on] for on in pieces]
        joined = placed.join(answers)
        np.testing.assert_array_equal(joined[0], w)
        np.testing.assert_array_equal(joined[1], b)
        self.assertTrue(all(a.flags.writeable and a.dtype == np.float32 for a in joined))
        self.assertFalse(any(np.shares_memory(j, p) for j in joined for on in answers for p in on))

        with self.assertRaisesRegex(PlacementError, "ps:1 answered with 0 tensors, but holds 1 variables and "
                                                    "slices \\(W rows 392-783 of 784"):
            placed.join([answers[0], []])
        with self.assertRaisesRegex(PlacementError, "ps:1 sent 3910 values for 'W/part_1', which holds 3920"):
            placed.join([answers[0], [w[392:783]]])
        with self.assertRaisesRegex(PlacementError, "'W' has shape \\(10, 784\\), the variable \\(784, 10\\)"):
            placed.split([w.T, b])

    def test_a_whole_variable_read_from_a_data_link_is_taken_without_a_copy(self):
        placed = Placement.from_signature(signature(("W", (784, 10)), ("b", (10,))), 1)
        # What a data link's answer holds: arrays the worker read the values
        # into, its own (parasync.worker's receive_answer), flat or shaped.
        w = np.arange(7840, dtype=np.float32)
        b = np.arange(10, dtype=np.float32)
        joined = placed.join([[w, b]])
        self.assertEqual(joined[0].shape, (784, 10))
        self.assertTrue(np.shares_memory(joined[0], w))  # 4 MB at 1M parameters, not copied again
        self.assertTrue(np.shares_memory(joined[1], b))
        # A writable view of memory the answer does not own (another
        # array's rows) is copied: that memory may be reused.
        buffer = np.zeros(8000, dtype=np.float32)
        joined = placed.join([[buffer[:7840], b]])
        self.assertFalse(np.shares_memory(joined[0], buffer))
        self.assertTrue(joined[0].flags.writeable)

    @staticmethod
    def read_only(values):
        view = np.frombuffer(np.ascontiguousarray(values).tobytes(), dtype=np.float32).reshape(values.shape)
        assert not view.flags.writeable
        return view


class CheckpointLayoutTest(unittest.TestCase):
    """Whole variables in, slices out, for any ps count; and back."""

    def setUp(self):
        rng = np.random.default_rng(3)
        self.values = {"W": rng.standard_normal((784, 10)).astype(np.float32),
                       "b": rng.standard_normal(10).astype(np.float32),
                       "E": rng.standard_normal((9, 4)).astype(np.float32)}
        self.model = signature(("W", (784, 10)), ("b", (10,)), ("E", (9, 4)))
        self.whole = [state(name, value, {"m": value * 2, "v": value * 3}, update_count=7)
                      for name, value in self.values.items()]

    def placed(self, num_ps, min_slice_bytes=KIB):
        return Placement.from_signature(placement.partition(self.model, num_ps, min_slice_bytes), num_ps)

    def assert_whole(self, states):
        self.assertEqual([s.name for s in states], list(self.values))
        for s in states:
            value = self.values[s.name]
            np.testing.assert_array_equal(array(s.value), value)
            self.assertEqual(sorted(s.slots), ["m", "v"])
            np.testing.assert_array_equal(array(s.slots["m"]), value * 2)
            np.testing.assert_array_equal(array(s.slots["v"]), value * 3)
            self.assertEqual(s.update_count, 7)

    def test_a_ps_gets_its_slices_of_every_value_and_optimizer_slot(self):
        placed = self.placed(3)
        shards = placed.split_states(self.whole)
        self.assertEqual([[s.name for s in shard] for shard in shards],
                         [["W/part_0", "b"], ["W/part_1", "E"], ["W/part_2"]])
        second = shards[1][0]
        self.assertEqual(list(second.value.shape), [261, 10])
        np.testing.assert_array_equal(array(second.value), self.values["W"][262:523])
        np.testing.assert_array_equal(array(second.slots["v"]), self.values["W"][262:523] * 3)
        self.assertEqual(second.update_count, 7)
        # And the chief's checkpoint joins them whole again.
        self.assert_whole(placed.join_states(shards))

    def test_whole_variables_restore_into_any_number_of_ps_tasks(self):
        for saving_ps, restoring_ps in ((2, 1), (1, 3), (3, 2), (4, 4)):
            with self.subTest(saving_ps=saving_ps, restoring_ps=restoring_ps):
                saved = pb.Checkpoint(global_step=50)
                saved.signature.CopyFrom(placement.partition(self.model, saving_ps, KIB).to_proto())
                saved.variables.extend(self.placed(saving_ps).join_states(self.placed(saving_ps).split_states(
                    self.whole)))
                read = checkpoints.parse(checkpoints.serialize(saved))
                self.assertEqual(len(read.shards), 0)
                restored = checkpoints.whole_variables(read)
                self.assert_whole(restored)
                placed = self.placed(restoring_ps)
                self.assert_whole(placed.join_states(placed.split_states(restored)))

    def test_a_checkpoint_from_before_partitioning_restores_from_its_shards(self):
        # Two ps tasks, variable i on ps i % 2, each whole.
        old = pb.Checkpoint(global_step=50)
        old.signature.CopyFrom(self.model.to_proto())
        for k in range(2):
            shard = old.shards.add(ps_index=k)
            shard.variables.extend(self.whole[k::2])
        restored = checkpoints.whole_variables(checkpoints.parse(checkpoints.serialize(old)))
        self.assert_whole(restored)
        placed = self.placed(2)  # now W is split
        self.assert_whole(placed.join_states(placed.split_states(restored)))

    def test_a_slot_that_does_not_fit_its_variable_is_left_to_the_ps_to_start_afresh(self):
        placed = self.placed(2)
        odd = state("W", self.values["W"], {"m": self.values["W"] * 2, "scalar": np.float32(1)})
        shards = placed.split_states([odd, *self.whole[1:]])
        self.assertEqual(sorted(shards[0][0].slots), ["m"])
        # A slot only one slice has is not joined into the whole variable.
        del shards[1][0].slots["m"]
        self.assertEqual(sorted(placed.join_states(shards)[0].slots), [])

    def test_a_ps_holding_other_pieces_than_the_placement_says_is_not_checkpointed(self):
        placed = self.placed(2)
        shards = placed.split_states(self.whole)
        with self.assertRaisesRegex(PlacementError, "ps:1 holds \\['W/part_1'\\], but the placement puts "
                                                    "\\['W/part_1', 'E'\\] there"):
            placed.join_states([shards[0], shards[1][:1]])
        with self.assertRaisesRegex(PlacementError, "'W' holds 10 values, the variable \\[784, 10\\] has 7840"):
            placed.split_states([self.whole[1], *self.whole[1:]])


def parse_flags(argv):
    parser = cluster_module.add_arguments(argparse.ArgumentParser())
    return cluster_module.from_arguments(parser.parse_args(argv), {})


class MinSliceBytesFlagTest(unittest.TestCase):
    HOSTS = ["--ps_hosts=127.0.0.1:2222,127.0.0.1:2225", "--worker_hosts=127.0.0.1:2223", "--task_index=0"]

    def cluster_file(self, training):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"cluster": {"ps": ["127.0.0.1:2222", "127.0.0.1:2225"], "worker": ["127.0.0.1:2223"]}, '
                    f'"training": {training}}}')
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_the_flag_the_cluster_file_and_the_default_as_parasync_node_takes_them(self):
        self.assertEqual(parse_flags(self.HOSTS).min_slice_bytes, 262144)
        self.assertEqual(parse_flags(self.HOSTS + ["--min_slice_bytes=0"]).min_slice_bytes, 0)
        path = self.cluster_file('{"mode": "sync", "min_slice_bytes": 1024}')
        self.assertEqual(parse_flags([f"--cluster_file={path}", "--task_index=0"]).min_slice_bytes, 1024)
        # The command line over the file.
        self.assertEqual(parse_flags([f"--cluster_file={path}", "--task_index=0", "--min_slice_bytes=2048"])
                         .min_slice_bytes, 2048)

    def test_a_negative_or_unreadable_value_is_refused(self):
        with self.assertRaisesRegex(parasync.ClusterError, "--min_slice_bytes=-1: give 0 \\(every variable "
                                                           "whole\\) or a number of bytes"):
            parse_flags(self.HOSTS + ["--min_slice_bytes=-1"])
        for value, message in (("-5", "must be at least 0"), ('"lots"', "not a whole number"),
                               ("1.5", "not a whole number"), ("true", "not a whole number")):
            with self.subTest(value=value):
                path = self.cluster_file(f'{{"min_slice_bytes": {value}}}')
                with self.assertRaisesRegex(parasync.ClusterError, re.escape(
                        f"(from the \"training\" of cluster file '{path}'): {message}")):
                    parse_flags([f"--cluster_file={path}", "--task_index=0"])

    def test_a_worker_joins_with_the_partitioning_its_cluster_decides(self):
        softmax = signature(("W", (784, 10)), ("b", (10,)))
        lines = []
        two_ps = ["127.0.0.1:1", "127.0.0.1:3"]
        worker = parasync.Worker(parasync.ClusterConfig(ps=two_ps, workers=["127.0.0.1:2"], task_index=0,
                                                        min_slice_bytes=KIB),
                                 softmax, log=lines.append, serve_control=False)
        self.addCleanup(worker.close)
        self.assertEqual([list(v.slice_rows) for v in worker.signature.to_proto().variables], [[392, 392], []])
        self.assertIn("variables partitioned (--min_slice_bytes=1024): ps:0 holds W rows 0-391 of 784 (15.3 KiB), "
                      "b (40 bytes); ps:1 holds W rows 392-783 of 784 (15.3 KiB)", lines[0])
        default = parasync.Worker(parasync.ClusterConfig(ps=two_ps, workers=["127.0.0.1:2"], task_index=0),
                                  softmax, log=lines.append, serve_control=False)
        self.addCleanup(default.close)
        self.assertEqual([v.slice_rows for v in default.signature.variables], [(), ()])
        with self.assertRaisesRegex(ValueError, "variable 0 \\('W'\\) has a negative dimension"):
            parasync.Worker(parasync.ClusterConfig(ps=two_ps, workers=["127.0.0.1:2"], task_index=0),
                            signature(("W", (-784, 10))), log=lines.append, serve_control=False)


class _FakePs(pb_grpc.ParameterServiceServicer, pb_grpc.TaskControlServicer):
    """A ps task in this process: plain SGD (learning rate 1) on whatever
    the chief initialised it with, recording each push's gradients; ps:1..
    hold a staged push's gradients until the decision that follows it, as
    parasync-node's ps tasks do (PushRequest.staged)."""

    def __init__(self, index):
        self.index = index
        self.states = None
        self.global_step = 0
        self.signature = None
        self.pushed = []  # per push: [(shape, values)] in the order received
        self.staged_pushes = 0
        self._lock = threading.Lock()

    def GetTaskStatus(self, request, context):
        return pb.TaskStatusResponse(job_name="ps", task_index=self.index)

    def Initialize(self, request, context):
        with self._lock:
            if self.states is not None:
                return pb.InitializeResponse(initialized_now=False, global_step=self.global_step)
            self.states = list(request.shard.variables)
            self.global_step = request.global_step
            self.signature = request.signature
            return pb.InitializeResponse(initialized_now=True, global_step=self.global_step)

    def Snapshot(self, request, context):
        with self._lock:
            return pb.SnapshotResponse(shard=pb.ShardState(ps_index=self.index, variables=self.states),
                                       global_step=self.global_step)

    def Train(self, request_iterator, context):
        staged = None  # a staged push's gradients (ps:1.. only), until ps:0's decision follows
        for request in request_iterator:
            with self._lock:
                response = pb.TrainResponse()
                if request.HasField("join"):
                    response.join.ready = True
                    response.join.global_step = self.global_step
                    response.join.parameters.extend(s.value for s in self.states)
                elif request.HasField("push"):
                    push = request.push
                    grads = [(tuple(g.shape), array(g)) for g in push.gradients]
                    if push.staged:
                        # Held, unanswered, as parasync-node's ps holds it.
                        staged = grads
                        self.pushed.append(grads)
                        self.staged_pushes += 1
                        continue
                    if staged is not None:
                        grads, staged = staged, None
                    else:
                        self.pushed.append(grads)
                    if self.index == 0 or push.contributions:
                        for s, (shape, grad) in zip(self.states, grads):
                            if shape != tuple(s.value.shape):
                                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{s.name}: shape {shape}")
                            s.value.ParseFromString(tensors.encode_tensor(array(s.value) - grad))
                            s.update_count += 1
                    self.global_step += 1
                    push_response = response.push
                    push_response.outcome = pb.APPLIED
                    push_response.global_step = push_response.update = self.global_step
                    push_response.contributions = 1
                    push_response.parameters.extend(s.value for s in self.states)
                else:
                    return
            yield response


class PartitionedWorkerTest(unittest.TestCase):
    """A Python chief against two in-process ps tasks, W split over both."""

    def start_ps(self, count):
        tasks, addresses = [], []
        for k in range(count):
            task = _FakePs(k)
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            pb_grpc.add_ParameterServiceServicer_to_server(task, server)
            pb_grpc.add_TaskControlServicer_to_server(task, server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            self.addCleanup(server.stop, None)
            tasks.append(task)
            addresses.append(f"127.0.0.1:{port}")
        return tasks, addresses

    def chief(self, addresses, logdir):
        config = parasync.ClusterConfig(ps=addresses, workers=["127.0.0.1:1"], task_index=0, logdir=logdir,
                                        save_checkpoint_secs=0, min_slice_bytes=KIB)
        worker = parasync.Worker(config, signature(("W", (784, 10)), ("b", (10,))), log=lambda line: None,
                                 serve_control=False)
        self.addCleanup(worker.close)
        return worker

    def test_the_chief_places_pushes_and_checkpoints_a_split_variable_whole(self):
        logdir = tempfile.mkdtemp(prefix="parasync-placement-")
        (ps0, ps1), addresses = self.start_ps(2)
        w = np.arange(7840, dtype=np.float32).reshape(784, 10) / 7840
        b = np.full(10, 0.5, dtype=np.float32)
        worker = self.chief(addresses, logdir)
        worker.initialize({"W": w, "b": b})
        # Each ps holds its pieces, named and shaped as the placement says.
        self.assertEqual([(s.name, list(s.value.shape)) for s in ps0.states], [("W/part_0", [392, 10]), ("b", [10])])
        self.assertEqual([(s.name, list(s.value.shape)) for s in ps1.states], [("W/part_1", [392, 10])])
        self.assertEqual(list(ps0.signature.variables[0].slice_rows), [392, 392])
        params = worker.join()
        np.testing.assert_array_equal(params["W"], w)
        np.testing.assert_array_equal(params["b"], b)

        grad_w = np.ones((784, 10), dtype=np.float32) * np.arange(784, dtype=np.float32)[:, None] / 1000
        grad_b = np.full(10, 0.25, dtype=np.float32)
        result = worker.push({"W": grad_w, "b": grad_b}, 1.0)
        # Each ps was sent its rows of W's gradient, in its variable list's order;
        # ps:1 got them staged, before ps:0's decision.
        self.assertEqual([shape for shape, _ in ps0.pushed[0]], [(392, 10), (10,)])
        np.testing.assert_array_equal(ps1.pushed[0][0][1], grad_w[392:])
        self.assertEqual((ps0.staged_pushes, ps1.staged_pushes), (0, 1))
        # What comes back is the whole model after the step.
        np.testing.assert_allclose(result.parameters["W"], w - grad_w, rtol=1e-6)
        np.testing.assert_allclose(result.parameters["b"], b - grad_b)
        self.assertEqual(result.parameters["W"].shape, (784, 10))

        path = worker.save_checkpoint()
        saved = checkpoints.read(path)
        self.assertEqual(len(saved.shards), 0)
        self.assertEqual([(v.name, list(v.value.shape)) for v in saved.variables], [("W", [784, 10]), ("b", [10])])
        np.testing.assert_allclose(array(saved.variables[0].value), w - grad_w, rtol=1e-6)
        self.assertEqual(saved.variables[0].update_count, 1)

        # A new chief on one ps task restores the whole W into it.
        (lone,), address = self.start_ps(1)
        again = self.chief(address, logdir)
        again.initialize({"W": w, "b": b})
        self.assertEqual([(s.name, list(s.value.shape)) for s in lone.states], [("W", [784, 10]), ("b", [10])])
        self.assertEqual(lone.global_step, saved.global_step)
        np.testing.assert_allclose(again.join()["W"], w - grad_w, rtol=1e-6)


if __name__ == "__main__":
    unittest.main()
