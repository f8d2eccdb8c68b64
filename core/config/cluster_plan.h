#pragma once

// A cluster to launch, as the app, a cluster file and the TFJob writer know
// it: the spec, the training flags every task gets, the hosts reached over
// ssh, and each worker's pace. Plain data with no process or socket behind
// it, so whatever describes a cluster (the designer, a manifest, the
// pre-flight) needs no launcher to do so.

#include "config/cluster_file.h"
#include "config/cluster_spec.h"
#include "config/task_options.h"

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
    // Workers that run a program of their own (a Python worker) instead of
    // parasync-node: the cluster file's "worker_command", and by worker
    // index its "per_worker" ones, which take precedence. Empty: parasync-node.
    std::vector<std::string> workerCommand;
    std::map<int, std::vector<std::string>> workerCommands;
    // The command worker `worker` runs: program first. Empty for parasync-node.
    const std::vector<std::string> &commandOf(int worker) const;
    bool hasWorkerCommands() const { return !workerCommand.empty() || !workerCommands.empty(); }
    // The three-port demo: ps 127.0.0.1:2222, workers :2223 and :2224.
    static ClusterPlan demo();
    // Flags for one task, as a user would type them: the cluster, the task,
    // --mode, and every training flag that differs from its default.
    // Not for a worker with a command of its own: see commandArguments.
    QStringList arguments(const TaskId &task) const;
    // What the app adds to a worker's own command: the cluster, the task and
    // the connection flags a Python worker takes (parasync/cluster.py), the
    // chief's run-directory flags (--logdir, --save_checkpoint_secs,
    // --max_to_keep: its checkpoints), --min_slice_bytes when not the
    // default (part of the model's signature), and no other training flag --
    // those are the ps tasks' (and its script's own).
    QStringList commandArguments(const TaskId &task) const;
    // Every task of the plan: ps tasks first, then their backups
    // (--ps_backup_hosts), then workers, by index.
    std::vector<TaskId> tasks() const;
};

} // namespace parasync
