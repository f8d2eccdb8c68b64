"""NumPy arrays on the training stream, without per-element conversion.

A `Tensor` message is a shape and a packed `repeated float values`: on the
wire, the values are a length-delimited run of little-endian float32, the
same bytes as ``array.astype("<f4").tobytes()``. Python's protobuf can only
fill and read that field one Python float at a time (a million of them per
step for a 1M-parameter model), so the training stream's messages are
serialized and parsed here: every field but the tensors goes through
protobuf's own code; the tensors' values are copied as one block of bytes,
and so are a sparse model's table rows (SparseRows: fixed64 ids, float values).
The result is byte-for-byte what protobuf would write, so the ps cannot tell
a Python worker from a C++ one.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from parasync.proto import parasync_pb2 as pb

# What the decoders read: bytes, or any buffer of them (a memoryview).
Buffer = Union[bytes, bytearray, memoryview]

_LEN = 2  # wire type of a length-delimited field
_FLOAT32 = np.dtype("<f4")


class WireError(ValueError):
    """A message that is not valid protobuf of the expected type."""


def _varint(value: int) -> bytes:
    """The varint bytes of a non-negative int, or of an int64 (two's complement)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def _as_int64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Yields (field number, wire type, field start, value start, value end)."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire_type == 0:
            _, value_end = _read_varint(buf, pos, end)
        elif wire_type == 1:
            value_end = pos + 8
        elif wire_type == _LEN:
            length, pos = _read_varint(buf, pos, end)
            value_end = pos + length
        elif wire_type == 5:
            value_end = pos + 4
        else:
            raise WireError(f"wire type {wire_type} (groups) is not used by parasync.proto")
        if value_end > end:
            raise WireError("field runs past the end of its message")
        yield number, wire_type, field_start, pos, value_end
        pos = value_end


def _tensor_parts(array: npt.ArrayLike, with_values: bool = True) -> tuple[list[Union[bytes, memoryview]], int]:
    """The pieces of a `Tensor` message holding `array` (as float32), the
    values as a view of the array's own memory (or, without them, its shape
    alone); and their total length."""
    values = np.asarray(array, dtype=_FLOAT32, order="C")  # keeps a 0-d scalar 0-d
    shape = b"".join(_varint(int(d)) for d in values.shape)
    parts: list[Union[bytes, memoryview]] = []
    if shape:
        parts += [b"\x0a" + _varint(len(shape)) + shape]
    if values.size and with_values:
        parts += [b"\x12" + _varint(values.nbytes), values.data.cast("B")]
    return parts, sum(len(p) for p in parts)


def value_bytes(array: npt.ArrayLike) -> memoryview:
    """The array's values as little-endian float32 bytes, a view of its own
    memory where it already is such an array: what a data link carries."""
    return np.ascontiguousarray(array, dtype=_FLOAT32).data.cast("B")


def encode_tensor(array: npt.ArrayLike) -> bytes:
    """The bytes of a `Tensor` message holding `array` (converted to float32)."""
    return b"".join(_tensor_parts(array)[0])


def decode_tensor(buf: Buffer, start: int = 0, end: int | None = None, copy: bool = True
                  ) -> npt.NDArray[np.float32]:
    """The array a `Tensor` message holds, in its shape: a writable float32
    copy, or with copy=False a read-only view of `buf`'s bytes where the
    values are one packed run (for a caller that copies them where they go)."""
    view = memoryview(buf)
    end = len(view) if end is None else end
    shape = []
    chunks = []
    for number, wire_type, _, value_start, value_end in _fields(view, start, end):
        if number == 1 and wire_type == _LEN:  # packed shape
            pos = value_start
            while pos < value_end:
                dim, pos = _read_varint(view, pos, value_end)
                shape.append(_as_int64(dim))
        elif number == 1 and wire_type == 0:  # one unpacked dimension
            shape.append(_as_int64(_read_varint(view, value_start, value_end)[0]))
        elif number == 2 and wire_type == _LEN:  # packed values
            if (value_end - value_start) % 4:
                raise WireError("packed float values whose length is not a multiple of 4")
            chunks.append(np.frombuffer(view[value_start:value_end], dtype=_FLOAT32))
        elif number == 2 and wire_type == 5:  # one unpacked value
            chunks.append(np.frombuffer(view[value_start:value_end], dtype=_FLOAT32))
    # One copy out of the message, into an array the caller may change.
    if len(chunks) == 1:
        values = chunks[0].astype(np.float32, copy=copy)
    else:
        values = np.concatenate(chunks).astype(np.float32, copy=False) if chunks else np.zeros(0, np.float32)
    if any(d < 0 for d in shape):
        raise WireError(f"tensor shape {shape} has a negative dimension")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if not shape and values.size != 1:
        # A shapeless tensor with several values: keep them flat, as sent.
        return values
    if count != values.size:
        raise WireError(f"tensor of shape {shape} holds {values.size} values")
    return values.reshape(shape)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: its key, its length, its bytes."""
    return _varint(number << 3 | _LEN) + _varint(len(payload)) + payload


def _ids_field(number: int, ids: npt.NDArray[np.uint64]) -> bytes:
    """`repeated fixed64` ids, packed: little-endian 8-byte words."""
    return _field(number, ids.astype("<u8", copy=False).tobytes()) if ids.size else b""


def encode_sparse_rows(table: int, ids: npt.NDArray[np.uint64], values: Any) -> bytes:
    """A `SparseRows` message: the table's index, its ids (fixed64), its rows
    (float32, row after row), each packed as protobuf packs them."""
    flat = np.ascontiguousarray(values, dtype=_FLOAT32).ravel()
    return ((b"\x08" + _varint(table) if table else b"") + _ids_field(2, ids)
            + (_field(3, flat.tobytes()) if flat.size else b""))


def encode_row_request(table: int, ids: npt.NDArray[np.uint64]) -> bytes:
    """A `RowRequest` message: a table's index and the ids asked for."""
    return (b"\x08" + _varint(table) if table else b"") + _ids_field(2, ids)


def push_rows(row_gradients: Sequence[bytes], pulls: Sequence[bytes]) -> bytes:
    """PushRequest fields row_gradients (16) and pull (17), from encoded
    SparseRows and RowRequest messages: appended to a push's bytes."""
    return b"".join(_field(16, m) for m in row_gradients) + b"".join(_field(17, m) for m in pulls)


def encode_pull(requests: Sequence[bytes], lookup_only: bool) -> bytes:
    """A `TrainRequest` whose pull (field 4) asks for `requests` (encoded
    RowRequest messages, at most one per table)."""
    inner = b"".join(_field(1, r) for r in requests) + (b"\x10\x01" if lookup_only else b"")
    return _field(4, inner)


def decode_sparse_rows(buf: memoryview, start: int, end: int
                       ) -> tuple[int, npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
    """(table, ids, values) of a `SparseRows` message: copies, the ids uint64
    and the values float32 (flat), packed or not as they came."""
    table = 0
    ids: list[npt.NDArray[Any]] = []
    values: list[npt.NDArray[Any]] = []
    for number, wire_type, _, value_start, value_end in _fields(buf, start, end):
        if number == 1 and wire_type == 0:
            table = _as_int64(_read_varint(buf, value_start, value_end)[0])
        elif number == 2 and wire_type in (_LEN, 1):
            if (value_end - value_start) % 8:
                raise WireError("packed fixed64 ids whose length is not a multiple of 8")
            ids.append(np.frombuffer(buf[value_start:value_end], dtype="<u8"))
        elif number == 3 and wire_type in (_LEN, 5):
            if (value_end - value_start) % 4:
                raise WireError("packed float values whose length is not a multiple of 4")
            values.append(np.frombuffer(buf[value_start:value_end], dtype=_FLOAT32))
    return (table, np.concatenate(ids).astype(np.uint64) if ids else np.zeros(0, np.uint64),
            np.concatenate(values).astype(np.float32) if values else np.zeros(0, np.float32))


def encode_push(head: pb.PushRequest, gradients: Sequence[npt.ArrayLike], with_values: bool = True,
                rows: bytes = b"") -> bytes:
    """A `TrainRequest` whose push is `head` (a PushRequest without gradients)
    with `gradients` (arrays, in the order of the ps task's variables), and
    `rows` (push_rows(): a sparse model's row gradients and pulls).
    The values are copied once, into the message: its pieces are joined as
    views of the arrays' memory. Without values, the tensors carry their
    shapes only (the values go on a data link: head.values_on_data_link)."""
    head_bytes = head.SerializeToString() + rows
    parts: list[Union[bytes, memoryview]] = [b"", head_bytes]
    length = len(head_bytes)
    for gradient in gradients:
        tensor_parts, tensor_length = _tensor_parts(gradient, with_values)
        key = b"\x12" + _varint(tensor_length)  # PushRequest.gradients = 2
        parts.append(key)
        parts += tensor_parts
        length += len(key) + tensor_length
    parts[0] = b"\x12" + _varint(length)  # TrainRequest.push = 2
    return b"".join(parts)


def encode_request(request: Union[bytes, bytearray, pb.TrainRequest]) -> bytes:
    """Serializer of the Train stream: bytes pass through (encode_push, encode_pull), a
    TrainRequest (join, leave) is serialized by protobuf."""
    if isinstance(request, (bytes, bytearray)):
        return bytes(request)
    return request.SerializeToString()


def decode_shape(buf: Buffer, start: int = 0, end: int | None = None) -> tuple[tuple[int, ...], int]:
    """The shape a `Tensor` message gives, and the number of values it
    carries itself (0 when they come on a data link)."""
    view = memoryview(buf)
    end = len(view) if end is None else end
    shape = []
    carried = 0
    for number, wire_type, _, value_start, value_end in _fields(view, start, end):
        if number == 1 and wire_type == _LEN:
            pos = value_start
            while pos < value_end:
                dim, pos = _read_varint(view, pos, value_end)
                shape.append(_as_int64(dim))
        elif number == 1 and wire_type == 0:
            shape.append(_as_int64(_read_varint(view, value_start, value_end)[0]))
        elif number == 2:
            carried += (value_end - value_start) // 4 if wire_type == _LEN else 1
    if any(d < 0 for d in shape):
        raise WireError(f"tensor shape {shape} has a negative dimension")
    return tuple(shape), carried


class TrainAnswer:
    """One answer of the Train stream: `kind` is "join", "push" or "pull",
    `message` the JoinResponse, PushResponse or PullResponse without its
    tensors and rows, `tensors` the parameters it carried as arrays (in the
    order of the ps task's variable list; read-only views of the answer's
    bytes when decoded with copy=False), `rows` the table rows it carried
    (PushResponse.rows, PullResponse.rows) as (table, ids, values) arrays.
    When the answer's values come on a data link (values_on_data_link),
    `tensors` holds their shapes, and the link's reader fills arrays of them."""

    __slots__ = ("kind", "message", "tensors", "rows", "lease_epoch")

    def __init__(self, kind: str, message: Any, tensors: list[Any],
                 rows: Optional[list[tuple[int, npt.NDArray[np.uint64], npt.NDArray[np.float32]]]] = None) -> None:
        self.kind = kind
        self.message = message
        self.tensors = tensors
        self.rows = rows or []
        self.lease_epoch = 0  # TrainResponse.lease_epoch: with a backup, the epoch the ps answered under


# TrainResponse.lease_epoch's field number.
_LEASE_EPOCH = 4

# TrainResponse field -> (kind, message class, its repeated Tensor field, its repeated SparseRows field).
_ANSWERS: dict[int, tuple[str, Any, int, int]] = {1: ("join", pb.JoinResponse, 4, 0),
                                                   2: ("push", pb.PushResponse, 6, 13),
                                                   3: ("pull", pb.PullResponse, 0, 2)}


def decode_answer(data: Buffer, copy: bool = True) -> TrainAnswer:
    """Deserializer of the Train stream: a TrainResponse as a TrainAnswer
    (its tensors copies, or with copy=False views of `data`: see decode_tensor)."""
    view = memoryview(data)
    answer = None
    lease_epoch = 0
    for number, wire_type, _, start, end in _fields(view, 0, len(view)):
        if number == _LEASE_EPOCH and wire_type == 0:
            lease_epoch, _ = _read_varint(view, start, end)
            continue
        if number not in _ANSWERS or wire_type != _LEN:
            continue  # a field a newer ps sends; protobuf would skip it too
        kind, message_class, tensor_field, rows_field = _ANSWERS[number]
        rest = []
        spans = []
        rows = []
        for inner, inner_type, field_start, value_start, value_end in _fields(view, start, end):
            if inner == tensor_field and inner_type == _LEN:
                spans.append((value_start, value_end))
            elif inner == rows_field and inner_type == _LEN:
                rows.append(decode_sparse_rows(view, value_start, value_end))
            else:
                rest.append(view[field_start:value_end])
        message = message_class.FromString(b"".join(rest))
        if kind == "push" and message.values_on_data_link:
            shapes = [decode_shape(view, s, e) for s, e in spans]
            if any(carried for _, carried in shapes):
                raise WireError("an answer whose values come on the data link carries values itself")
            tensors: list[Any] = [shape for shape, _ in shapes]
        else:
            tensors = [decode_tensor(view, s, e, copy) for s, e in spans]
        answer = TrainAnswer(kind, message, tensors, rows)
    if answer is None:
        raise WireError("a Train answer with neither join nor push (nor pull)")
    answer.lease_epoch = lease_epoch
    return answer
