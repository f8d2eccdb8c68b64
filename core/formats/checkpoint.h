#pragma once

#include "proto/parasync.pb.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

// Checkpoint files in a run directory: "model.ckpt-<global_step>.pckpt".
//
// Framing (version 2): the 8-byte magic "PSYNCKP2", the number of pieces
// (uint64, little-endian) and its CRC-32 (uint32, little-endian), each piece
// as its length and that length's CRC-32 (the same) and a serialized
// proto::Checkpoint, then the SHA-256 of every byte before it (32 bytes).
// A length's CRC tells a damaged length from a file cut short. The first piece holds all but the variables and the
// tables' rows (each table's name and slot names); each later piece holds variables, which follow the ones before in
// order, or rows of one table, after the rows before in id order (shard_pieces.h). A piece takes at most
// kCheckpointPieceBytes (but for a variable larger than that alone), so no
// message comes near protobuf's 2 GiB, however many rows the tables hold.
// Version 1, "PSYNCKP1" (one serialized proto::Checkpoint: the magic, its
// length, the message, its SHA-256), is read as well.
//
// Written to a temporary file in the same directory, flushed and fsync'ed,
// then renamed, so a reader sees either the old set of files or the new one,
// never half a file. Thread-compatible; one writer per directory (the chief).
class CheckpointStore
{
public:
    explicit CheckpointStore(std::string directory, int maxToKeep = 5);

    // Writes a checkpoint atomically and deletes the oldest beyond maxToKeep.
    // Returns the file path. Throws InputError when the directory cannot be
    // created or written (naming it and the system's reason). Takes the
    // checkpoint by value: its rows are moved into the pieces, not copied.
    std::string save(proto::Checkpoint checkpoint);

    struct Found
    {
        std::string path;
        proto::Checkpoint checkpoint;
    };
    // The newest checkpoint that loads and whose checksum holds. Corrupt or
    // truncated files are skipped; each is described in `skipped` (path and
    // reason) when given, so the caller can report it.
    std::optional<Found> newestValid(std::vector<std::string> *skipped = nullptr) const;

    // Paths of all checkpoint files, oldest first (by global step).
    std::vector<std::string> list() const;

    const std::string &directory() const { return m_directory; }

private:
    std::string m_directory;
    int m_maxToKeep;
};

// The checkpoint's variables whole, in the signature's order: its
// `variables`, or -- from a checkpoint written before variables could be
// partitioned -- its `shards` taken apart (variable i on shard i % shards).
std::vector<proto::VariableState> checkpointVariables(const proto::Checkpoint &checkpoint);

// The most a piece of a checkpoint file holds, serialized.
constexpr int64_t kCheckpointPieceBytes = int64_t(64) << 20;

// Reads and verifies one checkpoint file, of either version, a piece at a
// time. Throws InputError saying what is wrong ("bad magic", "truncated: 120
// of 530 bytes", "checksum mismatch", which piece holds what it may not).
proto::Checkpoint readCheckpointFile(const std::string &path);

// The same checks on bytes in memory (for fuzzing and tests).
proto::Checkpoint parseCheckpointBytes(const std::string &bytes, const std::string &originForErrors);
// A file's bytes (version 2) in memory, in pieces of at most `pieceBytes`.
std::string serializeCheckpoint(proto::Checkpoint checkpoint, int64_t pieceBytes = kCheckpointPieceBytes);

} // namespace parasync
