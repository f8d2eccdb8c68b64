#include "orchestration/slurm_backend.h"

#include "base/version.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/slurm_job.h"
#include "orchestration/slurm_preflight.h"

namespace parasync {

SlurmBackend::SlurmBackend(SlurmSettings settings, QObject *parent)
    : ClusterBackend(parent)
    , m_settings(std::move(settings))
{
    // The nodes must run this build: the check and the script's first step say so.
    if (m_settings.expectedVersion.empty())
        m_settings.expectedVersion = nodeVersionLine();
}

SlurmBackend::~SlurmBackend()
{
    if (m_job)
        m_job->setCancelOnQuit(stopOnQuit()); // its destructor cancels, and waits
}

QString SlurmBackend::name() const
{
    return tr("Slurm");
}

QString SlurmBackend::jobName() const
{
    return m_job && !m_job->jobId().isEmpty() ? tr("Slurm job %1").arg(m_job->jobId()) : QString();
}

QString SlurmBackend::outputDirectory() const
{
    return QString::fromStdString(m_settings.outputDirectory);
}

void SlurmBackend::setWatcher(ClusterWatcher *watcher)
{
    m_watcher = watcher;
    if (m_job)
        m_job->setWatcher(watcher);
}

void SlurmBackend::start(const ClusterPlan &plan, const RpcSettings &rpc)
{
    m_plan = plan;
    m_rpc = rpc;
    if (checkFirst())
        startCheck(plan, true);
    else
        submit();
}

void SlurmBackend::check(const ClusterPlan &plan)
{
    startCheck(plan, false);
}

void SlurmBackend::startCheck(const ClusterPlan &plan, bool thenSubmit)
{
    Q_EMIT said(
        tr("Pre-flight check of Slurm: the partition %1, its room for %2 tasks, parasync-node on its nodes")
            .arg(m_settings.partition.empty() ? tr("(the default)") : QString::fromStdString(m_settings.partition))
            .arg(plan.cluster.numPs() + plan.cluster.numWorkers()));
    Q_EMIT statusChanged(tr("Checking Slurm before submitting..."));
    m_preflight = std::make_unique<SlurmPreflight>();
    connect(m_preflight.get(), &SlurmPreflight::finished, this, [this, thenSubmit](bool passed) {
        Q_EMIT checked(passed, m_preflight->report());
        if (!passed || !thenSubmit)
            return;
        // The partition the check found, when none was named: the job asks for it.
        m_settings.partition = m_preflight->resolvedPartition().toStdString();
        submit();
    });
    m_preflight->start(plan, m_settings);
}

void SlurmBackend::submit()
{
    m_job = std::make_unique<SlurmJob>();
    m_job->setWatcher(m_watcher);
    connect(m_job.get(), &SlurmJob::submitted, this, [this](const QString &jobId, const QString &script) {
        Q_EMIT said(tr("Submitted Slurm job %1 (the batch script: %2)").arg(jobId, script));
        Q_EMIT statusChanged(tr("Slurm job %1 submitted").arg(jobId));
    });
    connect(m_job.get(), &SlurmJob::statusChanged, this, [this](const SlurmJobStatus &status) {
        const QString line = QString::fromStdString(describeSlurmJobStatus(status));
        Q_EMIT said(line);
        Q_EMIT statusChanged(line);
    });
    connect(m_job.get(), &SlurmJob::running, this, [this](const QString &ps0) {
        Q_EMIT said(tr("ps:0 runs at %1: watching it").arg(ps0));
        Q_EMIT running(ps0);
    });
    connect(m_job.get(), &SlurmJob::jobOutput, this,
            [this](const QString &line) { Q_EMIT taskOutput(QStringLiteral("job"), line); });
    connect(m_job.get(), &SlurmJob::taskOutput, this, [this](int, const TaskId &task, const QString &line) {
        Q_EMIT taskOutput(QString::fromStdString(task.toString()), line);
    });
    connect(m_job.get(), &SlurmJob::failed, this, &ClusterBackend::failed);
    connect(m_job.get(), &SlurmJob::ended, this, [this](const SlurmJobStatus &status) {
        const QString state = QString::fromStdString(status.state);
        // Cancelled by this app (Stop, a tour's end) is how a run without a last step ends.
        const Outcome outcome = status.state == "COMPLETED"                               ? Outcome::Completed
                                : status.state == "CANCELLED" && m_job->cancelRequested() ? Outcome::Stopped
                                                                                          : Outcome::Failed;
        QString summary = tr("Slurm job %1 ended %2").arg(m_job->jobId(), state);
        if (outcome == Outcome::Failed)
            summary += tr(": see the tasks' output, and %1").arg(outputDirectory());
        Q_EMIT ended(outcome, summary);
    });
    QString error;
    if (!m_job->submit(m_plan, m_settings, m_rpc, &error))
        Q_EMIT failed(error);
}

bool SlurmBackend::writeJobScript(const ClusterPlan &plan, const QString &path, QString *error) const
{
    return SlurmJob::writeScript(plan, m_settings, path, error);
}

void SlurmBackend::stop()
{
    if (!isLive())
        return;
    Q_EMIT said(tr("scancel %1").arg(m_job->jobId()));
    Q_EMIT statusChanged(tr("Cancelling Slurm job %1...").arg(m_job->jobId()));
    m_job->cancel();
}

bool SlurmBackend::stopAndWait(int timeoutMs)
{
    if (!isLive())
        return true;
    Q_EMIT statusChanged(tr("Cancelling Slurm job %1...").arg(m_job->jobId()));
    return m_job->cancelAndWait(timeoutMs);
}

bool SlurmBackend::isLive() const
{
    return m_job && !m_job->isOver() && !m_job->jobId().isEmpty();
}

} // namespace parasync
