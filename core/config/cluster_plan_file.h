#pragma once

// A cluster plan (spec + training flags) to and from a cluster file, going
// through the same flag parser as parasync-node so that a file the app
// accepts is one every task accepts. Any thread; nothing blocks.

#include "config/cluster_file.h"
#include "config/cluster_plan.h"
#include "config/cluster_spec.h"

namespace parasync {

// Throws InputError naming the flag or entry that is wrong.
ClusterPlan planFromClusterFile(const ClusterFile &file);
ClusterFile clusterFileFromPlan(const ClusterPlan &plan);

} // namespace parasync
