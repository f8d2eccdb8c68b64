"""The chief's checkpoints, in the format parasync-node's chief writes and
restores (core/formats/checkpoint.h), so a run may go on under either:

    "model.ckpt-<global_step>.pckpt" in the run directory: the 8-byte magic
    "PSYNCKP2", the number of pieces (a little-endian uint64) and its CRC-32
    (a little-endian uint32), each piece as its length and that length's
    CRC-32 (the same) and a serialized parasync.proto.Checkpoint, then the
    SHA-256 of every byte before it. A length's CRC tells a damaged length
    from a file cut short.

The first piece holds all but the variables and the tables' rows (each
table's name and slot names); each later piece holds variables, which follow
the ones before, or rows of one table, after the rows before in id order
(sparse.row_pieces). No piece is over PIECE_BYTES (but for one variable
larger than that alone), so no message comes near protobuf's 2 GiB however
many rows the tables hold. Files of version 1, "PSYNCKP1" (the magic, the
payload's length, one serialized Checkpoint, its SHA-256), are read too.

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
import io
import os
import re
import struct
import zlib
from typing import BinaryIO, Callable, List, Optional

from parasync import sparse
from parasync.proto import parasync_pb2 as pb

MAGIC = b"PSYNCKP2"
MAGIC_1 = b"PSYNCKP1"
# The most a piece holds, serialized (kCheckpointPieceBytes).
PIECE_BYTES = 64 << 20
_HEADER = len(MAGIC) + 8
_CHECKSUM = hashlib.sha256().digest_size
# A count or a length and its CRC-32 (version 2).
_CHECKED = 8 + 4
# A version 1 file of an empty Checkpoint; every version 2 file is longer.
_SMALLEST = _HEADER + _CHECKSUM
# The magic, the piece count, one piece's length, the checksum.
_SMALLEST_2 = len(MAGIC) + 2 * _CHECKED + _CHECKSUM
# protobuf parses no message longer.
_MOST_MESSAGE_BYTES = (1 << 31) - 1
_NAME = re.compile(r"^model\.ckpt-([0-9]{1,18})\.pckpt$")
_TEMPORARY = re.compile(r"^\.(model\.ckpt-([0-9]{1,18})\.pckpt)\.tmp-[0-9]+$")
_LATER_FIELDS = {"variables", "tables"}


def _checked(value: int) -> bytes:
    data = struct.pack("<Q", value)
    return data + struct.pack("<I", zlib.crc32(data))


def _value_of_checked(data: bytes) -> Optional[int]:
    """The value of _checked() bytes; None when its CRC does not hold."""
    if zlib.crc32(data[:8]) != struct.unpack_from("<I", data, 8)[0]:
        return None
    return struct.unpack_from("<Q", data)[0]


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message names the file and
    what is wrong with it."""


def _first_piece(checkpoint: pb.Checkpoint) -> pb.Checkpoint:
    """All of `checkpoint` but its variables and its tables' rows, without
    copying those."""
    first = pb.Checkpoint()
    for field, value in checkpoint.ListFields():
        if field.name in _LATER_FIELDS:
            continue
        if field.label == field.LABEL_REPEATED:
            getattr(first, field.name).extend(value)
        elif field.message_type is not None:
            getattr(first, field.name).CopyFrom(value)
        else:
            setattr(first, field.name, value)
    for table in checkpoint.tables:
        first.tables.add(name=table.name, slot_names=table.slot_names)
    return first


def _pieces(checkpoint: pb.Checkpoint, piece_bytes: int) -> list[Callable[[], pb.Checkpoint]]:
    """The pieces of the file, each made when called, so that one at a time
    is in memory beside the checkpoint."""
    pieces: list[Callable[[], pb.Checkpoint]] = [lambda: _first_piece(checkpoint)]
    groups: list[list[pb.VariableState]] = []
    filled = piece_bytes
    for variable in checkpoint.variables:
        size = variable.ByteSize() + 11  # and a tag and a length
        if filled + size > piece_bytes:
            groups.append([])
            filled = 0
        groups[-1].append(variable)
        filled += size
    for group in groups:
        pieces.append(lambda group=group: pb.Checkpoint(variables=group))
    for rows in sparse.row_pieces(checkpoint.tables, piece_bytes):
        pieces.append(lambda rows=rows: pb.Checkpoint(tables=[rows]))
    return pieces


def _write(checkpoint: pb.Checkpoint, out: Callable[[bytes], object], piece_bytes: int = PIECE_BYTES) -> None:
    pieces = _pieces(checkpoint, piece_bytes)
    digest = hashlib.sha256()

    def write(data: bytes) -> None:
        digest.update(data)
        out(data)

    write(MAGIC + _checked(len(pieces)))
    for make in pieces:
        payload = make().SerializeToString()
        write(_checked(len(payload)))
        write(payload)
    out(digest.digest())


def serialize(checkpoint: pb.Checkpoint, piece_bytes: int = PIECE_BYTES) -> bytes:
    """The file's bytes for `checkpoint` (see the module's text)."""
    chunks: list[bytes] = []
    _write(checkpoint, chunks.append, piece_bytes)
    return b"".join(chunks)


class _Reader:
    """One file's bytes, read in order, their SHA-256 kept as they go."""

    def __init__(self, stream: BinaryIO, size: int, origin: str) -> None:
        self.stream, self.size, self.origin = stream, size, origin
        self.position = 0
        self.digest = hashlib.sha256()

    def left(self) -> int:
        return self.size - self.position

    def take(self, count: int, summed: bool = True) -> bytes:
        data = self.stream.read(count)
        if len(data) != count:
            raise CheckpointError(f"{self.origin}: cannot read checkpoint: it was cut short while read")
        self.position += count
        if summed:
            self.digest.update(data)
        return data

    def error(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.origin}: {what}")

    def truncated(self, expected: int, at_least: bool) -> CheckpointError:
        return self.error(f"truncated: {self.size} of {'at least ' if at_least else ''}{expected} bytes")

    def check_the_sum(self) -> None:
        if self.take(_CHECKSUM, summed=False) != self.digest.digest():
            raise self.error("checksum mismatch (the file is corrupt)")


def _read(stream: BinaryIO, size: int, origin: str) -> pb.Checkpoint:
    reader = _Reader(stream, size, origin)
    magic = reader.take(min(size, len(MAGIC)), summed=False)
    version = next((v for v, m in ((1, MAGIC_1), (2, MAGIC)) if m[:len(magic)] == magic), None)
    if version is None:
        if len(magic) == len(MAGIC) and magic[:-1] == MAGIC[:-1] and b"3"[0] <= magic[-1] <= b"9"[0]:
            raise reader.error(f"written by a newer Parasync (checkpoint format {chr(magic[-1])}); this one reads "
                               "formats 1 and 2: restore it with the release that wrote it")
        raise reader.error("bad magic (not a Parasync checkpoint)")
    if version == 1:
        if size < _HEADER:
            raise reader.truncated(_SMALLEST, True)
        # Its checksum is the payload's alone.
        (length,) = struct.unpack("<Q", reader.take(8, summed=False))
        expected = length + _SMALLEST
        if size < expected:
            raise reader.truncated(expected, False)
        if size > expected:
            raise reader.error(f"{size - expected} unexpected bytes after the checksum (expected {expected} bytes)")
        payload = reader.take(length)
        reader.check_the_sum()
        checkpoint = pb.Checkpoint()
        try:
            checkpoint.ParseFromString(payload)
        except Exception:  # protobuf's DecodeError; the message says no more than this
            raise reader.error("payload does not parse (corrupt, or from an incompatible version)") from None
        return checkpoint

    if size < len(MAGIC) + _CHECKED:
        raise reader.truncated(_SMALLEST_2, True)
    reader.digest.update(magic)
    pieces = _value_of_checked(reader.take(_CHECKED))
    if pieces is None:
        raise reader.error("checksum mismatch (the file is corrupt: its piece count fails its CRC)")
    if pieces == 0 or pieces > 1 << 32:
        raise reader.error(f"{pieces} pieces is impossible (the header is corrupt)")
    least = len(MAGIC) + _CHECKED * (1 + pieces) + _CHECKSUM
    if least > size:
        raise reader.truncated(least, True)
    whole = pb.Checkpoint()
    wrong = ""  # the first thing wrong inside a piece; a damaged file is reported as damaged first
    for k in range(pieces):
        name = f"piece {k + 1} of {pieces}"
        if reader.left() < _CHECKED:
            raise reader.truncated(reader.position + _CHECKED + _CHECKSUM, True)
        length = _value_of_checked(reader.take(_CHECKED))
        if length is None:
            raise reader.error(f"checksum mismatch (the file is corrupt: the length of {name} fails its CRC)")
        if length > _MOST_MESSAGE_BYTES:
            raise reader.error(f"{name} is {length} bytes long, more than a piece can be (the file is corrupt)")
        if length + _CHECKSUM > reader.left():
            raise reader.truncated(reader.position + length + _CHECKSUM, k + 1 < pieces)
        payload = reader.take(length)
        if wrong:
            continue
        piece = pb.Checkpoint()
        try:
            piece.ParseFromString(payload)
        except Exception:  # protobuf's DecodeError
            wrong = f"{name} does not parse (corrupt, or from an incompatible version)"
            continue
        wrong = _take_first(piece, whole) if k == 0 else _join(piece, whole, name)
    if reader.left() < _CHECKSUM:
        raise reader.truncated(reader.position + _CHECKSUM, False)
    if reader.left() > _CHECKSUM:
        raise reader.error(f"{reader.left() - _CHECKSUM} unexpected bytes after the checksum "
                           f"(expected {reader.position + _CHECKSUM} bytes)")
    reader.check_the_sum()
    if wrong:
        raise reader.error(wrong)
    return whole


def _take_first(piece: pb.Checkpoint, whole: pb.Checkpoint) -> str:
    names = set()
    for table in piece.tables:
        if table.ids or table.values or table.slots:
            return f"piece 1 holds rows of table '{table.name}': they belong in the later pieces"
        if table.name in names:
            return f"piece 1 names table '{table.name}' twice"
        names.add(table.name)
    whole.CopyFrom(piece)
    return ""


def _join(piece: pb.Checkpoint, whole: pb.Checkpoint, name: str) -> str:
    for field, _ in piece.ListFields():
        if field.name not in _LATER_FIELDS:
            return (f"{name} holds {field.name}, which only the first piece may: later pieces hold variables and "
                    "tables' rows")
    whole.variables.extend(piece.variables)
    for rows in piece.tables:
        try:
            sparse.add_row_piece(whole, rows)
        except sparse.TableError as e:
            return f"{name}: {e}"
    return ""


def parse(data: bytes, origin: str = "checkpoint") -> pb.Checkpoint:
    """The Checkpoint in `data`, after the checks parasync-node makes."""
    return _read(io.BytesIO(data), len(data), origin)


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
            return _read(f, os.fstat(f.fileno()).st_size, path)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read checkpoint: {e.strerror}") from None


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
                _write(checkpoint, f.write)
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
