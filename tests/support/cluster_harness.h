#pragma once

// Starts real parasync-node processes on free loopback ports, the way a user
// does, and waits for what they print or what ps:0 reports. Used by the
// integration tests; no mocks.

#include "proto/parasync.grpc.pb.h"
#include "wire/rpc.h"

#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace parasync::testing {

// Path of the parasync-node binary under test (ctest sets PARASYNC_NODE).
QString nodeBinary();

class NodeProcess
{
public:
    NodeProcess(QString name, QStringList arguments);
    ~NodeProcess();

    // Runs the task inside network namespace `name` (ip netns exec), as
    // on another host; before start().
    void setNetNamespace(const QString &name) { m_netNamespace = name; }
    void start(const QProcessEnvironment &environment = QProcessEnvironment::systemEnvironment());
    // Waits until the output (stdout and stderr merged) contains `text`.
    bool waitForOutput(const QString &text, std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // Waits for the process to exit; returns its exit code, or -1 on timeout
    // or a crash.
    int waitForExit(std::chrono::milliseconds timeout = std::chrono::seconds(60));
    void kill();      // SIGKILL, as a crash or `kill -9`
    void terminate(); // SIGTERM
    bool isRunning() const;
    qint64 pid() const;
    QString output();
    const QString &name() const { return m_name; }

private:
    void drain();
    QString m_name;
    QStringList m_arguments;
    QString m_netNamespace;
    std::unique_ptr<QProcess> m_process;
    QString m_output;
};

class LocalCluster
{
public:
    LocalCluster(int numPs, int numWorkers, QStringList trainingFlags, QString logdir = {});
    ~LocalCluster();

    // Every task gets this token through its environment (never its command
    // line), and the harness's own control calls carry it.
    void setClusterToken(const QString &token) { m_token = token; }
    // TLS for the harness's own control calls (give the tasks their TLS
    // flags with the training flags).
    void setClientTls(const TlsMaterial &tls) { m_tls = tls; }

    // Gives every ps task a backup (--ps_backup_hosts) on a free port of its
    // own; before any task starts.
    void addBackups();
    bool replicated() const { return !m_backupHosts.isEmpty(); }

    QStringList clusterFlags() const;
    NodeProcess &startPs(int index, QStringList extraFlags = {});
    // ps task `index`'s backup, --job_name=ps_backup.
    NodeProcess &startBackup(int index, QStringList extraFlags = {});
    NodeProcess &startWorker(int index, QStringList extraFlags = {});
    // A worker beyond the --worker_hosts the running tasks were given, as an
    // elastic cluster's newcomer joins (--max_workers among the training
    // flags): on a free port of its own, with --worker_hosts listing the
    // workers up to itself. Its index is the next one; worker() has it.
    NodeProcess &startNewcomer(QStringList extraFlags = {});
    // ps tasks, then workers (non-chief first, as a user may).
    void startAll();

    NodeProcess &ps(int index) { return *m_ps.at(size_t(index)); }
    NodeProcess &backup(int index) { return *m_backups.at(size_t(index)); }
    QString backupAddress(int index) const { return m_backupHosts.at(index); }
    NodeProcess &worker(int index) { return *m_workers.at(size_t(index)); }
    QString psAddress(int index) const { return m_psHosts.at(index); }
    QString workerAddress(int index) const { return m_workerHosts.at(index); }
    const QString &logdir() const { return m_logdir; }

    // Waits for every started task to exit; returns true when all exited 0,
    // otherwise false with each task's code and output tail in `report`.
    bool waitAllExitCleanly(QString *report, std::chrono::milliseconds timeout = std::chrono::seconds(120));
    // Stops the cluster as a user's Ctrl+C in each terminal would, workers
    // first: SIGTERM to every running worker, and once they are gone to the
    // ps tasks and their backups; then waitAllExitCleanly().
    bool stopAllCleanly(QString *report, std::chrono::milliseconds timeout = std::chrono::seconds(120));

    // ps:0's view of the cluster, through its control service. With
    // backups, the process of ps:0's pair that serves answers. Asks again
    // for up to 15 s: a loaded machine (ThreadSanitizer, two suites at once)
    // may drop a connection while it is set up. False, with a warning that
    // says what failed, when no answer came.
    bool clusterStatus(proto::ClusterStatusResponse *status) const;
    // Polls ps:0 until `predicate` holds for its status.
    bool waitForStatus(const std::function<bool(const proto::ClusterStatusResponse &)> &predicate,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
    // Waits until ps:0 has worker `index` training (it joined and pushed, so
    // its own control service listens). ps:0 counts a worker from its first
    // push: the global step can pass 100 while a slow worker still starts.
    bool waitForWorkerTraining(int index, std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
    // Polls ps:0 until worker `index` is in `phase` (WAITING_FOR_CHIEF: its
    // join is held until the chief initialises).
    bool waitForWorkerPhase(int index, proto::WorkerPhase phase,
                            std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
    grpc::Status setMode(const proto::ModeConfig &mode, proto::SetModeResponse *response = nullptr) const;
    // Polls the task at `address` (its own TaskControl: a ps task's rows, a
    // backup's role) until `predicate` holds for its status.
    bool waitForTaskStatus(const QString &address,
                           const std::function<bool(const proto::TaskStatusResponse &)> &predicate,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;

private:
    QProcessEnvironment environment() const;
    RpcSettings rpcSettings() const;
    // One status call to each process of ps:0's pair; the error of the last
    // failed one in `error`.
    bool askStatusOnce(proto::ClusterStatusResponse *status, grpc::Status *error) const;
    // ps:0's addresses: its own, then its backup's.
    QStringList ps0Pair() const;
    QStringList m_psHosts;
    QStringList m_backupHosts;
    QStringList m_workerHosts;
    QStringList m_trainingFlags;
    QString m_logdir;
    QString m_token;
    TlsMaterial m_tls;
    std::vector<std::unique_ptr<NodeProcess>> m_ps;
    std::vector<std::unique_ptr<NodeProcess>> m_backups;
    std::vector<std::unique_ptr<NodeProcess>> m_workers;
};

// A loopback port held open by the test process, as a stale task would
// hold it (listening, never accepting).
class HeldPort
{
public:
    explicit HeldPort(uint16_t port);
    ~HeldPort();
    HeldPort(const HeldPort &) = delete;
    HeldPort &operator=(const HeldPort &) = delete;
    bool ok() const { return m_ok; }

private:
    int m_fd = -1;
    bool m_ok = false;
};

// The run directory's records.
std::vector<QJsonObject> readStepLog(const QString &logdir);
struct MetricsTable
{
    QStringList header;
    std::vector<QStringList> rows;
    int column(const QString &name) const { return int(header.indexOf(name)); }
};
MetricsTable readMetrics(const QString &logdir);

} // namespace parasync::testing
