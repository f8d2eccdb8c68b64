#pragma once

// What the chief measured on the parameters one step's gradient was computed
// from. It measures every --display_step of its own steps; on the other
// steps the loss is NaN and the lists are empty.

#include "engine/variable_trajectory.h"

#include <cmath>
#include <vector>

namespace parasync {

struct ChiefMeasurement
{
    float fullLoss = std::nanf("");         // over the chief's whole training shard
    std::vector<float> metrics;             // the signature's metric_names, in order
    std::vector<VariableSummary> variables; // one per variable, in declaration order
};

} // namespace parasync
