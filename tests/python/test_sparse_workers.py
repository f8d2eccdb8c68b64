"""Embedding tables from Python (docs/sparse.md): the rows' placement and
first values agree with parasync-node's (the ps refuses a row another ps
task holds, and its Snapshot says which rows it holds), a step moves a
batch's merged row gradients out and the next batch's rows in, the click
log's port draws parasync-node's problem, and a PyTorch EmbeddingBag worker
and a C++ worker train one sparse_lr model to within 0.01 of the best AUC
the held-out data allows. Bad input is refused with what to fix."""

import hashlib
import json
import os
import random
import re
import shutil
import struct
import tempfile
import unittest
import zlib

import grpc
import numpy as np
import torch

import parasync
import parasync.pytorch
from node_cluster import Cluster, describe, read_metrics
from parasync import checkpoints, click_log, models, sparse
from parasync.proto import parasync_pb2 as pb
from parasync.proto import parasync_pb2_grpc as pb_grpc

MASK = (1 << 64) - 1


def splitmix64_mix(z):
    """core/engine/sparse_table.cpp's mix64, on Python integers, step by step."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class HashTest(unittest.TestCase):
    def test_ps_of_row_is_splitmix64s_mix_of_the_id_modulo_the_ps_count(self):
        # splitmix64's published first output for seed 0 is the mix of the
        # golden ratio constant: 0xe220a8397b1dcdaf (Vigna's splitmix64.c).
        self.assertEqual(int(sparse.mix64(0x9E3779B97F4A7C15)[0]), 0xE220A8397B1DCDAF)
        self.assertEqual(list(sparse.ps_of_row([0x9E3779B97F4A7C15] * 4, 1)), [0] * 4)
        # 0xe220a8397b1dcdaf is odd; modulo 3 and 5 by hand: 16294208416658607535 = 3 * 5431402805552869178 + 1
        # = 5 * 3258841683331721507 + 0.
        for num_ps, expected in ((2, 1), (3, 1), (5, 0)):
            self.assertEqual(int(sparse.ps_of_row([0x9E3779B97F4A7C15], num_ps)[0]), expected)
        self.assertEqual(int(sparse.ps_of_row([0], 7)[0]), 0)  # mix64(0) = 0
        rng = random.Random(5)
        ids = [rng.getrandbits(64) for _ in range(2000)] + [0, 1, MASK, 1 << 63, (1 << 63) - 1]
        for num_ps in (1, 2, 3, 4, 7):
            self.assertEqual(list(sparse.ps_of_row(np.array(ids, dtype=np.uint64), num_ps)),
                             [splitmix64_mix(i) % num_ps for i in ids])
        with self.assertRaisesRegex(ValueError, "must be positive"):
            sparse.ps_of_row([1], 0)

    def test_initial_rows_are_drawn_from_seed_and_id_alone(self):
        table = sparse.TableSpec("factors", 4, init_stddev=0.01, seed=7)
        rows = sparse.initial_rows(table, [3, 5, 3])
        self.assertEqual(rows.shape, (3, 4))
        np.testing.assert_array_equal(rows[0], rows[2])
        self.assertFalse(np.array_equal(rows[0], rows[1]))
        self.assertLessEqual(float(np.abs(rows).max()), 0.02)  # truncated at two standard deviations
        many = sparse.initial_rows(table, np.arange(20000, dtype=np.uint64))
        self.assertAlmostEqual(float(many.std()), 0.01 * 0.8796, delta=0.0002)  # a normal truncated at 2 sigma
        np.testing.assert_array_equal(sparse.initial_rows(sparse.TableSpec("w", 2), [9]), np.zeros((1, 2)))

    def test_the_click_log_ids_are_parasync_nodes_hash_of_field_and_value(self):
        # clickLogId(field, value) = mix(mix(field * golden + 0x1d8e4e27c47d124f) ^ value), as click_log.cpp.
        for field, value in ((0, 0), (3, 12345), (9, 99999)):
            key = splitmix64_mix((field * 0x9E3779B97F4A7C15 + 0x1D8E4E27C47D124F) & MASK)
            self.assertEqual(int(click_log.click_log_id(field, [value])[0]), splitmix64_mix(key ^ value))
        log = click_log.make_click_log(click_log.parse_spec("clicklog:4:50:1.1"), 3, 0, 500)
        self.assertEqual(log.ids.shape, (500, 4))
        for f in range(4):  # every id of field f is one of its 50 values'
            self.assertTrue(set(log.ids[:, f]) <= set(click_log.click_log_id(f, np.arange(50))))
        self.assertEqual(set(np.unique(log.labels)), {0.0, 1.0})
        with self.assertRaisesRegex(ValueError, "the values per field must be from 2 to"):
            click_log.parse_spec("clicklog:10:1")


class SparseInputTest(unittest.TestCase):
    """Refused before anything is sent, with what to fix."""

    def setUp(self):
        cluster = parasync.ClusterConfig(ps=["127.0.0.1:1", "127.0.0.1:3"], workers=["127.0.0.1:2"], task_index=0)
        self.signature = parasync.Signature(model="m", variables=[parasync.VariableSpec("bias", (1,))],
                                            tables=[parasync.TableSpec("weights", 1),
                                                    parasync.TableSpec("factors", 4, id_limit=1000)])
        self.worker = parasync.Worker(cluster, self.signature, log=lambda line: None, serve_control=False)
        self.addCleanup(self.worker.close)
        self.grads = {"bias": np.zeros(1)}

    def test_ids_that_are_not_64_bit_ids_of_a_declared_table_are_refused(self):
        cases = [
            ({"embeddings": [1]}, r"table 'embeddings', which the model does not declare \(its tables: "
                                  r"\['weights', 'factors'\]\)"),
            ({"weights": [1.5, 2.0]}, "are float64, not integers: give 64-bit ids"),
            ({"weights": np.array([3, -4])}, "include the negative id -4"),
            ({"weights": [1, 1 << 64]}, "which is not a 64-bit id"),
            ({"factors": [999, 1000]}, "include id 1000, at or above the table's id_limit 1000"),
        ]
        for ids, message in cases:
            with self.subTest(ids=ids), self.assertRaisesRegex(parasync.TableError, message):
                self.worker.pull(ids)
            with self.subTest(ids=ids), self.assertRaisesRegex(parasync.TableError, message):
                self.worker.push(self.grads, 0.5, pull=ids)

    def test_row_gradients_of_another_shape_are_refused(self):
        cases = [
            ({"factors": ([1, 2, 3], np.zeros((3, 2)))}, r"have shape \(3, 2\), but 3 ids of rows of 4 need shape "
                                                         r"\(3, 4\)"),
            ({"factors": ([1, 2], np.zeros(8))}, r"have shape \(8,\), but 2 ids"),
            ({"factors": np.zeros((2, 4))}, r"must be a pair \(ids, gradients\)"),
            ({"nope": ([1], [0.0])}, "row gradients for table 'nope'"),
        ]
        for rows, message in cases:
            with self.subTest(rows=rows), self.assertRaisesRegex(parasync.TableError, message):
                self.worker.push(self.grads, 0.5, row_gradients=rows)
        # Rows of 1 may come flat; then the step is refused for not having joined, not for the rows.
        with self.assertRaisesRegex(RuntimeError, "has not joined the cluster"):
            self.worker.push(self.grads, 0.5, row_gradients={"weights": ([5, 5], [0.1, 0.2])})

    def test_a_model_without_tables_refuses_rows(self):
        dense = parasync.Worker(self.worker.cluster, parasync.Signature("d", [parasync.VariableSpec("b", (1,))]),
                                log=lambda line: None, serve_control=False)
        self.addCleanup(dense.close)
        with self.assertRaisesRegex(parasync.TableError, "the model declares no tables: declare it"):
            dense.pull({"weights": [1]})

    def test_tables_the_ps_would_refuse_are_refused_at_once(self):
        cases = [
            (parasync.TableSpec("w", 0), "rows of 0 floats: give a row_width from 1 to 4096"),
            (parasync.TableSpec("w w", 1), "is not 1-64 characters"),
            (parasync.TableSpec("bias", 1), "table name 'bias' is declared twice or is also a variable's"),
            (parasync.TableSpec("w", 1, init_stddev=-1.0), "give a finite spread, 0 or more"),
        ]
        for table, message in cases:
            signature = parasync.Signature("m", [parasync.VariableSpec("bias", (1,))], tables=[table])
            with self.subTest(table=table), self.assertRaisesRegex(parasync.TableError, message):
                parasync.Worker(self.worker.cluster, signature, log=lambda line: None, serve_control=False)

    def test_merging_sums_a_batchs_repeated_ids_and_sorts_them(self):
        ids, rows = sparse.merge_rows(np.array([9, 2, 9, 5, 2, 9], dtype=np.uint64),
                                      np.arange(6, dtype=np.float32).reshape(6, 1))
        self.assertEqual(list(ids), [2, 5, 9])
        self.assertEqual(list(rows[:, 0]), [1 + 4, 3, 0 + 2 + 5])

    def test_a_shard_cut_into_pieces_joins_to_the_same_bytes_and_bad_pieces_are_refused(self):
        whole = pb.ShardState(ps_index=1)
        whole.variables.add(name="bias").value.values.append(0.5)
        for name, width in (("weights", 1), ("empty", 2), ("factors", 3)):
            table = whole.tables.add(name=name, slot_names=["accumulator"])
            if name != "empty":
                table.ids.extend(range(3, 3 + 7 * 333, 7))
                table.values.extend(float(v) for v in range(333 * width))
                table.slots.extend(float(-v) for v in range(333 * width))
        self.assertTrue(sparse.shard_needs_pieces(whole, 4096))
        head = pb.ShardState()
        head.CopyFrom(whole)
        rows = sparse.take_table_rows(head)
        self.assertEqual([len(t.ids) for t in head.tables], [0, 0, 0])
        pieces = list(sparse.row_pieces(rows, sparse.piece_bytes_within(1000)))
        self.assertTrue(all(p.ByteSize() <= 1000 // sparse.PIECE_SHARE for p in pieces))
        for piece in pieces:
            sparse.add_row_piece(head, piece)
        self.assertEqual(head.SerializeToString(), whole.SerializeToString())
        for wrong, said in ((pb.TableState(name="other", ids=[9999], values=[1.0]), "did not name"),
                            (pb.TableState(name="factors", ids=[9999], values=[1.0]), "unlike the rows before"),
                            (pb.TableState(name="weights", ids=[3], values=[1.0], slots=[1.0]), "not after"),
                            (pb.TableState(name="weights"), "whole rows")):
            with self.assertRaisesRegex(sparse.TableError, said):
                sparse.add_row_piece(head, wrong)
        self.assertEqual(head.SerializeToString(), whole.SerializeToString())

    def test_a_checkpoint_in_pieces_reads_back_the_same_and_pieces_written_wrong_are_refused(self):
        """The checkpoint file in pieces (core/formats/checkpoint.h), as
        parasync-node writes and reads it: cut at any size it reads back the
        same; version 1 files still read; a piece holding what it may not, or
        damage, is refused in the words parasync-node uses."""
        saved = pb.Checkpoint(global_step=7000, signature=pb.ModelSignature(model="sparse_lr"))
        for name in ("bias", "scale"):
            saved.variables.add(name=name).value.values.extend(float(v) for v in range(64))
        for name, width in (("fields", 16), ("empty", 2), ("factors", 3)):
            table = saved.tables.add(name=name, slot_names=["accumulator"])
            if name != "empty":
                table.ids.extend(range(5, 5 + 11 * 300, 11))
                table.values.extend(float(v % 97) for v in range(300 * width))
                table.slots.extend(0.1 + v for v in range(300 * width))
        for piece_bytes in (1, 1000, checkpoints.PIECE_BYTES):
            data = checkpoints.serialize(saved, piece_bytes)
            self.assertEqual(data[:8], b"PSYNCKP2")
            pieces = struct.unpack_from("<Q", data, 8)[0]
            self.assertGreaterEqual(pieces, {1: 1 + 2 + 2 * 300, 1000: 10, checkpoints.PIECE_BYTES: 4}[piece_bytes])
            self.assertEqual(checkpoints.parse(data).SerializeToString(), saved.SerializeToString())
        payload = saved.SerializeToString()
        version_1 = b"PSYNCKP1" + struct.pack("<Q", len(payload)) + payload + hashlib.sha256(payload).digest()
        self.assertEqual(checkpoints.parse(version_1).SerializeToString(), payload)

        def checked(value: int) -> bytes:
            data = struct.pack("<Q", value)
            return data + struct.pack("<I", zlib.crc32(data))

        def framed(*pieces: bytes, count: int = 0) -> bytes:
            data = b"PSYNCKP2" + checked(count or len(pieces))
            for piece in pieces:
                data += checked(len(piece)) + piece
            return data + hashlib.sha256(data).digest()

        first = pb.Checkpoint(global_step=10, tables=[pb.TableState(name="fields")]).SerializeToString()
        rows = pb.Checkpoint(tables=[pb.TableState(name="fields", ids=[4], values=[1.0])]).SerializeToString()
        good = framed(first, rows)
        newer = b"PSYNCKP3" + good[8:]
        flipped = good[:23] + b"\x40" + good[24:]
        for data, said in ((framed(first, pb.Checkpoint(global_step=11).SerializeToString()),
                            "piece 2 of 2 holds global_step, which only the first piece may"),
                           (framed(first, rows.replace(b"fields", b"others")),
                            "piece 2 of 2: rows of table 'others', which the first message did not name"),
                           (framed(rows), "piece 1 holds rows of table 'fields'"),
                           (framed(first, rows, rows), "piece 3 of 3: .* not after the last id before it"),
                           (framed(first, b"\xff\xff\xff"), "piece 2 of 2 does not parse"),
                           (framed(first, count=1 << 40), "1099511627776 pieces is impossible"),
                           (framed(first, count=5), "truncated: "),
                           (newer, r"written by a newer Parasync \(checkpoint format 3\)"),
                           (flipped, r"checksum mismatch \(the file is corrupt: the length of piece 1 of 2 fails"),
                           (good[:-10], f"truncated: {len(good) - 10} of {len(good)} bytes")):
            with self.subTest(said=said), self.assertRaisesRegex(checkpoints.CheckpointError, "^ckpt: " + said):
                checkpoints.parse(data, "ckpt")
        self.assertEqual(checkpoints.parse(good).tables[0].ids, [4])


class TorchEmbeddingTest(unittest.TestCase):
    def test_sparse_embeddings_are_tables_and_the_rest_variables(self):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.users = torch.nn.EmbeddingBag(1, 8, mode="mean", sparse=True)
                self.dense = torch.nn.Embedding(5, 2)  # not sparse: a variable like any other
                self.out = torch.nn.Linear(8, 1)

        signature = parasync.pytorch.signature(Net(), "recsys", optimizer="adagrad", table_seed=3)
        self.assertEqual([v.name for v in signature.variables], ["dense.weight", "out.weight", "out.bias"])
        self.assertEqual(signature.tables, [parasync.TableSpec("users", 8, 0, 0.01, 3)])
        padded = torch.nn.Sequential(torch.nn.Embedding(4, 2, padding_idx=0, sparse=True))
        with self.assertRaisesRegex(ValueError, "embedding '0' has a padding_idx or max_norm"):
            parasync.pytorch.signature(padded, "p")

    def test_the_builtin_sparse_models_declare_what_parasync_node_declares(self):
        lr = parasync.pytorch.builtin_signature(parasync.pytorch.SparseLR(10), "clicklog", "adagrad", seed=1,
                                                held_out=True)
        self.assertEqual(lr.to_proto(), models.sparse_signature("sparse_lr", 10, "clicklog", "adagrad", 1, True)
                         .to_proto())
        self.assertEqual((lr.model, lr.feature_dim, lr.output_dim, lr.metric_names),
                         ("sparse_lr", 10, 1, ("heldout_loss", "heldout_auc")))
        self.assertEqual([(v.name, v.shape) for v in lr.variables], [("bias", (1,))])
        self.assertEqual(lr.tables, [parasync.TableSpec("weights", 1, 0, 0.0, 1)])
        fm = parasync.pytorch.builtin_signature(parasync.pytorch.FactorizationMachine(6, 4), "", "sgd", seed=9)
        self.assertEqual(fm.model, "fm:4")
        self.assertEqual(fm.tables, [parasync.TableSpec("weights", 1, 0, 0.0, 9),
                                     parasync.TableSpec("factors", 4, 0, 0.01, 9)])
        self.assertEqual(models.sparse_signature("fm", 3).model, "fm:8")
        with self.assertRaisesRegex(ValueError, "needs a rank from 1 to 1024"):
            models.sparse_model_rank("fm:0")


class SparseClusterTest(unittest.TestCase):
    def test_rows_travel_to_and_from_the_ps_task_each_id_hashes_to(self):
        """A Python chief of a model of its own on three parasync-node ps
        tasks: each id's row is asked of psOfRow's task, or the ps would
        refuse it; the rows start as initialRow draws them; a step's merged
        gradients move them by exactly -learning_rate x their sum (sgd)."""
        cluster = Cluster(self, num_ps=3, num_workers=1)
        for k in range(3):
            cluster.start_node("ps", k, "--optimizer=sgd", "--learning_rate=0.5")
        config = parasync.ClusterConfig(ps=cluster.ps_hosts.split(","), workers=cluster.worker_hosts.split(","),
                                        task_index=0, logdir=os.path.join(cluster.dir, "run"),
                                        save_checkpoint_secs=0)
        factors = parasync.TableSpec("factors", 3, init_stddev=0.01, seed=7)
        signature = parasync.Signature("py-sparse", [parasync.VariableSpec("bias", (1,))], optimizer="sgd",
                                       tables=[parasync.TableSpec("weights", 1), factors])
        rng = np.random.default_rng(11)
        ids = rng.integers(0, 1 << 64, size=600, dtype=np.uint64, endpoint=False)
        ids = np.concatenate([ids, ids[:100]])  # repeats, as a batch has them
        with parasync.Worker(config, signature, log=lambda line: None, serve_control=False) as worker:
            worker.initialize({"bias": [0.0]})
            worker.join()
            looked_up = worker.pull({"factors": ids}, lookup_only=True)["factors"]
            np.testing.assert_array_equal(looked_up[0], ids)
            np.testing.assert_allclose(looked_up[1], sparse.initial_rows(factors, ids), rtol=1e-6, atol=1e-9)
            snapshot = self.snapshots(cluster, config)
            self.assertEqual([len(s.tables[1].ids) for s in snapshot], [0, 0, 0])  # a lookup makes nothing

            pulled = worker.pull({"factors": ids, "weights": ids[:50]})
            np.testing.assert_array_equal(pulled["factors"][1], looked_up[1])
            np.testing.assert_array_equal(pulled["weights"][1], np.zeros((50, 1)))
            # Every ps task holds the rows whose ids hash to it, and only those.
            held = [np.array(s.tables[1].ids, dtype=np.uint64) for s in self.snapshots(cluster, config)]
            self.assertEqual(sorted(np.concatenate(held)), sorted(set(ids.tolist())))
            for k, held_ids in enumerate(held):
                self.assertGreater(len(held_ids), 100)
                self.assertTrue((sparse.ps_of_row(held_ids, 3) == k).all(), f"ps:{k}")

            # One step: each id's gradient row is (1, 2, 3), the repeated ones
            # twice; the answer brings the rows after the update.
            gradient = np.tile(np.array([1.0, 2.0, 3.0], dtype=np.float32), (ids.size, 1))
            step = worker.push({"bias": [0.0]}, 0.5, row_gradients={"factors": (ids, gradient)},
                               pull={"factors": ids[:300]})
            self.assertEqual((step.outcome, step.global_step), ("applied", 1))
            times = np.array([2 if i < 100 else 1 for i in range(300)], dtype=np.float32)[:, None]
            expected = looked_up[1][:300] - 0.5 * times * np.array([1.0, 2.0, 3.0], dtype=np.float32)
            np.testing.assert_allclose(step.rows["factors"][1], expected, rtol=1e-6, atol=1e-7)

            # A gradient for a row nobody pulled: the ps says so; the worker rejoins.
            with self.assertRaisesRegex(parasync.TableError, "was never pulled from ps:"):
                worker.push({"bias": [0.0]}, 0.5, row_gradients={"weights": ([12345678901234567], [1.0])})
            again = worker.pull({"factors": ids[:3]})
            np.testing.assert_allclose(again["factors"][1], expected[:3], rtol=1e-6, atol=1e-7)

            # The chief's checkpoint holds every row of every table, whichever
            # ps task held it, ids ascending (as parasync-node's chief saves them).
            saved = checkpoints.read(worker.save_checkpoint())
            self.assertEqual([t.name for t in saved.tables], ["weights", "factors"])
            saved_ids = np.array(saved.tables[1].ids, dtype=np.uint64)
            np.testing.assert_array_equal(saved_ids, np.unique(ids))
            saved_rows = np.array(saved.tables[1].values, dtype=np.float32).reshape(-1, 3)
            np.testing.assert_allclose(saved_rows[np.searchsorted(saved_ids, ids[:300])], expected, rtol=1e-6,
                                       atol=1e-7)
            self.assertEqual(len(saved.tables[0].ids), 50)
            # Restored into two ps tasks: each gets the rows whose ids hash to it.
            split = sparse.split_table_states(signature.tables, saved.tables, 2)
            for k in range(2):
                self.assertTrue((sparse.ps_of_row(np.array(split[k][1].ids, dtype=np.uint64), 2) == k).all())
            self.assertEqual(sparse.join_table_states(signature.tables, [s for s in split]), list(saved.tables))

    def test_a_python_chief_checkpoints_and_restores_rows_past_the_message_limit(self):
        """--max_message_bytes=8192 on every task: a step's rows fit, a ps
        task's do not. The Python chief's checkpoint reads each ps task in
        pieces (ReadShard), and a new cluster of another ps count is given
        the rows back in pieces (InitializeInPieces), every row bit for bit."""
        limit = "--max_message_bytes=8192"
        factors = parasync.TableSpec("factors", 3, init_stddev=0.01, seed=7)
        signature = parasync.Signature("py-sparse", [parasync.VariableSpec("bias", (1,))], optimizer="adagrad",
                                       tables=[parasync.TableSpec("weights", 1), factors])
        ids = np.unique(np.random.default_rng(5).integers(0, 1 << 64, size=3000, dtype=np.uint64, endpoint=False))
        logdir = os.path.join(tempfile.mkdtemp(prefix="parasync-pieces-"), "run")
        self.addCleanup(shutil.rmtree, os.path.dirname(logdir), ignore_errors=True)

        def chief(cluster):
            config = parasync.ClusterConfig(ps=cluster.ps_hosts.split(","), workers=cluster.worker_hosts.split(","),
                                            task_index=0, logdir=logdir, save_checkpoint_secs=0,
                                            max_message_bytes=8192)
            return parasync.Worker(config, signature, log=lambda line: None, serve_control=False)

        first = Cluster(self, num_ps=3, num_workers=1)
        for k in range(3):
            first.start_node("ps", k, "--optimizer=adagrad", "--learning_rate=0.5", limit)
        with chief(first) as worker:
            worker.initialize({"bias": [0.0]})
            worker.join()
            for batch in np.array_split(ids, 30):  # 100 rows a pull fit the limit
                worker.pull({"factors": batch})
                worker.push({"bias": [0.1]}, 0.5,
                            row_gradients={"factors": (batch, np.ones((batch.size, 3), dtype=np.float32))})
            path = worker.save_checkpoint()
            self.assertIsNotNone(path, first.output("ps:0"))
        saved = checkpoints.read(path)
        np.testing.assert_array_equal(np.array(saved.tables[1].ids, dtype=np.uint64), ids)
        self.assertGreater(len(ids) * (8 + 4 * 3 * 2) // 3, 8192)  # each ps task's rows pass the limit
        # Adagrad moved each row once from its initial draw.
        self.assertFalse(np.allclose(np.array(saved.tables[1].values, dtype=np.float32).reshape(-1, 3),
                                     sparse.initial_rows(factors, ids), atol=1e-4))

        second = Cluster(self, num_ps=2, num_workers=1)
        for k in range(2):
            second.start_node("ps", k, "--optimizer=adagrad", "--learning_rate=0.5", limit)
        with chief(second) as worker:
            worker.initialize({"bias": [0.0]})  # restores the newest checkpoint of the logdir
            worker.join()
            again = checkpoints.read(worker.save_checkpoint())
        self.assertEqual(again.global_step, saved.global_step)
        self.assertEqual(list(again.tables), list(saved.tables))
        self.assertEqual(list(again.variables), list(saved.variables))

    def snapshots(self, cluster, config):
        shards = []
        for address in config.ps:
            with grpc.insecure_channel(address) as channel:
                shards.append(pb_grpc.ParameterServiceStub(channel).Snapshot(pb.SnapshotRequest(), timeout=10).shard)
        return shards

    def test_a_torch_worker_and_a_cpp_worker_train_sparse_lr_to_the_best_auc(self):
        """sync on two ps tasks: every step averages a gradient of the C++
        chief and one of the PyTorch EmbeddingBag worker; the chief's
        held-out AUC ends within 0.01 of the generating model's."""
        last_step = 2500
        cluster = Cluster(self, num_ps=2, num_workers=2)
        logdir = os.path.join(cluster.dir, "run")
        common = ["--model=sparse_lr", "--dataset=clicklog", "--eval_dataset=clicklog", "--samples_per_shard=20000",
                  "--optimizer=adagrad", "--batch_size=100", "--display_step=250"]
        training = [*common, "--learning_rate=0.2", f"--last_step={last_step}", "--mode=sync"]
        cluster.start_node("ps", 0, *training, f"--logdir={logdir}")
        cluster.start_node("ps", 1, *training)
        cluster.start_python_worker(1, "torch_sparse_click_log.py", *common)
        # The chief starts once the Python worker waits for the variables:
        # the run's every step then averages the two workers' gradients.
        cluster.wait_for_output("worker:1", "state waiting: waiting for")
        cluster.start_node("worker", 0, *training)
        for name in ("worker:1", "worker:0", "ps:0", "ps:1"):
            self.assertEqual(cluster.wait(name, timeout=120), 0, describe(cluster))

        best = re.search(r"generated the held-out data scores AUC ([0-9.]+) \(log loss ([0-9.]+)\)",
                         cluster.output("worker:0"))
        self.assertIsNotNone(best, describe(cluster))
        # The port draws the same held-out data (shard 2 of 2 workers' seed
        # 1 log): the generating model scores the same there.
        held_out = click_log.make_click_log(click_log.ClickLogShape(), 1, 2, 20000)
        self.assertEqual(f"{click_log.area_under_roc(held_out.true_probability, held_out.labels):.4f}", best.group(1))
        self.assertEqual(f"{click_log.log_loss(held_out.true_probability, held_out.labels):.4f}", best.group(2))

        rows = read_metrics(logdir)
        scores = [(int(r["global_step"]), float(r["heldout_auc"])) for r in rows if r.get("heldout_auc")]
        self.assertGreaterEqual(len(scores), 5, describe(cluster))
        self.assertGreaterEqual(scores[-1][1], float(best.group(1)) - 0.01, (scores, best.group(1)))
        self.assertEqual(max(int(r["global_step"]) for r in rows), last_step)
        # Both workers' gradients went into (nearly) every step.
        python_steps = sum(1 for r in rows if r["worker"] == "1")
        self.assertGreater(python_steps, last_step * 0.9, describe(cluster))
        self.assertIn("worker:1 state finished", cluster.output("worker:1"))

    def test_a_torch_chief_and_a_cpp_worker_train_a_factorization_machine_to_the_best_auc(self):
        """async on two ps tasks, fm:4: the PyTorch chief (worker:0) makes
        the tables' rows and the bias, scores the held-out draw with rows
        looked up (never made) and reports it in the step log; a C++ worker
        trains beside it. The chief's held-out AUC ends within 0.01 of the
        generating model's, as its NumPy port of the click log computes it."""
        last_step = 3000
        cluster = Cluster(self, num_ps=2, num_workers=2)
        logdir = os.path.join(cluster.dir, "run")
        common = ["--model=fm:4", "--dataset=clicklog", "--eval_dataset=clicklog", "--samples_per_shard=20000",
                  "--optimizer=adagrad", "--batch_size=100"]
        training = [*common, "--learning_rate=0.2", f"--last_step={last_step}", "--mode=async"]
        cluster.start_node("ps", 0, *training, f"--logdir={logdir}")
        cluster.start_node("ps", 1, *training)
        cluster.start_python_worker(0, "torch_sparse_click_log.py", *common, "--display_step=500")
        cluster.start_node("worker", 1, *training)
        for name in ("worker:0", "worker:1", "ps:0", "ps:1"):
            self.assertEqual(cluster.wait(name, timeout=180), 0, describe(cluster))

        held_out = click_log.make_click_log(click_log.ClickLogShape(), 1, 2, 20000)
        best = click_log.area_under_roc(held_out.true_probability, held_out.labels)
        rows = read_metrics(logdir)
        scores = [(int(r["global_step"]), float(r["heldout_auc"])) for r in rows if r.get("heldout_auc")]
        self.assertGreaterEqual(len(scores), 4, describe(cluster))
        self.assertGreaterEqual(scores[-1][1], best - 0.01, (scores, best))
        # What the chief printed is what the step log holds. Its last print
        # may come with a push the run had ended before (the step log then
        # has no record of it): the last score logged is one it printed.
        printed = re.findall(r"held-out auc ([0-9.]+) loss [0-9.]+ at global step", cluster.output("worker:0"))
        self.assertIn(f"{scores[-1][1]:.4f}", printed[-2:])
        # Both workers stepped: the C++ worker's gradients are in the log too.
        self.assertGreater(sum(1 for r in rows if r["worker"] == "1"), last_step // 10, describe(cluster))

    def test_a_torch_worker_fails_over_with_a_replicated_ps_task_of_a_sparse_model(self):
        """ssp on two replicated ps tasks, sparse_lr: ps:1's primary -- half
        of the table's rows -- is SIGKILLed while the PyTorch EmbeddingBag
        worker and the C++ chief train. Both turn to its backup, which took
        over holding every acknowledged row update; the run ends at its last
        step with every global step applied once, and the chief's held-out
        AUC within 0.01 of the generating model's.

        ssp, not async: unbounded, the C++ chief can make every step on a
        loaded machine before the Python worker has imported torch, and the
        failover would then happen to one worker only."""
        last_step = 2500
        cluster = Cluster(self, num_ps=2, num_workers=2, backups=True)
        logdir = os.path.join(cluster.dir, "run")
        common = ["--model=sparse_lr", "--dataset=clicklog", "--eval_dataset=clicklog", "--samples_per_shard=20000",
                  "--optimizer=adagrad", "--batch_size=100"]
        training = [*common, "--learning_rate=0.2", f"--last_step={last_step}", "--mode=ssp", "--staleness=10",
                    "--display_step=250"]
        for job in ("ps", "ps_backup"):
            cluster.start_node(job, 0, *training, f"--logdir={logdir}")
            cluster.start_node(job, 1, *training)
        cluster.start_python_worker(1, "torch_sparse_click_log.py", *common, "--display_step=100")
        # The chief starts once the Python worker waits for the variables,
        # so the staleness bound holds it from its first step.
        cluster.wait_for_output("worker:1", "state waiting: waiting for", timeout=120)
        cluster.start_node("worker", 0, *training)
        cluster.wait_for_output("ps_backup:1", "follows its primary at")
        # Both train: the Python worker's loss line at global step 100 or later.
        cluster.wait_for_output("worker:1", re.compile(r"worker:1 step [1-9][0-9]{2,} \(local"), timeout=120)
        cluster.kill("ps:1")
        backup = cluster.ps_backup_hosts.split(",")[1]
        cluster.wait_for_output("worker:1", f"ps:1 is served by {backup} now")
        for name in ("worker:1", "worker:0", "ps:0", "ps_backup:1"):
            self.assertEqual(cluster.wait(name, timeout=180), 0, describe(cluster))
        self.assertIn("takes over as the pair's primary", cluster.output("ps_backup:1"))
        self.assertNotIn("WITHOUT its state", cluster.output("ps_backup:1"))
        self.assertNotIn("updates are lost", describe(cluster))

        # Every update ps:0 applied is in the step log once, 1 to the last.
        applied = []
        with open(os.path.join(logdir, "steps.jsonl")) as f:
            for line in f:
                record = json.loads(line)
                if record.get("outcome") == "applied":
                    applied.append(int(record["global_step"]))
        self.assertEqual(sorted(applied), list(range(1, last_step + 1)), describe(cluster))
        # The Python worker's gradients went in after the failover too.
        after = [r for r in read_metrics(logdir) if r["worker"] == "1"]
        self.assertGreater(max(int(r["global_step"]) for r in after), last_step * 0.6, describe(cluster))

        held_out = click_log.make_click_log(click_log.ClickLogShape(), 1, 2, 20000)
        best = click_log.area_under_roc(held_out.true_probability, held_out.labels)
        scores = [float(r["heldout_auc"]) for r in read_metrics(logdir) if r.get("heldout_auc")]
        self.assertGreaterEqual(len(scores), 5, describe(cluster))
        self.assertGreaterEqual(scores[-1], best - 0.01, (scores, best))


if __name__ == "__main__":
    unittest.main()
