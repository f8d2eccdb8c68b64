#pragma once

// The demo cluster's plan on free loopback ports: 2222-2224 may be taken on a
// CI machine, or by another test's cluster running beside this one.

#include "base/port_holder.h"
#include "config/cluster_plan.h"

#include <cstdint>

namespace parasync::testing {

// The demo on free ports, to --last_step=`lastStep` (0: until stopped).
inline ClusterPlan demoOnFreePorts(int64_t lastStep)
{
    ClusterPlan plan = ClusterPlan::demo();
    for (auto *list : {&plan.cluster.ps, &plan.cluster.workers})
        for (auto &address : *list)
            address.port = pickFreePort();
    plan.training.lastStep = lastStep;
    return plan;
}

} // namespace parasync::testing
