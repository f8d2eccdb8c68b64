#include "support/cluster_harness.h"

#include "base/port_holder.h"
#include "formats/step_log_reader.h"
#include "wire/rpc.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QFile>
#include <QJsonDocument>
#include <QThread>

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <optional>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace parasync::testing {

QString nodeBinary()
{
    const QString fromEnvironment = qEnvironmentVariable("PARASYNC_NODE");
    return fromEnvironment.isEmpty() ? QStringLiteral("parasync-node") : fromEnvironment;
}

NodeProcess::NodeProcess(QString name, QStringList arguments)
    : m_name(std::move(name))
    , m_arguments(std::move(arguments))
{
}

NodeProcess::~NodeProcess()
{
    if (isRunning()) {
        m_process->kill();
        m_process->waitForFinished(5000);
    }
}

void NodeProcess::start(const QProcessEnvironment &environment)
{
    m_process = std::make_unique<QProcess>();
    m_process->setProcessChannelMode(QProcess::MergedChannels);
    m_process->setProcessEnvironment(environment);
    // A test that crashes or is killed must not leave nodes training forever
    // (and holding ports): the kernel kills them when the test goes.
    // parasync-node takes SIGTERM and SIGINT with sigwait once its main()
    // has blocked them; one sent before that (a test that stops a task it
    // has just started, on a loaded machine: the dynamic linker alone takes
    // a while) would end it by the signal's default action, which reads as
    // a crash. Blocked from the fork on (the mask survives exec, and `ip
    // netns exec`), it waits for the node's own handling.
    m_process->setChildProcessModifier([] {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        ::sigprocmask(SIG_BLOCK, &stop, nullptr);
    });
    // ip netns exec execs the node after entering the namespace: the pid,
    // the signals and the exit code are the node's own.
    if (m_netNamespace.isEmpty())
        m_process->start(nodeBinary(), m_arguments);
    else
        m_process->start(QStringLiteral("ip"),
                         QStringList{QStringLiteral("netns"), QStringLiteral("exec"), m_netNamespace, nodeBinary()}
                             + m_arguments);
    m_process->waitForStarted(10000);
}

void NodeProcess::drain()
{
    if (!m_process)
        return;
    // QProcess moves what the node wrote from the pipe into its buffer only
    // when events are processed or waited for. Take it now, so that output()
    // holds every line written before the call: a test that learned from a
    // status call that something happened reads the node's line about it.
    while (m_process->state() == QProcess::Running && m_process->waitForReadyRead(0)) {}
    m_output += QString::fromUtf8(m_process->readAll());
}

QString NodeProcess::output()
{
    drain();
    return m_output;
}

bool NodeProcess::waitForOutput(const QString &text, std::chrono::milliseconds timeout)
{
    QDeadlineTimer deadline(timeout);
    while (!output().contains(text)) {
        if (deadline.hasExpired())
            return false;
        if (m_process->state() == QProcess::NotRunning)
            return output().contains(text);
        m_process->waitForReadyRead(50);
    }
    return true;
}

int NodeProcess::waitForExit(std::chrono::milliseconds timeout)
{
    if (!m_process)
        return -1;
    QDeadlineTimer deadline(timeout);
    while (m_process->state() != QProcess::NotRunning && !deadline.hasExpired()) {
        m_process->waitForFinished(100);
        drain();
    }
    drain();
    if (m_process->state() != QProcess::NotRunning || m_process->exitStatus() != QProcess::NormalExit)
        return -1;
    return m_process->exitCode();
}

void NodeProcess::kill()
{
    if (isRunning()) {
        ::kill(pid_t(m_process->processId()), SIGKILL);
        m_process->waitForFinished(5000);
    }
    drain();
}

void NodeProcess::terminate()
{
    if (isRunning())
        m_process->terminate();
}

bool NodeProcess::isRunning() const
{
    return m_process && m_process->state() != QProcess::NotRunning;
}

qint64 NodeProcess::pid() const
{
    return m_process ? m_process->processId() : 0;
}

LocalCluster::LocalCluster(int numPs, int numWorkers, QStringList trainingFlags, QString logdir)
    : m_trainingFlags(std::move(trainingFlags))
    , m_logdir(std::move(logdir))
{
    for (int i = 0; i < numPs; ++i)
        m_psHosts << QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
    for (int i = 0; i < numWorkers; ++i)
        m_workerHosts << QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
    m_ps.resize(size_t(numPs));
    m_workers.resize(size_t(numWorkers));
}

LocalCluster::~LocalCluster() = default;

void LocalCluster::addBackups()
{
    while (m_backupHosts.size() < m_psHosts.size()) {
        const QString address = QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
        if (!m_psHosts.contains(address) && !m_workerHosts.contains(address) && !m_backupHosts.contains(address))
            m_backupHosts << address;
    }
    m_backups.resize(size_t(m_psHosts.size()));
}

QStringList LocalCluster::ps0Pair() const
{
    QStringList pair{m_psHosts.front()};
    if (replicated())
        pair << m_backupHosts.front();
    return pair;
}

QStringList LocalCluster::clusterFlags() const
{
    QStringList flags{QStringLiteral("--ps_hosts=") + m_psHosts.join(QLatin1Char(',')),
                      QStringLiteral("--worker_hosts=") + m_workerHosts.join(QLatin1Char(','))};
    if (replicated())
        flags << QStringLiteral("--ps_backup_hosts=") + m_backupHosts.join(QLatin1Char(','));
    if (!m_logdir.isEmpty())
        flags << QStringLiteral("--logdir=") + m_logdir;
    return flags + m_trainingFlags;
}

QProcessEnvironment LocalCluster::environment() const
{
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    if (!m_token.isEmpty())
        environment.insert(QStringLiteral("PARASYNC_CLUSTER_TOKEN"), m_token);
    return environment;
}

RpcSettings LocalCluster::rpcSettings() const
{
    RpcSettings rpc;
    rpc.clusterToken = m_token.toStdString();
    rpc.tls = m_tls;
    return rpc;
}

NodeProcess &LocalCluster::startPs(int index, QStringList extraFlags)
{
    auto &slot = m_ps.at(size_t(index));
    slot = std::make_unique<NodeProcess>(
        QStringLiteral("ps:%1").arg(index),
        clusterFlags() + QStringList{QStringLiteral("--job_name=ps"), QStringLiteral("--task_index=%1").arg(index)}
            + extraFlags);
    slot->start(environment());
    return *slot;
}

NodeProcess &LocalCluster::startBackup(int index, QStringList extraFlags)
{
    auto &slot = m_backups.at(size_t(index));
    slot = std::make_unique<NodeProcess>(
        QStringLiteral("ps_backup:%1").arg(index),
        clusterFlags()
            + QStringList{QStringLiteral("--job_name=ps_backup"), QStringLiteral("--task_index=%1").arg(index)}
            + extraFlags);
    slot->start(environment());
    return *slot;
}

NodeProcess &LocalCluster::startWorker(int index, QStringList extraFlags)
{
    auto &slot = m_workers.at(size_t(index));
    slot = std::make_unique<NodeProcess>(
        QStringLiteral("worker:%1").arg(index),
        clusterFlags() + QStringList{QStringLiteral("--job_name=worker"), QStringLiteral("--task_index=%1").arg(index)}
            + extraFlags);
    slot->start(environment());
    return *slot;
}

NodeProcess &LocalCluster::startNewcomer(QStringList extraFlags)
{
    QString address;
    while (address.isEmpty() || m_psHosts.contains(address) || m_workerHosts.contains(address)
           || m_backupHosts.contains(address))
        address = QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
    m_workerHosts << address;
    m_workers.emplace_back();
    return startWorker(int(m_workers.size()) - 1, std::move(extraFlags));
}

void LocalCluster::startAll()
{
    // As a user would: the ps tasks first, then the workers once ps:0 listens
    // (so that every worker takes part from the first step).
    for (int i = 0; i < int(m_ps.size()); ++i)
        startPs(i);
    for (auto &ps : m_ps)
        ps->waitForOutput(QStringLiteral("listening on"));
    for (int i = int(m_workers.size()) - 1; i >= 0; --i)
        startWorker(i);
}

bool LocalCluster::waitAllExitCleanly(QString *report, std::chrono::milliseconds timeout)
{
    bool clean = true;
    for (auto *group : {&m_workers, &m_ps, &m_backups}) {
        for (auto &task : *group) {
            if (!task)
                continue;
            const int code = task->waitForExit(timeout);
            if (code != 0) {
                clean = false;
                *report += task->name() + QStringLiteral(" exit code %1; output:\n").arg(code)
                           + task->output().right(3000) + QLatin1Char('\n');
            }
        }
    }
    return clean;
}

bool LocalCluster::stopAllCleanly(QString *report, std::chrono::milliseconds timeout)
{
    for (auto &worker : m_workers)
        if (worker && worker->isRunning())
            worker->terminate();
    for (auto &worker : m_workers)
        if (worker)
            worker->waitForExit(timeout);
    for (auto *group : {&m_ps, &m_backups})
        for (auto &task : *group)
            if (task && task->isRunning())
                task->terminate();
    return waitAllExitCleanly(report, timeout);
}

bool LocalCluster::askStatusOnce(proto::ClusterStatusResponse *status, grpc::Status *error) const
{
    const RpcSettings rpc = rpcSettings();
    for (const QString &address : ps0Pair()) {
        auto stub = proto::ClusterControl::NewStub(makeChannel(address.toStdString(), rpc));
        auto context = makeContext(rpc, std::chrono::milliseconds(2000));
        const grpc::Status result = stub->GetClusterStatus(context.get(), {}, status);
        if (result.ok() && status->replica().role() != proto::REPLICA_BACKUP)
            return true;
        *error = result.ok() ? grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "only a backup answered") : result;
    }
    return false;
}

bool LocalCluster::clusterStatus(proto::ClusterStatusResponse *status) const
{
    QDeadlineTimer deadline(std::chrono::seconds(15));
    grpc::Status error;
    do {
        if (askStatusOnce(status, &error))
            return true;
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
        QThread::msleep(50);
    } while (!deadline.hasExpired());
    qWarning("clusterStatus: no answer from ps:0 in 15 s: %s",
             qPrintable(QString::fromStdString(describeRpcError(error))));
    return false;
}

bool LocalCluster::waitForTaskStatus(const QString &address,
                                     const std::function<bool(const proto::TaskStatusResponse &)> &predicate,
                                     std::chrono::milliseconds timeout) const
{
    const RpcSettings rpc = rpcSettings();
    auto stub = proto::TaskControl::NewStub(makeChannel(address.toStdString(), rpc));
    QDeadlineTimer deadline(timeout);
    proto::TaskStatusResponse status;
    grpc::Status result;
    while (!deadline.hasExpired()) {
        auto context = makeContext(rpc, std::chrono::milliseconds(2000));
        status.Clear();
        result = stub->GetTaskStatus(context.get(), {}, &status);
        if (result.ok() && predicate(status))
            return true;
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
        QThread::msleep(100);
    }
    qWarning("waitForTaskStatus(%s): gave up after %lld ms; its last answer: %s", qPrintable(address),
             qlonglong(timeout.count()),
             result.ok() ? status.ShortDebugString().substr(0, 2000).c_str() : describeRpcError(result).c_str());
    return false;
}

bool LocalCluster::waitForStatus(const std::function<bool(const proto::ClusterStatusResponse &)> &predicate,
                                 std::chrono::milliseconds timeout) const
{
    QDeadlineTimer deadline(timeout);
    std::optional<proto::ClusterStatusResponse> first;
    proto::ClusterStatusResponse last;
    while (!deadline.hasExpired()) {
        proto::ClusterStatusResponse status;
        grpc::Status ignored;
        if (askStatusOnce(&status, &ignored)) {
            if (predicate(status))
                return true;
            if (!first)
                first = status;
            last = std::move(status);
        }
        // Let QProcess read the tasks' output meanwhile: a pipe left full
        // blocks a task on its next log line, and the wait never ends.
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
        QThread::msleep(20);
    }
    // What a failed wait needs to tell a slow cluster from a stalled one.
    if (!first) {
        qWarning("waitForStatus: no status from ps:0 in %lld ms", qlonglong(timeout.count()));
        return false;
    }
    QString workers;
    for (const auto &w : last.workers())
        workers += QStringLiteral("\n  worker:%1 %2 clock %3 waiting for '%4' reason '%5'")
                       .arg(w.worker_index())
                       .arg(QString::fromStdString(proto::WorkerPhase_Name(w.phase())))
                       .arg(w.worker_clock())
                       .arg(QString::fromStdString(w.waiting_for()), QString::fromStdString(w.reason()));
    qWarning("waitForStatus: gave up after %lld ms at global step %lld (%lld at the start of the wait)%s%s",
             qlonglong(timeout.count()), qlonglong(last.global_step()), qlonglong(first->global_step()),
             last.stall().waiting_for().empty() ? ""
                                                : qPrintable(QStringLiteral("; stalled, waiting for ")
                                                             + QString::fromStdString(last.stall().waiting_for())),
             qPrintable(workers));
    return false;
}

bool LocalCluster::waitForWorkerTraining(int index, std::chrono::milliseconds timeout) const
{
    return waitForStatus(
        [index](const proto::ClusterStatusResponse &s) {
            if (index >= s.workers_size())
                return false;
            const auto phase = s.workers(index).phase();
            return phase == proto::TRAINING || phase == proto::BLOCKED_BY_SYNC || phase == proto::BLOCKED_BY_STALENESS;
        },
        timeout);
}

bool LocalCluster::waitForWorkerPhase(int index, proto::WorkerPhase phase, std::chrono::milliseconds timeout) const
{
    return waitForStatus(
        [index, phase](const proto::ClusterStatusResponse &s) {
            return index < s.workers_size() && s.workers(index).phase() == phase;
        },
        timeout);
}

grpc::Status LocalCluster::setMode(const proto::ModeConfig &mode, proto::SetModeResponse *response) const
{
    const RpcSettings rpc = rpcSettings();
    proto::SetModeRequest request;
    *request.mutable_mode() = mode;
    request.set_requested_by("integration test");
    proto::SetModeResponse ignored;
    grpc::Status status;
    // A backup answers UNAVAILABLE while its primary serves: ask the other.
    for (const QString &address : ps0Pair()) {
        auto stub = proto::ClusterControl::NewStub(makeChannel(address.toStdString(), rpc));
        const auto call = [&](grpc::ClientContext *context) {
            return stub->SetMode(context, request, response ? response : &ignored);
        };
        // A loaded ps may drop a fresh connection (its keepalive): ride that
        // out. Not with a backup, whose turn comes when the primary does not
        // answer.
        if (ps0Pair().size() == 1) {
            status = callRidingOutDrops(rpc, std::chrono::seconds(10), call);
        } else {
            status = call(makeContext(rpc, std::chrono::milliseconds(5000)).get());
        }
        if (status.error_code() != grpc::StatusCode::UNAVAILABLE)
            return status;
    }
    return status;
}

std::vector<QJsonObject> readStepLog(const QString &logdir)
{
    std::vector<QJsonObject> records;
    // The log as one: its rotated segments (a long run's), then steps.jsonl.
    StepLogReader log(logdir);
    QByteArray read;
    while (log.next(&read)) {
        const QByteArray line = read.trimmed();
        if (line.isEmpty())
            continue;
        const auto document = QJsonDocument::fromJson(line);
        if (document.isObject())
            records.push_back(document.object());
    }
    return records;
}

MetricsTable readMetrics(const QString &logdir)
{
    MetricsTable table;
    QFile file(logdir + QStringLiteral("/metrics.csv"));
    if (!file.open(QIODevice::ReadOnly))
        return table;
    table.header = QString::fromUtf8(file.readLine().trimmed()).split(QLatin1Char(','));
    while (!file.atEnd()) {
        const QString line = QString::fromUtf8(file.readLine().trimmed());
        if (!line.isEmpty())
            table.rows.push_back(line.split(QLatin1Char(',')));
    }
    return table;
}

HeldPort::HeldPort(uint16_t port)
{
    m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // With SO_REUSEADDR, as the stale task's gRPC server bound it: the port
    // came from pickFreePort, which keeps it bound (not listening) here.
    const int on = 1;
    if (m_fd >= 0)
        ::setsockopt(m_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    m_ok = m_fd >= 0 && ::bind(m_fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 && ::listen(m_fd, 4) == 0;
}

HeldPort::~HeldPort()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

} // namespace parasync::testing
