#pragma once

// The check before a launch: for every host of a cluster plan, is it
// reachable over ssh, is parasync-node there and of this build's version and
// protocol, is each task's port free there, and can each worker host reach
// every ps address (the seeds' firewall pitfall), and is the program of each
// worker command (a Python worker's interpreter) there. Every failure comes with
// the fix to try; taken ports come with a free one, and planWithFreePorts()
// rewrites the plan to use them. Runs the checks as processes (ssh for
// remote hosts, the local parasync-node here) so the caller's thread never
// blocks. Qt Core only.

#include "config/cluster_plan.h"

#include <QObject>
#include <QProcess>
#include <QString>

#include <memory>
#include <vector>

namespace parasync {

enum class CheckOutcome { Pending, Passed, Failed, Skipped };

struct PreflightItem
{
    enum class Kind { Ssh, Node, Port, Reach, Program };
    Kind kind = Kind::Ssh;
    QString host;    // the host checked (its name in the cluster's addresses)
    QString subject; // "ssh alice@h:22", "parasync-node", "ps:0 port 2222", "ps:0 at h:2222", "/usr/bin/python3"
    CheckOutcome outcome = CheckOutcome::Pending;
    QString detail;             // what was found
    QString fix;                // what to try, for a failure
    TaskId task;                // Port, Reach: the task (Reach: the ps task probed)
    uint16_t suggestedPort = 0; // Port: a free port on that host
};
// "SSH", "parasync-node", "port free", "reaches ps", "worker command"
QString checkKindName(PreflightItem::Kind kind);

class PreflightCheck : public QObject
{
    Q_OBJECT

public:
    explicit PreflightCheck(QObject *parent = nullptr);
    ~PreflightCheck() override; // ends checks still running

    // The local parasync-node (for tasks on this machine and the version to match).
    void setNodeBinary(const QString &path) { m_nodeBinary = path; }
    // Starts the checks of `plan`; itemsChanged follows as results come in,
    // then finished. Does not block. Restarting drops the previous run.
    void start(const ClusterPlan &plan);
    bool isRunning() const { return m_running; }

    const std::vector<PreflightItem> &items() const { return m_items; }
    // The hosts of the plan, in task order ("127.0.0.1" for local tasks).
    const QStringList &hosts() const { return m_hosts; }
    // What a check of `plan` goes through, for a person, before it starts:
    // "this machine" (every task local), "2 remote hosts (10.0.0.2,
    // 10.0.0.3)", "this machine and 1 remote host (10.0.0.2)". A "hosts"
    // entry that no task's address names is not checked, nor counted.
    static QString describeHosts(const ClusterPlan &plan);
    bool passed() const; // no failure
    bool hasPortSuggestions() const;
    // The plan with each taken port replaced by the free one found there.
    ClusterPlan planWithFreePorts() const;
    // Every item as text, one per line with its fix (for the headless mode and logs).
    QString report() const;

Q_SIGNALS:
    void itemsChanged();
    void finished(bool passed);

private:
    struct HostRun;
    void startHostChecks();
    void onHostChecked(int hostIndex, const QString &output, int exitCode, bool crashed);
    void checkWorkerPrograms(const HostRun &run, const QStringList &lines);
    void startReachChecks();
    void onReachChecked(int hostIndex, const QString &output, int exitCode, bool crashed);
    void finish();
    QProcess *runOnHost(int hostIndex, const QStringList &nodeArguments, const QString &script);
    PreflightItem &item(PreflightItem::Kind kind, const QString &host, const QString &subject);
    void fail(PreflightItem &entry, const QString &detail, const QString &fix);
    void pass(PreflightItem &entry, const QString &detail);

    ClusterPlan m_plan;
    QString m_nodeBinary;
    std::vector<PreflightItem> m_items;
    QStringList m_hosts;
    std::vector<std::unique_ptr<HostRun>> m_runs; // one per host
    int m_pending = 0;
    int m_holdersWaiting = 0; // holders not yet listening on their ports
    bool m_running = false;
    int m_generation = 0;
};

} // namespace parasync
