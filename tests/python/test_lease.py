"""A Python chief is the witness of every replicated pair's lease, as
parasync-node's chief is (parasync.lease; core/node/lease.h): served over
real gRPC on a loopback port, it promises its vote to one process of a pair
at a time, none in its first lease, refuses a lower epoch, and checks every
request as a stranger might fill it. A Python worker refuses an answer under
an older epoch than its ps task answered under before."""

import time
import unittest
from concurrent import futures

import grpc

from parasync import lease, tensors, worker
from parasync.proto import parasync_pb2 as pb
from parasync.proto import parasync_pb2_grpc as pb_grpc

PAIRS = [["127.0.0.1:2222", "127.0.0.1:2225"], ["127.0.0.1:2226", "127.0.0.1:2227"]]


class WitnessTest(unittest.TestCase):
    def setUp(self):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.witness = lease.Witness("the witness worker:0 at 127.0.0.1:2223", PAIRS, 300)
        pb_grpc.add_PsLeaseServicer_to_server(self.witness, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = pb_grpc.PsLeaseStub(self.channel)

    def tearDown(self):
        self.channel.close()
        self.server.stop(None)

    def vote(self, candidate, epoch, lease_ms=300, ps_index=0):
        return self.stub.Vote(pb.VoteRequest(ps_index=ps_index, candidate=candidate, epoch=epoch, lease_ms=lease_ms),
                              timeout=5)

    def wait_for_grant(self, candidate, epoch, ps_index=0):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            answer = self.vote(candidate, epoch, ps_index=ps_index)
            if answer.granted:
                return answer
            time.sleep(0.02)
        self.fail(f"{candidate} was never promised the vote: {answer.reason}")

    def test_the_witness_promises_one_process_of_a_pair_at_a_time(self):
        first = self.vote("127.0.0.1:2222", 1)
        self.assertFalse(first.granted)
        self.assertIn("started less than a lease ago", first.reason)
        self.wait_for_grant("127.0.0.1:2222", 1)
        refused = self.vote("127.0.0.1:2225", 2)
        self.assertFalse(refused.granted)
        self.assertEqual(refused.holder, "127.0.0.1:2222")
        self.assertGreater(refused.promised_ms, 0)
        self.assertIn("promised its vote to 127.0.0.1:2222", refused.reason)
        # The other pair's lease is its own.
        self.assertTrue(self.vote("127.0.0.1:2227", 5, ps_index=1).granted)
        # Once the promise ends the backup wins under a higher epoch, and
        # the old primary is told of it.
        self.wait_for_grant("127.0.0.1:2225", 2)
        deposed = self.vote("127.0.0.1:2222", 1)
        self.assertFalse(deposed.granted)
        self.assertEqual(deposed.epoch, 2)
        self.assertIn("has seen epoch 2 begin (at 127.0.0.1:2225)", deposed.reason)

    def test_a_backup_is_kept_out_while_its_primary_serves_alone(self):
        # The primary says it acknowledges what its backup does not hold (its
        # second turn alone): once its promise ends a backup holding the
        # first turn's state is still refused, for ten of the primary's
        # leases after its last such ask, and told whom it lacks; then it
        # wins, told that it takes over without those updates.
        primary, backup = PAIRS[0]
        granted = time.monotonic()
        deadline = granted + 10
        while not self.stub.Vote(pb.VoteRequest(ps_index=0, candidate=primary, epoch=1, lease_ms=300, alone_turn=2),
                                 timeout=5).granted:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        time.sleep(0.35)  # the promise itself has ended
        refused = self.stub.Vote(pb.VoteRequest(ps_index=0, candidate=backup, epoch=2, lease_ms=300, holds_turn=1),
                                 timeout=5)
        self.assertFalse(refused.granted)
        self.assertEqual(refused.served_alone_by, primary)
        self.assertIn(f"knows that {primary} acknowledged updates without a backup holding them", refused.reason)
        self.assertGreater(refused.promised_ms, 2000)
        won = self.wait_for_grant(backup, 2)
        self.assertEqual(won.served_alone_by, primary)
        self.assertGreaterEqual(time.monotonic() - granted, lease.ALONE_GRACE_LEASES * 0.3)
        # A backup that took the state of the turn the primary serves alone
        # in holds what it acknowledged: it may take over at once.
        other_primary, other_backup = PAIRS[1]
        self.stub.Vote(pb.VoteRequest(ps_index=1, candidate=other_primary, epoch=1, lease_ms=300, alone_turn=3),
                       timeout=5)
        time.sleep(0.35)
        taken = self.stub.Vote(pb.VoteRequest(ps_index=1, candidate=other_backup, epoch=2, lease_ms=300,
                                              holds_turn=3), timeout=5)
        self.assertTrue(taken.granted)
        self.assertEqual(taken.served_alone_by, "")

    def test_strangers_requests_are_refused_saying_what_is_wrong(self):
        cases = [(dict(ps_index=2), "a vote for ps:2's lease"),
                 (dict(ps_index=-1), "a vote for ps:-1's lease"),
                 (dict(candidate="127.0.0.1:9"), "whose processes are 127.0.0.1:2222 or 127.0.0.1:2225"),
                 (dict(candidate=""), "a candidate at ''"),
                 (dict(epoch=0), "epochs begin at 1"),
                 (dict(epoch=-(2**63)), "epochs begin at 1"),
                 (dict(lease_ms=0), "promises 1 to 300 ms"),
                 (dict(lease_ms=2**62), "give every task the same --ps_lease_ms"),
                 (dict(alone_turn=-1), "turns are counted from 0"),
                 (dict(holds_turn=-(2**63)), "turns are counted from 0")]
        for change, words in cases:
            with self.subTest(change=change):
                request = dict(ps_index=0, candidate="127.0.0.1:2222", epoch=1, lease_ms=300)
                request.update(change)
                with self.assertRaises(grpc.RpcError) as refused:
                    self.stub.Vote(pb.VoteRequest(**request), timeout=5)
                self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(words, refused.exception.details())


class EpochTest(unittest.TestCase):
    def test_an_answer_under_an_older_epoch_is_refused(self):
        # The stream's answers as a replicated ps task's gRPC stream would
        # hand them over: epoch 2, then one from the deposed process (1).
        stream = worker._PsStream.__new__(worker._PsStream)
        stream.index = 0
        stream._epochs = {}

        def answer(epoch):
            response = pb.TrainResponse(lease_epoch=epoch)
            response.push.global_step = 1
            return tensors.decode_answer(response.SerializeToString())

        stream._answers = iter([answer(2), answer(2), answer(1), answer(3)])
        self.assertEqual(stream.receive().lease_epoch, 2)
        self.assertEqual(stream.receive().lease_epoch, 2)
        with self.assertRaisesRegex(worker.DeposedAnswer, "answered under lease epoch 1, but its pair answered "
                                                          "under epoch 2 before"):
            stream.receive()
        self.assertEqual(stream.receive().lease_epoch, 3)
        self.assertEqual(stream._epochs, {0: 3})


if __name__ == "__main__":
    unittest.main()
