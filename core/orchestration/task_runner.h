#pragma once

// How the launcher runs one task's process: directly as a child of this
// process, or on the host its address names, through ssh. Either way the
// launcher sees a local QProcess whose output is the task's output; the
// runner decides how it is started, how a stop or a kill reaches the task,
// and what its exit means. Qt Core only; used on the launcher's thread.

#include "config/cluster_file.h"
#include "config/cluster_spec.h"

#include <QProcess>
#include <QString>
#include <QStringList>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace parasync {

// How a task's process ended, in the task's own terms (for ssh: the remote
// task's exit, not the ssh client's).
struct TaskExit
{
    bool crashed = false; // ended by a signal
    int code = 0;         // exit code, or the signal's number when crashed
    QString failure;      // set when the task could not be run at all (ssh failed), with what to try
};

// What a task runs: parasync-node with its flags, or a worker's own command
// (a Python worker: the cluster file's "worker_command") with the cluster
// flags after its own arguments.
struct TaskCommand
{
    QString program;
    QStringList arguments;
    // What to do when `program` is not found where the task runs: where its
    // path comes from ("give its path as \"node\" in ...").
    QString whenMissing;
    // Variables besides the token for a task on this machine (PYTHONPATH to
    // this build's Python package); a remote host's paths are its own, so
    // the ssh runner leaves them out.
    std::vector<std::pair<QString, QString>> localEnvironment;
};

// What to do when the program of a worker command (`program`, its first
// word) is not there to run: for messages of the launcher and the pre-flight.
QString workerProgramMissingAdvice(const QString &program);

class TaskRunner
{
public:
    virtual ~TaskRunner() = default;

    // Starts `process` (not yet started, output channels merged) for the
    // task `command`. The token reaches the task through its environment,
    // never a command line. Does not block.
    virtual void start(QProcess &process, const TaskCommand &command, const std::string &clusterToken) = 0;
    // A clean stop (SIGTERM to the task) and a hard one (SIGKILL); neither blocks.
    virtual void terminate(QProcess &process) = 0;
    virtual void kill(QProcess &process) = 0;
    // The last resort when the task did not end after kill(): ends the
    // local process (for ssh: the client, which also ends the remote task
    // through its closed control channel).
    virtual void abandon(QProcess &process) { process.kill(); }

    // Whether `line` of the output is the runner's own (not the task's);
    // sets `pid` when it tells the task's pid.
    virtual bool consumeLine(const QString &line, qint64 *pid)
    {
        (void)line;
        (void)pid;
        return false;
    }
    virtual TaskExit interpretExit(int exitCode, QProcess::ExitStatus status, const QString &lastLines) const;

    // The program the task runs ("parasync-node" on a remote host).
    virtual QString program(const QString &localNodeBinary) const { return localNodeBinary; }
    virtual bool isRemote() const { return false; }
    // Where the task runs, as the process panel says it: "this machine",
    // "alice@10.0.0.2 (ssh)".
    virtual QString where() const;
};

std::unique_ptr<TaskRunner> makeLocalRunner();
std::unique_ptr<TaskRunner> makeSshRunner(const RemoteHost &host);

} // namespace parasync
