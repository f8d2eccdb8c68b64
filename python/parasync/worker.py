"""A Parasync worker in Python: joins the ps tasks, pulls, pushes.

It speaks the same Train stream as parasync-node's workers (see
core/proto/parasync.proto): one stream per ps task, a Join first, then one
Push per step, then a Leave. The variables are placed as parasync-node
places them (parasync.placement): a variable larger than --min_slice_bytes
is partitioned along its rows over the ps tasks, and the pieces -- every
variable's slices, a whole variable as one -- go round-robin, the j-th on ps
task j % num_ps. The worker splits each gradient into its slices and joins
the slices of each parameter: the arrays you push and get back are whole
variables either way. ps:0's update policy decides what happens to each
gradient (async, sync, ssp, and switches between them while the cluster
trains); the other ps tasks apply what ps:0 decided. So a Python worker
takes part in every mode, is counted, held and dropped exactly as a C++ one.

    cluster, args = parasync.parse_cluster()
    with parasync.Worker(cluster, signature) as worker:
        params = worker.join()
        while not worker.done:
            grads, loss = compute(params)          # dict of NumPy arrays
            params = worker.push(grads, loss).parameters

A model with embedding tables (Signature.tables; docs/sparse.md) moves only
the rows its batch touches: pull(ids) before the first step, then each push
carries the batch's row gradients and the next batch's ids, and its answer
(StepResult.rows) brings those rows after the update -- one exchange a step:

    rows = worker.pull({"weights": first_ids})
    while not worker.done:
        grads, loss, row_grads = compute(params, rows)   # row_grads: {"weights": (ids, grads)}
        step = worker.push(grads, loss, row_gradients=row_grads, pull={"weights": next_ids})
        params, rows = step.parameters, step.rows
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import hmac
import logging
import math
import os
import queue
import signal
import socket
import threading
import time
from concurrent import futures
from typing import Any, Callable, Iterable, List, Literal, Mapping, Optional, Sequence, Union, cast

import grpc
import numpy as np
import numpy.typing as npt

from parasync import _log, lease, placement, sparse, tensors
from parasync.checkpoints import CheckpointError, CheckpointStore, whole_variables
from parasync.cluster import TOKEN_METADATA_KEY, ClusterConfig
from parasync.sparse import TableSpec
from parasync.summaries import ChiefSummaries
from parasync.proto import parasync_pb2 as pb
from parasync.proto import parasync_pb2_grpc as pb_grpc

_logger = logging.getLogger(__name__)

# A variable's values as the worker holds and returns them.
Array = npt.NDArray[np.float32]
# Values for every variable, as push() and initialize() take them: name ->
# array, or a sequence in declaration order (converted to float32).
Values = Union[Mapping[str, npt.ArrayLike], Sequence[npt.ArrayLike]]
# A table's rows by id: (ids, rows), the ids uint64 as asked, the rows one
# per id (len(ids) x row_width float32), in the ids' order.
TableRows = tuple[sparse.Ids, sparse.Rows]

_TRAIN_METHOD = "/parasync.proto.ParameterService/Train"
# What a data link's first bytes say, before the nonce (parasync.proto, DataLinkGrant).
_LINK_GREETING = b"PSYNCDL1"
# A worker whose variables on a ps come to less gains nothing from a link.
_LINK_MIN_BYTES = 64 * 1024
# Parameters small enough to travel with every push for the telemetry's w/b
# view, as parasync-node's workers send them.
_MAX_VIEWED_PARAMETERS = 16
_OUTCOMES = {pb.APPLIED: "applied", pb.AGGREGATED: "aggregated", pb.DROPPED_STALE: "dropped_stale",
             pb.REJECTED_NONFINITE: "rejected_nonfinite", pb.PUSH_OUTCOME_UNSPECIFIED: "none"}


class JoinRefused(RuntimeError):
    """The ps refused this worker (another model, an index held by a live
    worker, a wrong token); the message says why and what to change."""


class Stopped(RuntimeError):
    """The worker was asked to stop (TaskControl.Stop, the app's Stop)."""


@dataclasses.dataclass
class VariableSpec:
    name: str
    shape: tuple[int, ...]
    # How the variable is partitioned over the ps tasks: the rows of each
    # slice along dimension 0, empty when whole. The Worker decides it from
    # --min_slice_bytes (parasync.placement.partition), as every worker of
    # the cluster does; what a signature you make holds here is replaced.
    slice_rows: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        """Its number of values (1 for a scalar)."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclasses.dataclass
class Signature:
    """What the workers train; ps:0 refuses a worker whose signature differs
    from the cluster's, and says which field differs. For parasync-node's
    built-in models it must be what parasync-node declares (see
    parasync.models); a model of your own declares its own."""
    model: str
    variables: list[VariableSpec]  # in declaration order
    dataset: str = ""
    feature_dim: int = 0
    output_dim: int = 0
    optimizer: str = "sgd"
    # Names of the metrics the workers report with push(metrics=...), e.g.
    # ("heldout_loss", "heldout_accuracy"): each a metrics.csv column and a
    # TensorBoard tag; the app draws names ending in "loss" beside the losses
    # and those ending in "accuracy" on a 0-1 axis. Every worker declares the
    # same names (ps:0 refuses a worker whose names differ).
    metric_names: tuple[str, ...] = ()
    # Embedding tables (docs/sparse.md): rows by 64-bit id, spread over every
    # ps task by id, of which a step moves only its batch's. In declaration
    # order; empty for a dense model.
    tables: list[TableSpec] = dataclasses.field(default_factory=list)

    def to_proto(self) -> pb.ModelSignature:
        """The signature as the protocol's ModelSignature message."""
        signature = pb.ModelSignature(model=self.model, dataset=self.dataset, feature_dim=self.feature_dim,
                                      output_dim=self.output_dim, optimizer=self.optimizer,
                                      metric_names=list(self.metric_names))
        for v in self.variables:
            signature.variables.add(name=v.name, shape=list(v.shape), slice_rows=list(v.slice_rows))
        for t in self.tables:
            signature.tables.add(name=t.name, row_width=int(t.row_width), id_limit=int(t.id_limit),
                                 init_stddev=float(t.init_stddev), seed=int(t.seed))
        return signature


@dataclasses.dataclass
class StepResult:
    """What the cluster did with one pushed gradient."""
    outcome: str  # "applied", "aggregated", "dropped_stale", "rejected_nonfinite", "none" (the run had ended)
    global_step: int  # after the policy acted: the step of `parameters`
    staleness: int  # global step when applied minus the step the gradient was computed from
    contributions: int  # gradients averaged into this update (sync), 1 otherwise
    waited_s: float  # seconds the policy held this worker (sync barrier, staleness bound)
    done: bool  # the global step reached the cluster's --last_step
    parameters: dict[str, Array]  # fresh values, name -> array
    # The rows push(pull=...) asked for, after this update: table -> (ids, rows).
    rows: dict[str, TableRows] = dataclasses.field(default_factory=dict)


class DeposedAnswer(OSError):
    """An answer of a replicated ps task under a lower lease epoch than its
    pair answered under before: it comes from a process that no longer
    serves (its lease ended), and is refused."""


class _PsStream:
    """One ps task's Train stream: requests go into a queue that gRPC reads
    from; answers are read one per request. `epochs` (shared by the streams
    of one worker, kept across reconnections) holds the highest lease epoch
    each ps task answered under."""

    def __init__(self, index: int, channel: grpc.Channel, metadata: Sequence[tuple[str, str]],
                 epochs: dict[int, int]) -> None:
        self.index = index
        self._epochs = epochs
        self.link: Optional[socket.socket] = None  # the data link's socket, once one is open
        self._requests: queue.Queue[Any] = queue.Queue()
        # The answers' parameters stay views of the message until
        # Placement.join copies them into their variables: one copy each.
        call = channel.stream_stream(_TRAIN_METHOD, request_serializer=tensors.encode_request,
                                     response_deserializer=functools.partial(tensors.decode_answer, copy=False))
        self._answers = call(iter(self._requests.get, None), metadata=metadata)

    def send(self, request: Any) -> None:
        """Queues a request without waiting for an answer (a staged push gets none)."""
        self._requests.put(request)

    def receive(self) -> tensors.TrainAnswer:
        """The next answer, in the order of the requests that get one; raises
        DeposedAnswer for one from a process that no longer serves."""
        answer = next(self._answers)
        highest = self._epochs.get(self.index, 0)
        if answer.lease_epoch < highest:
            raise DeposedAnswer(f"ps:{self.index} answered under lease epoch {answer.lease_epoch}, but its pair "
                                f"answered under epoch {highest} before: that process no longer serves (its lease "
                                "ended); the answer is refused")
        self._epochs[self.index] = answer.lease_epoch
        return answer

    def exchange(self, request: Any) -> tensors.TrainAnswer:
        self.send(request)
        return self.receive()

    # -- the data link (core/wire/data_link.h; parasync.proto's DataLinkGrant) --

    def open_link(self, host: str, grant: pb.DataLinkGrant, timeout: float) -> socket.socket:
        """Connects the data link a join granted and greets with its nonce;
        returns it (self.link); raises OSError when it cannot be made."""
        if not 0 < grant.port <= 65535 or len(grant.nonce) != 16:
            raise OSError(f"the ps granted a data link that cannot be connected (port {grant.port}, "
                          f"{len(grant.nonce)}-byte nonce)")
        link = socket.create_connection((host, grant.port), timeout=timeout)
        try:
            link.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link.sendall(_LINK_GREETING + grant.nonce)
            if link.recv(1) != b"\x01":
                raise OSError(f"the ps at {host}:{grant.port} did not accept the link's greeting")
        except BaseException:
            link.close()
            raise
        self.link = link
        return link

    def send_push(self, head: pb.PushRequest, arrays: Sequence[npt.ArrayLike], rows: bytes = b"") -> None:
        """Sends a push: its arrays' values on the data link when one is open
        (from the arrays' own memory), else in the message; `rows` (a sparse
        model's row gradients and pulls, tensors.push_rows) in the message."""
        if self.link is None:
            self.send(tensors.encode_push(head, arrays, rows=rows))
            return
        head.values_on_data_link = True
        self.send(tensors.encode_push(head, arrays, with_values=False, rows=rows))
        for array in arrays:
            self.link.sendall(tensors.value_bytes(array))

    def receive_answer(self) -> tensors.TrainAnswer:
        """The next answer, its parameters as arrays: read from the data link
        into arrays of their shapes when they come on it."""
        answer = self.receive()
        if answer.kind == "push" and answer.message.values_on_data_link:
            if self.link is None:
                raise OSError(f"ps:{self.index} sent an answer's values on a data link this stream does not have")
            arrays = []
            for shape in answer.tensors:
                array = np.empty(shape, dtype=np.float32)
                view = array.data.cast("B")
                while view:
                    received = self.link.recv_into(view)
                    if received == 0:
                        raise OSError(f"ps:{self.index} closed the data link")
                    view = view[received:]
                arrays.append(array)
            answer.tensors = arrays
        return answer

    def close(self, last_request: Optional[pb.TrainRequest] = None) -> None:
        if last_request is not None:
            self._requests.put(last_request)
        self._requests.put(None)  # half-close: the ps ends the stream
        try:
            for _ in self._answers:
                pass
        except grpc.RpcError:
            pass
        self._close_link()

    def cancel(self) -> None:
        self._answers.cancel()
        self._close_link()

    def _close_link(self) -> None:
        if self.link is not None:
            self.link.close()
            self.link = None


class _TaskControl(pb_grpc.TaskControlServicer):
    """The worker's own address serves TaskControl, as every task does: the
    app asks what it is doing and tells it to stop."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    def GetTaskStatus(self, request: pb.TaskStatusRequest, context: grpc.ServicerContext) -> pb.TaskStatusResponse:
        w = self._worker
        return pb.TaskStatusResponse(job_name="worker", task_index=w.cluster.task_index, pid=os.getpid(),
                                     state=w.state, steps=w.clock, version=_version())

    def Stop(self, request: pb.StopRequest, context: grpc.ServicerContext) -> pb.StopResponse:
        self._worker.request_stop(request.reason or "asked to stop")
        return pb.StopResponse()

    def SetStraggler(self, request: pb.SetStragglerRequest, context: grpc.ServicerContext) -> None:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "a Python worker's pace is its own code's: no straggler delay")

    def SetPace(self, request: pb.SetPaceRequest, context: grpc.ServicerContext) -> None:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "a Python worker's pace is its own code's: no simulated pace")


class _TokenCheck(grpc.ServerInterceptor):
    """Refuses calls without the cluster token, as parasync-node's servers do."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

        def refuse(request: Any, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "refused: wrong or missing cluster token")

        self._refusal = grpc.unary_unary_rpc_method_handler(refuse)

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        given = dict(details.invocation_metadata).get(TOKEN_METADATA_KEY, "")
        if hmac.compare_digest(given.encode(), self._token):
            return continuation(details)
        return self._refusal


def _keep_step_buffers_mapped() -> None:
    """As parasync-node does (core/base/step_memory.cpp): glibc hands blocks
    above 128 KiB out as fresh mappings and unmaps them on free, so each
    step's tensor-sized buffers (the message, the arrays) were mapped anew and
    faulted in page by page: ~1,000 faults, milliseconds, per 1M-float step.
    Keeping blocks up to 32 MiB on the heap and the heap untrimmed below
    1 GiB lets every step reuse the last one's memory."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
        libc.mallopt(m_mmap_threshold, 32 << 20)
        libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError):
        pass  # not glibc: its allocator, its behaviour


def _version() -> str:
    try:
        from parasync import __version__
        return __version__
    except ImportError:
        return ""


class _Trajectory:
    """How the variables move, as the chief measures it on the parameters a
    gradient was computed from (parasync-node's engine/variable_trajectory.h):
    per variable its norm, its distance from the values of the first
    measurement, and its change per global step since the previous one."""

    def __init__(self) -> None:
        self._start: Optional[list[Array]] = None
        self._previous: list[Array] = []
        self._previous_step: Optional[int] = None

    @property
    def started(self) -> bool:
        return self._start is not None

    def measure(self, values: list[Array], global_step: int) -> list[pb.VariableSummary]:
        """values: flat float32 arrays in declaration order."""
        if self._start is None or [v.size for v in values] != [v.size for v in self._start]:
            self._start = [v.copy() for v in values]
            self._previous = self._start
            self._previous_step = None
        # A sync chief may measure twice at one global step: count at least one.
        steps = None if self._previous_step is None else max(global_step - self._previous_step, 1)
        summaries = [pb.VariableSummary(norm=float(np.linalg.norm(v)),
                                        distance_from_start=float(np.linalg.norm(v - start)),
                                        update_per_step=float(np.linalg.norm(v - previous)) / steps
                                        if steps else float("nan"))
                     for v, start, previous in zip(values, self._start, self._previous)]
        self._previous = [v.copy() for v in values]
        self._previous_step = global_step
        return summaries


class Worker:
    """One worker task of a Parasync cluster (see the module's text)."""

    def __init__(self, cluster: ClusterConfig, signature: Signature, log: Optional[Callable[[str], None]] = None,
                 serve_control: bool = True) -> None:
        """`log`: called with each line the worker has to say (its state
        lines, checkpoints, ...); without it they go to the logger
        "parasync.worker" (on stderr, in parasync-node's form, while the
        program configured no logging: see parasync._log). serve_control:
        serve TaskControl on this worker's address.
        Raises parasync.placement.PlacementError (a ValueError) for a
        signature whose variables cannot be placed (a negative dimension),
        parasync.sparse.TableError (a ValueError) for tables the ps would
        refuse."""
        self.cluster = cluster
        num_ps = len(cluster.ps)
        # The signature as the cluster sees it: partitioned by the rule every
        # worker applies, so ps:0 finds it equal to the chief's.
        self.signature = placement.partition(signature, num_ps, cluster.min_slice_bytes)
        self.placement = placement.Placement.from_signature(self.signature, num_ps)
        sparse.check_tables(signature.tables, [v.name for v in signature.variables])
        self._table_index = {t.name: i for i, t in enumerate(signature.tables)}
        self._hook = log
        self._name = f"worker:{cluster.task_index}"
        if self.placement.partitioned:
            self._say(f"{self._name}: variables partitioned (--min_slice_bytes={cluster.min_slice_bytes}): "
                      + "; ".join(f"ps:{k} holds {self.placement.describe(k) or 'nothing'}" for k in range(num_ps)))
        for table in signature.tables:
            self._say(f"{self._name}: table '{table.name}' (rows of {table.row_width}) lives on "
                      + (f"all {num_ps} ps tasks" if num_ps > 1 else "ps:0")
                      + ", each row on the one its id hashes to; a step moves only its batch's rows")
        self._metadata = ((TOKEN_METADATA_KEY, cluster.token),) if cluster.token else ()
        # Per ps task, a channel to each process of its pair (--ps_backup_hosts);
        # _channels[k] and _serving[k] are the one that serves it now.
        self._pairs = [[self._make_channel(address) for address in cluster.ps_pair(k)] for k in range(num_ps)]
        self._channels = [pair[0] for pair in self._pairs]
        self._serving = list(cluster.ps)
        self._streams: list[Optional[_PsStream]] = [None] * num_ps
        # The highest lease epoch each ps task answered under (_PsStream.receive).
        self._epochs: dict[int, int] = {}
        self._stop = threading.Event()
        self._stop_reason = ""
        # SIGTERM (Stop in the app, the end of a Slurm job, `kill`) stops this
        # worker as it stops parasync-node: the step in progress ends, and
        # close() leaves with a goodbye, so that ps:0 counts it stopped, not
        # dead. Only where Python lets a handler be set (the main thread) and
        # the program has set none of its own; close() puts the old one back.
        self._sigterm_before: Any = None
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._sigterm_before = signal.signal(signal.SIGTERM, self._on_sigterm)
        self.state = "listening"
        self.parameters: dict[str, Array] = {}
        self.global_step = 0
        self.done = False
        self.clock = 0
        self._last_push_us = 0
        self._params_at = time.monotonic()
        self._trajectory = _Trajectory()
        # The chief's checkpoints (with --logdir): every save_checkpoint_secs
        # from a thread of their own, and one when the run is done.
        self._checkpoints = CheckpointStore(cluster.logdir, cluster.max_to_keep) \
            if cluster.is_chief and cluster.logdir else None
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_thread: Optional[threading.Thread] = None
        self._initializes = False  # this chief gave the ps tasks their variables
        # Its TensorBoard event files, beside the checkpoints.
        self._summaries = ChiefSummaries(cluster.logdir, signature, log) \
            if cluster.is_chief and cluster.logdir else None
        if sum(v.size for v in signature.variables) >= 1 << 16:
            _keep_step_buffers_mapped()
        self._server = self._serve_control() if serve_control else None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> Literal[False]:
        self.close()
        return False

    def close(self) -> None:
        """Saves the chief's final checkpoint (if the run is done), leaves the
        cluster (finished if the last step was reached) and stops serving."""
        self._end_checkpoint_thread()
        if self._checkpoints and self.done and any(self._streams):
            self.save_checkpoint(final=True)
        if any(self._streams):
            self.leave()
        if self._summaries:
            self._summaries.close()
            self._summaries = None
        if self._server:
            self._server.stop(grace=0.5)
            self._server = None
        for channel in self._channels:
            channel.close()
        if self._sigterm_before is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._sigterm_before)
            self._sigterm_before = None

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.request_stop("received SIGTERM")

    @property
    def stopping(self) -> bool:
        """True once asked to stop (request_stop, TaskControl.Stop)."""
        return self._stop.is_set()

    def request_stop(self, reason: str) -> None:
        """Asks the worker to stop: a join or push that waits raises Stopped
        (thread-safe; TaskControl.Stop calls it)."""
        self._stop_reason = reason
        self._stop.set()

    # -- the chief's checkpoints -------------------------------------------------------------------------------

    def save_checkpoint(self, final: bool = False) -> Optional[str]:
        """The chief's duty with --logdir: every variable, whole (its slices
        joined, with their optimizer slots), at one global step, into the run
        directory as parasync-node's chief writes them, so a run restores it
        into any number of ps tasks; ps:0 records it in the step log.
        Returns the path, or None (said why) when a ps could not be read or
        the file not written: training goes on either way."""
        if not self._checkpoints:
            raise ValueError(f"{self._name} keeps no checkpoints: only the chief does, and only with --logdir")
        with self._checkpoint_lock:
            checkpoint = pb.Checkpoint(wall_time=time.time())
            checkpoint.signature.CopyFrom(self.signature.to_proto())
            shards: list[Any] = [None] * len(self.cluster.ps)
            table_shards: list[Any] = [None] * len(self.cluster.ps)
            # ps:0 last, so the recorded global step counts every update the
            # other shards' values already contain.
            for k in reversed(range(len(self.cluster.ps))):
                try:
                    snapshot = self._read_shard(k)
                except grpc.RpcError as e:
                    self._say(f"checkpoint skipped: cannot read ps:{k}: {e.details()}", logging.WARNING)
                    return None
                except sparse.TableError as e:
                    self._say(f"checkpoint skipped: ps:{k}'s rows came in pieces that do not fit: {e}",
                              logging.WARNING)
                    return None
                shards[k] = snapshot.shard.variables
                table_shards[k] = snapshot.shard.tables
                if k == 0:
                    checkpoint.global_step = snapshot.global_step
                    checkpoint.mode.CopyFrom(snapshot.mode)
            try:
                checkpoint.variables.extend(self.placement.join_states(shards))
                checkpoint.tables.extend(sparse.join_table_states(self.signature.tables, table_shards))
            except (placement.PlacementError, sparse.TableError) as e:
                self._say(f"checkpoint skipped: {e}", logging.WARNING)
                return None
            try:
                path = self._checkpoints.save(checkpoint)
            except CheckpointError as e:
                self._say(f"chief: checkpoint not saved: {e}", logging.WARNING)
                return None
            self._say(f"chief: saved checkpoint {path} at global step {checkpoint.global_step}")
            report = pb.ReportCheckpointRequest(final=final)
            report.checkpoint.wall_time = checkpoint.wall_time
            report.checkpoint.global_step = checkpoint.global_step
            report.checkpoint.path = os.path.basename(path)
            try:
                pb_grpc.TelemetryStub(self._channels[0]).ReportCheckpoint(report, metadata=self._metadata, timeout=5)
            except grpc.RpcError:
                pass  # the file is saved; only the step log's line is missing
            return path

    def _read_shard(self, k: int) -> Any:
        """ps:k's SnapshotResponse, its tables' rows read in pieces
        (ReadShard) so that they need not fit --max_message_bytes."""
        stub = pb_grpc.ParameterServiceStub(self._channels[k])
        snapshot = None
        try:
            for piece in stub.ReadShard(pb.SnapshotRequest(), metadata=self._metadata, timeout=10):
                if snapshot is None:
                    snapshot = piece
                elif len(piece.shard.tables) != 1:
                    raise sparse.TableError(f"a piece with {len(piece.shard.tables)} tables")
                else:
                    sparse.add_row_piece(snapshot.shard, piece.shard.tables[0])
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            # A ps task that serves no ReadShard (a parasync-node before it,
            # or another implementation of the .proto): one message.
            return stub.Snapshot(pb.SnapshotRequest(), metadata=self._metadata, timeout=10)
        if snapshot is None:
            raise sparse.TableError("ReadShard ended without a message")
        return snapshot

    def _send_initialize(self, k: int, request: Any) -> Any:
        """Initialize, or InitializeInPieces when ps:k's shard does not fit
        one message: the request without its tables' rows, then the rows."""
        stub = pb_grpc.ParameterServiceStub(self._channels[k])
        if not sparse.shard_needs_pieces(request.shard, self.cluster.max_message_bytes):
            return stub.Initialize(request, metadata=self._metadata, timeout=30)
        head = pb.InitializeRequest()
        head.CopyFrom(request)
        rows = sparse.take_table_rows(head.shard)

        def messages() -> Iterable[Any]:
            yield head
            for piece in sparse.row_pieces(rows, sparse.piece_bytes_within(self.cluster.max_message_bytes)):
                message = pb.InitializeRequest()
                message.shard.tables.append(piece)
                yield message

        return stub.InitializeInPieces(messages(), metadata=self._metadata, timeout=30)

    def _checkpoint_loop(self) -> None:
        while not self._checkpoint_stop.wait(self.cluster.save_checkpoint_secs):
            self.save_checkpoint()

    def _start_checkpoint_thread(self) -> None:
        if not self._checkpoints or self.cluster.save_checkpoint_secs <= 0 or self._checkpoint_thread:
            return
        self._checkpoint_stop = threading.Event()
        self._checkpoint_thread = threading.Thread(target=self._checkpoint_loop, name="checkpoints", daemon=True)
        self._checkpoint_thread.start()

    def _end_checkpoint_thread(self) -> None:
        if self._checkpoint_thread:
            self._checkpoint_stop.set()
            self._checkpoint_thread.join()
            self._checkpoint_thread = None

    def _restore(self, store: CheckpointStore) -> Optional[tuple[list[Any], list[Any], int, str]]:
        """(whole VariableStates in declaration order, whole TableStates,
        global step, origin) from the newest valid checkpoint of --logdir
        (`store`), or None when there is none. Raises JoinRefused when it
        holds another model."""
        skipped: list[str] = []
        found = store.newest_valid(skipped)
        for reason in skipped:
            self._say(f"checkpoint skipped (corrupt): {reason}", logging.WARNING)
        if not found:
            return None
        path, checkpoint = found
        specs = self.signature.variables
        saved = checkpoint.signature
        if saved.model != self.signature.model or [v.name for v in saved.variables] != [v.name for v in specs]:
            raise JoinRefused(f"{path} was saved by model '{saved.model}' with variables "
                              f"{[v.name for v in saved.variables]}; this worker trains '{self.signature.model}' "
                              f"with {[v.name for v in specs]}: use another --logdir or the same model")
        # Whole variables, however the saving run placed them: split again
        # for this run's ps tasks and partitioning.
        states = whole_variables(checkpoint)
        for spec, state in zip(specs, states):
            if state is None or list(state.value.shape) != list(spec.shape):
                raise JoinRefused(f"{path}: variable '{spec.name}' is missing or has another shape than the "
                                  f"model's {list(spec.shape)}: use another --logdir")
        if [t.name for t in checkpoint.tables] not in ([], [t.name for t in self.signature.tables]):
            raise JoinRefused(f"{path} holds the tables {[t.name for t in checkpoint.tables]}, the model "
                              f"{[t.name for t in self.signature.tables]}: use another --logdir")
        return states, list(checkpoint.tables), checkpoint.global_step, "restored from " + os.path.basename(path)

    def _say(self, line: str, level: int = logging.INFO) -> None:
        """One line for whoever watches this worker: to the log= hook when
        there is one, else to the logger "parasync.worker" (parasync._log)."""
        if self._hook:
            self._hook(line)
        else:
            _log.say(_logger, level, line)

    def _set_state(self, phase: str, detail: str) -> None:
        # One line at each change of state, in the form core/formats/task_state_line.h
        # defines: the app's launcher reads a task's state from these lines.
        self.state = detail
        self._say(f"{self._name} state {phase}: {detail}")

    def _make_channel(self, address: str) -> grpc.Channel:
        options = [("grpc.max_receive_message_length", self.cluster.max_message_bytes),
                   ("grpc.max_send_message_length", self.cluster.max_message_bytes),
                   ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000),
                   ("grpc.use_local_subchannel_pool", 1),
                   ("grpc.keepalive_time_ms", self.cluster.heartbeat_ms),
                   ("grpc.keepalive_timeout_ms", self.cluster.heartbeat_ms),
                   ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)]
        if self.cluster.uses_tls:
            credentials = grpc.ssl_channel_credentials(root_certificates=self.cluster.tls_ca,
                                                       private_key=self.cluster.tls_key or None,
                                                       certificate_chain=self.cluster.tls_cert or None)
            return grpc.secure_channel(address, credentials, options)
        return grpc.insecure_channel(address, options)

    def _serve_control(self) -> grpc.Server:
        interceptors = [_TokenCheck(self.cluster.token)] if self.cluster.token else []
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), interceptors=interceptors)
        pb_grpc.add_TaskControlServicer_to_server(_TaskControl(self), server)
        if self.cluster.is_chief and self.cluster.ps_backups and self.cluster.ps_lease_ms > 0:
            # The chief is the witness of every pair's lease, as parasync-node's is.
            address = self.cluster.workers[self.cluster.task_index]
            pb_grpc.add_PsLeaseServicer_to_server(
                lease.Witness(f"the witness worker:0 at {address}",
                              [self.cluster.ps_pair(k) for k in range(len(self.cluster.ps))],
                              self.cluster.ps_lease_ms), server)
        address = self.cluster.workers[self.cluster.task_index]
        if self.cluster.uses_tls and self.cluster.tls_cert:
            credentials = grpc.ssl_server_credentials([(self.cluster.tls_key, self.cluster.tls_cert)])
            bound = server.add_secure_port(address, credentials)
        else:
            bound = server.add_insecure_port(address)
        if not bound:
            raise JoinRefused(f"{self._name} cannot listen on {address}: is another task on that port? "
                              "(each task serves its own address of --worker_hosts)")
        server.start()
        self._set_state("listening", f"serving TaskControl at {address}")
        return server

    # -- joining -----------------------------------------------------------------------------------------------

    def _wait_for_ps(self, k: int) -> None:
        """Waits until a process of ps task k answers, and with a backup
        (--ps_backup_hosts) turns to the one that serves: the primary, or a
        backup holding the state whose primary is gone (the join makes it
        take over). A cheap unary call tells reachable from not, with a
        reason to print (as parasync-node's workers ask;
        grpc.channel_ready_future would leave a polling thread behind that
        fails once the channel closes)."""
        addresses = self.cluster.ps_pair(k)
        delay = 0.1
        while not self.stopping:
            reasons = []
            serving = backup_with_state = backup_without_state = None
            unreachable = 0
            for p, address in enumerate(addresses):
                try:
                    status = pb_grpc.TaskControlStub(self._pairs[k][p]).GetTaskStatus(
                        pb.TaskStatusRequest(), metadata=self._metadata, timeout=1.0)
                except grpc.RpcError as e:
                    if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                        raise JoinRefused(f"ps:{k} at {address} refused {self._name}: {e.details()} "
                                          "(give the cluster's token: --cluster_token_file or "
                                          "PARASYNC_CLUSTER_TOKEN)") from None
                    reasons.append(f"cannot reach ps:{k} at {address}: {e.details()}")
                    unreachable += 1
                    continue
                if status.replica_role == pb.REPLICA_PRIMARY or (
                        len(addresses) == 1 and status.replica_role != pb.REPLICA_BACKUP):
                    serving = p
                    break
                if status.replica_role == pb.REPLICA_ROLE_UNSPECIFIED:
                    reasons.append(f"ps:{k} at {address} is starting")  # one of a pair, its role not taken yet
                elif status.replica_holds_state:
                    backup_with_state = p
                    reasons.append(f"ps:{k} at {address} is the backup")
                else:
                    backup_without_state = p
                    reasons.append(f"ps:{k} at {address} is a backup without the state yet")
            if serving is None and backup_with_state is not None:
                serving = backup_with_state
            # Its primary cannot be reached at all: the backup without the
            # state serves in its place, empty (the chief gives it the
            # variables again), once the primary has been gone a few
            # heartbeats; until then the join says how long it waits.
            if serving is None and backup_without_state is not None and unreachable + 1 == len(addresses):
                serving = backup_without_state
            if serving is not None:
                if self._serving[k] != addresses[serving]:
                    self._serving[k] = addresses[serving]
                    self._channels[k] = self._pairs[k][serving]
                    self._say(f"{self._name}: ps:{k} is served by {self._serving[k]} now", logging.WARNING)
                return
            self._set_state("waiting", "; ".join(reasons) + f"; retrying in {delay:.1f} s")
            self._stop.wait(delay)
            delay = min(delay * 2, 2.0)
        raise Stopped(self._stop_reason)

    def initialize(self, initial_values: Values, origin: str = "fresh from the chief's initial values") -> None:
        """The chief's duty for a model it declares: give each ps task its
        variables -- from the newest valid checkpoint of --logdir when there
        is one (values, optimizer slots and global step), else
        `initial_values`. Idempotent: a ps that holds its variables already
        (another chief was first, or the ps survived a chief restart) keeps
        them, and join() then returns what it holds. With --logdir, starts
        saving checkpoints."""
        if not self.cluster.is_chief:
            raise ValueError(f"{self._name} is not the chief: only worker:0 initialises the variables")
        self._initialize_ps(self._check_values(initial_values, "initial value"), 0, origin)
        self._initializes = True

    def _initialize_ps(self, values: Mapping[str, Array], global_step: int, origin: str) -> None:
        restored = self._restore(self._checkpoints) if self._checkpoints else None
        table_shards: list[list[pb.TableState]] = [[] for _ in self.cluster.ps]
        if restored:
            states, tables, global_step, origin = restored
            shards = self.placement.split_states(states)
            # Each row to the ps task its id hashes to, whatever number of them saved it.
            table_shards = sparse.split_table_states(self.signature.tables, tables, len(self.cluster.ps))
        else:
            arrays = self.placement.split([values[spec.name] for spec in self.signature.variables])
            shards = [[pb.VariableState(name=piece.name) for piece in self.placement.on(k)]
                      for k in range(len(self.cluster.ps))]
            for k, pieces in enumerate(arrays):
                for state, array in zip(shards[k], pieces):
                    state.value.ParseFromString(tensors.encode_tensor(array))
        stub_signature = self.signature.to_proto()
        # ps:0 last: its initialisation is what tells the other workers the
        # variables are ready.
        for k in reversed(range(len(self.cluster.ps))):
            request = pb.InitializeRequest(origin=origin, global_step=global_step, signature=stub_signature)
            request.shard.ps_index = k
            request.shard.variables.extend(shards[k])
            request.shard.tables.extend(table_shards[k])
            answer = None
            while answer is None:
                self._wait_for_ps(k)
                try:
                    answer = self._send_initialize(k, request)
                except grpc.RpcError as e:
                    # UNAVAILABLE: the process died, or it is the backup of a
                    # live primary; either way, ask which one serves now.
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise JoinRefused(f"ps:{k} at {self._serving[k]} refused the variables: "
                                          f"{e.details()}") from None
                    self._set_state("waiting", f"initialising ps:{k}: {e.details()}")
                    self._stop.wait(0.2)
            if k == 0:
                self._say(f"chief: variables initialised ({origin}) at global step {answer.global_step}"
                          if answer.initialized_now else
                          f"chief: ps:0 already holds the variables at global step {answer.global_step}; "
                          "continuing from there")
        self._start_checkpoint_thread()

    def join(self) -> dict[str, Array]:
        """Joins every ps task; returns the parameters (name -> array). Waits,
        saying for what, while a ps is unreachable or the chief has not
        initialised the variables; raises JoinRefused when a ps refuses."""
        for k in range(len(self.cluster.ps)):
            self._wait_for_ps(k)
        self._take_parameters([self._join_ps(k) for k in range(len(self.cluster.ps))])
        self._params_at = time.monotonic()
        linked = ", ".join(f"ps:{s.index}" for s in self._streams if s and s.link)
        self._set_state("training", f"joined the cluster at global step {self.global_step}"
                                    + (f" (tensor values on data links to {linked})" if linked else ""))
        return dict(self.parameters)

    def _join_ps(self, k: int) -> list[Any]:
        """Joins ps task k; returns the parameters it answered with."""
        request = pb.TrainRequest()
        join = request.join
        join.worker_index = self.cluster.task_index
        join.pid = os.getpid()
        join.host = socket.gethostname()
        # Where this worker serves TaskControl: ps:0 names a newcomer to an
        # elastic cluster (beyond ps:0's --worker_hosts) by it.
        join.address = self.cluster.workers[self.cluster.task_index]
        join.signature.CopyFrom(self.signature.to_proto())
        if k == 0:
            # What ps:0 acknowledged last: a replicated ps:0 that took over
            # says whether acknowledged updates were lost.
            join.acknowledged_step = self.global_step
        # Data links are plain TCP: under TLS the values stay on the stream.
        join.offers_data_link = (self.cluster.data_link and not self.cluster.uses_tls
                                 and 4 * sum(s.size for s in self.placement.on(k)) >= _LINK_MIN_BYTES)
        delay = 0.2
        stream = None
        while True:
            if self.stopping:
                if stream:
                    stream.cancel()
                raise Stopped(self._stop_reason)
            # A join that is not ready yet is asked again on the same stream.
            if stream is None:
                self._wait_for_ps(k)
                stream = _PsStream(k, self._channels[k], self._metadata, self._epochs)
            try:
                answer = stream.exchange(request)
            except DeposedAnswer as e:
                stream.cancel()
                stream = None
                self._set_state("waiting", f"joining ps:{k}: {e}")
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            except grpc.RpcError as e:
                stream = None
                code = e.code()
                if code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT,
                            grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.UNAUTHENTICATED,
                            grpc.StatusCode.PERMISSION_DENIED):
                    raise JoinRefused(f"ps:{k} at {self._serving[k]} refused {self._name}: {e.details()}") from None
                # ABORTED: our index's old connection is still open on the ps;
                # anything else: the ps went away (or, UNAVAILABLE, it is a
                # backup whose primary serves). Either way, ask again, of
                # whichever process serves by then.
                self._set_state("waiting", f"joining ps:{k}: {e.details()}")
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            message = answer.message
            if not message.ready:
                self._set_state("waiting", f"waiting for {message.waiting_for}")
                # The ps held this join for up to a second; asked again at once, so
                # that a worker that joins late does not miss the chief's first steps.
                self._stop.wait(0.01)
                continue
            if message.HasField("data_link"):
                self._open_link(stream, message.data_link)
            self._streams[k] = stream
            if k == 0:
                self.global_step = message.global_step
                self.done = message.last_step > 0 and self.global_step >= message.last_step
            return answer.tensors

    def _open_link(self, stream: _PsStream, grant: pb.DataLinkGrant) -> None:
        """Connects the data link ps task stream.index granted; when it cannot,
        says so, and the values stay on the gRPC stream."""
        host = self._serving[stream.index].rsplit(":", 1)[0].strip("[]")
        # As parasync-node: a link that moves nothing for two heartbeats
        # (at least 2 s) is taken for broken. Python's socket timeout bounds
        # a whole sendall, so a 4 MB send gets room on a slow link too.
        timeout = max(2 * self.cluster.heartbeat_ms / 1000, 2.0)
        try:
            stream.open_link(host, grant, timeout).settimeout(5 * timeout)
        except OSError as e:
            self._say(f"{self._name}: no data link to ps:{stream.index} ({e}); its tensors go on the gRPC stream",
                      logging.WARNING)

    def _take_parameters(self, pieces: Sequence[Sequence[Any]]) -> None:
        """pieces: per ps task, the arrays it answered with (views of its
        answer), in the order of its variable list."""
        variables = self.placement.join(pieces)
        self.parameters = {spec.name: value for spec, value in zip(self.signature.variables, variables)}

    # -- steps -------------------------------------------------------------------------------------------------

    def _check_values(self, values: Values, what: str) -> dict[str, Array]:
        if not isinstance(values, dict):
            values = {v.name: g for v, g in zip(self.signature.variables, values)}
        checked = {}
        for spec in self.signature.variables:
            if spec.name not in values:
                raise ValueError(f"no {what} for variable '{spec.name}'")
            array = np.asarray(values[spec.name], dtype=np.float32)
            # The shape, not just the count: a transposed gradient has the
            # right number of values in the wrong places.
            if array.shape != tuple(spec.shape):
                raise ValueError(f"the {what} of '{spec.name}' has shape {array.shape}, the variable {spec.shape}")
            checked[spec.name] = array
        unknown = set(values) - set(checked)
        if unknown:
            raise ValueError(f"{what}s for variables the model does not declare: {sorted(unknown)}")
        return checked

    def push(self, gradients: Values, loss: float, full_loss: float = float("nan"),
             metrics: Optional[Mapping[str, float]] = None,
             row_gradients: Optional[Mapping[str, tuple[Any, Any]]] = None,
             pull: Optional[Mapping[str, Any]] = None) -> StepResult:
        """Pushes one step's gradients (name -> array, or a list in declaration
        order) with the batch loss, and the metrics measured on the parameters
        they were computed from (name -> value, names the signature declares;
        those left out are sent as NaN, "not measured"); returns what the
        cluster did with them.
        A model with tables: `row_gradients` gives, per table touched, (ids,
        gradients) -- one gradient row per id, ids in any order, a repeated
        id's rows summed -- for rows this batch pulled; `pull` the ids of the
        next batch (table -> ids), whose rows the answer brings after this
        update (StepResult.rows, as pull() returns them), so that a step is
        one exchange with each ps task.
        Blocks while the policy holds the worker (sync barrier, staleness bound).
        When a ps was lost, rejoins (waiting for it) and returns outcome "none"
        with the parameters the cluster holds now (and the rows `pull` asks
        for, pulled again)."""
        if self.stopping:
            raise Stopped(self._stop_reason)
        grads = self._check_values(gradients, "gradient")
        values = self._metric_values(metrics)
        row_parts = self._row_gradient_parts(row_gradients or {})
        asked = self._requested_rows(pull or {}, "pull")
        if not all(self._streams):
            raise RuntimeError(f"{self._name} has not joined the cluster: call join() first")
        compute_us = int((time.monotonic() - self._params_at) * 1e6)
        started = time.monotonic()
        try:
            result = self._push(grads, float(loss), float(full_loss), values, compute_us, row_parts, asked)
        except (grpc.RpcError, OSError) as e:
            self._refused_rows(e, "push", bool(row_parts) or bool(asked))
            self._reconnect(e)
            rows = self._pull(asked, False) if asked else {}
            return StepResult("none", self.global_step, 0, 0, 0.0, self.done, dict(self.parameters), rows)
        self._last_push_us = int((time.monotonic() - started) * 1e6) - int(result.waited_s * 1e6)
        self._params_at = time.monotonic()
        return result

    def _reconnect(self, error: Exception) -> None:
        """After a lost ps (error: its RpcError, or the OSError of a broken
        data link): drops every stream, and joins again, waiting for the ps."""
        why = error.details() if isinstance(error, grpc.RpcError) else f"the data link broke: {error}"
        self._set_state("waiting", f"reconnecting: lost a ps: {why}")
        for stream in self._streams:
            if stream:
                stream.cancel()
        self._streams = [None] * len(self._streams)
        if self._initializes:
            # A ps that restarted holds nothing until the chief gives it
            # the variables again: from the newest checkpoint, else the
            # chief's own last values (a ps that kept them keeps them).
            self._initialize_ps(dict(self.parameters), self.global_step,
                                f"the chief's parameters at global step {self.global_step}")
        self.join()

    def _refused_rows(self, error: Exception, what: str, had_rows: bool) -> None:
        """A ps refuses table rows it cannot take (a gradient for a row never
        pulled, an id another ps holds) with INVALID_ARGUMENT, and ends the
        stream: rejoined, that is raised as a TableError with the ps's words,
        not retried, since the same rows would be refused again."""
        if not had_rows or not isinstance(error, grpc.RpcError) or error.code() != grpc.StatusCode.INVALID_ARGUMENT:
            return
        self._reconnect(error)
        raise sparse.TableError(f"the ps refused this {what}: {error.details()}") from None

    # -- table rows ----------------------------------------------------------------------------------------------

    def _table(self, name: str, what: str) -> tuple[int, TableSpec]:
        if name not in self._table_index:
            declared = [t.name for t in self.signature.tables]
            if not declared:
                raise sparse.TableError(f"{what} for table '{name}', but the model declares no tables: declare it "
                                        "in the signature's tables")
            raise sparse.TableError(f"{what} for table '{name}', which the model does not declare (its tables: "
                                    f"{declared})")
        index = self._table_index[name]
        return index, self.signature.tables[index]

    def _requested_rows(self, ids_by_table: Mapping[str, Any], what: str
                        ) -> dict[int, tuple[sparse.Ids, sparse.Ids, npt.NDArray[np.intp]]]:
        """Per table index: (the ids as given, flat; their distinct ids
        ascending; where each given id is in those), checked."""
        asked = {}
        for name, ids in ids_by_table.items():
            index, table = self._table(name, what)
            given = sparse.as_ids(ids, table, f"the ids {what} asks for")
            distinct, where = np.unique(given, return_inverse=True)
            asked[index] = (given, distinct, where)
        return asked

    def _row_gradient_parts(self, row_gradients: Mapping[str, tuple[Any, Any]]) -> list[list[bytes]]:
        """Per ps task, the SparseRows messages of the rows it holds: each
        table's ids merged (duplicates summed) and ascending, checked."""
        parts: list[list[bytes]] = [[] for _ in self.cluster.ps]
        merged = {}
        for name, given in row_gradients.items():
            index, table = self._table(name, "row gradients")
            if not isinstance(given, (tuple, list)) or len(given) != 2:
                raise sparse.TableError(f"the row gradients of table '{name}' must be a pair (ids, gradients), "
                                        f"one gradient row per id; got {type(given).__name__}")
            ids = sparse.as_ids(given[0], table, "the row gradients' ids")
            grads = sparse.as_row_values(given[1], ids.size, table, "row gradients")
            merged[index] = sparse.merge_rows(ids, grads)
        # Tables in declaration order, as the ps expects them.
        for index in sorted(merged):
            ids, grads = merged[index]
            owner = sparse.ps_of_row(ids, len(self.cluster.ps))
            for k in range(len(self.cluster.ps)):
                mine = owner == k
                if mine.any():
                    parts[k].append(tensors.encode_sparse_rows(index, ids[mine], grads[mine]))
        return parts

    def _pull_parts(self, asked: Mapping[int, tuple[sparse.Ids, sparse.Ids, Any]]) -> list[list[bytes]]:
        """Per ps task, the RowRequest messages of the rows it holds."""
        parts: list[list[bytes]] = [[] for _ in self.cluster.ps]
        for index in sorted(asked):
            distinct = asked[index][1]
            owner = sparse.ps_of_row(distinct, len(self.cluster.ps))
            for k in range(len(self.cluster.ps)):
                mine = owner == k
                if mine.any():
                    parts[k].append(tensors.encode_row_request(index, distinct[mine]))
        return parts

    def _rows_answered(self, asked: Mapping[int, tuple[sparse.Ids, sparse.Ids, npt.NDArray[np.intp]]],
                       answers: Sequence[tensors.TrainAnswer]) -> dict[str, TableRows]:
        """The rows every ps task answered, put back in the order the ids were
        given (a repeated id's row repeated)."""
        rows: dict[str, TableRows] = {}
        for index, (given, distinct, where) in asked.items():
            table = self.signature.tables[index]
            width = int(table.row_width)
            values = np.empty((distinct.size, width), dtype=np.float32)
            found = np.zeros(distinct.size, dtype=bool)
            for k, answer in enumerate(answers):
                for answered_table, ids, flat in answer.rows:
                    if answered_table != index:
                        continue
                    if flat.size != ids.size * width:
                        raise RuntimeError(f"ps:{k} answered {flat.size} values for {ids.size} rows of table "
                                           f"'{table.name}', whose rows hold {width}: give every task the same "
                                           "Parasync version")
                    at = np.searchsorted(distinct, ids)
                    at_valid = np.minimum(at, max(distinct.size - 1, 0))
                    if ids.size and (distinct.size == 0 or (distinct[at_valid] != ids).any()):
                        raise RuntimeError(f"ps:{k} answered rows of table '{table.name}' this worker did not ask for")
                    values[at] = flat.reshape(ids.size, width)
                    found[at] = True
            if not found.all():
                raise RuntimeError(f"the ps tasks answered {int(found.sum())} of the {distinct.size} rows of table "
                                   f"'{table.name}' this worker asked for")
            rows[table.name] = (given, values[where])
        return rows

    def pull(self, ids: Mapping[str, Any], lookup_only: bool = False) -> dict[str, TableRows]:
        """The rows of `ids` (table name -> ids: uint64 or non-negative
        integers, any shape, read flat, repeats allowed) from the ps tasks
        that hold them, one request on each stream; returns table name ->
        (the ids, flat uint64; their rows, len(ids) x row_width, in that
        order). A row not made yet is made (its first touch), so that its
        gradient can be pushed; with `lookup_only` (an evaluation's) it comes
        at its initial values and is not kept. Pull a batch's rows before
        its first step; after that push(pull=...) brings the next batch's
        with each step. When a ps was lost, rejoins (waiting for it) and
        pulls again."""
        if self.stopping:
            raise Stopped(self._stop_reason)
        asked = self._requested_rows(ids, "pull")
        if not all(self._streams):
            raise RuntimeError(f"{self._name} has not joined the cluster: call join() first")
        return self._pull(asked, lookup_only)

    def _pull(self, asked: Mapping[int, tuple[sparse.Ids, sparse.Ids, npt.NDArray[np.intp]]],
              lookup_only: bool) -> dict[str, TableRows]:
        while True:
            try:
                streams = cast(List[_PsStream], self._streams)
                # Every ps task is asked, its share empty or not, as parasync-node's workers ask.
                for stream, parts in zip(streams, self._pull_parts(asked)):
                    stream.send(tensors.encode_pull(parts, lookup_only))
                answers = [stream.receive() for stream in streams]
            except (grpc.RpcError, OSError) as e:
                self._refused_rows(e, "pull", True)
                self._reconnect(e)
                continue
            for k, answer in enumerate(answers):
                if answer.kind != "pull":
                    raise RuntimeError(f"ps:{k} answered a pull with a {answer.kind} answer: give every task the "
                                       "same Parasync version")
            return self._rows_answered(asked, answers)

    def _metric_values(self, metrics: Optional[Mapping[str, float]]) -> list[float]:
        if not metrics:
            return []
        unknown = set(metrics) - set(self.signature.metric_names)
        if unknown:
            raise ValueError(f"metrics {sorted(unknown)} are not declared: add them to the signature's "
                             f"metric_names (it declares {list(self.signature.metric_names)})")
        return [float(metrics.get(name, float("nan"))) for name in self.signature.metric_names]

    def _push(self, grads: Mapping[str, Array], loss: float, full_loss: float, metric_values: list[float],
              compute_us: int, row_parts: Sequence[Sequence[bytes]] = (),
              asked: Optional[Mapping[int, tuple[sparse.Ids, sparse.Ids, npt.NDArray[np.intp]]]] = None
              ) -> StepResult:
        head = pb.PushRequest(computed_from_step=self.global_step, batch_loss=loss, full_loss=full_loss,
                              compute_us=compute_us, previous_push_us=self._last_push_us, metrics=metric_values)
        # The chief measures how the variables move whenever it measures
        # anything, and on its first push (the start), as parasync-node's does.
        if self.cluster.is_chief and (metric_values or math.isfinite(full_loss) or not self._trajectory.started):
            head.variable_summaries.extend(self._trajectory.measure(
                [np.asarray(self.parameters[v.name], dtype=np.float32).ravel() for v in self.signature.variables],
                self.global_step))
        if sum(v.size for v in self.signature.variables) <= _MAX_VIEWED_PARAMETERS:
            head.parameter_view.extend(
                float(x) for v in self.signature.variables for x in self.parameters[v.name].ravel())
        # Each ps task's pieces: whole gradients, and views of the slices' rows.
        pieces = self.placement.split([grads[v.name] for v in self.signature.variables])

        # A sparse model's rows: each ps task's share of the row gradients
        # goes with its gradient pieces, its share of the next batch's ids
        # with the push it answers (ps:0's; the others' decision).
        row_parts = row_parts or [[] for _ in self._streams]
        pull_parts = self._pull_parts(asked) if asked else [[] for _ in self._streams]

        # ps:0 first: its update policy decides what happens to the gradient.
        # The other ps tasks get their slices staged (PushRequest.staged)
        # while ps:0 decides, so the uploads overlap ps:0's work instead of
        # following its answer, as parasync-node's workers do; then each gets
        # the decision (0 contributions drops the staged slices) and answers
        # with its fresh slices.
        streams = cast(List[_PsStream], self._streams)  # push() checked that every one is open
        others = range(1, len(streams))
        streams[0].send_push(head, pieces[0], tensors.push_rows(row_parts[0], pull_parts[0]))
        for k in others:
            staged = pb.PushRequest(computed_from_step=self.global_step, staged=True)
            streams[k].send_push(staged, pieces[k], tensors.push_rows(row_parts[k], []))
        answer = streams[0].receive_answer()
        decision = answer.message
        answers = [answer.tensors]
        row_answers = [answer]
        counted = decision.outcome in (pb.APPLIED, pb.AGGREGATED)
        for k in others:
            # learning_rate_scale: ps:0's factor under a staleness-aware rule,
            # so that every shard of the update moves by it (0 reads as 1).
            decided = pb.PushRequest(computed_from_step=self.global_step, update=decision.update,
                                     contributions=decision.contributions if counted else 0,
                                     learning_rate_scale=decision.learning_rate_scale)
            streams[k].send_push(decided, [], tensors.push_rows([], pull_parts[k]))
        for k in others:
            row_answers.append(streams[k].receive_answer())
            answers.append(row_answers[-1].tensors)
        self._take_parameters(answers)
        self.global_step = decision.global_step
        self.done = decision.done
        if decision.outcome != pb.PUSH_OUTCOME_UNSPECIFIED:
            self.clock += 1
        # After a step the chief measured, and after the last: what
        # parasync-node's chief writes for TensorBoard.
        measured = bool(head.variable_summaries) or bool(metric_values) or math.isfinite(full_loss)
        if self._summaries and ((counted and measured) or decision.done):
            self._summaries.after_step(decision.global_step, loss, full_loss, metric_values,
                                       head.variable_summaries)
        rows: dict[str, TableRows] = {}
        if asked:
            try:
                rows = self._rows_answered(asked, row_answers)
            except RuntimeError:
                # The run ended with this push: a ps task that saw the end
                # answers no rows, and no next batch needs them.
                if not decision.done:
                    raise
        return StepResult(_OUTCOMES.get(decision.outcome, "none"), decision.global_step, decision.staleness,
                          decision.contributions, decision.waited_us / 1e6, decision.done, dict(self.parameters),
                          rows)

    def leave(self) -> None:
        """Leaves every ps's stream; finished when the last step was reached."""
        request = pb.TrainRequest()
        request.leave.finished = self.done
        request.leave.worker_clock = self.clock
        for k, stream in enumerate(self._streams):
            if stream:
                stream.close(request)
            self._streams[k] = None
        if self.done:
            self._set_state("finished", f"global step {self.global_step} reached the last step "
                                        f"(local steps {self.clock})")
        else:
            self._set_state("stopped", self._stop_reason or "left the cluster")
