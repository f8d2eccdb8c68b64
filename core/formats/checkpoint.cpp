#include "formats/checkpoint.h"

#include "base/error.h"

#include <QByteArray>
#include <QCryptographicHash>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include <fcntl.h>
#include <unistd.h>

namespace parasync {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = {'P', 'S', 'Y', 'N', 'C', 'K', 'P', '1'};
constexpr size_t kMagicSize = sizeof(kMagic);
constexpr size_t kHeaderSize = kMagicSize + 8;
constexpr size_t kChecksumSize = 32;
constexpr char kPrefix[] = "model.ckpt-";
constexpr char kSuffix[] = ".pckpt";
constexpr char kTmpMarker[] = ".tmp-";

std::string sha256(const char *data, size_t size)
{
    return QCryptographicHash::hash(QByteArrayView(data, qsizetype(size)), QCryptographicHash::Sha256).toStdString();
}

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

void writeFileDurably(const std::string &path, const std::string &bytes)
{
    std::FILE *file = std::fopen(path.c_str(), "wb");
    if (!file)
        throw InputError("cannot write checkpoint '" + path + "': " + systemError(errno));
    const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size() && std::fflush(file) == 0
                         && ::fsync(fileno(file)) == 0;
    const int error = errno;
    const bool closed = std::fclose(file) == 0;
    if (!written || !closed) {
        std::remove(path.c_str());
        throw InputError("cannot write checkpoint '" + path + "': " + systemError(written ? errno : error));
    }
}

} // namespace

std::string serializeCheckpoint(const proto::Checkpoint &checkpoint)
{
    std::string payload;
    if (!checkpoint.SerializeToString(&payload))
        throw InputError("cannot serialize checkpoint at global step " + std::to_string(checkpoint.global_step()));
    std::string bytes(kMagic, kMagicSize);
    uint64_t length = payload.size();
    for (int i = 0; i < 8; ++i) {
        bytes.push_back(char(length & 0xff));
        length >>= 8;
    }
    bytes += payload;
    bytes += sha256(payload.data(), payload.size());
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
    const std::string origin = originForErrors.empty() ? std::string("checkpoint") : originForErrors;
    const size_t minimum = kHeaderSize + kChecksumSize;
    const size_t magicBytes = std::min(bytes.size(), kMagicSize);
    if (bytes.compare(0, magicBytes, kMagic, magicBytes) != 0)
        throw InputError(origin + ": bad magic (not a Parasync checkpoint)");
    if (bytes.size() < kHeaderSize)
        throw InputError(origin + ": truncated: " + std::to_string(bytes.size()) + " of at least "
                         + std::to_string(minimum) + " bytes");

    uint64_t length = 0;
    for (int i = 7; i >= 0; --i)
        length = (length << 8) | static_cast<unsigned char>(bytes[kMagicSize + size_t(i)]);
    if (length > std::numeric_limits<uint64_t>::max() - minimum)
        throw InputError(origin + ": payload length " + std::to_string(length)
                         + " is impossible (the header is corrupt)");
    const uint64_t expected = length + minimum;
    if (bytes.size() < expected)
        throw InputError(origin + ": truncated: " + std::to_string(bytes.size()) + " of " + std::to_string(expected)
                         + " bytes");
    if (bytes.size() > expected)
        throw InputError(origin + ": " + std::to_string(bytes.size() - expected)
                         + " unexpected bytes after the checksum (expected " + std::to_string(expected) + " bytes)");

    const char *payload = bytes.data() + kHeaderSize;
    if (sha256(payload, size_t(length)) != bytes.substr(kHeaderSize + size_t(length)))
        throw InputError(origin + ": checksum mismatch (the file is corrupt)");
    proto::Checkpoint checkpoint;
    if (!checkpoint.ParseFromArray(payload, int(length)))
        throw InputError(origin + ": payload does not parse (corrupt, or from an incompatible version)");
    return checkpoint;
}

proto::Checkpoint readCheckpointFile(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw InputError(path + ": cannot read checkpoint: " + systemError(errno));
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad())
        throw InputError(path + ": cannot read checkpoint: " + systemError(errno));
    return parseCheckpointBytes(bytes, path);
}

CheckpointStore::CheckpointStore(std::string directory, int maxToKeep)
    : m_directory(std::move(directory))
    , m_maxToKeep(maxToKeep)
{
}

std::string CheckpointStore::save(const proto::Checkpoint &checkpoint)
{
    if (checkpoint.global_step() < 0)
        throw InputError("cannot save a checkpoint at negative global step "
                         + std::to_string(checkpoint.global_step()));
    std::error_code error;
    fs::create_directories(m_directory, error);
    if (error)
        throw InputError("cannot create checkpoint directory '" + m_directory + "': " + error.message());

    const std::string bytes = serializeCheckpoint(checkpoint);
    const std::string name = fileName(checkpoint.global_step());
    const std::string path = (fs::path(m_directory) / name).string();
    // In the same directory, so that rename(2) is atomic; the pid keeps two
    // writers (a chief and its accidental twin) off each other's file.
    const std::string temporary
        = (fs::path(m_directory) / ("." + name + kTmpMarker + std::to_string(::getpid()))).string();

    writeFileDurably(temporary, bytes);
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
