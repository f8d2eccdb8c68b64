// ClusterLauncher's elastic cluster: one more worker joins while the cluster
// trains, beyond the workers it was launched with, as --max_workers leaves
// room for (docs/clusters.md, "Workers that join and leave").

#include "orchestration/cluster_launcher.h"

#include "base/port_holder.h"
#include "base/qt_text.h"
#include "orchestration/logging.h"

#include <set>

namespace parasync {

namespace {

// Taken ports an added worker moves past before the launcher gives up and
// shows why: a host where so many ports in a row are taken wants a look.
constexpr int kMaxPortMoves = 10;

} // namespace

bool ClusterLauncher::canAddWorker(QString *whyNot) const
{
    const auto refuse = [whyNot](const QString &why) {
        if (whyNot)
            *whyNot = why;
        return false;
    };
    const int ps0 = taskRow(TaskId{JobName::Ps, 0});
    if (ps0 < 0 || !isRunning(ps0))
        return refuse(tr("no cluster this app launched is running"));
    const int room = m_plan.training.maxWorkers;
    const int workers = m_plan.cluster.numWorkers();
    if (room <= workers)
        return refuse(
            room == 0 ? tr("the cluster was launched without room for more workers: give it more room "
                           "for workers in the cluster designer (--max_workers) and launch it again")
                      : tr("the cluster has room for %1 workers (--max_workers), and all %1 were started").arg(room));
    return true;
}

uint16_t ClusterLauncher::nextWorkerPort(const HostPort &after, bool remote) const
{
    // A newcomer's address must differ from every address the cluster has.
    std::set<int> used;
    for (const TaskId &task : m_plan.tasks())
        used.insert(m_plan.cluster.address(task).port);
    // A remote host's ports cannot be tried from here: its worker says when
    // one is taken (moveOffTakenPort).
    for (int port = after.port + 1; port <= 65535; ++port)
        if (!used.count(port) && (remote || !after.isLoopback() || isPortFree(after.host, uint16_t(port))))
            return uint16_t(port);
    return 0;
}

int ClusterLauncher::addWorker(QString *error)
{
    if (!canAddWorker(error))
        return -1;
    // On the last worker's host, above its port.
    const HostPort &last = m_plan.cluster.workers.back();
    const TaskId task{JobName::Worker, m_plan.cluster.numWorkers()};
    const bool remote = m_plan.remoteHost(TaskId{JobName::Worker, task.index - 1}) != nullptr;
    const HostPort address{last.host, nextWorkerPort(last, remote)};
    if (address.port == 0) {
        if (error)
            *error = tr("no free port above %1 on %2 for worker:%3").arg(last.port).arg(qs(last.host)).arg(task.index);
        return -1;
    }
    m_plan.cluster.workers.push_back(address);
    const int row = appendTask(task);
    m_portMovesOfAddedWorkers[row] = 0;
    Q_EMIT taskChanged(row);
    startTask(row);
    return row;
}

bool ClusterLauncher::moveOffTakenPort(int row, const QString &lastLines)
{
    const auto moves = m_portMovesOfAddedWorkers.find(row);
    if (moves == m_portMovesOfAddedWorkers.end() || moves->second >= kMaxPortMoves)
        return false;
    TaskInfo &info = m_infos[size_t(row)];
    const HostPort taken = info.address;
    if (!lastLines.contains(qs(portTakenMessage(taken.toString(), info.task.toString()))))
        return false;
    const uint16_t port = nextWorkerPort(taken, m_plan.remoteHost(info.task) != nullptr);
    if (port == 0)
        return false;
    ++moves->second;
    HostPort &address = m_plan.cluster.workers[size_t(info.task.index)];
    address.port = port;
    info.address = address;
    const QString moved = tr("parasync: %1 is taken on %2: %3, placed there by the launcher, starts again at %4")
                              .arg(qs(taken.toString()), info.host, qs(info.task.toString()), qs(address.toString()));
    qCInfo(lcLauncher).noquote() << moved;
    takeLines(row, moved);
    Q_EMIT taskChanged(row);
    return true;
}

} // namespace parasync
