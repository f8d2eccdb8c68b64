// ClusterLauncher's check of the plan's local ports before a launch, and the
// free ports it suggests instead of taken ones (the launch sequence asks the
// user which to take).

#include "orchestration/cluster_launcher.h"

#include "base/port_holder.h"
#include "base/qt_text.h"

#include <set>

namespace parasync {

namespace {

// Binding as the task will (see bindPort): a port with only TIME_WAIT
// connections from a run that just ended is not taken.
bool portTaken(const HostPort &address)
{
    return !isPortFree(address.host, address.port);
}

} // namespace

std::vector<PortConflict> ClusterLauncher::checkPorts(const ClusterPlan &plan) const
{
    std::vector<PortConflict> conflicts;
    std::set<uint16_t> planned;
    for (const auto &task : plan.tasks())
        planned.insert(plan.cluster.address(task).port);
    for (const auto &task : plan.tasks()) {
        const HostPort &address = plan.cluster.address(task);
        if (plan.remoteHost(task) || !address.isLoopback() || !portTaken(address))
            continue;
        PortConflict conflict;
        conflict.task = task;
        conflict.address = address;
        if (const auto holder = findPortHolder(address.port))
            conflict.holder = qs(holder->describe());
        const std::string host = address.host == "localhost" || address.host.find(':') != std::string::npos
                                     ? std::string("127.0.0.1")
                                     : address.host;
        // A suggestion must not collide with the plan or another suggestion.
        for (int attempt = 0; attempt < 20 && conflict.suggestedPort == 0; ++attempt) {
            const uint16_t port = pickFreePort(host);
            if (port != 0 && planned.insert(port).second)
                conflict.suggestedPort = port;
        }
        conflicts.push_back(std::move(conflict));
    }
    return conflicts;
}

ClusterPlan ClusterLauncher::withSuggestedPorts(ClusterPlan plan, const std::vector<PortConflict> &conflicts)
{
    for (const auto &conflict : conflicts) {
        if (conflict.suggestedPort == 0)
            continue;
        auto &list = conflict.task.job == JobName::Ps         ? plan.cluster.ps
                     : conflict.task.job == JobName::PsBackup ? plan.cluster.psBackups
                                                              : plan.cluster.workers;
        if (conflict.task.index >= 0 && size_t(conflict.task.index) < list.size())
            list[size_t(conflict.task.index)].port = conflict.suggestedPort;
    }
    return plan;
}

} // namespace parasync
