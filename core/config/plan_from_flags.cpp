#include "config/plan_from_flags.h"

#include "base/error.h"
#include "config/cluster_file.h"
#include "config/cluster_plan_file.h"
#include "config/cluster_spec.h"
#include "config/workloads.h"

#include <QString>
#include <QStringList>

#include <algorithm>

namespace parasync {

ClusterPlan demoPlanFromEnvironment()
{
    ClusterPlan plan = ClusterPlan::demo();
    // At full speed the demo's two parameters take microseconds a step and
    // the whole run is over before the window repaints. These make it a
    // run a person can follow and that shows the modes apart:
    // - ~40 ms of simulated compute per step, long-tailed (jitter 0.5: now
    //   and then a step takes two or three times as long), so each worker
    //   makes 10-25 steps a second and the lanes can be read;
    // - worker:1 a straggler (+40 ms a step, about half worker:0's speed):
    //   sync then waits for it at every barrier, ssp lets worker:0 run up
    //   to the staleness bound and then waits, async lets its gradients
    //   arrive stale -- each visible in the lanes as it happens;
    //   ps:0 flags it as a straggler (banner, its lane) at the threshold below;
    // - a learning rate at which w and b take tens of seconds to converge,
    //   so a mode switch lands while they still move;
    // - no last step: in the window the demo trains until stopped.
    plan.training.pace.computeMs = 40;
    plan.training.pace.computeJitter = 0.5f;
    plan.workerPace[1] = plan.training.pace;
    plan.workerPace[1].stragglerMs = 40;
    // About 1.8 times worker:0's time a step, with the jitter: flagged as a
    // straggler at a threshold of 1.5 (the default 2 is for real clusters,
    // where a worker half as fast is worth a look but no surprise).
    plan.training.stragglerThreshold = 1.5f;
    plan.training.learningRate = 0.01f;
    plan.training.lastStep = 0;
    const QString ports = qEnvironmentVariable("PARASYNC_DEMO_PORTS");
    if (ports.isEmpty())
        return plan;
    std::vector<HostPort *> addresses;
    for (HostPort &ps : plan.cluster.ps)
        addresses.push_back(&ps);
    for (HostPort &worker : plan.cluster.workers)
        addresses.push_back(&worker);
    const QStringList list = ports.split(QLatin1Char(','), Qt::SkipEmptyParts);
    for (qsizetype i = 0; i < list.size() && size_t(i) < addresses.size(); ++i) {
        bool ok = false;
        const uint port = list[i].trimmed().toUInt(&ok);
        if (ok && port > 0 && port < 65536)
            addresses[size_t(i)]->port = uint16_t(port);
    }
    return plan;
}

const std::vector<std::string> &appTrainingFlags()
{
    static const std::vector<std::string> names = {
        "mode",         "staleness",  "replicas_to_aggregate", "last_step",    "logdir", "learning_rate", "optimizer",
        "batch_size",   "compute_ms", "compute_jitter",        "straggler_ms", "model",  "dataset",       "seed",
        "eval_fraction"};
    return names;
}

ClusterPlan planFromFlags(const PlanFlags &flags)
{
    if (flags.clusterFile && flags.workload)
        throw InputError("--workload and --cluster_file each describe the cluster: give one of them");
    const ClusterPlan base = flags.clusterFile ? planFromClusterFile(readClusterFile(*flags.clusterFile))
                             : flags.workload  ? workload(*flags.workload).plan
                                               : demoPlanFromEnvironment();
    // Through a cluster file's form, so that parasync-node's parser checks
    // the flags given as it checks the file's.
    ClusterFile file = clusterFileFromPlan(base);
    if (flags.psHosts)
        file.cluster.ps = parseHostList(*flags.psHosts, "--ps_hosts");
    if (flags.workerHosts)
        file.cluster.workers = parseHostList(*flags.workerHosts, "--worker_hosts");
    if (flags.psBackupHosts)
        file.cluster.psBackups = parseHostList(*flags.psBackupHosts, "--ps_backup_hosts");
    // The file's checks again: as many backups as ps tasks, no address twice.
    file.cluster.validate();
    for (const auto &entry : flags.training) {
        // Named, not a structured binding: clang 14 cannot capture those.
        const std::string &flag = entry.first;
        const std::string &value = entry.second;
        // A flag on the command line is for every task: it replaces the
        // workers' own values too.
        for (auto &[index, workerFlags] : file.perWorker)
            std::erase_if(workerFlags, [&flag](const auto &other) { return other.first == flag; });
        auto it = std::find_if(file.training.begin(), file.training.end(),
                               [&flag](const auto &other) { return other.first == flag; });
        if (it == file.training.end())
            file.training.emplace_back(flag, value);
        else
            it->second = value;
    }
    return planFromClusterFile(file);
}

} // namespace parasync
