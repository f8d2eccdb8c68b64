"""Embedding tables on the ps tasks, as parasync-node keeps them
(docs/sparse.md, core/engine/sparse_table.h): rows addressed by 64-bit ids,
each held by the ps task its id hashes to, made on first touch from (seed,
id) alone. A batch moves only the rows it touches: the worker merges a
batch's duplicate ids (summing their gradients), sorts them, and sends each
ps task its share.

The functions here compute what the C++ side computes, bit for bit where it
matters: ps_of_row() must agree with psOfRow() for every id (a ps refuses a
row another one holds), initial_rows() with initialRow() (up to the last bit
of the C library's log and cos).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from parasync.proto import parasync_pb2 as pb

Ids = npt.NDArray[np.uint64]
Rows = npt.NDArray[np.float32]

# TableSpec's limits, as the ps checks them (core/engine/sparse_rows.cpp, tableSpecsProblem).
MAX_ROW_WIDTH = 4096
MAX_TABLES = 64
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_./-]{1,64}$")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


@dataclasses.dataclass
class TableSpec:
    """An embedding table as a model declares it (ModelSignature.tables).
    There is no vocabulary: any 64-bit id addresses a row (hashed features),
    so the table has no size, only a row width."""
    name: str  # 1-64 characters of [A-Za-z0-9_./-], distinct from the variables' names
    row_width: int  # floats per row, 1 to 4096
    id_limit: int = 0  # ids are below it (the ps refuses others); 0: any 64-bit id
    # A new row's values: N(0, init_stddev) truncated at 2 standard
    # deviations, drawn from (seed, id) alone; 0: zeros.
    init_stddev: float = 0.0
    seed: int = 0


class TableError(ValueError):
    """Table rows or ids a worker cannot send; the message says what to fix."""


def check_tables(tables: Iterable[TableSpec], variable_names: Iterable[str]) -> None:
    """Raises TableError for what the ps would refuse at the join: a bad
    name, width, limit, spread or seed, a name used twice or by a variable."""
    taken = set(variable_names)
    count = 0
    for t in tables:
        count += 1
        if not isinstance(t.name, str) or not _TABLE_NAME.match(t.name):
            raise TableError(f"table name {t.name!r} is not 1-64 characters of letters, digits, '_', '.', '/' or "
                             "'-': rename the table")
        if t.name in taken:
            raise TableError(f"table name '{t.name}' is declared twice or is also a variable's: give each table "
                             "its own name")
        taken.add(t.name)
        if not isinstance(t.row_width, (int, np.integer)) or not 1 <= t.row_width <= MAX_ROW_WIDTH:
            raise TableError(f"table '{t.name}' has rows of {t.row_width} floats: give a row_width from 1 to "
                             f"{MAX_ROW_WIDTH}")
        if not isinstance(t.id_limit, (int, np.integer)) or not 0 <= t.id_limit < 1 << 64:
            raise TableError(f"table '{t.name}' has id_limit {t.id_limit}: give 0 (any 64-bit id) or a limit "
                             "below 2^64")
        if not isinstance(t.seed, (int, np.integer)) or not 0 <= t.seed < 1 << 64:
            raise TableError(f"table '{t.name}' has seed {t.seed}: give an integer from 0 to 2^64 - 1")
        if not math.isfinite(t.init_stddev) or t.init_stddev < 0:
            raise TableError(f"table '{t.name}' has init_stddev {t.init_stddev}: give a finite spread, 0 or more "
                             "(0: rows start at zero)")
    if count > MAX_TABLES:
        raise TableError(f"the model declares {count} tables, more than {MAX_TABLES}: merge some (a table's rows "
                         "can be addressed by ids of several features)")


def mix64(z: npt.ArrayLike) -> Ids:
    """splitmix64's output function (core/engine/sparse_table.cpp, mix64),
    element-wise on uint64 (numpy's unsigned arithmetic wraps modulo 2^64,
    as C++'s does)."""
    z = np.array(z, dtype=np.uint64, ndmin=1)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def ps_of_row(ids: npt.ArrayLike, num_ps: int) -> npt.NDArray[np.int64]:
    """Which ps task holds each row: psOfRow(id, num_ps), a splitmix64 mix of
    the id modulo the number of ps tasks, for an array of uint64 ids."""
    if num_ps <= 0:
        raise ValueError(f"ps_of_row: the number of ps tasks must be positive, got {num_ps}")
    return (mix64(ids) % np.uint64(num_ps)).astype(np.int64)


def _uniform_open(bits: Ids) -> npt.NDArray[np.float64]:
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53


def _truncated_normal(stream: Ids) -> npt.NDArray[np.float64]:
    """truncatedNormal(stream) of sparse_table.cpp for each stream: Box-Muller
    from counter-based draws, redrawn with the next two counters beyond 2."""
    out = np.empty(stream.shape, dtype=np.float64)
    pending = np.arange(stream.size)
    counter = 1
    while pending.size:
        s = stream[pending]
        # counter * golden modulo 2^64 in Python's integers: numpy warns of a scalar's wrap.
        u1 = _uniform_open(mix64(s + np.uint64(counter * int(_GOLDEN) & _MASK)))
        u2 = _uniform_open(mix64(s + np.uint64((counter + 1) * int(_GOLDEN) & _MASK)))
        z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
        kept = np.abs(z) <= 2.0
        out[pending[kept]] = z[kept]
        pending = pending[~kept]
        counter += 2
    return out


def initial_rows(table: TableSpec, ids: npt.ArrayLike) -> Rows:
    """The values the rows of `ids` start with (initialRow of
    sparse_table.cpp): what a ps makes on a first pull, and what a lookup of
    a row not made yet answers. len(ids) x row_width float32."""
    ids = np.array(ids, dtype=np.uint64, ndmin=1).ravel()
    width = int(table.row_width)
    stddev = float(np.float32(table.init_stddev))  # the ps holds it as a float
    if stddev == 0.0:
        return np.zeros((ids.size, width), dtype=np.float32)
    row_key = mix64(mix64(np.uint64(table.seed) ^ _GOLDEN) ^ ids)
    column_keys = mix64(np.arange(width, dtype=np.uint64) + _GOLDEN)
    streams = mix64(row_key[:, None] ^ column_keys[None, :])
    return (stddev * _truncated_normal(streams.ravel())).astype(np.float32).reshape(ids.size, width)


def as_ids(ids: Any, table: TableSpec, what: str) -> Ids:
    """`ids` as a flat uint64 array, checked: integers (numpy, Python, or a
    CPU tensor's), none negative, each below the table's id_limit."""
    array = np.asarray(ids)
    if array.dtype == object:
        try:
            values = [int(i) for i in array.ravel()]
        except (TypeError, ValueError):
            raise TableError(f"{what} of table '{table.name}' are not integers: give 64-bit ids "
                             "(numpy uint64 for hashed ids)") from None
        bad = [i for i in values if not 0 <= i < 1 << 64]
        if bad:
            raise TableError(f"{what} of table '{table.name}' include {bad[0]}, which is not a 64-bit id: ids are "
                             "0 to 2^64 - 1")
        array = np.array(values, dtype=np.uint64)
    elif array.size == 0:
        array = np.zeros(0, dtype=np.uint64)  # [] reads as float64; nothing to check
    elif array.dtype.kind == "i":
        if (array < 0).any():
            raise TableError(f"{what} of table '{table.name}' include the negative id {int(array[array < 0][0])}: "
                             "ids are 0 to 2^64 - 1; hashed ids beyond 2^63 go as numpy uint64, not int64")
        array = array.astype(np.uint64)
    elif array.dtype.kind != "u":
        raise TableError(f"{what} of table '{table.name}' are {array.dtype}, not integers: give 64-bit ids "
                         "(numpy uint64 for hashed ids)")
    array = array.astype(np.uint64, copy=False).ravel()
    if table.id_limit and array.size and (array >= np.uint64(table.id_limit)).any():
        over = int(array[array >= np.uint64(table.id_limit)][0])
        raise TableError(f"{what} of table '{table.name}' include id {over}, at or above the table's id_limit "
                         f"{table.id_limit}: give ids below it (or declare a larger id_limit, 0 for any)")
    return array


def as_row_values(values: Any, count: int, table: TableSpec, what: str) -> Rows:
    """`values` as count x row_width float32: one row per id (a flat array of
    count values for rows of 1)."""
    array = np.asarray(values, dtype=np.float32)
    width = int(table.row_width)
    if array.shape == (count,) and width == 1:
        array = array.reshape(count, 1)
    if array.shape != (count, width):
        raise TableError(f"the {what} of table '{table.name}' have shape {array.shape}, but {count} ids of rows "
                         f"of {width} need shape ({count}, {width}): one row per id")
    return array


def merge_rows(ids: Ids, values: Rows) -> tuple[Ids, Rows]:
    """Ids ascending, each once, with the rows of a repeated id summed: a
    batch's row gradients as they travel (a ps refuses repeats)."""
    if ids.size == 0:
        return ids, values.reshape(0, values.shape[-1] if values.ndim > 1 else 1)
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    if starts.size == ordered.size:
        return ordered, values[order]
    return ordered[starts], np.add.reduceat(values[order], starts, axis=0)


def _state_arrays(state: Any, width: int) -> tuple[Ids, Rows, Rows]:
    """A TableState's ids, rows and per-row optimizer slots as arrays."""
    ids = np.array(state.ids, dtype=np.uint64)
    values = np.array(state.values, dtype=np.float32).reshape(ids.size, width)
    slots = np.array(state.slots, dtype=np.float32).reshape(ids.size, len(state.slot_names) * width)
    return ids, values, slots


def join_table_states(tables: Sequence[TableSpec], shards: Sequence[Any]) -> list[pb.TableState]:
    """Every ps task's rows of each table (their ShardState.tables), joined
    into one TableState per table with the ids ascending: what a checkpoint
    holds (joinTableStates)."""
    joined = []
    for t, table in enumerate(tables):
        parts = [shard[t] for shard in shards if len(shard) > t]
        if any(p.name != table.name for p in parts):
            raise TableError(f"a ps task's rows of table {t} are named {[p.name for p in parts]}, the model's "
                             f"'{table.name}': give every task the same model")
        slot_names = next((list(p.slot_names) for p in parts if p.ids), [])
        arrays = [_state_arrays(p, int(table.row_width)) for p in parts if p.ids]
        state = pb.TableState(name=table.name, slot_names=slot_names)
        if arrays:
            ids = np.concatenate([a[0] for a in arrays])
            order = np.argsort(ids, kind="stable")
            state.ids.extend(ids[order].tolist())
            state.values.extend(np.concatenate([a[1] for a in arrays])[order].ravel().tolist())
            state.slots.extend(np.concatenate([a[2] for a in arrays])[order].ravel().tolist())
        joined.append(state)
    return joined


def split_table_states(tables: Sequence[TableSpec], whole: Sequence[Any], num_ps: int) -> list[list[pb.TableState]]:
    """Per ps task, its rows of each whole table (a checkpoint's): the rows
    whose ids hash to it (splitTableStates), one TableState per table."""
    shards: list[list[pb.TableState]] = [[] for _ in range(num_ps)]
    by_name = {state.name: state for state in whole}
    for table in tables:
        state = by_name.get(table.name)
        if state is None:
            for shard in shards:
                shard.append(pb.TableState(name=table.name))
            continue
        ids, values, slots = _state_arrays(state, int(table.row_width))
        owner = ps_of_row(ids, num_ps)
        for k, shard in enumerate(shards):
            mine = owner == k
            part = pb.TableState(name=table.name, slot_names=list(state.slot_names))
            part.ids.extend(ids[mine].tolist())
            part.values.extend(values[mine].ravel().tolist())
            part.slots.extend(slots[mine].ravel().tolist())
            shard.append(part)
    return shards


# -- rows past one message: a ps task's on the wire, a checkpoint's in its file (docs/sparse.md, "Larger than a
# message"; core/formats/shard_pieces.h) --

# The pieces take at most this share of --max_message_bytes (kShardPieceShare).
PIECE_SHARE = 2


def shard_needs_pieces(shard: Any, max_message_bytes: int) -> bool:
    """Whether a ShardState must travel in pieces (ReadShard,
    InitializeInPieces) to fit `max_message_bytes` with the message around it."""
    return shard.ByteSize() > piece_bytes_within(max_message_bytes)


def piece_bytes_within(max_message_bytes: int) -> int:
    """The bytes a piece may take to travel in a message of at most
    `max_message_bytes` (pieceBytesWithin)."""
    return max_message_bytes // PIECE_SHARE


def take_table_rows(shard: Any) -> list[pb.TableState]:
    """Moves every table's rows out of `shard` (a ShardState, or a
    Checkpoint) and returns them, one TableState per table; `shard` keeps
    each table's name and slot names: what the first message carries."""
    rows = []
    for table in shard.tables:
        rows.append(pb.TableState(name=table.name, ids=table.ids, values=table.values, slots=table.slots))
        del table.ids[:]
        del table.values[:]
        del table.slots[:]
    return rows


def row_pieces(tables: Sequence[Any], piece_bytes: int) -> Iterable[pb.TableState]:
    """The rows of `tables` in pieces of at most `piece_bytes` bytes
    (serialized), each one TableState of one table (its
    name, ids ascending, their values and slots), table after table; at
    least one row a piece, whatever its size (forEachRowPiece)."""
    for table in tables:
        # The piece's own bytes beyond its rows': the name, a tag and a length a field.
        budget = piece_bytes - (3 * (1 + 10) + 2 + len(table.name))
        count = len(table.ids)
        if count == 0:
            continue
        if len(table.values) % count or len(table.slots) % count:
            yield table  # not whole rows: for the receiver to refuse in its words
            continue
        width, slot_values = len(table.values) // count, len(table.slots) // count
        per_piece = max(1, budget // (8 + 4 * (width + slot_values)))
        for first in range(0, count, per_piece):
            last = min(count, first + per_piece)
            yield pb.TableState(name=table.name, ids=table.ids[first:last],
                                values=table.values[first * width:last * width],
                                slots=table.slots[first * slot_values:last * slot_values])


def add_row_piece(shard: Any, piece: Any) -> None:
    """Appends a piece of rows to the table of its name in `shard` (a
    ShardState, or a Checkpoint); raises TableError, saying what is wrong, for a table the
    first message did not name, rows that are not whole or ids not after
    the rows before (addRowPiece)."""
    table = next((t for t in shard.tables if t.name == piece.name), None)
    if table is None:
        raise TableError(f"rows of table '{piece.name}', which the first message did not name")
    count = len(piece.ids)
    if count == 0 or len(piece.values) % count or len(piece.slots) % count:
        raise TableError(f"a piece of table '{piece.name}' with {count} ids, {len(piece.values)} values and "
                         f"{len(piece.slots)} slot values: whole rows, at least one, were due")
    if table.ids:
        if (len(table.values) * count != len(piece.values) * len(table.ids)
                or len(table.slots) * count != len(piece.slots) * len(table.ids)):
            raise TableError(f"a piece of table '{piece.name}' whose rows are unlike the rows before it")
        if piece.ids[0] <= table.ids[-1]:
            raise TableError(f"a piece of table '{piece.name}' starting at id {piece.ids[0]}, not after the last "
                             f"id before it ({table.ids[-1]})")
    table.ids.extend(piece.ids)
    table.values.extend(piece.values)
    table.slots.extend(piece.slots)
