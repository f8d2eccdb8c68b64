#include "orchestration/slurm_preflight.h"

#include "base/qt_text.h"
#include "base/version.h"
#include "orchestration/slurm_job.h"

namespace parasync {

namespace {

QString lastLine(const QString &text)
{
    const QStringList lines = text.trimmed().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    return lines.isEmpty() ? QString() : lines.back().trimmed();
}

} // namespace

SlurmPreflight::SlurmPreflight(QObject *parent) : QObject(parent) {}

void SlurmPreflight::start(const ClusterPlan &plan, const SlurmSettings &settings)
{
    m_plan = plan;
    m_settings = settings;
    m_partition = qs(settings.partition);
    m_checks.clear();
    checkPartition();
}

void SlurmPreflight::add(const QString &name, Outcome outcome, const QString &detail, const QString &fix)
{
    m_checks.push_back(Check{name, outcome, detail, fix});
}

void SlurmPreflight::checkPartition()
{
    QStringList arguments{QStringLiteral("--oneliner"), QStringLiteral("show"), QStringLiteral("partition")};
    if (!m_partition.isEmpty())
        arguments << m_partition;
    runSlurmCommand(this, QStringLiteral("scontrol"), arguments, [this](const SlurmCommandResult &result) {
        if (!result.started) {
            add(tr("Slurm"), Outcome::Failed, tr("scontrol is not on PATH"),
                tr("install Slurm's client commands (Debian: slurm-client) or load their module, as for sbatch"));
            done();
            return;
        }
        const QString said = lastLine(result.errors + QLatin1Char('\n') + result.output);
        if (said.contains(QLatin1String("not found"))) {
            add(tr("Slurm"), Outcome::Passed, tr("the controller answers"));
            add(tr("partition"), Outcome::Failed, tr("partition %1 does not exist").arg(m_partition),
                tr("pick one of the partitions `sinfo` lists"));
            done();
            return;
        }
        if (result.exitCode != 0) {
            add(tr("Slurm"), Outcome::Failed, tr("scontrol: %1").arg(said),
                tr("the Slurm controller does not answer from here: check that `sinfo` works (SLURM_CONF, munge)"));
            done();
            return;
        }
        add(tr("Slurm"), Outcome::Passed, tr("the controller answers"));
        const auto partitions = parseScontrolPartitions(result.output.toStdString());
        const SlurmPartition *chosen = nullptr;
        for (const SlurmPartition &p : partitions)
            if (m_partition.isEmpty() ? p.isDefault : qs(p.name) == m_partition)
                chosen = &p;
        if (!chosen) {
            add(tr("partition"), Outcome::Failed,
                m_partition.isEmpty() ? tr("the cluster has no default partition")
                                      : tr("partition %1 is not in scontrol's answer").arg(m_partition),
                tr("name a partition (--slurm_partition; `sinfo` lists them)"));
            done();
            return;
        }
        m_partition = qs(chosen->name);
        const int numTasks = m_plan.cluster.numPs() + m_plan.cluster.numWorkers();
        if (const auto problem = slurmJobDoesNotFit(m_plan, m_settings, *chosen)) {
            add(tr("partition"), Outcome::Failed, qs(*problem));
            done();
            return;
        }
        add(tr("partition"), Outcome::Passed,
            tr("%1 is %2: %3 node(s), %4 CPUs for the job's %5 tasks")
                .arg(m_partition, qs(chosen->state))
                .arg(chosen->totalNodes)
                .arg(chosen->totalCpus)
                .arg(numTasks));
        checkNodeVersion();
    });
}

void SlurmPreflight::checkNodeVersion()
{
    const QString node = qs(m_settings.nodeProgram());
    const QString expected
        = m_settings.expectedVersion.empty() ? qs(nodeVersionLine()) : qs(m_settings.expectedVersion);
    QStringList arguments{QStringLiteral("--partition=") + m_partition,
                          QStringLiteral("--nodes=1"),
                          QStringLiteral("--ntasks=1"),
                          QStringLiteral("--immediate=%1").arg(m_nodeWaitSeconds),
                          QStringLiteral("--job-name=parasync-preflight"),
                          QStringLiteral("--quiet")};
    if (!m_settings.account.empty())
        arguments << QStringLiteral("--account=") + qs(m_settings.account);
    arguments << node << QStringLiteral("--version");
    runSlurmCommand(this, QStringLiteral("srun"), arguments, [this, node, expected](const SlurmCommandResult &result) {
        const QString printed = lastLine(result.output);
        const QString errors = result.errors.trimmed();
        const QString name = tr("parasync-node");
        if (!result.started) {
            add(name, Outcome::Failed, tr("srun is not on PATH"), tr("install Slurm's client commands"));
        } else if (result.exitCode == 0 && printed == expected) {
            add(name, Outcome::Passed, tr("a node of %1 runs %2").arg(m_partition, printed));
        } else if (result.exitCode == 0) {
            add(name, Outcome::Failed,
                tr("a node of %1 runs '%2', this app is '%3'").arg(m_partition, printed, expected),
                tr("install the same build of parasync-node on the nodes (or give the path of one with --slurm_node)"));
        } else if (errors.contains(QLatin1String("Immediate execution impossible"))
                   || errors.contains(QLatin1String("Unable to allocate resources"))
                   || errors.contains(QLatin1String("queued and waiting"))) {
            add(name, Outcome::Unknown,
                tr("no node of %1 free within %2 s to check it; the job checks every node first")
                    .arg(m_partition)
                    .arg(m_nodeWaitSeconds));
        } else if (errors.contains(QLatin1String("No such file")) || errors.contains(QLatin1String("execve"))) {
            add(name, Outcome::Failed, tr("%1 is not on the path of the nodes of %2").arg(node, m_partition),
                tr("install parasync-node on the nodes (on their PATH), or give its path there with --slurm_node"));
        } else {
            add(name, Outcome::Failed, tr("srun %1 --version failed: %2").arg(node, lastLine(errors)),
                tr("run `srun --partition=%1 -N1 -n1 %2 --version` by hand to see why").arg(m_partition, node));
        }
        done();
    });
}

void SlurmPreflight::done()
{
    bool passed = true;
    for (const Check &check : m_checks)
        passed = passed && check.outcome != Outcome::Failed;
    Q_EMIT finished(passed);
}

QString SlurmPreflight::report() const
{
    QString text;
    QStringList fixes;
    for (const Check &check : m_checks) {
        const QString mark = check.outcome == Outcome::Passed   ? tr("ok")
                             : check.outcome == Outcome::Failed ? tr("FAILED")
                                                                : tr("unknown");
        text += QStringLiteral("  %1: %2 -- %3\n").arg(check.name, mark, check.detail);
        if (check.outcome == Outcome::Failed && !check.fix.isEmpty())
            fixes << QStringLiteral("  fix %1: %2").arg(check.name, check.fix);
    }
    if (!fixes.isEmpty())
        text += fixes.join(QLatin1Char('\n')) + QLatin1Char('\n');
    return text;
}

} // namespace parasync
