#pragma once

// Named training problems the app offers besides the demo, each a whole
// cluster plan with what a mode comparison on it runs and aims for. The demo
// (two workers, a straight line) shows the modes' pace; these show what the
// pace costs in what the model learns.

#include "config/cluster_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parasync {

struct Workload
{
    std::string name;        // "staleness": --workload's value
    std::string title;       // "the price of staleness": the Runs menu's "Compare modes: TITLE..."
    std::string description; // one line, for --help and the menu's tooltip
    // The cluster on loopback ports from 2222 up, training until stopped.
    ClusterPlan plan;
    // The comparison's contenders (parseModeSpecList) and its target: the
    // chief's full-shard loss, which the contenders reach at clearly
    // different times on this problem.
    std::string contenders;
    double targetLoss = 0;
    // Each run's time, and whether it ends at the target (false: every run
    // trains its whole time, so the final held-out figures compare at one
    // wall time, as Chen et al. compare them).
    int compareSeconds = 40;
    bool stopAtTarget = true;
    // Each contender is run once per seed: on these problems one run's
    // accuracy moves by several points with the seed, so a single run
    // cannot tell a mode's price from luck.
    std::vector<uint64_t> seeds;
};

// Every workload's name, in the order --help lists them.
std::vector<std::string> workloadNames();
// The workload called `name`; throws InputError listing the names.
Workload workload(const std::string &name);

} // namespace parasync
