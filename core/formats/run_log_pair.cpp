// The two processes of a replicated ps:0 writing one run directory in
// turn: the lock they take, what each reads of the other's records, and a
// takeover's replay of what the deposed primary may have logged already.

#include "formats/run_log.h"

#include "base/error.h"
#include "formats/step_log_reader.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <cerrno>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace parasync {

namespace {

// The step records in a piece of the step log, each named by its global
// step, worker and worker clock: one gradient's record, whichever process
// of a replicated pair wrote it. Lines that do not parse (a partial first
// line of a tail) are passed over. `oldest` is the lowest global step seen;
// `failover`, whether the piece holds a failover record.
std::set<std::tuple<int64_t, int, int64_t>> stepRecordsIn(const QByteArray &text, int64_t *oldest = nullptr,
                                                          bool *failover = nullptr)
{
    std::set<std::tuple<int64_t, int, int64_t>> keys;
    for (const QByteArray &line : text.split('\n')) {
        const QJsonObject o = QJsonDocument::fromJson(line).object();
        const QString type = o.value(QStringLiteral("type")).toString();
        if (failover && type == QLatin1String("failover"))
            *failover = true;
        if (type != QLatin1String("step"))
            continue;
        const int64_t step = int64_t(o.value(QStringLiteral("global_step")).toDouble());
        if (oldest)
            *oldest = *oldest < 0 ? step : std::min(*oldest, step);
        keys.emplace(step, o.value(QStringLiteral("worker")).toInt(),
                     int64_t(o.value(QStringLiteral("worker_clock")).toDouble()));
    }
    return keys;
}

// A file's bytes from `from` to its end.
QByteArray bytesFrom(std::FILE *file, off_t from)
{
    struct stat st
    {
    };
    if (::fstat(::fileno(file), &st) != 0 || st.st_size <= from)
        return {};
    QByteArray text(qsizetype(st.st_size - from), Qt::Uninitialized);
    const ssize_t got = ::pread(::fileno(file), text.data(), size_t(text.size()), from);
    text.truncate(got > 0 ? qsizetype(got) : 0);
    return text;
}

} // namespace

void RunLog::skipStepsAlreadyLogged()
{
    // The last MiB holds the last thousands of steps: far more than a
    // takeover can find unconfirmed (the changes of one round trip).
    constexpr qint64 kTail = 1 << 20;
    QFile file(QString::fromStdString(m_directory + "/" + run_files::kStepLog));
    if (!file.open(QIODevice::ReadOnly))
        return;
    bool truncated = file.size() > kTail;
    if (truncated)
        file.seek(file.size() - kTail);
    QByteArray tail = file.readAll();
    // Just after a rotation steps.jsonl is short: the rest of the tail is
    // the end of the newest segment (decompressed whole, kept in part; a
    // takeover meets this once in some hundred thousand steps).
    const QString directory = QString::fromStdString(m_directory);
    if (const QList<int> segments = StepLogReader::segmentIndices(directory); !truncated && !segments.isEmpty()) {
        const int n = segments.back();
        const QString plain = StepLogReader::segmentPath(directory, n, false);
        const QString path = QFileInfo::exists(plain) ? plain : StepLogReader::segmentPath(directory, n, true);
        if (gzFile segment = gzopen(QFile::encodeName(path).constData(), "rb")) {
            QByteArray before;
            char buffer[1 << 16];
            for (int got; (got = gzread(segment, buffer, sizeof buffer)) > 0;) {
                before.append(buffer, got);
                if (before.size() > 2 * kTail)
                    before.remove(0, before.size() - kTail);
            }
            gzclose(segment);
            if (before.size() + tail.size() > kTail)
                before.remove(0, before.size() + tail.size() - kTail);
            tail.prepend(before);
            truncated = true;
        }
    }
    int64_t oldest = -1;
    auto logged = stepRecordsIn(tail, &oldest);
    std::lock_guard lock(m_mutex);
    m_alreadyLogged.merge(logged);
    m_replaying = true;
    // What the taker-over holds reaches further back than the tail (it keeps
    // its last thousands of events): those older steps are all in the log.
    // The oldest step of the tail itself may have lines before the tail's
    // start, so it counts as written too.
    if (truncated)
        m_loggedThrough = oldest;
}

void RunLog::stopSkipping()
{
    std::lock_guard lock(m_mutex);
    m_alreadyLogged.clear();
    m_loggedThrough = -1;
    m_replaying = false;
}

RunLog::DirectoryLock::DirectoryLock(int fd) : m_fd(fd)
{
    // The other writer holds the lock for one batch's write, unless it was
    // stopped in the middle of one (SIGSTOP, a debugger): after kLockWait
    // this one writes without the lock rather than hold up training (its
    // queue is bounded), at worst logging a step the other logs too. A file
    // system without flock() leaves the writes as they were before pairs
    // shared a log.
    const auto giveUp = std::chrono::steady_clock::now() + kLockWait;
    while (!(m_held = ::flock(m_fd, LOCK_EX | LOCK_NB) == 0) && errno == EWOULDBLOCK
           && std::chrono::steady_clock::now() < giveUp)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

RunLog::DirectoryLock::~DirectoryLock()
{
    if (m_held)
        ::flock(m_fd, LOCK_UN);
}

void RunLog::dropStepsWrittenByAnother(std::vector<proto::TelemetryEvent> &batch)
{
    // What the other wrote to this writer's file since its last write...
    QByteArray written = bytesFrom(m_stepLog, m_stepLogEnd);
    m_stepLogEnd += off_t(written.size());
    const std::string path = m_directory + "/" + run_files::kStepLog;
    struct stat named
    {
    };
    struct stat ours
    {
    };
    if (::stat(path.c_str(), &named) == 0 && ::fstat(::fileno(m_stepLog), &ours) == 0
        && (named.st_ino != ours.st_ino || named.st_dev != ours.st_dev)) {
        // ...and, when it rotated the log (this writer's file is a segment
        // now), everything in the new steps.jsonl.
        bool empty = false;
        try {
            std::FILE *current = openForAppend(path, &empty);
            std::fclose(m_stepLog);
            m_stepLog = current;
            const QByteArray theirs = bytesFrom(m_stepLog, 0);
            written += theirs;
            m_stepLogEnd = off_t(theirs.size());
        } catch (const InputError &) {
            // Written where it was; the next batch tries again.
        }
    }
    if (!written.isEmpty()) {
        // A failover record from the other: it took over, and this process
        // is the deposed primary.
        auto others = stepRecordsIn(written, nullptr, &m_deposed);
        m_writtenByAnother.merge(others);
        // The newest only: a pair writes in turn for the moments around a
        // takeover; this bounds a split brain's cost.
        while (m_writtenByAnother.size() > kRememberedSteps)
            m_writtenByAnother.erase(m_writtenByAnother.begin());
    }
    if (m_writtenByAnother.empty())
        return; // nobody else wrote: the common case
    // Which of this batch's steps are the other's records already: for the
    // deposed process, any the other wrote (the same update replayed, or
    // one of the other's own, which replaced this process's unacknowledged
    // one); for the process that took over, only the steps it replayed --
    // its own later steps are new updates, whatever numbers they share with
    // the deposed one's records that did not survive.
    std::lock_guard lock(m_mutex);
    std::erase_if(batch, [&](const proto::TelemetryEvent &event) {
        if (!event.has_step())
            return false;
        const std::tuple key{event.step().global_step(), event.step().worker(), event.step().worker_clock()};
        return m_writtenByAnother.contains(key) && (m_deposed || m_replayed.contains(key));
    });
}

} // namespace parasync
