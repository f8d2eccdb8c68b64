#include "bench_support.h"

#include "base/error.h"
#include "base/port_holder.h"
#include "wire/cluster_control.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QThread>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <sys/prctl.h>
#include <unistd.h>

namespace parasync::bench {

using namespace Qt::StringLiterals;

QString nodeBinary()
{
    const QString fromEnvironment = qEnvironmentVariable("PARASYNC_NODE");
    if (!fromEnvironment.isEmpty())
        return fromEnvironment;
    const QString sibling = QCoreApplication::applicationDirPath() + u"/../app/parasync-node/parasync-node";
    return QFileInfo::exists(sibling) ? QFileInfo(sibling).canonicalFilePath() : QStringLiteral("parasync-node");
}

QString logDirectory()
{
    static const QString directory = [] {
        QString path = qEnvironmentVariable("PARASYNC_BENCH_LOGS");
        if (path.isEmpty())
            path = QDir::tempPath() + QStringLiteral("/parasync-bench-%1").arg(::getpid());
        QDir().mkpath(path);
        return path;
    }();
    return directory;
}

ChildProcess::ChildProcess(QString program, QStringList arguments, QString name)
    : m_program(std::move(program))
    , m_arguments(std::move(arguments))
{
    // Numbered, so a repetition's log never overwrites an earlier one's.
    static int s_started = 0;
    m_logPath = logDirectory() + QStringLiteral("/%1-").arg(++s_started, 4, 10, QLatin1Char('0')) + name + u".log";
}

ChildProcess::~ChildProcess()
{
    stop();
}

void ChildProcess::countAllocations()
{
    m_allocCountsPath = m_logPath + u".alloc"_s;
}

AllocCounts ChildProcess::allocations() const
{
    return m_allocCountsPath.isEmpty() ? AllocCounts{} : readAllocCounts(qPrintable(m_allocCountsPath));
}

void ChildProcess::start()
{
    m_process = std::make_unique<QProcess>();
    if (!m_allocCountsPath.isEmpty()) {
        QFile::remove(m_allocCountsPath); // the counters start at zero
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.insert(u"LD_PRELOAD"_s, QStringLiteral(PARASYNC_ALLOC_COUNTER));
        environment.insert(u"PARASYNC_ALLOC_COUNTS"_s, m_allocCountsPath);
        m_process->setProcessEnvironment(environment);
    }
    m_process->setProcessChannelMode(QProcess::MergedChannels);
    m_process->setStandardOutputFile(m_logPath, QIODevice::Truncate);
    m_process->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
    m_process->start(m_program, m_arguments);
    m_process->waitForStarted(10000);
}

bool ChildProcess::waitForLog(const QString &text, std::chrono::milliseconds timeout)
{
    QDeadlineTimer deadline(timeout);
    QFile log(m_logPath);
    for (;;) {
        if (log.open(QIODevice::ReadOnly)) {
            const bool found = QString::fromUtf8(log.readAll()).contains(text);
            log.close();
            if (found)
                return true;
        }
        if (deadline.hasExpired() || !isRunning())
            return false;
        QThread::msleep(20);
    }
}

void ChildProcess::stop(std::chrono::milliseconds grace)
{
    if (!isRunning())
        return;
    m_process->terminate();
    if (!m_process->waitForFinished(int(grace.count()))) {
        m_process->kill();
        m_process->waitForFinished(5000);
    }
}

bool ChildProcess::isRunning() const
{
    return m_process && m_process->state() != QProcess::NotRunning;
}

qint64 ChildProcess::pid() const
{
    return m_process ? m_process->processId() : 0;
}

BenchCluster::BenchCluster(QString name, int numPs, int numWorkers, QStringList trainingFlags, bool backups)
    : m_name(std::move(name))
    , m_trainingFlags(std::move(trainingFlags))
{
    for (int i = 0; i < numPs; ++i)
        m_psHosts << QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
    for (int i = 0; backups && i < numPs; ++i)
        m_backupHosts << QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
    for (int i = 0; i < numWorkers; ++i)
        m_workerHosts << QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
}

BenchCluster::~BenchCluster()
{
    stop();
}

bool BenchCluster::start(QString *error, const std::function<void()> &beforeChief, std::chrono::milliseconds timeout)
{
    // A free port picked for a task may be taken by another program before
    // the task binds it (this machine is shared): then try new ports.
    for (int attempt = 1;; ++attempt) {
        bool portTaken = false;
        if (startOnce(error, beforeChief, timeout, &portTaken) || !portTaken || attempt == 3)
            return error->isEmpty();
        stop();
        for (auto &host : m_psHosts)
            host = QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
        for (auto &host : m_backupHosts)
            host = QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
        for (auto &host : m_workerHosts)
            host = QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
        error->clear();
    }
}

bool BenchCluster::startOnce(QString *error, const std::function<void()> &beforeChief,
                             std::chrono::milliseconds timeout, bool *portTaken)
{
    QStringList cluster{QStringLiteral("--ps_hosts=") + m_psHosts.join(u','),
                        QStringLiteral("--worker_hosts=") + m_workerHosts.join(u',')};
    if (!m_backupHosts.isEmpty())
        cluster << QStringLiteral("--ps_backup_hosts=") + m_backupHosts.join(u',');
    auto task = [&](const QString &job, int index) {
        const QString name = m_name + u'-' + job + QString::number(index);
        auto child = std::make_unique<ChildProcess>(
            nodeBinary(),
            cluster + QStringList{u"--job_name="_s + job, u"--task_index="_s + QString::number(index)}
                + m_trainingFlags,
            name);
        child->start();
        m_tasks.push_back(std::move(child));
        return m_tasks.back().get();
    };
    for (int i = 0; i < m_psHosts.size(); ++i) {
        if (!task(QStringLiteral("ps"), i)->waitForLog(QStringLiteral("listening on"), timeout)) {
            *error = u"ps:"_s + QString::number(i) + u" did not start; see "_s + m_tasks.back()->logPath();
            *portTaken = true;
            return false;
        }
    }
    for (int i = 0; i < m_backupHosts.size(); ++i) {
        if (!task(QStringLiteral("ps_backup"), i)->waitForLog(QStringLiteral("follows its primary"), timeout)) {
            *error = u"ps:"_s + QString::number(i) + u"'s backup did not follow; see "_s + m_tasks.back()->logPath();
            *portTaken = true;
            return false;
        }
    }
    // Non-chief workers first: they wait for the chief, which starts the steps.
    for (int i = int(m_workerHosts.size()) - 1; i >= 1; --i)
        task(QStringLiteral("worker"), i);
    if (beforeChief)
        beforeChief();
    task(QStringLiteral("worker"), 0);
    QDeadlineTimer deadline(timeout);
    while (!deadline.hasExpired()) {
        try {
            const auto s = status();
            const bool allTraining
                = s.initialized() && s.workers_size() == m_workerHosts.size()
                  && std::all_of(s.workers().begin(), s.workers().end(), [](const auto &w) {
                         return w.phase() != proto::WORKER_PHASE_UNSPECIFIED && w.phase() != proto::WAITING_FOR_CHIEF;
                     });
            if (allTraining)
                return true;
        } catch (const InputError &) {
        }
        QThread::msleep(20);
    }
    *error = u"the cluster did not start training in time; logs in "_s + logDirectory();
    return false;
}

void BenchCluster::stop()
{
    // Workers first, so ps:0 does not log them as dead for nothing.
    for (auto it = m_tasks.rbegin(); it != m_tasks.rend(); ++it)
        (*it)->stop();
    m_tasks.clear();
}

proto::ClusterStatusResponse BenchCluster::status() const
{
    return getClusterStatus(ps0Address());
}

ResultFile::ResultFile(QString program, bool quick) : m_program(std::move(program)), m_quick(quick) {}

Samples &ResultFile::add(std::string group, std::string name, std::string unit)
{
    if (auto *existing = find(group, name))
        return *existing;
    m_samples.push_back({std::move(group), std::move(name), std::move(unit), {}, {}});
    return m_samples.back();
}

Samples *ResultFile::find(const std::string &group, const std::string &name)
{
    for (auto &s : m_samples)
        if (s.group == group && s.name == name)
            return &s;
    return nullptr;
}

bool ResultFile::write(const QString &path) const
{
    if (path.isEmpty())
        return true;
    QJsonArray results;
    for (const auto &s : m_samples) {
        QJsonArray values;
        for (double v : s.values)
            values.append(v);
        QJsonObject record{{u"group"_s, QString::fromStdString(s.group)},
                           {u"name"_s, QString::fromStdString(s.name)},
                           {u"unit"_s, QString::fromStdString(s.unit)},
                           {u"samples"_s, values}};
        if (!s.extra.isEmpty())
            record.insert(u"extra"_s, s.extra);
        results.append(record);
    }
    const QJsonObject root{
        {u"program"_s, m_program}, {u"quick"_s, m_quick}, {u"notes"_s, m_notes}, {u"results"_s, results}};
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return false;
    file.write(QJsonDocument(root).toJson());
    return true;
}

double median(std::vector<double> values)
{
    if (values.empty())
        return std::nan("");
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double residentMiB(qint64 pid)
{
    QFile status(pid > 0 ? QStringLiteral("/proc/%1/status").arg(pid) : QStringLiteral("/proc/self/status"));
    if (!status.open(QIODevice::ReadOnly))
        return std::nan("");
    for (const QByteArray &line : status.readAll().split('\n')) {
        if (line.startsWith("VmRSS:"))
            return line.mid(6).trimmed().split(' ').front().toDouble() / 1024.0;
    }
    return std::nan("");
}

double cpuSeconds(qint64 pid)
{
    QFile stat(pid > 0 ? QStringLiteral("/proc/%1/stat").arg(pid) : QStringLiteral("/proc/self/stat"));
    if (!stat.open(QIODevice::ReadOnly))
        return std::nan("");
    // The command name (field 2) may hold spaces: count from the ')' after it.
    const QByteArray text = stat.readAll();
    const QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
    if (fields.size() < 13)
        return std::nan("");
    return (fields[11].toDouble() + fields[12].toDouble()) / double(::sysconf(_SC_CLK_TCK)); // utime + stime
}

ThreadSchedule threadSchedule(qint64 tid)
{
    QFile schedstat(QStringLiteral("/proc/self/task/%1/schedstat").arg(tid > 0 ? tid : ::getpid()));
    const QList<QByteArray> fields
        = schedstat.open(QIODevice::ReadOnly) ? schedstat.readAll().trimmed().split(' ') : QList<QByteArray>{};
    if (fields.size() < 2)
        return {std::nan(""), std::nan("")};
    return {fields[0].toDouble() / 1e9, fields[1].toDouble() / 1e9}; // nanoseconds
}

double contextSwitches(qint64 pid)
{
    // /proc/PID/status counts the main thread only; the task directory has every thread.
    double total = 0;
    const QDir tasks(QStringLiteral("/proc/%1/task").arg(pid));
    for (const QString &tid : tasks.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        QFile status(tasks.filePath(tid) + u"/status");
        if (!status.open(QIODevice::ReadOnly))
            continue;
        for (const QByteArray &line : status.readAll().split('\n')) {
            if (line.startsWith("voluntary_ctxt_switches:") || line.startsWith("nonvoluntary_ctxt_switches:"))
                total += line.mid(line.indexOf(':') + 1).trimmed().toDouble();
        }
    }
    return total;
}

} // namespace parasync::bench
