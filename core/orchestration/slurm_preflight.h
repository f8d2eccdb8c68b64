#pragma once

// The pre-flight check of a Slurm job before it is submitted: Slurm answers
// from here, the partition exists, is up and can hold the job's tasks, and
// the nodes run the same build of parasync-node as this app (a one-task
// `srun --immediate` of `parasync-node --version` on one node of the
// partition). A node that cannot be had at once leaves the last check
// unknown, not failed: the batch script checks every node again as its
// first step. Qt Core only; runs Slurm's client commands asynchronously on
// the caller's thread (it must run an event loop).

#include "config/cluster_plan.h"
#include "slurm/slurm_batch_script.h"

#include <QObject>
#include <QString>

#include <vector>

namespace parasync {

class SlurmPreflight : public QObject
{
    Q_OBJECT

public:
    enum class Outcome { Passed, Failed, Unknown };
    struct Check
    {
        QString name; // "Slurm", "partition", "parasync-node"
        Outcome outcome = Outcome::Unknown;
        QString detail; // what was found
        QString fix;    // what to do, when it failed
    };

    explicit SlurmPreflight(QObject *parent = nullptr);

    // Seconds the version check waits for a node (srun --immediate).
    void setNodeWaitSeconds(int seconds) { m_nodeWaitSeconds = seconds; }
    // Begins; finished() follows. `settings.partition` empty: the default
    // partition, which the check then names in `resolvedPartition()`.
    void start(const ClusterPlan &plan, const SlurmSettings &settings);

    const std::vector<Check> &checks() const { return m_checks; }
    QString resolvedPartition() const { return m_partition; }
    // One line per check, and under it what to do for each that failed.
    QString report() const;

Q_SIGNALS:
    // Every check has run; `passed` when none failed (an unknown one passes).
    void finished(bool passed);

private:
    void checkPartition();
    void checkNodeVersion();
    void add(const QString &name, Outcome outcome, const QString &detail, const QString &fix = {});
    void done();

    ClusterPlan m_plan;
    SlurmSettings m_settings;
    QString m_partition;
    int m_nodeWaitSeconds = 30;
    std::vector<Check> m_checks;
};

} // namespace parasync
