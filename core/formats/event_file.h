#pragma once

// TensorBoard event files, as TensorFlow's own writer makes them: a sequence
// of TFRecords (uint64 LE length, masked CRC-32C of the length, the data,
// masked CRC-32C of the data), each holding one serialized Event; the first
// Event carries file_version "brain.Event:2". Files are named
// events.out.tfevents.<seconds>.<host> so TensorBoard finds them in --logdir.

#include "proto/tensorboard.pb.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace parasync {

namespace event_files {
inline constexpr const char *kPrefix = "events.out.tfevents.";
inline constexpr const char *kFileVersion = "brain.Event:2";
} // namespace event_files

// CRC-32C (Castagnoli), as TFRecord uses it. Thread-safe.
uint32_t crc32c(const void *data, size_t size);
// TFRecord's masked CRC: the CRC rotated right by 15 bits plus 0xa282ead8,
// so that a CRC of data that itself holds CRCs stays well distributed.
uint32_t maskedCrc32c(const void *data, size_t size);
// One TFRecord around `data`.
std::string frameRecord(const std::string &data);

// TensorFlow's histogram of `values` (tf.summary.histogram): its default
// bucket limits (±1e-12 growing by 1.1 up to ±1e20, ±DBL_MAX, and 0), runs
// of empty buckets collapsed into one as TensorFlow encodes them.
tensorboard::HistogramProto makeHistogram(const std::vector<double> &values);

// Appends Events to a new event file in `directory`. Not thread-safe: one
// owner (the chief's training thread) writes.
class EventFileWriter
{
public:
    // Creates the directory if needed and the file, and writes the
    // file_version event. Throws InputError naming the path and the reason.
    explicit EventFileWriter(const std::string &directory);
    ~EventFileWriter();
    EventFileWriter(const EventFileWriter &) = delete;
    EventFileWriter &operator=(const EventFileWriter &) = delete;

    // Appends one record and flushes it to the OS (a killed process leaves
    // every complete record). Returns false when the disk refused it.
    bool write(const tensorboard::Event &event);
    const std::string &path() const { return m_path; }

private:
    std::string m_path;
    std::FILE *m_file = nullptr;
};

// Reads every record of an event file, checking both CRCs of each. Throws
// InputError naming the file, the record and its byte offset for a file that
// is not an event file, is cut short, or fails a CRC.
std::vector<tensorboard::Event> readEventFile(const std::string &path);

// The event files in `directory`, oldest first (by the seconds in the name).
std::vector<std::string> findEventFiles(const std::string &directory);

} // namespace parasync
