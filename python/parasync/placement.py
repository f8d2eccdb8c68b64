"""Where a model's variables live on the ps tasks, as parasync-node places
them (core/engine/variable_placement.h), so Python and C++ workers of one
cluster split, push and join every variable the same way.

A large variable is partitioned along dimension 0 as TensorFlow's
min_max_variable_partitioner does: at most one slice per ps task, each at
least --min_slice_bytes. Slice k of variable "W" is "W/part_k", its shape
W's with dimension 0 replaced by its rows; rows are outermost in the
row-major layout, so a slice is one contiguous run of W's values. The
pieces -- each variable's slices in order, a whole variable as one -- are
placed round-robin: the j-th lives on ps task j % num_ps. Without
partitioning that is the old rule, variable i on ps task i % num_ps. The
pieces on ps task k, in that order, are its variable list: the order of the
gradients pushed to it and of the parameters and shard states it answers
with.

The decision travels in the signature (VariableSpec.slice_rows): ps:0
refuses a worker that splits differently from the cluster.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence, TypeVar, Union

import numpy as np
import numpy.typing as npt

from parasync import tensors
from parasync.proto import parasync_pb2 as pb

if TYPE_CHECKING:
    from parasync.worker import Signature

_SignatureT = TypeVar("_SignatureT", "Signature", pb.ModelSignature)

# TensorFlow's min_max_variable_partitioner default: 256 KiB.
DEFAULT_MIN_SLICE_BYTES = 256 << 10
# More slices than this in one signature is a hostile or broken one.
MAX_SLICES = 4096
# A tensor's values travel in one repeated field: at most 2^31 - 1 of them.
_MAX_VALUES = (1 << 31) - 1
_BYTES_PER_VALUE = 4  # float32


class PlacementError(ValueError):
    """A signature whose partitioning cannot be placed, or pieces that do not
    fit the placement; the message says what is wrong."""


@dataclasses.dataclass(frozen=True)
class VariableSlice:
    """One piece of a variable that one ps task holds: the whole variable,
    or a slice of its rows."""
    variable: int  # index into the signature's variables
    part: int  # 0 .. parts - 1
    parts: int  # 1: the variable is whole
    ps: int  # the ps task holding it
    first_row: int  # along dimension 0
    rows: int  # 0 for a scalar (whole)
    offset: int  # first value, in the flattened variable
    size: int  # values
    name: str  # "<variable>/part_<k>", or the variable's name when whole
    shape: tuple[int, ...]

    @property
    def whole(self) -> bool:
        return self.parts == 1


def _variable_text(i: int, name: str) -> str:
    return f"variable {i} ('{name}')"


def _values_per_row(what: str, shape: Sequence[int]) -> int:
    """The product of dimensions 1.., checked as parasync-node checks a
    shape off the wire."""
    too_many = f"{what} claims more than 2^31 values: declare its real shape"
    per_row = 1
    for d, dim in enumerate(shape):
        if dim < 0:
            raise PlacementError(f"{what} has a negative dimension {dim}: declare each "
                                 "variable's shape as the model has it")
        if d > 0:
            per_row *= dim
            if per_row > _MAX_VALUES:
                raise PlacementError(too_many)
    rows = shape[0] if shape else 1
    if rows * per_row > _MAX_VALUES:
        raise PlacementError(too_many)
    return per_row


def _decide(what: str, shape: Sequence[int], num_ps: int, min_slice_bytes: int) -> tuple[int, ...]:
    shape = [int(d) for d in shape]
    if min_slice_bytes <= 0 or num_ps < 2 or not shape:
        return ()
    rows = shape[0]
    size = rows * _values_per_row(what, shape)
    parts = min(num_ps, rows, max(1, size * _BYTES_PER_VALUE // min_slice_bytes))
    if parts < 2:
        return ()
    return tuple(rows // parts + (1 if k < rows % parts else 0) for k in range(parts))


def slice_rows(shape: Sequence[int], num_ps: int, min_slice_bytes: int = DEFAULT_MIN_SLICE_BYTES) -> tuple[int, ...]:
    """The rows of each slice a variable of `shape` is partitioned into for
    `num_ps` ps tasks: min(num_ps, rows, bytes // min_slice_bytes) slices
    (the first rows % n one row longer), or () when it stays whole (a scalar,
    one ps task, min_slice_bytes 0, or fewer than two slices' worth)."""
    return _decide(f"a variable of shape {list(shape)}", shape, num_ps, min_slice_bytes)


def partition(signature: _SignatureT, num_ps: int, min_slice_bytes: int = DEFAULT_MIN_SLICE_BYTES) -> _SignatureT:
    """A copy of `signature` (a parasync.Signature or a ModelSignature
    message) whose variables' slice_rows say how they are partitioned over
    `num_ps` ps tasks: what every worker of the cluster decides from the same
    --min_slice_bytes. Slice rows it held before are replaced."""
    if isinstance(signature, pb.ModelSignature):
        decided = pb.ModelSignature()
        decided.CopyFrom(signature)
        for i, spec in enumerate(decided.variables):
            rows = _decide(_variable_text(i, spec.name), spec.shape, num_ps, min_slice_bytes)
            del spec.slice_rows[:]
            spec.slice_rows.extend(rows)
        return decided
    variables = [dataclasses.replace(spec, slice_rows=_decide(_variable_text(i, spec.name), spec.shape, num_ps,
                                                              min_slice_bytes))
                 for i, spec in enumerate(signature.variables)]
    return dataclasses.replace(signature, variables=variables)


def _size_text(size_bytes: int) -> str:
    if size_bytes >= 1 << 20:
        return f"{size_bytes / (1 << 20):.1f} MiB"
    if size_bytes >= 1024:
        return f"{size_bytes / 1024:.1f} KiB"
    return f"{size_bytes} bytes"


class Placement:
    """Where every variable of a signature lives (see the module's text)."""

    def __init__(self, num_ps: int, names: list[str], shapes: list[tuple[int, ...]],
                 slices: list[VariableSlice]) -> None:
        self.num_ps = num_ps
        self.names = names  # of the variables, in declaration order
        self.shapes = shapes  # of the variables, tuples
        self.slices = slices  # every piece, in placement order
        self._on_ps = [[s for s in slices if s.ps == k] for k in range(num_ps)]
        self._of_variable = [[s for s in slices if s.variable == i] for i in range(len(names))]

    @classmethod
    def from_signature(cls, signature: Union[Signature, pb.ModelSignature], num_ps: int) -> Placement:
        """The placement `signature` (a parasync.Signature or a
        ModelSignature message) declares for `num_ps` ps tasks. Checks every
        field as a hostile client could fill it; raises PlacementError."""
        if num_ps < 1:
            raise PlacementError("a cluster needs at least one ps task to hold the variables")
        names, shapes, pieces = [], [], []
        for i, spec in enumerate(signature.variables):
            shape = tuple(int(d) for d in spec.shape)
            names.append(spec.name)
            shapes.append(shape)
            per_row = _values_per_row(_variable_text(i, spec.name), shape)
            rows = shape[0] if shape else 0
            declared = [int(r) for r in getattr(spec, "slice_rows", ())]
            parts = len(declared)
            if parts == 0:
                pieces.append(dict(variable=i, part=0, parts=1, first_row=0, rows=rows, offset=0,
                                   size=rows * per_row if shape else 1, name=spec.name, shape=shape))
                continue
            if not shape:
                raise PlacementError(f"{_variable_text(i, spec.name)} is a scalar but declares slices: only a "
                                     "variable with rows can be partitioned")
            if parts == 1:
                raise PlacementError(f"{_variable_text(i, spec.name)} declares a single slice: leave slice_rows "
                                     "empty for a whole variable")
            if len(pieces) + parts > MAX_SLICES:
                raise PlacementError(f"the signature declares more than {MAX_SLICES} variable slices: partition "
                                     "into fewer, larger slices")
            first_row = 0
            for k, slice_rows_k in enumerate(declared):
                if slice_rows_k < 1 or slice_rows_k > rows - first_row:
                    raise PlacementError(f"{_variable_text(i, spec.name)} declares slice {k} of {slice_rows_k} "
                                         f"rows, but its {rows} rows leave {rows - first_row}: each slice needs "
                                         "at least one row and together they cover dimension 0")
                pieces.append(dict(variable=i, part=k, parts=parts, first_row=first_row, rows=slice_rows_k,
                                   offset=first_row * per_row, size=slice_rows_k * per_row,
                                   name=f"{spec.name}/part_{k}", shape=(slice_rows_k,) + shape[1:]))
                first_row += slice_rows_k
            if first_row != rows:
                raise PlacementError(f"{_variable_text(i, spec.name)} declares slices of {first_row} rows in all, "
                                     f"but it has {rows}: the slices must cover dimension 0 exactly")
        if len(pieces) > MAX_SLICES:
            raise PlacementError(f"the signature declares more than {MAX_SLICES} variables and slices: a model "
                                 "this fragmented is not supported")
        slices = [VariableSlice(ps=j % num_ps, **piece) for j, piece in enumerate(pieces)]
        return cls(num_ps, names, shapes, slices)

    def on(self, ps: int) -> list[VariableSlice]:
        """The pieces ps task `ps` holds, in the order of its variable list."""
        return self._on_ps[ps]

    @property
    def partitioned(self) -> bool:
        """True when some variable is split."""
        return any(not s.whole for s in self.slices)

    def describe(self, ps: int) -> str:
        """What ps task `ps` holds, in words: "W rows 0-391 of 784 (15.3 KiB),
        b (40 bytes)"; empty when it holds nothing."""
        words = []
        for s in self.on(ps):
            text = s.name if s.whole else (f"{self.names[s.variable]} rows {s.first_row}-{s.first_row + s.rows - 1} "
                                           f"of {self.shapes[s.variable][0]}")
            words.append(f"{text} ({_size_text(s.size * _BYTES_PER_VALUE)})")
        return ", ".join(words)

    # -- arrays: gradients out, parameters in -----------------------------------------------------------------

    def split(self, arrays: Sequence[Any]) -> list[list[Any]]:
        """Each ps task's pieces of `arrays` (one per variable, in declaration
        order, in the variables' shapes): a list per ps task, in the order of
        its variable list. A slice is a view of its variable's rows, not a copy."""
        out: list[list[Any]] = [[] for _ in range(self.num_ps)]
        for s in self.slices:
            array = arrays[s.variable]
            if tuple(np.shape(array)) != self.shapes[s.variable]:
                raise PlacementError(f"'{self.names[s.variable]}' has shape {tuple(np.shape(array))}, the variable "
                                     f"{self.shapes[s.variable]}")
            out[s.ps].append(array if s.whole else array[s.first_row:s.first_row + s.rows])
        return out

    def join(self, pieces: Sequence[Sequence[npt.ArrayLike]]) -> list[npt.NDArray[np.float32]]:
        """The variables (writable float32 arrays in their shapes, in
        declaration order) that `pieces` -- per ps task, the arrays it
        answered with, in the order of its variable list -- hold. A whole
        variable read from a data link is the array it was read into (the
        worker's own, writable); other values are copied once, from the
        answer into their variable."""
        for k in range(self.num_ps):
            if len(pieces[k]) != len(self.on(k)):
                raise PlacementError(f"ps:{k} answered with {len(pieces[k])} tensors, but holds "
                                     f"{len(self.on(k))} variables and slices ({self.describe(k) or 'none'})")
        out: list[Any] = [None] * len(self.names)
        for k in range(self.num_ps):
            for s, array in zip(self.on(k), pieces[k]):
                if np.size(array) != s.size:
                    raise PlacementError(f"ps:{k} sent {np.size(array)} values for '{s.name}', which holds {s.size}")
                shape = self.shapes[s.variable]
                if s.whole:
                    value = np.asarray(array, dtype=np.float32)
                    # A view of an answer's message bytes is read-only and
                    # lives as long as the message: copied. An array of its
                    # own (read from a data link) is taken as it is: at 1M
                    # parameters that copy was 0.8 ms of a 3.7 ms push
                    # (bench/analysis.md, the first table).
                    if not (value.flags.writeable and value.flags.owndata):
                        value = value.copy()
                    out[s.variable] = value.reshape(shape)
                    continue
                if out[s.variable] is None:
                    out[s.variable] = np.empty(shape, dtype=np.float32)
                out[s.variable].reshape(-1)[s.offset:s.offset + s.size] = np.reshape(array, -1)
        return out

    # -- variable states: initialising the ps tasks, checkpoints ----------------------------------------------

    def split_states(self, states: Sequence[pb.VariableState]) -> list[list[pb.VariableState]]:
        """Each ps task's pieces (VariableState messages, a list per ps task in
        the order of its variable list) of `states`: one whole VariableState
        per variable, in declaration order. A slice holds its rows of the
        value and of every optimizer slot, and the variable's update_count.
        A slot of another size than its variable is left out (the ps starts
        such a slot afresh, as it would from a whole variable)."""
        out: list[list[pb.VariableState]] = [[] for _ in range(self.num_ps)]
        for i, state in enumerate(states):
            size = int(np.prod(self.shapes[i], dtype=np.int64))
            value = _array(state.value)
            if value.size != size:
                raise PlacementError(f"'{self.names[i]}' holds {value.size} values, the variable "
                                     f"{list(self.shapes[i])} has {size}")
            slots = {name: _array(tensor).reshape(-1) for name, tensor in state.slots.items()}
            slots = {name: values for name, values in slots.items() if values.size == size}
            for s in self._of_variable[i]:
                if s.whole:
                    piece = pb.VariableState()
                    piece.CopyFrom(state)
                    piece.name = s.name
                    out[s.ps].append(piece)
                    continue
                piece = pb.VariableState(name=s.name, update_count=state.update_count)
                piece.value.ParseFromString(tensors.encode_tensor(_rows(value, s)))
                for name, values in slots.items():
                    piece.slots[name].ParseFromString(tensors.encode_tensor(_rows(values, s)))
                out[s.ps].append(piece)
        return out

    def join_states(self, shards: Sequence[Sequence[pb.VariableState]]) -> list[pb.VariableState]:
        """The whole variables (VariableState messages in declaration order)
        that `shards` -- per ps task, the VariableStates it holds, in the
        order of its variable list (ShardState.variables) -- hold: each
        variable's slices joined along dimension 0, its optimizer slots too
        (a slot only when every slice has it), update_count from the first
        slice. Raises PlacementError when a ps holds other pieces than the
        placement puts there."""
        for k in range(self.num_ps):
            held = [state.name for state in shards[k]]
            expected = [s.name for s in self.on(k)]
            if held != expected:
                raise PlacementError(f"ps:{k} holds {held}, but the placement puts {expected} there")
        pieces: list[dict[int, pb.VariableState]] = [{} for _ in self.names]
        for k in range(self.num_ps):
            for s, state in zip(self.on(k), shards[k]):
                pieces[s.variable][s.part] = state
        out = []
        for i, name in enumerate(self.names):
            slices = self._of_variable[i]
            if len(slices) == 1:
                whole = pb.VariableState()
                whole.CopyFrom(pieces[i][0])
                out.append(whole)
                continue
            states = [pieces[i][s.part] for s in slices]
            whole = pb.VariableState(name=name, update_count=states[0].update_count)
            whole.value.ParseFromString(tensors.encode_tensor(self._joined(slices, [st.value for st in states])))
            for slot in states[0].slots:
                if all(slot in st.slots and _count(st.slots[slot]) == s.size for s, st in zip(slices, states)):
                    whole.slots[slot].ParseFromString(
                        tensors.encode_tensor(self._joined(slices, [st.slots[slot] for st in states])))
            out.append(whole)
        return out

    def _joined(self, slices: list[VariableSlice], tensor_messages: Sequence[pb.Tensor]) -> npt.NDArray[np.float32]:
        i = slices[0].variable
        values = np.empty(self.shapes[i], dtype=np.float32)
        flat = values.reshape(-1)
        for s, message in zip(slices, tensor_messages):
            array = _array(message)
            if array.size != s.size:
                raise PlacementError(f"'{s.name}' holds {array.size} values, the slice {s.size}")
            flat[s.offset:s.offset + s.size] = array.reshape(-1)
        return values


def _array(tensor_message: pb.Tensor) -> npt.NDArray[np.float32]:
    """The values of a Tensor message as an array (through its bytes: a
    message's repeated floats are read one Python float at a time otherwise)."""
    return tensors.decode_tensor(tensor_message.SerializeToString())


def _count(tensor_message: pb.Tensor) -> int:
    return len(tensor_message.values)


def _rows(values: npt.NDArray[np.float32], s: VariableSlice) -> npt.NDArray[np.float32]:
    return values.reshape(-1)[s.offset:s.offset + s.size].reshape(s.shape)
