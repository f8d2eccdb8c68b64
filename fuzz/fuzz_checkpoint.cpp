// parseCheckpointBytes on arbitrary bytes. The SHA-256 (and, in format 2,
// each length's CRC-32) keeps random bytes from ever reaching the payload, so
// each input is also tried with its framing repaired, which is what a
// checkpoint damaged before it was checksummed, or forged, looks like: as
// format 1 (length and checksum recomputed over the bytes after the header)
// and, when it is format 2, with the CRC of each count and length it holds
// and the checksum recomputed.
#include "base/error.h"
#include "formats/checkpoint.h"

#include <QByteArray>
#include <QCryptographicHash>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <zlib.h>

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

// A format 2 file's bytes with the CRC-32 of its piece count and of every
// length it reaches recomputed, and its checksum.
std::string repairedVersion2(std::string bytes)
{
    const size_t end = bytes.size() - kChecksumSize;
    const auto recheck = [&](size_t at) {
        uint32_t crc = uint32_t(::crc32(0, reinterpret_cast<const Bytef *>(bytes.data() + at), 8));
        for (int i = 0; i < 4; ++i, crc >>= 8)
            bytes[at + 8 + size_t(i)] = char(crc & 0xff);
        uint64_t value = 0;
        for (int i = 7; i >= 0; --i)
            value = (value << 8) | static_cast<unsigned char>(bytes[at + size_t(i)]);
        return value;
    };
    const uint64_t pieces = recheck(8);
    size_t at = 20;
    for (uint64_t k = 0; k < pieces && at + 12 <= end; ++k) {
        const uint64_t length = recheck(at);
        if (length > end - at - 12)
            break;
        at += 12 + size_t(length);
    }
    bytes.resize(end);
    return bytes + sha256(bytes);
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
    if (size >= kHeaderSize + 4 + kChecksumSize && bytes.compare(0, 8, "PSYNCKP2") == 0)
        parseAndReserialize(repairedVersion2(bytes));
    return 0;
}
