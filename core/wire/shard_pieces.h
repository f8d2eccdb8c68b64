#pragma once

// A ps task's shard in pieces that each fit a message. A dense variable
// travels whole with every step, so it fits --max_message_bytes by
// definition; an embedding table's rows do not: a ps task holding 10M rows
// of 16 floats with Adagrad's state holds 1.3 GB, and gRPC refuses any
// message over the limit (64 MiB by default). ReadShard,
// InitializeInPieces and the replication stream's `shard_rows` records carry
// the rows this way (parasync.proto).

#include "proto/parasync.pb.h"

#include <cstdint>
#include <functional>
#include <string>

namespace parasync {

// The pieces take at most this share of --max_message_bytes: room for the
// message around them and protobuf's tags and lengths.
constexpr int64_t kShardPieceShare = 2;

// Whether `shard` must travel in pieces to fit `maxMessageBytes`, with the
// message around it.
bool shardNeedsPieces(const proto::ShardState &shard, int64_t maxMessageBytes);

// Moves every table's rows out of `shard` into `rows` (one TableState per
// table, in order), leaving each table's name and slot names: what the
// first message carries.
void takeTableRows(proto::ShardState *shard, google::protobuf::RepeatedPtrField<proto::TableState> *rows);

// How many pieces forEachRowPiece makes of `tables`.
int64_t rowPieceCount(const google::protobuf::RepeatedPtrField<proto::TableState> &tables, int64_t maxMessageBytes);

// Calls `emit` with the rows of `tables` in pieces of at most
// maxMessageBytes / kShardPieceShare bytes (serialized), each one TableState
// of one table (its name, ids ascending, their values and slots), table
// after table; at least one row a piece, whatever its size. Stops when `emit` returns false and
// returns false then.
bool forEachRowPiece(const google::protobuf::RepeatedPtrField<proto::TableState> &tables, int64_t maxMessageBytes,
                     const std::function<bool(proto::TableState &)> &emit);

// Appends a piece to the table of its name in `shard`. Returns what is
// wrong, in words, when there is no such table or the piece is not whole
// rows of it; empty when it was added. The shard's own checks (the ps
// task's, when it is initialised from it) see the rows in the end.
std::string addRowPiece(proto::ShardState *shard, proto::TableState &&piece);

} // namespace parasync
