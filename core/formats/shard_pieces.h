#pragma once

// A ps task's shard, or a checkpoint, in pieces that each fit a protobuf
// message. A dense variable travels whole with every step, so it fits
// --max_message_bytes by definition; an embedding table's rows do not: a ps
// task holding 10M rows of 16 floats with Adagrad's state holds 1.3 GB, gRPC
// refuses any message over the limit (64 MiB by default), and protobuf any
// message over 2 GiB. ReadShard, InitializeInPieces and the replication
// stream's `shard_rows` records carry the rows this way (parasync.proto), and
// so does a checkpoint file (checkpoint.h).

#include "proto/parasync.pb.h"

#include <cstdint>
#include <functional>
#include <string>

namespace parasync {

using TableStates = google::protobuf::RepeatedPtrField<proto::TableState>;

// The pieces take at most this share of --max_message_bytes: room for the
// message around them and protobuf's tags and lengths.
constexpr int64_t kShardPieceShare = 2;

// The bytes a piece may take when it travels in a message of at most
// `maxMessageBytes`.
constexpr int64_t pieceBytesWithin(int64_t maxMessageBytes)
{
    return maxMessageBytes / kShardPieceShare;
}

// Whether `shard` must travel in pieces to fit `maxMessageBytes`, with the
// message around it.
bool shardNeedsPieces(const proto::ShardState &shard, int64_t maxMessageBytes);

// Moves every table's rows out of `tables` into `rows` (one TableState per
// table, in order), leaving each table's name and slot names: what the
// first message carries.
void takeTableRows(TableStates *tables, TableStates *rows);

// How many pieces forEachRowPiece makes of `tables`.
int64_t rowPieceCount(const TableStates &tables, int64_t pieceBytes);

// Calls `emit` with the rows of `tables` in pieces of at most `pieceBytes`
// bytes (serialized), each one TableState of one table (its name, ids
// ascending, their values and slots), table after table; at least one row a
// piece, whatever its size. Stops when `emit` returns false and returns
// false then.
bool forEachRowPiece(const TableStates &tables, int64_t pieceBytes,
                     const std::function<bool(proto::TableState &)> &emit);

// Appends a piece to the table of its name in `tables`. Returns what is
// wrong, in words, when there is no such table or the piece is not whole
// rows of it; empty when it was added. The receiver's own checks (the ps
// task's, when it is initialised from them) see the rows in the end.
std::string addRowPiece(TableStates *tables, proto::TableState &&piece);

} // namespace parasync
