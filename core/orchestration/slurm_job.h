#pragma once

// A designed cluster run as one job of the user's Slurm: the batch script
// written (slurm/slurm_batch_script.h) and submitted with sbatch, the job
// followed with squeue (sacct once squeue has forgotten it) -- pending,
// running, the nodes it got --, ps:0's address found from those nodes once
// it runs and the watcher pointed at it, each task's output file followed
// and relayed line by line, and the job cancelled with scancel on request
// (Stop, quitting). The window and `parasync --headless --slurm` both drive
// one. Slurm's own client commands are the only way in: whatever sbatch can
// reach (a login node's configuration, SLURM_CONF) this reaches.
//
// Qt Core only (QProcess, QTimer); lives on the GUI or headless main
// thread. Nothing blocks it but cancelAndWait(), meant for quitting.

#include "config/cluster_plan.h"
#include "config/cluster_spec.h"
#include "slurm/slurm_batch_script.h"
#include "wire/rpc_settings.h"

#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QTimer>

#include <functional>
#include <map>
#include <optional>
#include <vector>

class QProcess;

namespace parasync {

class ClusterWatcher;

class SlurmJob : public QObject
{
    Q_OBJECT

public:
    explicit SlurmJob(QObject *parent = nullptr);
    // Cancels a job still queued or running when cancelOnQuit is set (see
    // cancelAndWait); otherwise leaves it to Slurm.
    ~SlurmJob() override;

    // Whether destroying this object (quitting the app) cancels the job.
    // Off by default: a job on a cluster usually outlives the laptop that
    // submitted it.
    void setCancelOnQuit(bool cancel) { m_cancelOnQuit = cancel; }
    // Pointed at ps:0 with the job's token and TLS once the job runs;
    // nullptr: nobody watches. Not owned.
    void setWatcher(ClusterWatcher *watcher);

    // Writes the batch script into settings.outputDirectory (created if
    // missing) and submits it with sbatch; the token in `rpc` reaches the
    // tasks through sbatch's environment (never a command line), its TLS
    // files are the watcher's; without a token the job gets a new one.
    // Returns false with `error` when the script
    // cannot be written (InputError's message); sbatch's own refusal comes
    // as failed(). Does not block.
    bool submit(const ClusterPlan &plan, const SlurmSettings &settings, const RpcSettings &rpc, QString *error);
    // The script alone, for a person to submit by hand: written to `path`
    // (mode 0755). Returns false with `error` when it cannot be.
    static bool writeScript(const ClusterPlan &plan, const SlurmSettings &settings, const QString &path,
                            QString *error);

    // scancel: the tasks get SIGTERM (a clean stop), SIGKILL after the
    // cluster's KillWait; ended() follows once squeue says the job is over.
    // Does not block.
    void cancel();
    // Cancels and waits until Slurm reports the job over (every task gone)
    // or `timeoutMs` passed; returns whether it is over. Blocks: for quitting.
    bool cancelAndWait(int timeoutMs);

    QString jobId() const { return m_jobId; }
    QString scriptPath() const { return m_scriptPath; }
    const SlurmJobStatus &status() const { return m_status; }
    bool isOver() const { return m_over; }
    bool cancelRequested() const { return m_cancelRequested; }
    // ps:0's address once the job runs, else nullopt.
    std::optional<HostPort> ps0() const { return m_ps0; }
    // The task of rank `rank` in this job's step.
    TaskId taskOfRank(int rank) const;
    // Everything a task printed so far (bounded to its last lines).
    QString taskLog(int rank) const;

Q_SIGNALS:
    // sbatch accepted the script.
    void submitted(const QString &jobId, const QString &scriptPath);
    // The job's state or nodes changed (PENDING with its reason, RUNNING on nodes, ...).
    void statusChanged(const parasync::SlurmJobStatus &status);
    // The job runs: ps:0 listens (or soon will) at `ps0`.
    void running(const QString &ps0);
    // A line of a task's output (its log file), or of the batch script's own.
    void taskOutput(int rank, const parasync::TaskId &task, const QString &line);
    void jobOutput(const QString &line);
    // The job is over (COMPLETED, CANCELLED, FAILED, TIMEOUT, ...) and
    // every line its tasks wrote has been relayed.
    void ended(const parasync::SlurmJobStatus &status);
    // sbatch or scancel refused: `message` says why and what to try.
    void failed(const QString &message);

private:
    struct FollowedFile
    {
        QString path;
        qint64 offset = 0;
        QString partial;
    };
    void poll();
    void onQueueAnswer(const SlurmJobStatus &status);
    // The job runs on `nodeList`: ps:0 is found, the watcher pointed at it.
    void onNodesKnown(const std::string &nodeList);
    void followOutput();
    void readNewLines(FollowedFile &file, const std::function<void(const QString &)> &emitLine);
    void finish(const SlurmJobStatus &status);

    ClusterPlan m_plan;
    SlurmSettings m_settings;
    RpcSettings m_rpc;
    QPointer<ClusterWatcher> m_watcher;
    QString m_jobId;
    QString m_scriptPath;
    SlurmJobStatus m_status;
    std::optional<HostPort> m_ps0;
    QTimer m_poll;              // squeue / sacct
    QTimer m_follow;            // the output files
    QPointer<QProcess> m_query; // the squeue or sacct in flight
    bool m_over = false;
    bool m_cancelRequested = false;
    bool m_cancelOnQuit = false;
    bool m_everKnown = false;
    int m_unknownPolls = 0;
    FollowedFile m_jobFile;
    std::map<int, FollowedFile> m_taskFiles;
    std::map<int, QStringList> m_taskLines;
};

// What a Slurm client command printed, run to its end: for the pre-flight
// check and the job. `program` is looked up on PATH.
struct SlurmCommandResult
{
    bool started = false; // false: the program is not installed (or not on PATH)
    int exitCode = 0;
    QString output; // stdout
    QString errors; // stderr
};
// Runs `program arguments` and calls `done` on the caller's thread when it
// ends (or could not start). Does not block. `context` owns the process.
void runSlurmCommand(QObject *context, const QString &program, const QStringList &arguments,
                     std::function<void(const SlurmCommandResult &)> done);
// The same, blocking up to `timeoutMs`.
SlurmCommandResult runSlurmCommandNow(const QString &program, const QStringList &arguments, int timeoutMs);

} // namespace parasync
