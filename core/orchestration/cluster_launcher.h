#pragma once

// Starts and stops the tasks of a cluster as real processes -- parasync-node,
// or for a worker the plan's worker command (a Python worker) -- children of
// this process, or on remote hosts through ssh (a task whose host has an
// entry in ClusterPlan::hosts; see task_runner.h) -- and tracks each one:
// state, pid, output. Qt Core only (QProcess); lives on the GUI
// thread or the headless main thread, and never blocks it. Quitting
// (destroying the launcher) stops every process it started, remote ones
// included: no orphans left holding ports.

#include "config/cluster_plan.h"
#include "config/cluster_spec.h"
#include "config/task_options.h"
#include "orchestration/run_state.h"

#include <QObject>
#include <QPointer>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace parasync {

class ClusterWatcher;
class TaskRunner;
struct TaskCommand;

// What a task is doing, as the process panel shows it.
enum class TaskState {
    NotStarted,
    Starting,   // process started, not listening yet
    WaitingFor, // waiting for a ps / the chief (see TaskInfo::detail)
    Training,
    BlockedBySync,
    BlockedByStaleness,
    Serving,  // a ps that holds variables
    Finished, // exited 0
    Stopped,  // stopped on request
    Dead,     // crashed, killed, or exited non-zero
};
QString taskStateName(TaskState state);

struct TaskInfo
{
    TaskId task;
    HostPort address;
    TaskState state = TaskState::NotStarted;
    QString detail; // "waiting for the chief worker:0 ...", "exit code 2: ..."
    qint64 pid = 0; // on the host the task runs on
    QString host;   // where it runs: "this machine", "alice@10.0.0.2 (ssh)"
    int exitCode = 0;
    double stepsPerSecond = 0;
    int stragglerDelayMs = 0;
};

// A port of the plan that is taken, with its holder when /proc tells.
struct PortConflict
{
    TaskId task;
    HostPort address;
    QString holder;             // "pid 1234 (parasync-node --job_name=ps ...)", or empty
    uint16_t suggestedPort = 0; // a free port to use instead
};

class ClusterLauncher : public QObject
{
    Q_OBJECT

public:
    explicit ClusterLauncher(QObject *parent = nullptr);
    ~ClusterLauncher() override; // stops every task it started

    // The cluster token the tasks check (see cluster_token.h). Children get
    // it as PARASYNC_CLUSTER_TOKEN in their environment, never on their
    // command line, where `ps` would show it; empty (the default) leaves the
    // environment as the app has it. Applies to tasks started afterwards.
    void setClusterToken(const std::string &token) { m_clusterToken = token; }

    // The parasync-node binary; defaults to the one beside the app (or, in a
    // build tree, in ../parasync-node/), then $PARASYNC_NODE, then PATH.
    void setNodeBinary(const QString &path);
    QString nodeBinary() const;

    // Ports of local tasks that are taken right now (before launching; the
    // pre-flight check looks at remote ones). A
    // port held only by connections in TIME_WAIT (a run that just ended) is
    // not taken: the node binds it as gRPC does, with SO_REUSEADDR.
    // Blocks briefly (reads /proc for the holders).
    std::vector<PortConflict> checkPorts(const ClusterPlan &plan) const;
    // The plan with every conflicting port replaced by its suggestion.
    static ClusterPlan withSuggestedPorts(ClusterPlan plan, const std::vector<PortConflict> &conflicts);

    // Starts every task: the ps tasks first, the workers once every ps task
    // listens (or after a few seconds, so they say themselves what they wait
    // for), non-chief workers before the chief so that all take part from the
    // first step. Returns false and sets `error` when a port is taken (see
    // checkPorts), the spec is invalid, the binary (or the program of a local
    // worker's command) is missing, or tasks of an earlier launch are still
    // running. A worker with a command of its own gets PYTHONPATH to this
    // build tree's Python package when the app runs from one. Does not block. Remote tasks are
    // started through ssh; what goes wrong there (ssh cannot log in, the
    // binary is missing there) ends that task Dead with what to try.
    bool launch(const ClusterPlan &plan, QString *error);
    const ClusterPlan &plan() const { return m_plan; }

    // Holds the workers of every later launch() until `watcher` reports it
    // is connected to the plan's ps:0 (call watcher->connectTo(ps:0) right
    // after launch()), so a short run -- the demo trains 2000 steps in a
    // fraction of a second -- is watched from its first step. Gives up
    // waiting after 10 s: a watcher that cannot connect never keeps a
    // cluster from training. nullptr turns it off (the default).
    void holdWorkersUntilWatched(ClusterWatcher *watcher);

    const std::vector<TaskInfo> &tasks() const { return m_infos; }
    int taskRow(const TaskId &task) const; // index into tasks(), -1 if unknown
    QString output(int row) const;         // the task's log so far (bounded)

    // None of these block: the outcome arrives as taskChanged.
    void stopTask(int row);    // SIGTERM: a clean stop (SIGKILL if still running 5 s later)
    void killTask(int row);    // SIGKILL, as a crash would (the task ends Dead)
    void restartTask(int row); // start again with the same flags (stopping it first if running)
    // An elastic cluster (--max_workers above the workers launched): whether
    // one more worker may join while it trains; else why not, in words.
    bool canAddWorker(QString *whyNot = nullptr) const;
    // Starts one more worker with the next index, on the last worker's host
    // at a port no task of the cluster uses (free here, for a local one); its
    // --worker_hosts lists the workers up to itself, so the plan grows by
    // it. Returns its row in tasks(), or -1 with `error` set. Does not block.
    // Stopping it (stopTask) is how it leaves.
    int addWorker(QString *error);
    // Stops all tasks; returns once all have exited. Blocks up to ~3 s
    // (SIGTERM, then SIGKILL for stragglers; a few seconds more for remote
    // tasks whose ssh connection does not answer): meant for quitting.
    void stopAll();
    bool anyRunning() const;

    // Updates a task's state from what ps:0 or the task reports (the watcher
    // calls this); the launcher keeps process-level states (dead, finished).
    void updateFromStatus(const TaskId &task, TaskState state, const QString &detail, double stepsPerSecond);
    // The same for every worker (phase, what it waits for, steps/s) and
    // ps:0 (global step, mode) of a watcher's snapshot.
    void updateFromSnapshot(const RunSnapshot &snapshot);
    // Records the straggler delay a worker now has (TaskInfo::stragglerDelayMs).
    void setStragglerDelay(const TaskId &task, int delayMs);

Q_SIGNALS:
    void taskChanged(int row);
    void outputAppended(int row, const QString &text);
    void allExited();

private:
    struct Process;
    // A row for `task` of m_plan, not started yet; returns its row.
    int appendTask(const TaskId &task);
    void startTask(int row);
    // parasync-node with the plan's flags, or the worker's own command.
    TaskCommand taskCommand(int row) const;
    void startPendingWorkers();
    void updatePendingWorkers(); // starts the held workers once ps tasks listen and a watcher follows
    void onOutput(int row);
    // The task's complete lines: the runner's own (the remote pid) consumed,
    // the rest kept for output(), read for the task's state, logged, emitted.
    void takeLines(int row, const QString &text);
    // A port above `after`'s on its host that no task of the plan has and,
    // on this machine's loopback, nothing listens on; 0 when none is left.
    uint16_t nextWorkerPort(const HostPort &after, bool remote) const;
    // A worker addWorker placed that exited because its port was taken
    // (its `lastLines` say so): placed on the next port, to be started again.
    bool moveOffTakenPort(int row, const QString &lastLines);
    void interpretLine(int row, const QString &line);
    void onFinished(int row, int exitCode, QProcess::ExitStatus status);
    void onFailedToStart(int row);
    void setState(int row, TaskState state, const QString &detail);
    void emitAllExitedIfDone();
    bool isRunning(int row) const;

    ClusterPlan m_plan;
    QString m_nodeBinary;
    std::string m_clusterToken;
    std::vector<TaskInfo> m_infos;
    std::vector<std::unique_ptr<Process>> m_processes;
    // Workers wait to be started until every ps task listens (or a few
    // seconds passed) and, with holdWorkersUntilWatched, a watcher follows.
    bool m_workersPending = false;
    bool m_psReady = false;
    bool m_watcherReady = false;
    int m_launchGeneration = 0;
    // The rows of the workers addWorker placed, each with the taken ports it
    // moved past: the launcher chose their ports, so it moves them on.
    std::map<int, int> m_portMovesOfAddedWorkers;
    QPointer<ClusterWatcher> m_gateWatcher;
    QMetaObject::Connection m_gateConnection;
};

} // namespace parasync
