#pragma once

// A cluster to launch, as the app, a cluster file and the TFJob writer know
// it: the spec, the training flags every task gets, the hosts reached over
// ssh, and each worker's pace. Plain data with no process or socket behind
// it, so whatever describes a cluster (the designer, a manifest, the
// pre-flight) needs no launcher to do so.

#include "config/cluster_spec.h"
#include "config/node_options.h"

#include <QStringList>

#include <map>
#include <vector>

namespace parasync {

// A cluster to launch: the spec plus the training flags every task gets.
struct ClusterPlan
{
    ClusterSpec cluster;
    TrainingOptions training;
    // Hosts reached over ssh; a task whose address's host is not here runs
    // on this machine.
    std::vector<RemoteHost> hosts;
    // The ssh entry for `task`'s host, or nullptr for a local task.
    const RemoteHost *remoteHost(const TaskId &task) const;
    ConnectionOptions connection; // TLS files and limits, for every task
    // Workers whose pace differs from training.pace (a cluster file's
    // "per_worker"), by worker index.
    std::map<int, WorkerPace> workerPace;
    WorkerPace paceOf(int worker) const;
    // The three-port demo: ps 127.0.0.1:2222, workers :2223 and :2224.
    static ClusterPlan demo();
    // Flags for one task, as a user would type them: the cluster, the task,
    // --mode, and every training flag that differs from its default.
    QStringList arguments(const TaskId &task) const;
    // Every task of the plan: ps tasks first, then workers, by index.
    std::vector<TaskId> tasks() const;
};

} // namespace parasync
