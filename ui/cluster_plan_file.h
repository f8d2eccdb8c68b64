#pragma once

// A cluster plan (spec + training flags) to and from a cluster file, going
// through the same flag parser as parasync-node so that a file the app
// accepts is one every task accepts.

#include "cluster_launcher.h"
#include "cluster_spec.h"

namespace parasync::ui {

// Throws InputError naming the flag or entry that is wrong.
ClusterPlan planFromClusterFile(const ClusterFile &file);
ClusterFile clusterFileFromPlan(const ClusterPlan &plan);

} // namespace parasync::ui

namespace parasync::ui {

// ClusterPlan::demo() with its ports replaced by $PARASYNC_DEMO_PORTS
// ("ps,worker0,worker1"), so tests and a second instance can use free ports.
ClusterPlan demoPlanFromEnvironment();

} // namespace parasync::ui
