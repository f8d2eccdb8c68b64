#include "formats/checkpoint.h"

#include "base/error.h"
#include "formats/shard_pieces.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string_view>

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>
#include <zlib.h>

namespace parasync {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic1[] = {'P', 'S', 'Y', 'N', 'C', 'K', 'P', '1'};
constexpr char kMagic2[] = {'P', 'S', 'Y', 'N', 'C', 'K', 'P', '2'};
constexpr size_t kMagicSize = sizeof(kMagic1);
// The magic and a uint64: the payload's length (version 1), the number of
// pieces (version 2).
constexpr size_t kHeaderSize = kMagicSize + 8;
constexpr size_t kChecksumSize = 32;
// Version 2: a count or a length, a uint64, and its CRC-32, a uint32.
constexpr size_t kCheckedSize = 8 + 4;
// A version 1 file of an empty Checkpoint; every version 2 file is longer.
constexpr size_t kSmallestFile = kHeaderSize + kChecksumSize;
// The magic, the piece count, one piece's length, the checksum.
constexpr size_t kSmallestFile2 = kMagicSize + 2 * kCheckedSize + kChecksumSize;
// protobuf parses no message longer.
constexpr uint64_t kMostMessageBytes = uint64_t(std::numeric_limits<int32_t>::max());
constexpr char kPrefix[] = "model.ckpt-";
constexpr char kSuffix[] = ".pckpt";
constexpr char kTmpMarker[] = ".tmp-";

std::string systemError(int error)
{
    return std::strerror(error);
}

// "model.ckpt-200.pckpt" -> 200; -1 for any other name.
int64_t stepOfName(const std::string &name)
{
    const size_t prefix = std::strlen(kPrefix);
    const size_t suffix = std::strlen(kSuffix);
    if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0
        || name.compare(name.size() - suffix, suffix, kSuffix) != 0)
        return -1;
    const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
    if (digits.empty() || digits.size() > 18
        || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }))
        return -1;
    return std::stoll(digits);
}

// ".model.ckpt-200.pckpt.tmp-1234" -> 200; -1 for any other name.
int64_t stepOfTemporaryName(const std::string &name)
{
    if (name.empty() || name.front() != '.')
        return -1;
    const size_t marker = name.rfind(kTmpMarker);
    if (marker == std::string::npos)
        return -1;
    const std::string pid = name.substr(marker + std::strlen(kTmpMarker));
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }))
        return -1;
    return stepOfName(name.substr(1, marker - 1));
}

std::string fileName(int64_t step)
{
    return kPrefix + std::to_string(step) + kSuffix;
}

// Makes the rename itself durable. Some file systems cannot fsync a
// directory; the checkpoint is complete either way, so failures are ignored.
void syncDirectory(const std::string &directory)
{
    const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    (void)::fsync(fd);
    ::close(fd);
}

std::string littleEndian64(uint64_t value)
{
    std::string bytes;
    for (int i = 0; i < 8; ++i, value >>= 8)
        bytes.push_back(char(value & 0xff));
    return bytes;
}

uint64_t fromLittleEndian(const char *bytes, int size)
{
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; --i)
        value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    return value;
}

uint64_t fromLittleEndian64(const char *bytes)
{
    return fromLittleEndian(bytes, 8);
}

uint32_t crc32Of(const char *bytes, size_t size)
{
    return uint32_t(::crc32(::crc32(0, nullptr, 0), reinterpret_cast<const Bytef *>(bytes), uInt(size)));
}

// A count or a length with its CRC-32, as TFRecord frames its lengths: a
// damaged length is told from a file cut short, which a length alone cannot
// tell (both point past the end).
std::string checked(uint64_t value)
{
    std::string bytes = littleEndian64(value);
    uint32_t crc = crc32Of(bytes.data(), bytes.size());
    for (int i = 0; i < 4; ++i, crc >>= 8)
        bytes.push_back(char(crc & 0xff));
    return bytes;
}

// The value of checked() bytes; nullopt when its CRC does not hold.
std::optional<uint64_t> valueOfChecked(const char *bytes)
{
    if (crc32Of(bytes, 8) != uint32_t(fromLittleEndian(bytes + 8, 4)))
        return std::nullopt;
    return fromLittleEndian64(bytes);
}

// The checksum, with OpenSSL's SHA-256: some ten times QCryptographicHash's
// speed here, which is seconds for a table of a gigabyte.
class Sha256
{
public:
    Sha256() : m_context(EVP_MD_CTX_new())
    {
        if (!m_context || EVP_DigestInit_ex(m_context.get(), EVP_sha256(), nullptr) != 1)
            throw std::bad_alloc();
    }
    void add(const char *data, size_t size) { EVP_DigestUpdate(m_context.get(), data, size); }
    void add(const std::string &bytes) { add(bytes.data(), bytes.size()); }
    std::string result()
    {
        std::string digest(kChecksumSize, '\0');
        unsigned int size = 0;
        EVP_DigestFinal_ex(m_context.get(), reinterpret_cast<unsigned char *>(digest.data()), &size);
        return digest;
    }

private:
    struct Free
    {
        void operator()(EVP_MD_CTX *context) const { EVP_MD_CTX_free(context); }
    };
    std::unique_ptr<EVP_MD_CTX, Free> m_context;
};

using ByteSink = std::function<void(const std::string &bytes)>;

// Hands `checkpoint` to `write` as a version 2 file, piece after piece: the
// whole file is never in memory twice, and no piece is one message of all
// the rows.
void writePieces(proto::Checkpoint checkpoint, int64_t pieceBytes, const ByteSink &write)
{
    google::protobuf::RepeatedPtrField<proto::VariableState> variables;
    variables.Swap(checkpoint.mutable_variables());
    TableStates rows;
    takeTableRows(checkpoint.mutable_tables(), &rows);

    // Variables a piece: as many as fit, one at least.
    std::vector<int> firstOfPiece;
    int64_t filled = pieceBytes;
    for (int i = 0; i < variables.size(); ++i) {
        // Its bytes, and a tag and a length.
        const int64_t bytes = int64_t(variables[i].ByteSizeLong()) + 11;
        if (filled + bytes > pieceBytes) {
            firstOfPiece.push_back(i);
            filled = 0;
        }
        filled += bytes;
    }
    const int64_t pieces = 1 + int64_t(firstOfPiece.size()) + rowPieceCount(rows, pieceBytes);

    Sha256 sum;
    const auto out = [&](const std::string &bytes) {
        sum.add(bytes);
        write(bytes);
    };
    std::string payload;
    const auto piece = [&](const proto::Checkpoint &message) {
        if (!message.SerializeToString(&payload))
            throw InputError("cannot serialize checkpoint at global step " + std::to_string(checkpoint.global_step())
                             + ": a piece of " + std::to_string(message.ByteSizeLong())
                             + " bytes, more than a protobuf message holds");
        out(checked(payload.size()));
        out(payload);
    };

    out(std::string(kMagic2, kMagicSize) + checked(uint64_t(pieces)));
    piece(checkpoint);
    proto::Checkpoint later;
    for (size_t p = 0; p < firstOfPiece.size(); ++p) {
        const int last = p + 1 < firstOfPiece.size() ? firstOfPiece[p + 1] : variables.size();
        later.Clear();
        for (int i = firstOfPiece[p]; i < last; ++i)
            later.add_variables()->Swap(variables.Mutable(i));
        piece(later);
    }
    forEachRowPiece(rows, pieceBytes, [&](proto::TableState &table) {
        later.Clear();
        later.add_tables()->Swap(&table);
        piece(later);
        return true;
    });
    write(sum.result());
}

// Where a checkpoint's bytes are read from: a file, or bytes in memory.
class ByteSource
{
public:
    virtual ~ByteSource() = default;
    // Copies the next `size` bytes to `to`; false when fewer are left.
    virtual bool read(char *to, size_t size) = 0;
    // All its bytes, and those not yet read.
    virtual uint64_t size() const = 0;
    uint64_t left() const { return size() - m_position; }
    uint64_t position() const { return m_position; }

protected:
    uint64_t m_position = 0;
};

class MemorySource : public ByteSource
{
public:
    explicit MemorySource(const std::string &bytes) : m_bytes(bytes) {}
    bool read(char *to, size_t size) override
    {
        if (size > left())
            return false;
        std::memcpy(to, m_bytes.data() + m_position, size);
        m_position += size;
        return true;
    }
    uint64_t size() const override { return m_bytes.size(); }

private:
    const std::string &m_bytes;
};

class FileSource : public ByteSource
{
public:
    explicit FileSource(const std::string &path) : m_path(path), m_in(path, std::ios::binary)
    {
        std::error_code error;
        if (!m_in)
            throw InputError(path + ": cannot read checkpoint: " + systemError(errno));
        m_size = fs::file_size(path, error);
        if (error)
            throw InputError(path + ": cannot read checkpoint: " + error.message());
    }
    bool read(char *to, size_t size) override
    {
        if (size > left())
            return false;
        if (!m_in.read(to, std::streamsize(size)))
            throw InputError(m_path + ": cannot read checkpoint: "
                             + (m_in.bad() ? systemError(errno) : std::string("it was cut short while read")));
        m_position += size;
        return true;
    }
    uint64_t size() const override { return m_size; }

private:
    std::string m_path;
    std::ifstream m_in;
    uint64_t m_size = 0;
};

class CheckpointReader
{
public:
    CheckpointReader(ByteSource &in, std::string origin) : m_in(in), m_origin(std::move(origin)) {}

    proto::Checkpoint read()
    {
        char magic[kMagicSize] = {};
        const size_t magicBytes = size_t(std::min<uint64_t>(m_in.size(), kMagicSize));
        m_in.read(magic, magicBytes);
        const bool version1 = std::memcmp(magic, kMagic1, magicBytes) == 0;
        const bool version2 = std::memcmp(magic, kMagic2, magicBytes) == 0;
        if (!version1 && !version2) {
            if (magicBytes == kMagicSize && std::memcmp(magic, kMagic2, kMagicSize - 1) == 0 && magic[7] > '2'
                && magic[7] <= '9')
                throw InputError(m_origin + ": written by a newer Parasync (checkpoint format " + magic[7]
                                 + "); this one reads formats 1 and 2: restore it with the release that wrote it");
            throw InputError(m_origin + ": bad magic (not a Parasync checkpoint)");
        }
        if (version1) {
            if (m_in.size() < kHeaderSize)
                throw truncated(kSmallestFile, true);
            char header[8];
            m_in.read(header, sizeof header);
            return readVersion1(fromLittleEndian64(header));
        }
        if (m_in.size() < kMagicSize + kCheckedSize)
            throw truncated(kSmallestFile2, true);
        char header[kCheckedSize];
        m_in.read(header, sizeof header);
        m_sum.add(magic, kMagicSize);
        m_sum.add(header, sizeof header);
        const std::optional<uint64_t> pieces = valueOfChecked(header);
        if (!pieces)
            throw InputError(m_origin + ": checksum mismatch (the file is corrupt: its piece count fails its CRC)");
        return readVersion2(*pieces);
    }

private:
    proto::Checkpoint readVersion1(uint64_t length)
    {
        if (length > std::numeric_limits<uint64_t>::max() - kSmallestFile)
            throw InputError(m_origin + ": payload length " + std::to_string(length)
                             + " is impossible (the header is corrupt)");
        const uint64_t expected = length + kSmallestFile;
        if (m_in.size() < expected)
            throw truncated(expected, false);
        if (m_in.size() > expected)
            throw InputError(m_origin + ": " + std::to_string(m_in.size() - expected)
                             + " unexpected bytes after the checksum (expected " + std::to_string(expected)
                             + " bytes)");
        std::string payload(size_t(length), '\0');
        m_in.read(payload.data(), payload.size());
        m_sum.add(payload);
        checkTheSum();
        proto::Checkpoint checkpoint;
        if (!checkpoint.ParseFromString(payload))
            throw InputError(m_origin + ": payload does not parse (corrupt, or from an incompatible version)");
        return checkpoint;
    }

    proto::Checkpoint readVersion2(uint64_t pieces)
    {
        // More than 2^32 pieces of 64 MiB would be a file of 256 PiB.
        if (pieces == 0 || pieces > (uint64_t(1) << 32))
            throw InputError(m_origin + ": " + std::to_string(pieces)
                             + " pieces is impossible (the header is corrupt)");
        // Each piece takes its length at least.
        const uint64_t least = kMagicSize + kCheckedSize * (1 + pieces) + kChecksumSize;
        if (least > m_in.size())
            throw truncated(least, true);
        proto::Checkpoint whole;
        // The first thing wrong inside a piece. The checksum is checked
        // first, over the whole file: damage is reported as damage, not as
        // whatever the damaged bytes happen to say.
        std::string wrong;
        std::string payload;
        proto::Checkpoint piece;
        for (uint64_t k = 0; k < pieces; ++k) {
            char header[kCheckedSize];
            if (!m_in.read(header, sizeof header))
                throw truncated(m_in.position() + sizeof header + kChecksumSize, true);
            m_sum.add(header, sizeof header);
            const std::optional<uint64_t> checkedLength = valueOfChecked(header);
            if (!checkedLength)
                throw InputError(m_origin + ": checksum mismatch (the file is corrupt: the length of "
                                 + nameOf(k, pieces) + " fails its CRC)");
            const uint64_t length = *checkedLength;
            if (length > kMostMessageBytes)
                throw InputError(m_origin + ": " + nameOf(k, pieces) + " is " + std::to_string(length)
                                 + " bytes long, more than a piece can be (the file is corrupt)");
            if (length + kChecksumSize > m_in.left())
                throw truncated(m_in.position() + length + kChecksumSize, k + 1 < pieces);
            payload.resize(size_t(length));
            m_in.read(payload.data(), payload.size());
            m_sum.add(payload);
            if (!wrong.empty())
                continue;
            if (!piece.ParseFromString(payload))
                wrong = nameOf(k, pieces) + " does not parse (corrupt, or from an incompatible version)";
            else
                wrong = k == 0 ? takeFirst(&piece, &whole) : join(&piece, &whole, nameOf(k, pieces));
        }
        if (m_in.left() < kChecksumSize)
            throw truncated(m_in.position() + kChecksumSize, false);
        if (m_in.left() > kChecksumSize)
            throw InputError(m_origin + ": " + std::to_string(m_in.left() - kChecksumSize)
                             + " unexpected bytes after the checksum (expected "
                             + std::to_string(m_in.position() + kChecksumSize) + " bytes)");
        checkTheSum();
        if (!wrong.empty())
            throw InputError(m_origin + ": " + wrong);
        return whole;
    }

    static std::string nameOf(uint64_t k, uint64_t pieces)
    {
        return "piece " + std::to_string(k + 1) + " of " + std::to_string(pieces);
    }

    // The first piece: all but the rows, and each table once.
    static std::string takeFirst(proto::Checkpoint *piece, proto::Checkpoint *whole)
    {
        for (int i = 0; i < piece->tables_size(); ++i) {
            const proto::TableState &table = piece->tables(i);
            if (table.ids_size() > 0 || table.values_size() > 0 || table.slots_size() > 0)
                return "piece 1 holds rows of table '" + table.name() + "': they belong in the later pieces";
            for (int j = 0; j < i; ++j)
                if (piece->tables(j).name() == table.name())
                    return "piece 1 names table '" + table.name() + "' twice";
        }
        whole->Swap(piece);
        return {};
    }

    // A later piece: variables, or a table's rows, and nothing else.
    static std::string join(proto::Checkpoint *piece, proto::Checkpoint *whole, const std::string &name)
    {
        std::vector<const google::protobuf::FieldDescriptor *> fields;
        piece->GetReflection()->ListFields(*piece, &fields);
        for (const auto *field : fields)
            if (field->number() != proto::Checkpoint::kVariablesFieldNumber
                && field->number() != proto::Checkpoint::kTablesFieldNumber)
                return name + " holds " + field->name()
                       + ", which only the first piece may: later pieces hold variables and tables' rows";
        for (proto::VariableState &variable : *piece->mutable_variables())
            whole->add_variables()->Swap(&variable);
        for (proto::TableState &table : *piece->mutable_tables())
            if (std::string wrong = addRowPiece(whole->mutable_tables(), std::move(table)); !wrong.empty())
                return name + ": " + wrong;
        piece->Clear();
        return {};
    }

    void checkTheSum()
    {
        char expected[kChecksumSize];
        m_in.read(expected, kChecksumSize);
        if (m_sum.result() != std::string_view(expected, kChecksumSize))
            throw InputError(m_origin + ": checksum mismatch (the file is corrupt)");
    }

    InputError truncated(uint64_t expected, bool atLeast) const
    {
        return InputError(m_origin + ": truncated: " + std::to_string(m_in.size()) + " of "
                          + (atLeast ? "at least " : "") + std::to_string(expected) + " bytes");
    }

    ByteSource &m_in;
    std::string m_origin;
    Sha256 m_sum;
};

struct CloseFile
{
    void operator()(std::FILE *file) const { std::fclose(file); }
};

// Writes the file at `path`, flushed and fsync'ed, with what `produce` hands
// its sink; removes it and throws InputError naming it when that fails.
void writeFileDurably(const std::string &path, const std::function<void(const ByteSink &)> &produce)
{
    const auto failure
        = [&](int error) { return InputError("cannot write checkpoint '" + path + "': " + systemError(error)); };
    std::unique_ptr<std::FILE, CloseFile> file(std::fopen(path.c_str(), "wb"));
    if (!file)
        throw failure(errno);
    try {
        produce([&](const std::string &bytes) {
            if (std::fwrite(bytes.data(), 1, bytes.size(), file.get()) != bytes.size())
                throw failure(errno);
        });
        if (std::fflush(file.get()) != 0 || ::fsync(fileno(file.get())) != 0)
            throw failure(errno);
        if (std::fclose(file.release()) != 0)
            throw failure(errno);
    } catch (...) {
        file.reset();
        std::remove(path.c_str());
        throw;
    }
}

} // namespace

std::string serializeCheckpoint(proto::Checkpoint checkpoint, int64_t pieceBytes)
{
    std::string bytes;
    writePieces(std::move(checkpoint), pieceBytes, [&](const std::string &piece) { bytes += piece; });
    return bytes;
}

std::vector<proto::VariableState> checkpointVariables(const proto::Checkpoint &checkpoint)
{
    if (checkpoint.variables_size() > 0 || checkpoint.shards_size() == 0)
        return {checkpoint.variables().begin(), checkpoint.variables().end()};
    const int numShards = checkpoint.shards_size();
    std::vector<proto::VariableState> variables;
    for (const auto &shard : checkpoint.shards()) {
        for (int j = 0; j < shard.variables_size(); ++j) {
            // In 64 bits: a damaged file's ps_index must not overflow into a valid slot.
            const int64_t index = int64_t(shard.ps_index()) + int64_t(j) * numShards;
            if (index < 0 || index >= int64_t(checkpoint.signature().variables_size()))
                continue;
            if (size_t(index) >= variables.size())
                variables.resize(size_t(index) + 1);
            variables[size_t(index)] = shard.variables(j);
        }
    }
    return variables;
}

proto::Checkpoint parseCheckpointBytes(const std::string &bytes, const std::string &originForErrors)
{
    MemorySource source(bytes);
    return CheckpointReader(source, originForErrors.empty() ? std::string("checkpoint") : originForErrors).read();
}

proto::Checkpoint readCheckpointFile(const std::string &path)
{
    FileSource source(path);
    return CheckpointReader(source, path).read();
}

CheckpointStore::CheckpointStore(std::string directory, int maxToKeep)
    : m_directory(std::move(directory))
    , m_maxToKeep(maxToKeep)
{
}

std::string CheckpointStore::save(proto::Checkpoint checkpoint)
{
    if (checkpoint.global_step() < 0)
        throw InputError("cannot save a checkpoint at negative global step "
                         + std::to_string(checkpoint.global_step()));
    std::error_code error;
    fs::create_directories(m_directory, error);
    if (error)
        throw InputError("cannot create checkpoint directory '" + m_directory + "': " + error.message());

    const std::string name = fileName(checkpoint.global_step());
    const std::string path = (fs::path(m_directory) / name).string();
    // In the same directory, so that rename(2) is atomic; the pid keeps two
    // writers (a chief and its accidental twin) off each other's file.
    const std::string temporary
        = (fs::path(m_directory) / ("." + name + kTmpMarker + std::to_string(::getpid()))).string();

    writeFileDurably(temporary,
                     [&](const ByteSink &write) { writePieces(std::move(checkpoint), kCheckpointPieceBytes, write); });
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        const int renameError = errno;
        std::remove(temporary.c_str());
        throw InputError("cannot write checkpoint '" + path + "': " + systemError(renameError));
    }
    syncDirectory(m_directory);

    // As tf.train.Saver: 0 (or less) keeps every checkpoint.
    if (m_maxToKeep > 0) {
        std::vector<std::string> files = list();
        std::erase(files, path);
        const size_t keepOthers = size_t(m_maxToKeep) - 1;
        // A failed deletion leaves one checkpoint too many; not worth failing the save.
        for (size_t i = 0; i + keepOthers < files.size(); ++i)
            fs::remove(files[i], error);
    }
    return path;
}

std::optional<CheckpointStore::Found> CheckpointStore::newestValid(std::vector<std::string> *skipped) const
{
    std::optional<Found> found;
    const std::vector<std::string> files = list();
    for (auto it = files.rbegin(); it != files.rend() && !found; ++it) {
        try {
            found = Found{*it, readCheckpointFile(*it)};
        } catch (const InputError &e) {
            if (skipped)
                skipped->push_back(e.what());
        }
    }
    if (!found)
        return found;

    // Temporaries are what a crash in save() leaves; those from before the
    // newest valid checkpoint can never become one.
    std::error_code error;
    const int64_t newestStep = stepOfName(fs::path(found->path).filename().string());
    const auto newestTime = fs::last_write_time(found->path, error);
    if (error)
        return found;
    for (const auto &entry : fs::directory_iterator(m_directory, error)) {
        const int64_t step = stepOfTemporaryName(entry.path().filename().string());
        if (step < 0)
            continue;
        std::error_code entryError;
        const auto time = fs::last_write_time(entry.path(), entryError);
        if (!entryError && (step < newestStep || time < newestTime))
            fs::remove(entry.path(), entryError);
    }
    return found;
}

std::vector<std::string> CheckpointStore::list() const
{
    std::vector<std::pair<int64_t, std::string>> found;
    std::error_code error;
    for (const auto &entry : fs::directory_iterator(m_directory, error)) {
        const int64_t step = stepOfName(entry.path().filename().string());
        std::error_code entryError;
        if (step >= 0 && entry.is_regular_file(entryError))
            found.emplace_back(step, entry.path().string());
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> paths;
    paths.reserve(found.size());
    for (auto &[step, path] : found)
        paths.push_back(std::move(path));
    return paths;
}

} // namespace parasync
