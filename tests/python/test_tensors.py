"""The Python worker's hand-made Train messages are what protobuf itself
writes and reads: built with parasync.tensors, parsed by protobuf (the ps's
view), and the other way round."""

import math
import unittest

import numpy as np

from parasync import tensors
from parasync.proto import parasync_pb2 as pb


def protobuf_tensor(array):
    t = pb.Tensor(shape=list(array.shape))
    t.values.extend(float(v) for v in np.asarray(array, dtype=np.float32).ravel())
    return t


class TensorWireTest(unittest.TestCase):
    shapes = [(), (1,), (7,), (3, 4), (2, 3, 5), (0,), (4, 0), (64, 10)]

    def test_a_tensor_reads_back_as_protobuf_wrote_it(self):
        rng = np.random.default_rng(7)
        for shape in self.shapes:
            with self.subTest(shape=shape):
                array = rng.standard_normal(shape).astype(np.float32)
                encoded = tensors.encode_tensor(array)
                self.assertEqual(pb.Tensor.FromString(encoded), protobuf_tensor(array))
                decoded = tensors.decode_tensor(protobuf_tensor(array).SerializeToString())
                self.assertEqual(decoded.shape, array.shape)
                np.testing.assert_array_equal(decoded, array)
                self.assertTrue(decoded.flags.writeable)

    def test_nan_infinity_and_float64_input_cross_as_float32(self):
        array = np.array([math.nan, math.inf, -math.inf, 1e-45, 3.4e38, 0.1], dtype=np.float64)
        decoded = tensors.decode_tensor(tensors.encode_tensor(array))
        np.testing.assert_array_equal(decoded, array.astype(np.float32))
        self.assertEqual(decoded.dtype, np.float32)

    def test_a_push_is_the_train_request_protobuf_would_send(self):
        head = pb.PushRequest(computed_from_step=41, batch_loss=0.5, full_loss=math.nan, compute_us=1234,
                              previous_push_us=-3)  # negative int64: ten-byte varints
        gradients = [np.arange(12, dtype=np.float32).reshape(3, 4), np.array([1.5, -2.5], dtype=np.float32)]
        request = pb.TrainRequest.FromString(tensors.encode_push(head, gradients))
        self.assertEqual(request.WhichOneof("kind"), "push")
        self.assertEqual(request.push.computed_from_step, 41)
        self.assertEqual(request.push.previous_push_us, -3)
        self.assertTrue(math.isnan(request.push.full_loss))
        self.assertEqual([list(g.shape) for g in request.push.gradients], [[3, 4], [2]])
        self.assertEqual(list(request.push.gradients[0].values), list(range(12)))
        self.assertEqual(list(request.push.gradients[1].values), [1.5, -2.5])

    def test_answers_come_apart_into_their_fields_and_arrays(self):
        response = pb.TrainResponse()
        push = response.push
        push.outcome = pb.AGGREGATED
        push.global_step = 99
        push.staleness = -1
        push.contributions = 2
        push.mode.mode = pb.SSP
        push.mode.staleness = 3
        push.done = True
        push.parameters.append(protobuf_tensor(np.ones((2, 2))))
        push.parameters.append(protobuf_tensor(np.array([7.0])))
        answer = tensors.decode_answer(response.SerializeToString())
        self.assertEqual(answer.kind, "push")
        self.assertEqual(answer.message.global_step, 99)
        self.assertEqual(answer.message.staleness, -1)
        self.assertEqual(answer.message.mode.staleness, 3)
        self.assertTrue(answer.message.done)
        self.assertEqual(len(answer.message.parameters), 0)  # they are the arrays
        np.testing.assert_array_equal(answer.tensors[0], np.ones((2, 2)))
        np.testing.assert_array_equal(answer.tensors[1], [7.0])

        join = pb.TrainResponse()
        join.join.ready = False
        join.join.waiting_for = "the chief worker:0 to initialise the variables"
        answer = tensors.decode_answer(join.SerializeToString())
        self.assertEqual((answer.kind, answer.message.ready), ("join", False))
        self.assertEqual(answer.message.waiting_for, "the chief worker:0 to initialise the variables")

    def test_fields_a_newer_ps_adds_are_skipped_as_protobuf_skips_them(self):
        response = pb.TrainResponse()
        response.push.global_step = 5
        response.push.parameters.append(protobuf_tensor(np.array([1.0, 2.0])))
        unknown = b"\xf8\x07\x01" + b"\xfa\x07\x03abc"  # fields 127 (varint) and 127 (bytes)
        answer = tensors.decode_answer(response.SerializeToString() + unknown)
        self.assertEqual(answer.message.global_step, 5)
        np.testing.assert_array_equal(answer.tensors[0], [1.0, 2.0])

    def test_an_answer_carries_its_lease_epoch(self):
        # A replicated ps task stamps each answer with the lease epoch it was
        # given under (TrainResponse.lease_epoch); an unreplicated one sends none.
        response = pb.TrainResponse(lease_epoch=2**40 + 3)
        response.push.global_step = 9
        self.assertEqual(tensors.decode_answer(response.SerializeToString()).lease_epoch, 2**40 + 3)
        response.ClearField("lease_epoch")
        self.assertEqual(tensors.decode_answer(response.SerializeToString()).lease_epoch, 0)

    def test_damaged_messages_are_refused_with_what_is_wrong(self):
        good = tensors.encode_tensor(np.ones(4, dtype=np.float32))
        with self.assertRaisesRegex(tensors.WireError, "past the end"):
            tensors.decode_tensor(good[:-2])
        with self.assertRaisesRegex(tensors.WireError, "holds 4 values"):
            tensors.decode_tensor(pb.Tensor(shape=[5]).SerializeToString() + good[3:])  # [5], then 4 values
        with self.assertRaisesRegex(tensors.WireError, "multiple of 4"):
            tensors.decode_tensor(b"\x12\x03abc")
        with self.assertRaisesRegex(tensors.WireError, "neither join nor push"):
            tensors.decode_answer(b"")


if __name__ == "__main__":
    unittest.main()
