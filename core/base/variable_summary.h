#pragma once

// How one model variable moves, as the chief measures it every
// --display_step (engine/variable_trajectory.h): the figures that show a
// model with more parameters than w and b training. A value type shared by
// the node that measures it and the app that draws it.

namespace parasync {

struct VariableSummary
{
    float norm = 0;              // L2 norm of the values
    float distanceFromStart = 0; // L2 norm of values minus those at the run's start
    float updatePerStep = 0;     // L2 norm of the change per global step since the previous summary; NaN at the first
};

} // namespace parasync
