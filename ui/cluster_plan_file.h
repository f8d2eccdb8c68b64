#pragma once

// A cluster plan (spec + training flags) to and from a cluster file, going
// through the same flag parser as parasync-node so that a file the app
// accepts is one every task accepts.

#include "config/cluster_plan.h"
#include "config/cluster_spec.h"

namespace parasync::ui {

// Throws InputError naming the flag or entry that is wrong.
ClusterPlan planFromClusterFile(const ClusterFile &file);
ClusterFile clusterFileFromPlan(const ClusterPlan &plan);

} // namespace parasync::ui

namespace parasync::ui {

// The demo as the app runs it: ClusterPlan::demo() at a pace a person can
// follow, worker:1 a straggler, training until stopped (the reasons are in
// the definition); its ports replaced by $PARASYNC_DEMO_PORTS
// ("ps,worker0,worker1"), so tests and a second instance can use free ports.
ClusterPlan demoPlanFromEnvironment();

} // namespace parasync::ui
