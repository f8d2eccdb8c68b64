"""TensorBoard event files by the Python chief, as parasync-node's chief
writes them (core/formats/event_file.h, core/node/training_summaries.h), so
`tensorboard --logdir=RUN_DIR` and the app's replay read a Python run as a
C++ one:

    events.out.tfevents.<seconds>.<host> in the run directory: TFRecords
    (length, masked CRC-32C of the length, an Event, its masked CRC-32C), a
    file_version "brain.Event:2" event first, then one event per summary.

The tags are the C++ chief's: "loss" (the chief's batch loss), "full_loss",
a metric "heldout_accuracy" as "heldout/accuracy", "updates_per_sec", and per
variable "variables/<name>/norm", ".../distance_from_start",
".../update_per_step". CRC-32C comes from Debian's python3-crcmod.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import struct
import time
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, Sequence

from parasync import _log
from parasync.proto import tensorboard_pb2 as tb

if TYPE_CHECKING:
    from parasync.proto import parasync_pb2 as pb
    from parasync.worker import Signature

_crc32c: Optional[Callable[[bytes], int]]
try:
    import crcmod.predefined
    _crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
except ImportError:  # the chief says so once, and trains on without event files
    _crc32c = None

FILE_VERSION = "brain.Event:2"

_logger = logging.getLogger(__name__)


class SummaryError(OSError):
    """The event file cannot be written; the message says which and why."""


def _masked_crc(data: bytes) -> int:
    crc32c = _crc32c
    if crc32c is None:
        raise SummaryError("no CRC-32C for TensorBoard records: Python's crcmod is missing (Debian: python3-crcmod)")
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One TFRecord as TensorFlow's record_writer frames it."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked_crc(length)) + data + struct.pack("<I", _masked_crc(data))


def metric_tag(name: str) -> str:
    """"heldout_accuracy" -> "heldout/accuracy": TensorBoard groups by the
    first '/', as the C++ chief tags them."""
    underscore = name.find("_")
    return name[:underscore] + "/" + name[underscore + 1:] if underscore > 0 else name


class EventFileWriter:
    """One event file in `logdir`, flushed after every event."""

    def __init__(self, logdir: str) -> None:
        if _crc32c is None:
            raise SummaryError("no TensorBoard event files: Python's crcmod is missing (Debian: python3-crcmod)")
        now = time.time()
        base = os.path.join(logdir, f"events.out.tfevents.{int(now)}.{socket.gethostname()}")
        # A chief restarted within the same second must not append a second
        # file_version into the middle of the first file.
        self.path = base if not os.path.exists(base) else f"{base}.{os.getpid()}"
        try:
            os.makedirs(logdir, exist_ok=True)
            self._file = open(self.path, "wb")
        except OSError as e:
            raise SummaryError(f"cannot write {self.path}: {e.strerror}") from None
        self._write(tb.Event(wall_time=now, file_version=FILE_VERSION))

    def write_scalars(self, step: int, scalars: Mapping[str, float], wall_time: Optional[float] = None) -> None:
        """One event at global step `step` with the finite values of
        `scalars` (tag -> number)."""
        event = tb.Event(wall_time=time.time() if wall_time is None else wall_time, step=step)
        for tag, value in scalars.items():
            if math.isfinite(value):
                event.summary.value.add(tag=tag, simple_value=value)
        self._write(event)

    def _write(self, event: tb.Event) -> None:
        try:
            self._file.write(frame_record(event.SerializeToString()))
            self._file.flush()
        except OSError as e:
            raise SummaryError(f"cannot write {self.path}: {e.strerror}") from None

    def close(self) -> None:
        self._file.close()


class ChiefSummaries:
    """What the chief writes after a step it measured, and after the last."""

    def __init__(self, logdir: str, signature: Signature, log: Optional[Callable[[str], None]] = None) -> None:
        """`log`: called with each line it has to say (that it cannot write
        the event files); without it they are warnings of the logger
        "parasync.summaries" (parasync._log)."""
        self._log = log or (lambda line: _log.say(_logger, logging.WARNING, line))
        self._variable_names = [v.name for v in signature.variables]
        self._metric_tags = [metric_tag(name) for name in signature.metric_names]
        self._last: Optional[tuple[int, float]] = None  # (global step, wall time) of the previous event
        try:
            self._writer: Optional[EventFileWriter] = EventFileWriter(logdir)
        except SummaryError as e:
            self._writer = None
            self._log(f"chief: {e}")

    def after_step(self, global_step: int, loss: float, full_loss: float, metric_values: Sequence[float],
                   variable_summaries: Iterable[pb.VariableSummary]) -> None:
        """Writes the step's scalars (see the module's text) unless an event
        at this global step or a later one was written already."""
        if not self._writer or (self._last and global_step <= self._last[0]):
            return
        now = time.time()
        scalars = {"loss": loss, "full_loss": full_loss}
        scalars.update(zip(self._metric_tags, metric_values))
        for name, summary in zip(self._variable_names, variable_summaries):
            prefix = f"variables/{name}/"
            scalars[prefix + "norm"] = summary.norm
            scalars[prefix + "distance_from_start"] = summary.distance_from_start
            scalars[prefix + "update_per_step"] = summary.update_per_step
        if self._last and now > self._last[1]:
            scalars["updates_per_sec"] = (global_step - self._last[0]) / (now - self._last[1])
        try:
            self._writer.write_scalars(global_step, scalars, now)
        except SummaryError as e:
            self._log(f"chief: {e}; no more TensorBoard summaries this run")
            self._writer = None
            return
        self._last = (global_step, now)

    def close(self) -> None:
        if self._writer:
            self._writer.close()
