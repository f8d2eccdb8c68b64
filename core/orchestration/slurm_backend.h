#pragma once

// The plan run as one job of the user's Slurm (ClusterBackend): the
// pre-flight check (SlurmPreflight), then the batch script submitted,
// followed and cancelled (SlurmJob). The window's "Run on Slurm..." and
// `parasync --headless --slurm` both drive this one object, so the check,
// the submission and the story they tell are written once.

#include "orchestration/cluster_backend.h"
#include "slurm/slurm_batch_script.h"

#include <QPointer>

#include <memory>

namespace parasync {

class SlurmJob;
class SlurmPreflight;

class SlurmBackend : public ClusterBackend
{
    Q_OBJECT

public:
    // `settings.expectedVersion` empty: the nodes must run this build.
    explicit SlurmBackend(SlurmSettings settings, QObject *parent = nullptr);
    ~SlurmBackend() override; // cancels a live job when stopOnQuit()

    QString name() const override;
    QString jobName() const override;
    QString outputDirectory() const override;
    void setWatcher(ClusterWatcher *watcher) override;
    void start(const ClusterPlan &plan, const RpcSettings &rpc) override;
    void check(const ClusterPlan &plan) override;
    bool writeJobScript(const ClusterPlan &plan, const QString &path, QString *error) const override;
    void stop() override;
    bool stopAndWait(int timeoutMs) override;
    bool isLive() const override;

    // The settings as submitted: the partition the check found, when none
    // was named.
    const SlurmSettings &settings() const { return m_settings; }
    // The job once submitted (its id, Slurm's state), else nullptr.
    SlurmJob *job() const { return m_job.get(); }

private:
    void startCheck(const ClusterPlan &plan, bool thenSubmit);
    void submit();

    SlurmSettings m_settings;
    ClusterPlan m_plan;
    RpcSettings m_rpc;
    QPointer<ClusterWatcher> m_watcher;
    std::unique_ptr<SlurmPreflight> m_preflight;
    std::unique_ptr<SlurmJob> m_job;
};

} // namespace parasync
