"""The witness's vote in a replicated ps pair's lease, as parasync-node's
chief gives it (core/node/lease.h; the PsLease service in parasync.proto).

A pair's primary acknowledges anything only while two of three votes are
promised to it: its own, its backup's and the chief's. A Python chief
(worker:0) of a cluster with --ps_backup_hosts serves its vote here; the
rules are node/lease.h's, which tests/unit/tst_lease.cpp proves."""

from __future__ import annotations

import threading
import time
from typing import Optional

import grpc

from parasync.proto import parasync_pb2 as pb
from parasync.proto import parasync_pb2_grpc as pb_grpc

# A candidate that serves alone (VoteRequest.alone_turn) keeps the pair's
# other process out, unless that one holds the state of that turn, until it
# has not asked for this many of its leases (node/lease.h's kAloneGraceLeases).
ALONE_GRACE_LEASES = 10


class LeaseVote:
    """One voter's vote for one pair: promised to one candidate at a time,
    for a lease on this process's monotonic clock; nothing in its first
    lease (it may have promised its vote in a life it no longer remembers)."""

    def __init__(self, voter: str, lease_s: float, started: Optional[float] = None) -> None:
        self._voter = voter
        self._quiet_until = (time.monotonic() if started is None else started) + lease_s
        self._holder = ""
        self._until = 0.0
        self.epoch = 0
        # The last holder that serves alone, in which turn, and until when it
        # keeps the other process out.
        self._alone_holder = ""
        self._alone_turn = 0
        self._alone_until = 0.0

    def ask(self, candidate: str, epoch: int, lease_s: float, now: float, alone_turn: int = 0,
            holds_turn: int = 0) -> pb.VoteResponse:
        def left(until: float) -> int:
            return max(0, int(-(-(until - now) * 1000 // 1)))

        if epoch < self.epoch:
            at = f" (at {self._holder})" if self._holder else ""
            return pb.VoteResponse(granted=False, epoch=self.epoch, holder=self._holder,
                                   reason=f"{self._voter} has seen epoch {self.epoch} begin{at}, after epoch {epoch}")
        if now < self._quiet_until:
            ms = left(self._quiet_until)
            return pb.VoteResponse(granted=False, epoch=self.epoch, promised_ms=ms,
                                   reason=f"{self._voter} started less than a lease ago and promises no vote for "
                                          f"another {ms} ms (it may have promised it before it started again)")
        if self._holder and self._holder != candidate and now < self._until:
            ms = left(self._until)
            return pb.VoteResponse(granted=False, epoch=self.epoch, holder=self._holder, promised_ms=ms,
                                   reason=f"{self._voter} promised its vote to {self._holder} for another {ms} ms")
        if self._holder and self._holder != candidate and epoch == self.epoch:
            return pb.VoteResponse(granted=False, epoch=self.epoch, holder=self._holder,
                                   reason=f"{self._voter} promised epoch {self.epoch} to {self._holder} already: "
                                          "a new holder asks under a higher one")
        served_alone_by = ""
        if self._alone_holder and self._alone_holder != candidate and holds_turn < self._alone_turn:
            # The candidate would serve without what the other acknowledged alone.
            served_alone_by = self._alone_holder
            if now < self._alone_until:
                ms = left(self._alone_until)
                return pb.VoteResponse(
                    granted=False, epoch=self.epoch, holder=self._holder, promised_ms=ms,
                    served_alone_by=served_alone_by,
                    reason=f"{self._voter} knows that {self._alone_holder} acknowledged updates without a backup "
                           f"holding them, which {candidate} does not hold: it votes for {candidate} only once "
                           f"{self._alone_holder} has not asked for its lease for another {ms} ms (then those "
                           "updates are lost)")
            self._alone_holder = ""
        self._holder = candidate
        self._until = now + lease_s
        self.epoch = epoch
        if alone_turn > 0:
            self._alone_holder = candidate
            self._alone_turn = alone_turn
            self._alone_until = now + ALONE_GRACE_LEASES * lease_s
        elif self._alone_holder == candidate or holds_turn >= self._alone_turn:
            self._alone_holder = ""  # its backup holds everything again, or the candidate does
        return pb.VoteResponse(granted=True, epoch=epoch, served_alone_by=served_alone_by)


class Witness(pb_grpc.PsLeaseServicer):
    """The chief's vote in every pair's lease: checks each request as a
    stranger might fill it (INVALID_ARGUMENT, saying what is wrong)."""

    def __init__(self, name: str, pairs: list[list[str]], lease_ms: int) -> None:
        self._pairs = pairs
        self._lease_ms = lease_ms
        self._votes = [LeaseVote(name, lease_ms / 1000) for _ in pairs]
        self._lock = threading.Lock()

    def Vote(self, request: pb.VoteRequest, context: grpc.ServicerContext) -> pb.VoteResponse:
        problem = self.problem(request)
        if problem:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        with self._lock:
            return self._votes[request.ps_index].ask(request.candidate, request.epoch, request.lease_ms / 1000,
                                                     time.monotonic(), request.alone_turn, request.holds_turn)

    def problem(self, request: pb.VoteRequest) -> str:
        """What is wrong with a vote request, or "" (as node/lease.h's LeaseVoter says it)."""
        k = request.ps_index
        if not 0 <= k < len(self._pairs):
            return (f"a vote for ps:{k}'s lease asked of a voter that votes for the pairs of ps:0 to "
                    f"ps:{len(self._pairs) - 1}")
        if request.candidate not in self._pairs[k]:
            return (f"a candidate at '{request.candidate[:256]}' asked for ps:{k}'s lease, whose processes are "
                    f"{' or '.join(self._pairs[k])}: give every task the same cluster")
        if request.epoch <= 0:
            return f"a vote asked under epoch {request.epoch}: epochs begin at 1"
        if not 1 <= request.lease_ms <= self._lease_ms:
            return (f"a vote asked for {request.lease_ms} ms; this voter promises 1 to {self._lease_ms} ms (its "
                    "--ps_lease_ms): give every task the same --ps_lease_ms")
        if request.alone_turn < 0 or request.holds_turn < 0:
            return (f"a vote asked with alone_turn {request.alone_turn} and holds_turn {request.holds_turn}: "
                    "turns are counted from 0")
        return ""
