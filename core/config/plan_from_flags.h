#pragma once

// The cluster the app's command line asks for: the demo as the app runs it,
// or a cluster file, with the flags given on the command line applied -- the
// flags parasync-node takes, checked by its parser. Flags in as plain data,
// a plan out, so that what the app makes of them is tested without a window
// or a process. Any thread; nothing blocks but reading the cluster file.

#include "config/cluster_plan.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace parasync {

// The demo as the app runs it: ClusterPlan::demo() at a pace a person can
// follow, worker:1 a straggler, training until stopped (the reasons are in
// the definition); its ports replaced by $PARASYNC_DEMO_PORTS
// ("ps,worker0,worker1"), so tests and a second instance can use free ports.
ClusterPlan demoPlanFromEnvironment();

// The training flags the app takes on its command line (names without
// dashes) and hands on to every task.
const std::vector<std::string> &appTrainingFlags();

// What a command line says about the cluster to start; a flag not given is
// empty (std::nullopt: "--ps_hosts=" is given, and wrong).
struct PlanFlags
{
    std::optional<std::string> clusterFile;   // --cluster_file; without it, demoPlanFromEnvironment()
    std::optional<std::string> workload;      // --workload: that workload's plan (config/workloads.h)
    std::optional<std::string> psHosts;       // --ps_hosts
    std::optional<std::string> workerHosts;   // --worker_hosts
    std::optional<std::string> psBackupHosts; // --ps_backup_hosts
    // appTrainingFlags() given, as (name, value). They are for every task:
    // each replaces the cluster file's value and the workers' own.
    std::vector<std::pair<std::string, std::string>> training;
};

// The plan `flags` ask for. Throws InputError naming the flag (or the
// cluster file's entry) to fix.
ClusterPlan planFromFlags(const PlanFlags &flags);

} // namespace parasync
