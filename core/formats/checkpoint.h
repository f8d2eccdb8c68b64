#pragma once

#include "proto/parasync.pb.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

// Checkpoint files in a run directory: "model.ckpt-<global_step>.pckpt".
//
// Framing: 8-byte magic "PSYNCKP1", uint64 little-endian payload length, the
// serialized proto::Checkpoint, and its SHA-256 (32 bytes). Written to a
// temporary file in the same directory, flushed and fsync'ed, then renamed,
// so a reader sees either the old set of files or the new one, never half a
// file. Thread-compatible; one writer per directory (the chief).
class CheckpointStore
{
public:
    explicit CheckpointStore(std::string directory, int maxToKeep = 5);

    // Writes a checkpoint atomically and deletes the oldest beyond maxToKeep.
    // Returns the file path. Throws InputError when the directory cannot be
    // created or written (naming it and the system's reason).
    std::string save(const proto::Checkpoint &checkpoint);

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

// Reads and verifies one checkpoint file. Throws InputError saying what is
// wrong ("bad magic", "truncated: 120 of 530 bytes", "checksum mismatch").
proto::Checkpoint readCheckpointFile(const std::string &path);

// The same checks on bytes in memory (for fuzzing and tests).
proto::Checkpoint parseCheckpointBytes(const std::string &bytes, const std::string &originForErrors);
std::string serializeCheckpoint(const proto::Checkpoint &checkpoint);

} // namespace parasync
