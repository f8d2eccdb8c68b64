#pragma once

// A way to run a designed cluster that hands the whole plan to a cluster
// manager to place: a job of the user's Slurm today (slurm_backend.h); PBS,
// LSF or Ray would each be one more subclass. The window and
// `parasync --headless` drive every back end alike -- start, follow its
// story, stop -- and the back end points the watcher at ps:0 once it knows
// where that runs. A new launcher is one subclass plus the dialog that fills
// in its settings; nothing else learns its name.
//
// The processes this app starts itself, here and over ssh, are
// ClusterLauncher's, driven by LaunchSequence: that path stops mid-way for
// questions (a taken port, a failed check of a host) that a cluster
// manager's queue never asks, so it keeps its own sequence.
//
// Qt Core only; lives on the GUI or headless main thread and never blocks it
// but in stopAndWait(), meant for quitting.

#include "config/cluster_plan.h"
#include "config/cluster_spec.h"
#include "wire/rpc_settings.h"

#include <QObject>
#include <QString>

namespace parasync {

class ClusterWatcher;

class ClusterBackend : public QObject
{
    Q_OBJECT

public:
    // How a job ended: as planned (its last step), stopped on this app's
    // request, or otherwise (killed, out of time, a task failed).
    enum class Outcome { Completed, Stopped, Failed };

    using QObject::QObject;

    // The manager's name for the menu and the messages: "Slurm".
    virtual QString name() const = 0;
    // The job once the manager accepted it, in its own words ("Slurm job
    // 42"); empty before.
    virtual QString jobName() const = 0;
    // Where the job's own files go (its script, each task's output): a
    // folder the tasks' hosts share with this machine.
    virtual QString outputDirectory() const = 0;
    // Pointed at ps:0 with the job's token and TLS once the job runs;
    // nullptr: nobody watches. Not owned; must outlive the job.
    virtual void setWatcher(ClusterWatcher *watcher) = 0;

    // Checks that the manager can run `plan` (checked() follows, said() tells
    // what is checked), then, if it passed, starts it. Without the check
    // (setCheckFirst(false)) starts at once. The plan's run directory is
    // written by the tasks: an absolute path on a file system they share
    // with this machine. The token in `rpc` reaches the tasks without a
    // command line; without one the job gets a new one. Does not block; a
    // refusal comes as failed().
    virtual void start(const ClusterPlan &plan, const RpcSettings &rpc) = 0;
    // Only the check: checked() follows, nothing starts.
    virtual void check(const ClusterPlan &plan) = 0;
    // The job as a file a person submits by hand (a batch script), written
    // to `path`. Returns false with `error` when it cannot be.
    virtual bool writeJobScript(const ClusterPlan &plan, const QString &path, QString *error) const = 0;

    // Asks the manager to stop the job (the tasks get SIGTERM, a clean
    // stop); ended() follows. Does not block.
    virtual void stop() = 0;
    // Stops and waits until the manager reports the job over or `timeoutMs`
    // passed; returns whether it is over. Blocks: for quitting.
    virtual bool stopAndWait(int timeoutMs) = 0;
    // The manager accepted the job and it is not over.
    virtual bool isLive() const = 0;

    // Whether destroying the back end (quitting the app) stops a live job.
    // Off by default: a job on a cluster usually outlives the laptop that
    // submitted it.
    void setStopOnQuit(bool stop) { m_stopOnQuit = stop; }
    bool stopOnQuit() const { return m_stopOnQuit; }
    void setCheckFirst(bool check) { m_checkFirst = check; }
    bool checkFirst() const { return m_checkFirst; }

Q_SIGNALS:
    // A step of the story, for a log: "Submitted Slurm job 42 (...)".
    void said(const QString &line);
    // The job's state changed: one line for a status bar.
    void statusChanged(const QString &line);
    // The check is over: `report` has one line per check and the fix of
    // each that failed. After a failed check nothing starts.
    void checked(bool passed, const QString &report);
    // The job runs: ps:0 listens (or soon will) at `ps0`.
    void running(const QString &ps0);
    // A line a task printed, or (`task` empty) the job's own output.
    void taskOutput(const QString &task, const QString &line);
    // The job is over and everything its tasks printed was relayed;
    // `summary` says how in words, with where its output is.
    void ended(parasync::ClusterBackend::Outcome outcome, const QString &summary);
    // The manager refused (to start, or to stop): `message` says why and
    // what to try.
    void failed(const QString &message);

private:
    bool m_stopOnQuit = false;
    bool m_checkFirst = true;
};

} // namespace parasync
