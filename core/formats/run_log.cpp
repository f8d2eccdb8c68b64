#include "formats/run_log.h"

#include "base/error.h"
#include "config/update_modes.h"
#include "formats/step_log_reader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <google/protobuf/util/json_util.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace parasync {

namespace {

// A record cut short by a kill -9 leaves the file without its last newline.
// Appending after it would glue the next record onto the torn one, making a
// line no reader can parse in the middle of the file: cut the torn record
// off first (it was never complete, so nothing complete is lost).
void dropTornLastLine(const std::string &path)
{
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return; // a new file
    struct stat st
    {
    };
    off_t end = ::fstat(fd, &st) == 0 ? st.st_size : 0;
    char last = '\n';
    if (end > 0 && (::pread(fd, &last, 1, end - 1) != 1 || last == '\n')) {
        ::close(fd);
        return;
    }
    // Back to just after the last newline, in chunks.
    char chunk[4096];
    off_t keep = 0;
    while (end > 0) {
        const off_t start = end > off_t(sizeof chunk) ? end - off_t(sizeof chunk) : 0;
        const ssize_t got = ::pread(fd, chunk, size_t(end - start), start);
        if (got <= 0)
            break;
        const char *newline = static_cast<const char *>(::memrchr(chunk, '\n', size_t(got)));
        if (newline) {
            keep = start + (newline - chunk) + 1;
            break;
        }
        end = start;
    }
    if (::ftruncate(fd, keep) != 0) {
        // Left as it is: the readers skip a torn line too.
    }
    ::close(fd);
}

// The step log's words for outcomes and phases (see run_log.h).
constexpr std::pair<proto::PushOutcome, const char *> kOutcomeNames[] = {
    {proto::APPLIED, "applied"},
    {proto::AGGREGATED, "aggregated"},
    {proto::DROPPED_STALE, "dropped_stale"},
    {proto::REJECTED_NONFINITE, "rejected_nonfinite"},
};
constexpr std::pair<proto::WorkerPhase, const char *> kPhaseNames[] = {
    {proto::WAITING_FOR_CHIEF, "waiting_for_chief"},
    {proto::TRAINING, "training"},
    {proto::BLOCKED_BY_SYNC, "blocked_by_sync"},
    {proto::BLOCKED_BY_STALENESS, "blocked_by_staleness"},
    {proto::FINISHED, "finished"},
    {proto::DEAD, "dead"},
    {proto::STOPPED, "stopped"},
    {proto::REJOINING, "rejoining"},
};

// JSON has no NaN: missing values are written as null.
std::string number(double value)
{
    if (!std::isfinite(value))
        return "null";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.9g", value);
    return buffer;
}

std::string modeJson(const proto::ModeConfig &mode)
{
    return std::string("{\"mode\":\"") + updateModeName(mode.mode())
           + "\",\"staleness\":" + std::to_string(mode.staleness())
           + ",\"replicas_to_aggregate\":" + std::to_string(mode.replicas_to_aggregate())
           + ",\"total_num_replicas\":" + std::to_string(mode.total_num_replicas())
           + (mode.learning_rate_by_staleness() ? ",\"learning_rate_by_staleness\":true" : "") + "}";
}

} // namespace

// Seconds since the epoch with microseconds: %g would round them away.
std::string jsonSeconds(double seconds)
{
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6f", seconds);
    return buffer;
}

std::string jsonQuoted(const std::string &text)
{
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buffer[8];
            std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
            out += buffer;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::FILE *RunLog::openForAppend(const std::string &path, bool *wasEmpty)
{
    dropTornLastLine(path);
    // Read too ("a+"): a writer reads what the other process of a
    // replicated pair appended (RunLog::dropStepsWrittenByAnother).
    std::FILE *file = std::fopen(path.c_str(), "a+b");
    if (!file)
        throw InputError("cannot write " + path + ": " + std::strerror(errno));
    struct stat st
    {
    };
    *wasEmpty = ::stat(path.c_str(), &st) == 0 && st.st_size == 0;
    return file;
}

RunLog::RunLog(const std::string &directory, std::vector<std::string> parameterNames,
               std::vector<std::string> metricNames, std::vector<std::string> variableNames)
    : m_directory(directory)
    , m_parameterNames(std::move(parameterNames))
    , m_metricNames(std::move(metricNames))
    , m_variableNames(std::move(variableNames))
{
    if (!QDir().mkpath(QString::fromStdString(directory)))
        throw InputError("cannot create the run directory " + directory
                         + ": check the --logdir path and its permissions");
    m_directoryFd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (m_directoryFd < 0)
        throw InputError("cannot open the run directory " + directory + ": " + std::strerror(errno));
    {
        // Under the lock: cutting a torn last line off must not cut into a
        // batch the other process of a pair is writing. (Released before the
        // writer thread starts: a flock() belongs to the descriptor, which
        // the thread shares.)
        const DirectoryLock exclusive(m_directoryFd);
        bool empty = false;
        m_stepLog = openForAppend(directory + "/" + run_files::kStepLog, &empty);
        m_stepLogEnd = fileSize(m_stepLog);
        m_metrics = openForAppend(directory + "/" + run_files::kMetrics, &empty);
        if (empty) {
            std::string header = "global_step,wall_time,worker,loss,full_loss";
            for (const auto &name : m_parameterNames)
                header += "," + name;
            for (const auto &name : m_metricNames)
                header += "," + name;
            header += "\n";
            std::fputs(header.c_str(), m_metrics);
            std::fflush(m_metrics);
        }
    }
    // Segments of an earlier process of this run go on being counted.
    const QList<int> segments = StepLogReader::segmentIndices(QString::fromStdString(directory));
    for (const int n : segments) {
        m_segmentLastStep[n] = -1;
        // One it left uncompressed (killed while compressing) is compressed now.
        if (QFileInfo::exists(StepLogReader::segmentPath(QString::fromStdString(directory), n, false)))
            m_toCompress.emplace_back(n, -1);
    }
    if (!segments.isEmpty())
        m_nextSegment = segments.back() + 1;
    m_thread = std::thread([this] { run(); });
}

RunLog::~RunLog()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_all();
    m_room.notify_all();
    m_thread.join();
    {
        std::lock_guard lock(m_compressMutex);
        m_compressorStopping = true;
    }
    m_compressWake.notify_all();
    if (m_compressor.joinable())
        m_compressor.join();
    std::fclose(m_stepLog);
    std::fclose(m_metrics);
    ::close(m_directoryFd);
}

void RunLog::setMaxBytes(int64_t maxBytes)
{
    m_maxBytes = std::max<int64_t>(0, maxBytes);
    // Sixteen segments to a budget: removing the oldest gives back a
    // sixteenth, and a compressed segment is written in well under a second.
    // At least 64 KiB, so that a tiny budget still makes whole segments.
    m_segmentBytes = m_maxBytes > 0 ? std::max<int64_t>(m_maxBytes / 16, 64 * 1024) : 0;
}

void RunLog::report(const std::string &words) const
{
    if (m_onProblem)
        m_onProblem(words);
}

void RunLog::rotate()
{
    // Another process of a replicated pair may have rotated since this one
    // counted the segments: the next number is the next free one.
    const QList<int> existing = StepLogReader::segmentIndices(QString::fromStdString(m_directory));
    if (!existing.isEmpty())
        m_nextSegment = std::max(m_nextSegment, existing.back() + 1);
    const int n = m_nextSegment++;
    const QString directory = QString::fromStdString(m_directory);
    const std::string current = m_directory + "/" + run_files::kStepLog;
    std::fclose(m_stepLog);
    m_stepLog = nullptr;
    const std::string segment = StepLogReader::segmentPath(directory, n, false).toStdString();
    if (std::rename(current.c_str(), segment.c_str()) != 0)
        report("cannot rotate " + current + " to " + segment + ": " + std::strerror(errno) + "; it goes on growing");
    bool empty = false;
    try {
        m_stepLog = openForAppend(current, &empty);
        m_stepLogEnd = fileSize(m_stepLog);
    } catch (const InputError &e) {
        // Reported as any failed write is; /dev/null keeps the writer simple.
        m_stepLog = std::fopen("/dev/null", "ab");
        std::lock_guard lock(m_mutex);
        m_problem = e.what();
    }
    {
        std::lock_guard lock(m_compressMutex);
        m_toCompress.emplace_back(n, m_keptThrough);
    }
    // Started here, by the writer, at the first rotation: what it reads (the
    // budget, the problem callback) was set before the first record().
    if (!m_compressor.joinable())
        m_compressor = std::thread([this] { compressLoop(); });
    m_compressWake.notify_all();
}

void RunLog::compressLoop()
{
    std::unique_lock lock(m_compressMutex);
    for (;;) {
        m_compressWake.wait(lock, [this] { return m_compressorStopping || !m_toCompress.empty(); });
        if (m_toCompress.empty())
            return; // stopping, nothing left
        const auto [n, lastStep] = m_toCompress.front();
        m_toCompress.pop_front();
        lock.unlock();
        compressSegment(n);
        lock.lock();
        if (lastStep >= 0 || !m_segmentLastStep.count(n))
            m_segmentLastStep[n] = lastStep;
        lock.unlock();
        keepWithinBudget();
        lock.lock();
    }
}

void RunLog::compressSegment(int n)
{
    const QString directory = QString::fromStdString(m_directory);
    const QString plain = StepLogReader::segmentPath(directory, n, false);
    const QString compressed = StepLogReader::segmentPath(directory, n, true);
    const QString temporary = compressed + QStringLiteral(".tmp");
    QFile in(plain);
    if (!in.open(QIODevice::ReadOnly))
        return; // compressed already by an earlier process
    // Level 1: the step log's JSON shrinks about sixfold at it, at a speed
    // that keeps the compressor far ahead of the writer.
    gzFile out = gzopen(QFile::encodeName(temporary).constData(), "wb1");
    bool ok = out != nullptr;
    while (ok && !in.atEnd()) {
        const QByteArray chunk = in.read(1 << 20);
        ok = gzwrite(out, chunk.constData(), unsigned(chunk.size())) == int(chunk.size());
    }
    if (out && gzclose(out) != Z_OK)
        ok = false;
    if (!ok || std::rename(QFile::encodeName(temporary).constData(), QFile::encodeName(compressed).constData()) != 0) {
        QFile::remove(temporary);
        report("cannot compress " + plain.toStdString() + " (" + std::strerror(errno) + "); it is kept as it is");
        return;
    }
    QFile::remove(plain);
}

void RunLog::keepWithinBudget()
{
    if (m_maxBytes <= 0)
        return;
    const QDir dir(QString::fromStdString(m_directory));
    const auto sizeOf = [&](const QString &name) { return QFileInfo(dir.filePath(name)).size(); };
    int64_t total = sizeOf(QLatin1String(run_files::kStepLog)) + sizeOf(QLatin1String(run_files::kMetrics));
    std::map<int, int64_t> segmentSizes;
    for (const int n : StepLogReader::segmentIndices(dir.path())) {
        const int64_t size = QFileInfo(StepLogReader::segmentPath(dir.path(), n, true)).size()
                             + QFileInfo(StepLogReader::segmentPath(dir.path(), n, false)).size();
        segmentSizes[n] = size;
        total += size;
    }
    bool removed = false;
    std::unique_lock lock(m_compressMutex);
    if (total > m_maxBytes && segmentSizes.size() <= 1 && m_toCompress.empty() && !m_saidOverBudget) {
        // metrics.csv (about a fifth of the step log's size) is never cut:
        // every step's loss stays. Past the budget with nothing left to cut,
        // the records go on, and the user is told once.
        m_saidOverBudget = true;
        lock.unlock();
        report("the run's records hold " + std::to_string(total / (1024 * 1024))
               + " MiB, more than --logdir_max_mb=" + std::to_string(m_maxBytes / (1024 * 1024))
               + " even with the step log cut to its newest segment: metrics.csv keeps every step and goes on "
                 "growing. Raise --logdir_max_mb (0 is unbounded)");
        return;
    }
    // The newest segment stays: the log always keeps its last stretch whole.
    // Only compressed ones go (a segment still queued is newer than they).
    while (total > m_maxBytes && segmentSizes.size() > 1 && m_segmentLastStep.count(segmentSizes.begin()->first)) {
        const auto [n, size] = *segmentSizes.begin();
        QFile::remove(StepLogReader::segmentPath(dir.path(), n, true));
        QFile::remove(StepLogReader::segmentPath(dir.path(), n, false));
        total -= size;
        segmentSizes.erase(segmentSizes.begin());
        const auto last = m_segmentLastStep.find(n);
        if (last != m_segmentLastStep.end()) {
            m_removedThrough = std::max(m_removedThrough, last->second);
            m_segmentLastStep.erase(last);
        }
        ++m_removedSegments;
        removed = true;
    }
    if (!removed)
        return;
    const int64_t through = m_removedThrough;
    const int segments = m_removedSegments;
    lock.unlock();
    const std::string budget = std::to_string(m_maxBytes / (1024 * 1024)) + " MiB";
    const std::string words
        = "the run's records reached their budget of " + budget + " (--logdir_max_mb): the step log's oldest "
          + std::to_string(segments) + (segments == 1 ? " segment was" : " segments were") + " removed"
          + (through >= 0 ? ", so it holds global steps after " + std::to_string(through) : std::string())
          + "; metrics.csv keeps every step. Raise --logdir_max_mb (0 is unbounded) to keep more";
    QSaveFile file(dir.filePath(QLatin1String(run_files::kRecords)));
    if (file.open(QIODevice::WriteOnly)) {
        QJsonObject o{{QStringLiteral("budget_bytes"), double(m_maxBytes)},
                      {QStringLiteral("removed_segments"), segments},
                      {QStringLiteral("removed_through_global_step"), double(through)},
                      {QStringLiteral("said"), QString::fromStdString(words)}};
        file.write(QJsonDocument(o).toJson());
        file.commit();
    }
    report(words);
}

void RunLog::record(const proto::TelemetryEvent &event)
{
    {
        std::unique_lock lock(m_mutex);
        if (event.has_step() && !m_alreadyLogged.empty()
            && (event.step().global_step() <= m_loggedThrough
                || m_alreadyLogged.contains(
                    {event.step().global_step(), event.step().worker(), event.step().worker_clock()})))
            return;
        if (m_replaying && event.has_step())
            m_replayed.emplace(event.step().global_step(), event.step().worker(), event.step().worker_clock());
        // Training waits for the disk only when the writer is this far
        // behind; without the bound a writer starved of CPU let the queue,
        // and the process, grow for as long as the run lasted.
        m_room.wait(lock, [this] { return m_queue.size() < kMaxQueued || m_stopping; });
        m_queue.push_back(event);
        ++m_queuedSeq;
    }
    m_wake.notify_one();
}

void RunLog::flush()
{
    std::unique_lock lock(m_mutex);
    const uint64_t target = m_queuedSeq;
    m_wake.notify_one();
    m_flushed.wait(lock, [&] { return m_writtenSeq >= target; });
}

void RunLog::run()
{
    std::vector<proto::TelemetryEvent> batch;
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_wake.wait_for(lock, std::chrono::milliseconds(100), [this] { return !m_queue.empty() || m_stopping; });
        batch.swap(m_queue);
        const uint64_t seq = m_queuedSeq;
        const bool stopping = m_stopping;
        lock.unlock();
        m_room.notify_all();
        writeBatch(batch);
        batch.clear();
        lock.lock();
        m_writtenSeq = seq;
        m_flushed.notify_all();
        if (stopping && m_queue.empty())
            return;
    }
}

void RunLog::writeBatch(std::vector<proto::TelemetryEvent> &batch)
{
    if (batch.empty())
        return;
    const auto now = std::chrono::steady_clock::now();
    const bool failing = !problem().empty();
    if (failing && now < m_retryAt) {
        m_droppedSince += int64_t(batch.size());
        return;
    }
    // The processes of a replicated pair write this log in turn, and a
    // deposed one may still write: one stopped (SIGSTOP) with events queued
    // writes them when it resumes, and the process that took over writes the
    // same steps from what it held, before or after. One writer at a time,
    // each reading what the other appended: each gradient's record is in the
    // log once.
    const DirectoryLock exclusive(m_directoryFd);
    dropStepsWrittenByAnother(batch);
    if (batch.empty())
        return;
    std::string steps;
    std::string metrics;
    char buffer[128];
    for (const auto &event : batch) {
        steps += formatStepLogLine(event, m_parameterNames, m_metricNames, m_variableNames);
        steps += '\n';
        if (event.has_step()
            && (event.step().outcome() == proto::APPLIED || event.step().outcome() == proto::AGGREGATED)) {
            const auto &s = event.step();
            std::snprintf(buffer, sizeof buffer, "%lld,%.6f,%d,%.9g,", static_cast<long long>(s.global_step()),
                          s.wall_time(), s.worker(), double(s.batch_loss()));
            metrics += buffer;
            if (std::isfinite(s.full_loss())) {
                std::snprintf(buffer, sizeof buffer, "%.9g", double(s.full_loss()));
                metrics += buffer;
            }
            const auto cells = [&](const auto &values, size_t count) {
                for (size_t i = 0; i < count; ++i) {
                    metrics += ',';
                    if (int(i) < values.size() && std::isfinite(values[int(i)])) {
                        std::snprintf(buffer, sizeof buffer, "%.9g", double(values[int(i)]));
                        metrics += buffer;
                    }
                }
            };
            cells(s.parameters(), m_parameterNames.size());
            cells(s.metrics(), m_metricNames.size());
            metrics += '\n';
        }
    }
    int64_t newest = m_keptThrough;
    for (const auto &event : batch)
        if (event.has_step())
            newest = std::max(newest, event.step().global_step());

    const off_t stepLogSize = fileSize(m_stepLog);
    std::string failure = append(m_stepLog, steps);
    std::string file = run_files::kStepLog;
    if (failure.empty() && !metrics.empty()) {
        failure = append(m_metrics, metrics);
        file = run_files::kMetrics;
        // Both files end at the same step: the batch's step lines go too.
        if (!failure.empty())
            cutBack(m_stepLog, stepLogSize);
    }
    if (!failure.empty()) {
        m_retryAt = now + kRetryAfter;
        m_droppedSince += int64_t(batch.size());
        if (failing)
            return; // said already
        const std::string words = "cannot write " + m_directory + "/" + file + ": " + failure + ". The run's records ("
                                  + run_files::kStepLog + ", " + run_files::kMetrics + ") stop at global step "
                                  + std::to_string(m_keptThrough)
                                  + ", every line up to it complete; training goes on, and the records are tried "
                                    "again every "
                                  + std::to_string(kRetryAfter.count()) + " s. Free space in " + m_directory
                                  + " (or give --logdir another place) to keep the rest";
        {
            std::lock_guard lock(m_mutex);
            m_problem = words;
        }
        if (m_onProblem)
            m_onProblem(words);
        return;
    }
    if (failing) {
        const std::string words = "the run's records in " + m_directory + " resume at global step "
                                  + std::to_string(newest) + ": " + std::to_string(m_droppedSince)
                                  + " records after global step " + std::to_string(m_keptThrough)
                                  + " could not be written and are missing";
        {
            std::lock_guard lock(m_mutex);
            m_problem.clear();
        }
        m_droppedSince = 0;
        if (m_onProblem)
            m_onProblem(words);
    }
    m_keptThrough = newest;
    m_stepLogEnd = fileSize(m_stepLog);
    if (m_segmentBytes > 0 && m_stepLogEnd >= m_segmentBytes)
        rotate();
}

off_t RunLog::fileSize(std::FILE *file)
{
    // The streams are flushed after every batch: their buffers are empty
    // between batches, and a file's size is where the next batch starts.
    struct stat st
    {
    };
    return ::fstat(::fileno(file), &st) == 0 ? st.st_size : -1;
}

void RunLog::cutBack(std::FILE *file, off_t size)
{
    // What stdio still buffers is dropped with the purge; what reached the
    // file of this batch is cut off, so that it ends on a complete line.
    ::__fpurge(file);
    std::clearerr(file);
    if (size >= 0 && ::ftruncate(::fileno(file), size) != 0) {
        // Left as it is (a device that takes no truncation): the readers
        // skip a torn line, and the next open cuts it off.
    }
}

std::string RunLog::append(std::FILE *file, const std::string &text)
{
    const off_t before = fileSize(file);
    errno = 0;
    const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
    if (written && std::fflush(file) == 0)
        return {};
    const std::string reason = std::strerror(errno != 0 ? errno : EIO);
    cutBack(file, before);
    return reason;
}

std::string RunLog::problem() const
{
    std::lock_guard lock(m_mutex);
    return m_problem;
}

std::string RunLog::formatStepLogLine(const proto::TelemetryEvent &event,
                                      const std::vector<std::string> &parameterNames,
                                      const std::vector<std::string> &metricNames,
                                      const std::vector<std::string> &variableNames)
{
    std::string line;
    if (event.has_step()) {
        const auto &s = event.step();
        line = "{\"type\":\"step\",\"global_step\":" + std::to_string(s.global_step()) + ",\"wall_time\":"
               + jsonSeconds(s.wall_time()) + ",\"worker\":" + std::to_string(s.worker()) + ",\"worker_clock\":"
               + std::to_string(s.worker_clock()) + ",\"computed_from_step\":" + std::to_string(s.computed_from_step())
               + ",\"staleness\":" + std::to_string(s.staleness()) + ",\"outcome\":\"" + outcomeName(s.outcome())
               + "\",\"contributions\":" + std::to_string(s.contributions())
               + ",\"batch_loss\":" + number(s.batch_loss()) + ",\"full_loss\":" + number(s.full_loss())
               + ",\"compute_us\":" + std::to_string(s.compute_us()) + ",\"push_us\":" + std::to_string(s.push_us())
               + ",\"wait_us\":" + std::to_string(s.wait_us()) + ",\"wait_reason\":\"" + phaseName(s.wait_reason())
               + "\"";
        for (size_t i = 0; i < parameterNames.size() && int(i) < s.parameters_size(); ++i)
            line += ",\"" + parameterNames[i] + "\":" + number(s.parameters(int(i)));
        // An object of its own, so a metric named like a parameter or a
        // step field cannot be taken for one.
        if (s.metrics_size() > 0 && size_t(s.metrics_size()) == metricNames.size()) {
            std::string values;
            for (size_t i = 0; i < metricNames.size(); ++i)
                values += (i ? ",\"" : "\"") + metricNames[i] + "\":" + number(s.metrics(int(i)));
            line += ",\"metrics\":{" + values + "}";
        }
        if (s.variable_summaries_size() > 0 && size_t(s.variable_summaries_size()) == variableNames.size()) {
            std::string values;
            for (size_t i = 0; i < variableNames.size(); ++i) {
                const auto &v = s.variable_summaries(int(i));
                values += (i ? ",\"" : "\"") + variableNames[i] + "\":{\"norm\":" + number(v.norm())
                          + ",\"distance_from_start\":" + number(v.distance_from_start())
                          + ",\"update_per_step\":" + number(v.update_per_step()) + "}";
            }
            line += ",\"variables\":{" + values + "}";
        }
        // Only where they say something: a rule that scaled this gradient,
        // a sampled step's probe (the step log stays as it was otherwise).
        if (s.learning_rate_scale() != 0.0f && s.learning_rate_scale() != 1.0f)
            line += ",\"learning_rate_scale\":" + number(s.learning_rate_scale());
        if (s.lease_epoch() != 0)
            line += ",\"lease_epoch\":" + std::to_string(s.lease_epoch());
        if (s.has_staleness_probe()) {
            const auto &p = s.staleness_probe();
            line += ",\"staleness_probe\":{\"stale_step\":" + std::to_string(p.stale_step())
                    + ",\"fresh_step\":" + std::to_string(p.fresh_step()) + ",\"cosine\":" + number(p.cosine())
                    + ",\"relative_error\":" + number(p.relative_error()) + "}";
        }
        line += "}";
    } else if (event.has_mode_change()) {
        const auto &m = event.mode_change();
        line = "{\"type\":\"mode_change\",\"global_step\":" + std::to_string(m.global_step())
               + ",\"wall_time\":" + jsonSeconds(m.wall_time()) + ",\"previous\":" + modeJson(m.previous())
               + ",\"current\":" + modeJson(m.current()) + ",\"requested_by\":" + jsonQuoted(m.requested_by()) + "}";
    } else if (event.has_worker_state()) {
        const auto &w = event.worker_state();
        line = "{\"type\":\"worker_state\",\"wall_time\":" + jsonSeconds(w.wall_time())
               + ",\"worker\":" + std::to_string(w.status().worker_index()) + ",\"phase\":\""
               + phaseName(w.status().phase()) + "\",\"worker_clock\":" + std::to_string(w.status().worker_clock())
               + ",\"waiting_for\":" + jsonQuoted(w.status().waiting_for()) + ",\"reason\":"
               + jsonQuoted(w.status().reason()) + ",\"straggler\":" + (w.status().straggler() ? "true" : "false")
               + ",\"seconds_per_step\":" + number(w.status().seconds_per_step()) + "}";
    } else if (event.has_checkpoint()) {
        const auto &c = event.checkpoint();
        line = "{\"type\":\"checkpoint\",\"wall_time\":" + jsonSeconds(c.wall_time())
               + ",\"global_step\":" + std::to_string(c.global_step()) + ",\"path\":" + jsonQuoted(c.path()) + "}";
    } else if (event.has_failover()) {
        const auto &f = event.failover();
        line = "{\"type\":\"failover\",\"global_step\":" + std::to_string(f.global_step())
               + ",\"wall_time\":" + jsonSeconds(f.wall_time()) + ",\"new_primary\":" + jsonQuoted(f.new_primary())
               + ",\"old_primary\":" + jsonQuoted(f.old_primary()) + ",\"epoch\":" + std::to_string(f.epoch())
               + ",\"reason\":" + jsonQuoted(f.reason()) + "}";
    }
    return line;
}

void writeRunClusterJson(const std::string &directory, const std::string &clusterJson, const std::string &trainingJson)
{
    if (!QDir().mkpath(QString::fromStdString(directory)))
        throw InputError("cannot create the run directory " + directory
                         + ": check the --logdir path and its permissions");
    QJsonObject root;
    root[QStringLiteral("cluster")] = QJsonDocument::fromJson(QByteArray::fromStdString(clusterJson)).object();
    root[QStringLiteral("training")] = QJsonDocument::fromJson(QByteArray::fromStdString(trainingJson)).object();
    QSaveFile file(QString::fromStdString(directory + "/" + run_files::kCluster));
    if (!file.open(QIODevice::WriteOnly) || file.write(QJsonDocument(root).toJson(QJsonDocument::Indented)) < 0
        || !file.commit())
        throw InputError("cannot write " + directory + "/" + run_files::kCluster + ": "
                         + file.errorString().toStdString());
}

void writeRunModelJson(const std::string &directory, const proto::ModelSignature &signature)
{
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    std::string json;
    if (!google::protobuf::util::MessageToJsonString(signature, &json, options).ok())
        throw InputError("cannot describe the model signature as JSON");
    QSaveFile file(QString::fromStdString(directory + "/" + run_files::kModel));
    if (!file.open(QIODevice::WriteOnly) || file.write(json.data(), qint64(json.size())) < 0 || !file.commit())
        throw InputError("cannot write " + directory + "/" + run_files::kModel + ": "
                         + file.errorString().toStdString());
}

bool readRunModelJson(const std::string &directory, proto::ModelSignature *signature)
{
    QFile file(QString::fromStdString(directory + "/" + run_files::kModel));
    if (!file.open(QIODevice::ReadOnly))
        return false;
    const QByteArray json = file.readAll();
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true; // a newer Parasync's fields
    proto::ModelSignature parsed;
    if (!google::protobuf::util::JsonStringToMessage(std::string(json.constData(), size_t(json.size())), &parsed,
                                                     options)
             .ok())
        return false;
    *signature = std::move(parsed);
    return true;
}

const char *outcomeName(proto::PushOutcome outcome)
{
    for (const auto &[value, name] : kOutcomeNames)
        if (value == outcome)
            return name;
    return "unknown";
}

proto::PushOutcome outcomeFromName(std::string_view name)
{
    for (const auto &[value, text] : kOutcomeNames)
        if (name == text)
            return value;
    return proto::PUSH_OUTCOME_UNSPECIFIED;
}

const char *phaseName(proto::WorkerPhase phase)
{
    for (const auto &[value, name] : kPhaseNames)
        if (value == phase)
            return name;
    return "";
}

proto::WorkerPhase phaseFromName(std::string_view name)
{
    for (const auto &[value, text] : kPhaseNames)
        if (name == text)
            return value;
    return proto::WORKER_PHASE_UNSPECIFIED;
}

} // namespace parasync
