// parseCheckpointBytes on arbitrary bytes. The SHA-256 keeps random bytes
// from ever reaching the payload, so each input is also tried with its
// framing repaired, which is what a checkpoint damaged before it was
// checksummed, or forged, looks like: as format 1 (length and checksum
// recomputed over the bytes after the header) and, when it is format 2, with
// its checksum recomputed over the bytes before it.
#include "base/error.h"
#include "formats/checkpoint.h"

#include <QByteArray>
#include <QCryptographicHash>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace parasync;

namespace {

constexpr size_t kHeaderSize = 16;
constexpr size_t kChecksumSize = 32;

std::string sha256(const std::string &bytes)
{
    return QCryptographicHash::hash(QByteArray::fromStdString(bytes), QCryptographicHash::Sha256).toStdString();
}

std::string framed(const std::string &payload)
{
    std::string bytes = "PSYNCKP1";
    uint64_t length = payload.size();
    for (int i = 0; i < 8; ++i, length >>= 8)
        bytes.push_back(char(length & 0xff));
    bytes += payload;
    bytes += sha256(payload);
    return bytes;
}

// Map entries in key order, so that equal messages give equal bytes.
std::string canonicalBytes(const google::protobuf::Message &message)
{
    std::string bytes;
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
    coded.Trim();
    return bytes;
}

void parseAndReserialize(const std::string &bytes)
{
    try {
        const proto::Checkpoint checkpoint = parseCheckpointBytes(bytes, "fuzz.pckpt");
        // What was read must write back as a checkpoint that reads the same.
        const std::string again = serializeCheckpoint(checkpoint);
        if (canonicalBytes(parseCheckpointBytes(again, "rewritten")) != canonicalBytes(checkpoint)) {
            std::fprintf(stderr, "a checkpoint reads back differently after serializeCheckpoint\n");
            std::abort();
        }
    } catch (const InputError &) {
    }
}

} // namespace

// Protobuf logs every string field with invalid UTF-8 it refuses; random
// bytes make thousands of such lines, which would bury a sanitizer report.
extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    google::protobuf::SetLogHandler(nullptr);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string bytes(reinterpret_cast<const char *>(data), size);
    parseAndReserialize(bytes);
    if (size >= kHeaderSize)
        parseAndReserialize(framed(bytes.substr(kHeaderSize)));
    if (size >= kHeaderSize + kChecksumSize && bytes.compare(0, 8, "PSYNCKP2") == 0) {
        const std::string summed = bytes.substr(0, size - kChecksumSize);
        parseAndReserialize(summed + sha256(summed));
    }
    return 0;
}
