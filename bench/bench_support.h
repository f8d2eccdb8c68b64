#pragma once

// What the benchmark programs share: real parasync-node processes started the
// way a user starts them (their output goes to a log file, never to a pipe
// nobody reads, which would stall a task on a full pipe), and raw samples
// written as JSON for bench/report.py, which takes medians, spreads and
// ratios. No timing is judged here.

#include "alloc_counter.h"
#include "proto/parasync.pb.h"
#include "wire/rpc.h"

#include <QJsonArray>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace parasync::bench {

// parasync-node: $PARASYNC_NODE, else the one of the same build tree as the
// running benchmark (build/<preset>/app/parasync-node/parasync-node).
QString nodeBinary();

// Where children's logs go: $PARASYNC_BENCH_LOGS, else a directory under
// the system temp dir. Created on first use.
QString logDirectory();

// A child process whose stdout and stderr go to `<logDirectory>/<name>.log`.
// Killed (SIGKILL) by the kernel if the benchmark dies, terminated (SIGTERM,
// then SIGKILL after 5 s) by the destructor: no orphans are left behind.
class ChildProcess
{
public:
    ChildProcess(QString program, QStringList arguments, QString name);
    ~ChildProcess();
    ChildProcess(const ChildProcess &) = delete;
    ChildProcess &operator=(const ChildProcess &) = delete;

    // Counts the child's heap allocations from its start (alloc_counter.h:
    // the counting library preloaded); call before start().
    void countAllocations();
    // Its allocations so far; zeros unless countAllocations() was called.
    AllocCounts allocations() const;
    void start();
    // Waits until the log contains `text`; false on timeout or exit.
    bool waitForLog(const QString &text, std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // SIGTERM, and waits for the exit (SIGKILL after `grace`).
    void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
    bool isRunning() const;
    qint64 pid() const;
    QString logPath() const { return m_logPath; }

private:
    QString m_program;
    QStringList m_arguments;
    QString m_logPath;
    QString m_allocCountsPath;
    std::unique_ptr<QProcess> m_process;
};

// A cluster of real parasync-node processes on free loopback ports, all with
// the same training flags, as a user runs one (ps tasks first, then workers).
class BenchCluster
{
public:
    // With `backups`, every ps task has one (--ps_backup_hosts), started with
    // it; start() waits until each follows.
    BenchCluster(QString name, int numPs, int numWorkers, QStringList trainingFlags, bool backups = false);
    ~BenchCluster();

    // Starts the ps tasks, waits until they listen, then the workers. Waits
    // until ps:0 reports every worker training. False (with the log paths in
    // `error`) when that does not happen in time.
    // `beforeChief` runs once the other workers listen and before the chief
    // starts, i.e. before any step (e.g. to make a worker a straggler).
    bool start(QString *error, const std::function<void()> &beforeChief = {},
               std::chrono::milliseconds timeout = std::chrono::seconds(60));
    // Stops every task (workers first), waits for them.
    void stop();

    std::string ps0Address() const { return m_psHosts.front().toStdString(); }
    qint64 ps0Pid() const { return m_tasks.empty() ? 0 : m_tasks.front()->pid(); }
    std::string workerAddress(int index) const { return m_workerHosts.at(index).toStdString(); }
    proto::ClusterStatusResponse status() const; // throws InputError when unreachable

private:
    bool startOnce(QString *error, const std::function<void()> &beforeChief, std::chrono::milliseconds timeout,
                   bool *portTaken);
    QString m_name;
    QStringList m_psHosts;
    QStringList m_backupHosts;
    QStringList m_workerHosts;
    QStringList m_trainingFlags;
    std::vector<std::unique_ptr<ChildProcess>> m_tasks;
};

// Samples of one figure, in the order measured.
struct Samples
{
    std::string group; // "throughput", "time_to_accuracy", ...
    std::string name;  // "async/4 workers"
    std::string unit;  // "updates/s", "s", "us", "MB"
    std::vector<double> values;
    QJsonObject extra; // anything a reader needs to interpret it
};

// Collects samples and writes {"program", "quick", "results": [...]} to a
// JSON file for bench/report.py.
class ResultFile
{
public:
    ResultFile(QString program, bool quick);
    Samples &add(std::string group, std::string name, std::string unit);
    Samples *find(const std::string &group, const std::string &name);
    void note(const QString &key, const QJsonValue &value) { m_notes.insert(key, value); }
    // An empty path keeps nothing (a bench run by hand for its printed
    // lines, which left a JSON file in whatever directory it ran from).
    bool write(const QString &path) const;

private:
    QString m_program;
    bool m_quick;
    std::deque<Samples> m_samples; // add() hands out references that must stay valid
    QJsonObject m_notes;
};

// Median of `values` (by copy); NaN when empty. For progress lines only: the
// report computes the published figures.
double median(std::vector<double> values);

// Resident set size of process `pid` (0: this one) in MiB, from /proc.
double residentMiB(qint64 pid = 0);

// CPU time (user + system) of every thread of process `pid` (0: this one)
// so far, in seconds, from /proc/PID/stat: whole clock ticks
// (sysconf(_SC_CLK_TCK), 10 ms here), so measure over windows of seconds.
double cpuSeconds(qint64 pid = 0);

// The scheduler's account of one thread of this process (the main thread
// when `tid` is 0), from /proc/self/task/TID/schedstat: seconds it ran on a
// core, and seconds it was runnable but waited for one. NaN when the kernel
// keeps no schedstat.
struct ThreadSchedule
{
    double running = 0;
    double waiting = 0;
};
ThreadSchedule threadSchedule(qint64 tid = 0);

// Context switches (voluntary + involuntary) of every thread of `pid` so far,
// from /proc: how often its threads went to sleep and were woken.
double contextSwitches(qint64 pid);

} // namespace parasync::bench
