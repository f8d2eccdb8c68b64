#pragma once

// A real one-node Slurm for tests: Debian's munged, slurmctld and slurmd,
// started by the test as root, without systemd, on a slurm.conf and munge
// key generated into a temporary directory (non-default ports, the munge
// socket of its own munged, proctrack/linuxproc, task/none, the node at
// 127.0.0.1 under this machine's host name with config_overrides so it may
// claim more CPUs than it has). Slurm's client commands reach it through
// SLURM_CONF, which start() sets for this process and its children, exactly
// as a login node's users reach their cluster.

#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>

#include <cstdint>
#include <memory>
#include <vector>

namespace parasync::testing {

class SlurmCluster
{
public:
    SlurmCluster();
    ~SlurmCluster(); // cancels every job of this cluster, then stops its daemons (only them, by pid)

    // Generates the key and the configuration and starts the daemons; waits
    // until the node is idle. False with the reason in `whyNot` (not root,
    // Slurm or munge not installed, a daemon that cannot run here).
    bool start(QString *whyNot);

    QString nodeName() const { return m_nodeName; }
    QString partition() const { return QStringLiteral("debug"); }
    int cpus() const { return 8; }
    QString confPath() const;
    // The daemons' logs, for a failure message.
    QString logs() const;
    // Runs a Slurm client command against this cluster; its stdout and stderr.
    QString run(const QString &program, const QStringList &arguments, int *exitCode = nullptr) const;
    // Whether squeue lists no job and no job step (every task gone).
    bool idle() const;

private:
    bool startDaemon(const QString &program, const QStringList &arguments, const QString &name, QString *whyNot);

    QTemporaryDir m_dir;
    QString m_nodeName;
    QByteArray m_previousSlurmConf;
    std::vector<std::unique_ptr<QProcess>> m_daemons; // munged, slurmctld, slurmd
    std::vector<QString> m_daemonNames;
};

// Ports for a job's tasks: a base with `count` free ports from it up, on
// 127.0.0.1 (the node's tasks listen at the base plus their local index).
// 0 when none was found.
uint16_t freePortBase(int count);

// The parasync-node processes on this machine whose command line holds
// `needle` (a job's own --slurm_port_base=N), as "pid: command line".
QStringList nodeProcessesWith(const QString &needle);

} // namespace parasync::testing
