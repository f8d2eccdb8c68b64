// ClusterLauncher's elastic cluster: one more worker joins while the cluster
// trains, beyond the workers it was launched with, as --max_workers leaves
// room for (docs/clusters.md, "Workers that join and leave").

#include "orchestration/cluster_launcher.h"

#include "base/port_holder.h"
#include "base/qt_text.h"

#include <set>

namespace parasync {

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

int ClusterLauncher::addWorker(QString *error)
{
    if (!canAddWorker(error))
        return -1;
    // On the last worker's host, above its port, at one no task uses: a
    // newcomer's address must differ from every address the cluster has.
    const HostPort &last = m_plan.cluster.workers.back();
    std::set<int> used;
    for (const TaskId &task : m_plan.tasks())
        used.insert(m_plan.cluster.address(task).port);
    const TaskId task{JobName::Worker, m_plan.cluster.numWorkers()};
    const bool remote = m_plan.remoteHost(TaskId{JobName::Worker, task.index - 1}) != nullptr;
    HostPort address{last.host, 0};
    for (int port = last.port + 1; port <= 65535 && address.port == 0; ++port)
        if (!used.count(port) && (remote || !last.isLoopback() || isPortFree(last.host, uint16_t(port))))
            address.port = port;
    if (address.port == 0) {
        if (error)
            *error = tr("no free port above %1 on %2 for worker:%3").arg(last.port).arg(qs(last.host)).arg(task.index);
        return -1;
    }
    m_plan.cluster.workers.push_back(address);
    const int row = appendTask(task);
    Q_EMIT taskChanged(row);
    startTask(row);
    return row;
}

} // namespace parasync
