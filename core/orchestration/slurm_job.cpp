#include "orchestration/slurm_job.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/logging.h"
#include "wire/cluster_token.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QProcessEnvironment>
#include <QThread>

namespace parasync {

namespace {

constexpr int kPollMs = 1000;
constexpr int kFollowMs = 250; // the tasks' logs, and the script's first line with the job's nodes
constexpr int kMaxTaskLines = 2000;
// A job both squeue and sacct have never heard of this many polls after
// sbatch took it: the controller lost it (or accounting is off and its
// record aged out before the first poll).
constexpr int kForgottenAfterPolls = 5;

QStringList squeueArguments(const QString &jobId)
{
    return {QStringLiteral("--noheader"), QStringLiteral("--states=all"), QStringLiteral("--jobs=") + jobId,
            QStringLiteral("--format=") + qs(squeueFormat())};
}

QStringList sacctArguments(const QString &jobId)
{
    return {QStringLiteral("--noheader"), QStringLiteral("--parsable2"), QStringLiteral("--allocations"),
            QStringLiteral("--jobs=") + jobId, QStringLiteral("--format=") + qs(sacctFormat())};
}

QString firstLines(const QString &text)
{
    QStringList lines = text.trimmed().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    if (lines.size() > 6)
        lines = lines.mid(0, 6);
    return lines.join(QStringLiteral("; "));
}

// What to try when sbatch refused the script.
QString sbatchAdvice(const QString &errors)
{
    if (errors.contains(QLatin1String("invalid partition")))
        return QStringLiteral("pick a partition that exists (sinfo lists them)");
    if (errors.contains(QLatin1String("Requested node configuration is not available"))
        || errors.contains(QLatin1String("More processors requested")))
        return QStringLiteral("the partition cannot hold this many tasks: design a smaller cluster, ask for more "
                              "nodes, or pick a larger partition");
    if (errors.contains(QLatin1String("Invalid account")))
        return QStringLiteral("give an account you may charge (sacctmgr show assoc user=$USER)");
    if (errors.contains(QLatin1String("Unable to contact slurm controller"))
        || errors.contains(QLatin1String("Zero Bytes")))
        return QStringLiteral("the Slurm controller does not answer: check `sinfo` works from this machine "
                              "(SLURM_CONF, munge)");
    return QStringLiteral("check the script and the partition's limits (scontrol show partition)");
}

} // namespace

void runSlurmCommand(QObject *context, const QString &program, const QStringList &arguments,
                     std::function<void(const SlurmCommandResult &)> done)
{
    auto *process = new QProcess(context);
    QObject::connect(process, &QProcess::finished, context, [process, done](int exitCode, QProcess::ExitStatus status) {
        SlurmCommandResult result;
        result.started = true;
        result.exitCode = status == QProcess::CrashExit ? -1 : exitCode;
        result.output = QString::fromLocal8Bit(process->readAllStandardOutput());
        result.errors = QString::fromLocal8Bit(process->readAllStandardError());
        process->deleteLater();
        done(result);
    });
    QObject::connect(process, &QProcess::errorOccurred, context, [process, done](QProcess::ProcessError error) {
        if (error != QProcess::FailedToStart)
            return;
        process->deleteLater();
        done(SlurmCommandResult{});
    });
    process->start(program, arguments);
}

SlurmCommandResult runSlurmCommandNow(const QString &program, const QStringList &arguments, int timeoutMs)
{
    QProcess process;
    process.start(program, arguments);
    SlurmCommandResult result;
    if (!process.waitForStarted(timeoutMs))
        return result;
    result.started = true;
    if (!process.waitForFinished(timeoutMs)) {
        process.kill();
        process.waitForFinished(1000);
        result.exitCode = -1;
    } else {
        result.exitCode = process.exitStatus() == QProcess::CrashExit ? -1 : process.exitCode();
    }
    result.output = QString::fromLocal8Bit(process.readAllStandardOutput());
    result.errors = QString::fromLocal8Bit(process.readAllStandardError());
    return result;
}

SlurmJob::SlurmJob(QObject *parent) : QObject(parent)
{
    m_poll.setInterval(kPollMs);
    connect(&m_poll, &QTimer::timeout, this, &SlurmJob::poll);
    m_follow.setInterval(kFollowMs);
    connect(&m_follow, &QTimer::timeout, this, &SlurmJob::followOutput);
}

SlurmJob::~SlurmJob()
{
    m_poll.stop();
    blockSignals(true);
    if (m_cancelOnQuit && !m_jobId.isEmpty() && !m_over)
        cancelAndWait(15000);
}

void SlurmJob::setWatcher(ClusterWatcher *watcher)
{
    m_watcher = watcher;
}

bool SlurmJob::writeScript(const ClusterPlan &plan, const SlurmSettings &settings, const QString &path, QString *error)
{
    std::string script;
    try {
        script = slurmBatchScript(plan, settings);
    } catch (const InputError &e) {
        if (error)
            *error = qs(e.what());
        return false;
    }
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)
        || file.write(script.data(), qint64(script.size())) != qint64(script.size())) {
        if (error)
            *error = tr("cannot write the batch script %1: %2").arg(path, file.errorString());
        return false;
    }
    file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner
                        | QFileDevice::ReadGroup | QFileDevice::ExeGroup | QFileDevice::ReadOther
                        | QFileDevice::ExeOther);
    return true;
}

bool SlurmJob::submit(const ClusterPlan &plan, const SlurmSettings &settings, const RpcSettings &rpc, QString *error)
{
    if (!m_jobId.isEmpty() && !m_over) {
        if (error)
            *error = tr("Slurm job %1 is still queued or running: cancel it first").arg(m_jobId);
        return false;
    }
    m_plan = plan;
    m_settings = settings;
    m_rpc = rpc;
    // The tasks serve their nodes' names, not loopback: without a token of
    // the user's, the job gets one of its own, which the watcher uses too.
    if (m_rpc.clusterToken.empty())
        m_rpc.clusterToken = generateClusterToken();
    m_jobId.clear();
    m_status = SlurmJobStatus{};
    m_ps0.reset();
    m_over = m_cancelRequested = m_everKnown = false;
    m_unknownPolls = 0;
    m_taskFiles.clear();
    m_taskLines.clear();
    if (!QDir().mkpath(qs(settings.outputDirectory))) {
        if (error)
            *error = tr("cannot create the Slurm output directory %1").arg(qs(settings.outputDirectory));
        return false;
    }
    m_scriptPath = QDir(qs(settings.outputDirectory)).filePath(qs(settings.jobName) + QStringLiteral(".sbatch"));
    if (!writeScript(plan, settings, m_scriptPath, error))
        return false;

    auto *sbatch = new QProcess(this);
    // sbatch hands its environment to the job (its default --export=ALL):
    // the token reaches every task without a command line or a file.
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QLatin1String(kTokenEnvironmentVariable), qs(m_rpc.clusterToken));
    sbatch->setProcessEnvironment(environment);
    sbatch->setWorkingDirectory(qs(settings.outputDirectory));
    connect(sbatch, &QProcess::errorOccurred, this, [this, sbatch](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart)
            return;
        sbatch->deleteLater();
        m_over = true;
        qCWarning(lcSlurm) << "cannot run sbatch:" << sbatch->errorString();
        Q_EMIT failed(tr("cannot run sbatch: Slurm's commands are not on PATH here. Install Slurm's client "
                         "(Debian: slurm-client) or load its module, or submit %1 from a login node")
                          .arg(m_scriptPath));
    });
    connect(sbatch, &QProcess::finished, this, [this, sbatch](int exitCode, QProcess::ExitStatus) {
        sbatch->deleteLater();
        const QString output = QString::fromLocal8Bit(sbatch->readAllStandardOutput());
        const QString errors = QString::fromLocal8Bit(sbatch->readAllStandardError());
        const auto id = parseSbatchJobId(output.toStdString());
        if (exitCode != 0 || !id) {
            qCWarning(lcSlurm).noquote() << "sbatch refused the job, exit code" << exitCode << ":"
                                         << QString(errors + output).trimmed();
            m_over = true;
            Q_EMIT failed(tr("sbatch refused the job (%1): %2").arg(firstLines(errors + output), sbatchAdvice(errors)));
            return;
        }
        m_jobId = qs(*id);
        qCDebug(lcSlurm).noquote() << "submitted as job" << m_jobId;
        const QDir out(qs(m_settings.outputDirectory));
        m_jobFile = FollowedFile{out.filePath(qs(slurmJobOutputName(*id))), 0, {}};
        for (int rank = 0; rank < m_plan.cluster.numPs() + m_plan.cluster.numWorkers(); ++rank)
            m_taskFiles[rank] = FollowedFile{out.filePath(qs(slurmTaskOutputName(*id, rank))), 0, {}};
        Q_EMIT submitted(m_jobId, m_scriptPath);
        if (m_cancelRequested)
            cancel();
        poll();
        m_poll.start();
        m_follow.start();
    });
    qCDebug(lcSlurm).noquote() << "sbatch --parsable" << m_scriptPath << "in" << qs(settings.outputDirectory);
    sbatch->start(QStringLiteral("sbatch"), {QStringLiteral("--parsable"), m_scriptPath});
    return true;
}

TaskId SlurmJob::taskOfRank(int rank) const
{
    const int numTasks = m_plan.cluster.numPs() + m_plan.cluster.numWorkers();
    return slurmTaskOfRank(rank, numTasks, m_settings.layout(m_plan));
}

QString SlurmJob::taskLog(int rank) const
{
    const auto it = m_taskLines.find(rank);
    return it == m_taskLines.end() ? QString() : it->second.join(QLatin1Char('\n'));
}

void SlurmJob::cancel()
{
    m_cancelRequested = true;
    if (m_jobId.isEmpty() || m_over)
        return; // sbatch's answer cancels it, if it comes
    qCDebug(lcSlurm).noquote() << "scancel" << m_jobId;
    runSlurmCommand(this, QStringLiteral("scancel"), {m_jobId}, [this](const SlurmCommandResult &result) {
        if (!result.started || result.exitCode != 0)
            Q_EMIT failed(tr("scancel %1 failed (%2): cancel the job by hand (scancel %1)")
                              .arg(m_jobId, result.started ? firstLines(result.errors) : tr("scancel not found")));
    });
}

bool SlurmJob::cancelAndWait(int timeoutMs)
{
    m_cancelRequested = true;
    if (m_jobId.isEmpty() || m_over)
        return m_over || m_jobId.isEmpty();
    const QDeadlineTimer deadline(timeoutMs);
    runSlurmCommandNow(QStringLiteral("scancel"), {m_jobId}, int(deadline.remainingTime()));
    while (!deadline.hasExpired()) {
        const SlurmCommandResult answer
            = runSlurmCommandNow(QStringLiteral("squeue"), squeueArguments(m_jobId), int(deadline.remainingTime()));
        const SlurmJobStatus status = parseSqueueOutput(answer.output.toStdString(), m_jobId.toStdString());
        if (answer.started && (!status.known || slurmJobIsOver(status.state))) {
            m_over = true;
            return true;
        }
        QThread::msleep(200);
    }
    return false;
}

void SlurmJob::poll()
{
    if (m_over || m_jobId.isEmpty() || m_query)
        return;
    const QString jobId = m_jobId;
    m_query = new QProcess(this);
    QProcess *query = m_query;
    connect(query, &QProcess::finished, this, [this, query, jobId](int, QProcess::ExitStatus) {
        query->deleteLater();
        if (jobId != m_jobId)
            return;
        const SlurmJobStatus status = parseSqueueOutput(
            QString::fromLocal8Bit(query->readAllStandardOutput()).toStdString(), jobId.toStdString());
        if (status.known) {
            onQueueAnswer(status);
            return;
        }
        // squeue no longer holds it: accounting does, where there is any.
        runSlurmCommand(this, QStringLiteral("sacct"), sacctArguments(jobId),
                        [this, jobId](const SlurmCommandResult &result) {
                            if (jobId == m_jobId)
                                onQueueAnswer(parseSacctOutput(result.output.toStdString(), jobId.toStdString()));
                        });
    });
    connect(query, &QProcess::errorOccurred, this, [query](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            query->deleteLater();
    });
    query->start(QStringLiteral("squeue"), squeueArguments(jobId));
}

void SlurmJob::onQueueAnswer(const SlurmJobStatus &answer)
{
    if (m_over)
        return;
    if (!answer.known) {
        qCDebug(lcSlurm).noquote() << "neither squeue nor sacct knows job" << m_jobId;
        if (m_everKnown || ++m_unknownPolls >= kForgottenAfterPolls) {
            // Gone from squeue, and no accounting to ask: it is over.
            SlurmJobStatus gone = m_status;
            gone.jobId = m_jobId.toStdString();
            gone.known = false;
            if (!slurmJobIsOver(gone.state))
                gone.state = m_cancelRequested ? "CANCELLED" : "COMPLETED";
            finish(gone);
        }
        return;
    }
    m_everKnown = true;
    const bool changed
        = answer.state != m_status.state || answer.nodeList != m_status.nodeList || answer.reason != m_status.reason;
    if (changed) // squeue's answer every poll would drown the rest
        qCDebug(lcSlurm).noquote() << "job" << m_jobId << "is" << qs(answer.state) << "nodes:" << qs(answer.nodeList)
                                   << "reason:" << qs(answer.reason);
    m_status = answer;
    if (changed)
        Q_EMIT statusChanged(m_status);
    if (answer.state == "RUNNING" && !answer.nodeList.empty())
        onNodesKnown(answer.nodeList);
    if (slurmJobIsOver(answer.state))
        finish(answer);
}

void SlurmJob::onNodesKnown(const std::string &nodeList)
{
    if (m_ps0 || m_over)
        return;
    try {
        m_ps0 = slurmPs0Address(nodeList, m_settings.layout(m_plan));
    } catch (const InputError &e) {
        Q_EMIT failed(tr("cannot find ps:0 in the job's nodes: %1").arg(qs(e.what())));
        return;
    }
    const QString address = qs(m_ps0->toString());
    if (m_watcher) {
        // Watched from its first step: the telemetry is the whole story.
        m_watcher->setHistory({}, false);
        m_watcher->connectTo(address, m_rpc);
    }
    Q_EMIT running(address);
}

void SlurmJob::finish(const SlurmJobStatus &status)
{
    const bool changed = status.state != m_status.state;
    qCDebug(lcSlurm).noquote() << "job" << m_jobId << "ended:" << qs(status.state);
    m_status = status;
    m_over = true;
    m_poll.stop();
    m_follow.stop();
    followOutput(); // the last lines the tasks wrote
    for (auto &[rank, file] : m_taskFiles)
        if (!file.partial.isEmpty()) {
            const QString line = file.partial;
            file.partial.clear();
            m_taskLines[rank].append(line);
            Q_EMIT taskOutput(rank, taskOfRank(rank), line);
        }
    if (changed)
        Q_EMIT statusChanged(m_status);
    Q_EMIT ended(m_status);
}

void SlurmJob::followOutput()
{
    if (m_jobId.isEmpty())
        return;
    readNewLines(m_jobFile, [this](const QString &line) {
        Q_EMIT jobOutput(line);
        // The script's first line names the job's nodes as soon as it runs,
        // before squeue's next poll would.
        const QString prefix = QStringLiteral("parasync: job %1 runs on ").arg(m_jobId);
        if (line.startsWith(prefix))
            onNodesKnown(line.mid(prefix.size()).trimmed().toStdString());
    });
    for (auto &[rank, file] : m_taskFiles) {
        const int r = rank;
        readNewLines(file, [this, r](const QString &line) {
            QStringList &lines = m_taskLines[r];
            lines.append(line);
            if (lines.size() > kMaxTaskLines)
                lines.removeFirst();
            Q_EMIT taskOutput(r, taskOfRank(r), line);
        });
    }
}

void SlurmJob::readNewLines(FollowedFile &file, const std::function<void(const QString &)> &emitLine)
{
    QFile f(file.path);
    if (!f.open(QIODevice::ReadOnly) || f.size() <= file.offset)
        return;
    f.seek(file.offset);
    const QByteArray bytes = f.readAll();
    file.offset += bytes.size();
    file.partial += QString::fromUtf8(bytes);
    qsizetype newline = 0;
    while ((newline = file.partial.indexOf(QLatin1Char('\n'))) >= 0) {
        const QString line = file.partial.left(newline);
        file.partial.remove(0, newline + 1);
        emitLine(line);
    }
}

} // namespace parasync
