#include "formats/event_file.h"

#include "base/error.h"

#include <boost/crc.hpp>

#include <QDir>
#include <QFile>
#include <QSysInfo>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

namespace parasync {

namespace {

// TFRecord header: uint64 length + masked CRC of those 8 bytes; footer:
// masked CRC of the data.
constexpr size_t kHeaderBytes = sizeof(uint64_t) + sizeof(uint32_t);
constexpr size_t kFooterBytes = sizeof(uint32_t);

void appendLittleEndian(std::string *out, uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        out->push_back(char((value >> (8 * i)) & 0xff));
}

uint64_t readLittleEndian(const char *data, int bytes)
{
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i)
        value = (value << 8) | uint8_t(data[i]);
    return value;
}

const std::vector<double> &defaultBucketLimits()
{
    static const std::vector<double> limits = [] {
        std::vector<double> positive;
        for (double v = 1.0e-12; v < 1.0e20; v *= 1.1)
            positive.push_back(v);
        positive.push_back(DBL_MAX);
        std::vector<double> all;
        all.reserve(2 * positive.size() + 1);
        for (auto it = positive.rbegin(); it != positive.rend(); ++it)
            all.push_back(-*it);
        all.push_back(0.0);
        all.insert(all.end(), positive.begin(), positive.end());
        return all;
    }();
    return limits;
}

std::string hostName()
{
    std::string host = QSysInfo::machineHostName().toStdString();
    // The name becomes part of a file name.
    std::replace(host.begin(), host.end(), '/', '_');
    return host.empty() ? std::string("localhost") : host;
}

} // namespace

uint32_t crc32c(const void *data, size_t size)
{
    // CRC-32C: reflected Castagnoli polynomial, initial and final XOR all ones.
    boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
    crc.process_bytes(data, size);
    return crc.checksum();
}

uint32_t maskedCrc32c(const void *data, size_t size)
{
    const uint32_t crc = crc32c(data, size);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frameRecord(const std::string &data)
{
    std::string record;
    record.reserve(kHeaderBytes + data.size() + kFooterBytes);
    appendLittleEndian(&record, data.size(), 8);
    appendLittleEndian(&record, maskedCrc32c(record.data(), 8), 4);
    record += data;
    appendLittleEndian(&record, maskedCrc32c(data.data(), data.size()), 4);
    return record;
}

tensorboard::HistogramProto makeHistogram(const std::vector<double> &values)
{
    const std::vector<double> &limits = defaultBucketLimits();
    std::vector<double> counts(limits.size(), 0.0);
    double min = 0, max = 0, sum = 0, sumSquares = 0, num = 0;
    for (double v : values) {
        if (!std::isfinite(v))
            continue; // tf.summary.histogram refuses them; one NaN must not hide the rest
        const size_t bucket
            = std::min(size_t(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin()), limits.size() - 1);
        counts[bucket] += 1;
        min = num == 0 ? v : std::min(min, v);
        max = num == 0 ? v : std::max(max, v);
        num += 1;
        sum += v;
        sumSquares += v * v;
    }
    tensorboard::HistogramProto histogram;
    histogram.set_min(min);
    histogram.set_max(max);
    histogram.set_num(num);
    histogram.set_sum(sum);
    histogram.set_sum_squares(sumSquares);
    // As TensorFlow's Histogram::EncodeToProto: a run of empty buckets
    // becomes one bucket ending where the run ends.
    for (size_t i = 0; i < counts.size();) {
        double end = limits[i];
        double count = counts[i];
        ++i;
        if (count <= 0) {
            while (i < counts.size() && counts[i] <= 0) {
                end = limits[i];
                count = counts[i];
                ++i;
            }
        }
        histogram.add_bucket_limit(end);
        histogram.add_bucket(count);
    }
    return histogram;
}

EventFileWriter::EventFileWriter(const std::string &directory)
{
    if (!QDir().mkpath(QString::fromStdString(directory)))
        throw InputError("cannot create the run directory " + directory);
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string base = directory + "/" + event_files::kPrefix + std::to_string(int64_t(now)) + "." + hostName();
    m_path = base;
    // A task restarted within the same second must not append a second
    // file_version into the middle of the first file.
    if (QFile::exists(QString::fromStdString(m_path)))
        m_path = base + "." + std::to_string(::getpid());
    m_file = std::fopen(m_path.c_str(), "wb");
    if (!m_file)
        throw InputError("cannot write " + m_path + ": " + std::strerror(errno));
    tensorboard::Event first;
    first.set_wall_time(now);
    first.set_file_version(event_files::kFileVersion);
    if (!write(first))
        throw InputError("cannot write " + m_path + ": " + std::strerror(errno));
}

EventFileWriter::~EventFileWriter()
{
    if (m_file)
        std::fclose(m_file);
}

bool EventFileWriter::write(const tensorboard::Event &event)
{
    const std::string record = frameRecord(event.SerializeAsString());
    return std::fwrite(record.data(), 1, record.size(), m_file) == record.size() && std::fflush(m_file) == 0;
}

std::vector<tensorboard::Event> readEventFile(const std::string &path)
{
    QFile file(QString::fromStdString(path));
    if (!file.open(QIODevice::ReadOnly))
        throw InputError("cannot read the event file " + path + ": " + file.errorString().toStdString());
    const QByteArray bytes = file.readAll();
    std::vector<tensorboard::Event> events;
    size_t offset = 0;
    const size_t size = size_t(bytes.size());
    while (offset < size) {
        const std::string where
            = path + ": record " + std::to_string(events.size() + 1) + " at byte " + std::to_string(offset);
        if (size - offset < kHeaderBytes)
            throw InputError(where + " is cut short (" + std::to_string(size - offset)
                             + " bytes left, a record header needs 12): the file is truncated");
        const char *header = bytes.constData() + offset;
        const uint64_t length = readLittleEndian(header, 8);
        if (uint32_t(readLittleEndian(header + 8, 4)) != maskedCrc32c(header, 8))
            throw InputError(where + ": the length's CRC does not match: not an event file, or a damaged one");
        if (length > size - offset - kHeaderBytes || size - offset - kHeaderBytes - length < kFooterBytes)
            throw InputError(where + " is cut short (it needs " + std::to_string(length + kFooterBytes)
                             + " bytes after its header, the file has " + std::to_string(size - offset - kHeaderBytes)
                             + "): the file is truncated");
        const char *data = header + kHeaderBytes;
        if (uint32_t(readLittleEndian(data + length, 4)) != maskedCrc32c(data, size_t(length)))
            throw InputError(where + ": the data's CRC does not match: the file is damaged");
        tensorboard::Event event;
        if (!event.ParseFromArray(data, int(length)))
            throw InputError(where + " holds no valid Event message");
        if (events.empty() && event.file_version().rfind("brain.Event:", 0) != 0)
            throw InputError(path
                             + " does not start with a file_version event (\"brain.Event:2\"): "
                               "not a TensorBoard event file");
        events.push_back(std::move(event));
        offset += kHeaderBytes + length + kFooterBytes;
    }
    if (events.empty())
        throw InputError("the event file " + path + " is empty");
    return events;
}

std::vector<std::string> findEventFiles(const std::string &directory)
{
    const QDir dir(QString::fromStdString(directory));
    QFileInfoList entries = dir.entryInfoList({QLatin1String(event_files::kPrefix) + QLatin1Char('*')}, QDir::Files);
    const auto seconds = [](const QFileInfo &info) {
        return info.fileName().mid(int(std::strlen(event_files::kPrefix))).section(QLatin1Char('.'), 0, 0).toLongLong();
    };
    std::sort(entries.begin(), entries.end(), [&](const QFileInfo &a, const QFileInfo &b) {
        return std::pair(seconds(a), a.fileName()) < std::pair(seconds(b), b.fileName());
    });
    std::vector<std::string> paths;
    for (const QFileInfo &entry : entries)
        paths.push_back(entry.filePath().toStdString());
    return paths;
}

} // namespace parasync
