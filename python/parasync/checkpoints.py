"""The chief's checkpoints, in the format parasync-node's chief writes and
restores (core/formats/checkpoint.h), so a run may go on under either:

    "model.ckpt-<global_step>.pckpt" in the run directory: the 8-byte magic
    "PSYNCKP1", the payload's length as a little-endian uint64, the serialized
    parasync.proto.Checkpoint, and the payload's SHA-256.

A checkpoint is written to a temporary file in the same directory, flushed,
fsync'ed and renamed, so a reader sees the old set of files or the new one,
never half a file. One writer per directory (the chief).

It holds every variable whole (`Checkpoint.variables`, in the signature's
order), however the saving run partitioned and placed them, so a run
restores it into any number of ps tasks. Checkpoints written before
partitioned variables hold per-ps shards instead (`Checkpoint.shards`,
variable i on ps task i % len(shards)); whole_variables() reads both.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from typing import List, Optional

from parasync.proto import parasync_pb2 as pb

MAGIC = b"PSYNCKP1"
_HEADER = len(MAGIC) + 8
_CHECKSUM = hashlib.sha256().digest_size
_NAME = re.compile(r"^model\.ckpt-([0-9]{1,18})\.pckpt$")
_TEMPORARY = re.compile(r"^\.(model\.ckpt-([0-9]{1,18})\.pckpt)\.tmp-[0-9]+$")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and
    what is wrong with it."""


def serialize(checkpoint: pb.Checkpoint) -> bytes:
    """The file's bytes for `checkpoint` (see the module's text)."""
    payload = checkpoint.SerializeToString()
    return MAGIC + struct.pack("<Q", len(payload)) + payload + hashlib.sha256(payload).digest()


def parse(data: bytes, origin: str = "checkpoint") -> pb.Checkpoint:
    """The Checkpoint in `data`, after the checks parasync-node makes."""
    if data[:len(MAGIC)] != MAGIC[:len(data)]:
        raise CheckpointError(f"{origin}: bad magic (not a Parasync checkpoint)")
    minimum = _HEADER + _CHECKSUM
    if len(data) < _HEADER:
        raise CheckpointError(f"{origin}: truncated: {len(data)} of at least {minimum} bytes")
    (length,) = struct.unpack_from("<Q", data, len(MAGIC))
    expected = length + minimum
    if len(data) < expected:
        raise CheckpointError(f"{origin}: truncated: {len(data)} of {expected} bytes")
    if len(data) > expected:
        raise CheckpointError(f"{origin}: {len(data) - expected} unexpected bytes after the checksum "
                              f"(expected {expected} bytes)")
    payload = data[_HEADER:_HEADER + length]
    if hashlib.sha256(payload).digest() != data[_HEADER + length:]:
        raise CheckpointError(f"{origin}: checksum mismatch (the file is corrupt)")
    checkpoint = pb.Checkpoint()
    try:
        checkpoint.ParseFromString(payload)
    except Exception:  # protobuf's DecodeError; the message says no more than this
        raise CheckpointError(f"{origin}: payload does not parse (corrupt, or from an incompatible version)") from None
    return checkpoint


def whole_variables(checkpoint: pb.Checkpoint) -> list[Optional[pb.VariableState]]:
    """The variables a Checkpoint holds, whole (VariableState messages), in
    its signature's order: from `variables` when it has them, else from the
    older per-ps `shards`. A variable the file lacks is None."""
    count = len(checkpoint.signature.variables)
    if checkpoint.variables:
        saved: list[Optional[pb.VariableState]] = list(checkpoint.variables[:count])
        return saved + [None] * (count - len(saved))
    states: list[Optional[pb.VariableState]] = [None] * count
    old_ps = max(1, len(checkpoint.shards))
    for shard in checkpoint.shards:
        for j, state in enumerate(shard.variables):
            index = shard.ps_index + j * old_ps
            if 0 <= index < count:
                states[index] = state
    return states


def read(path: str) -> pb.Checkpoint:
    """The Checkpoint in the file at `path`; raises CheckpointError."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read checkpoint: {e.strerror}") from None
    return parse(data, path)


class CheckpointStore:
    """The checkpoints of one run directory."""

    def __init__(self, directory: str, max_to_keep: int = 5) -> None:
        self.directory = directory
        self.max_to_keep = max_to_keep

    # typing.List in this class: here `list` names this method.
    def list(self) -> List[str]:
        """Paths of the checkpoint files, oldest first (by global step)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            match = _NAME.match(name)
            path = os.path.join(self.directory, name)
            if match and os.path.isfile(path):
                found.append((int(match.group(1)), path))
        return [path for _, path in sorted(found)]

    def save(self, checkpoint: pb.Checkpoint) -> str:
        """Writes `checkpoint` durably and deletes the oldest beyond
        max_to_keep (0 keeps all, as tf.train.Saver); returns its path.
        Raises CheckpointError naming the directory and the system's reason."""
        if checkpoint.global_step < 0:
            raise CheckpointError(f"cannot save a checkpoint at negative global step {checkpoint.global_step}")
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"cannot create checkpoint directory '{self.directory}': {e.strerror}") from None
        name = f"model.ckpt-{checkpoint.global_step}.pckpt"
        path = os.path.join(self.directory, name)
        # The pid keeps a chief and its accidental twin off each other's file.
        temporary = os.path.join(self.directory, f".{name}.tmp-{os.getpid()}")
        try:
            with open(temporary, "wb") as f:
                f.write(serialize(checkpoint))
                f.flush()
                os.fsync(f.fileno())
            os.rename(temporary, path)
        except OSError as e:
            try:
                os.remove(temporary)
            except OSError:
                pass
            raise CheckpointError(f"cannot write checkpoint '{path}': {e.strerror}") from None
        self._sync_directory()
        if self.max_to_keep > 0:
            others = [p for p in self.list() if p != path]
            for old in others[:max(0, len(others) - (self.max_to_keep - 1))]:
                try:
                    os.remove(old)
                except OSError:
                    pass  # one checkpoint too many is not worth failing the save
        return path

    def newest_valid(self, skipped: Optional[List[str]] = None) -> Optional[tuple[str, pb.Checkpoint]]:
        """(path, Checkpoint) of the newest checkpoint that loads and whose
        checksum holds, or None. Each corrupt or truncated file passed over is
        appended to `skipped` (a list) with its reason. Temporaries older than
        the one found (what a crash in save() leaves) are removed."""
        for path in reversed(self.list()):
            try:
                found = (path, read(path))
                break
            except CheckpointError as e:
                if skipped is not None:
                    skipped.append(str(e))
        else:
            return None
        newest = _NAME.match(os.path.basename(found[0]))
        assert newest, "list() returns checkpoint names only"
        newest_step = int(newest.group(1))
        newest_time = os.path.getmtime(found[0])
        for name in os.listdir(self.directory):
            match = _TEMPORARY.match(name)
            if not match:
                continue
            path = os.path.join(self.directory, name)
            try:
                if int(match.group(2)) < newest_step or os.path.getmtime(path) < newest_time:
                    os.remove(path)
            except OSError:
                pass
        return found

    def _sync_directory(self) -> None:
        # Makes the rename itself durable; some file systems cannot fsync a
        # directory, and the checkpoint is complete either way.
        try:
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
