#pragma once

// How a model's variables move, for models with more parameters than a chart
// can draw one by one: per variable, its norm, its distance from where the
// run started and the size of its update per global step. The chief measures
// these every --display_step on the parameters it pulled, so the app can show
// an MLP's or a softmax's training the way it shows w and b.

#include "base/variable_summary.h"
#include "engine/model.h"

#include <cstdint>
#include <vector>

namespace parasync {

class VariableTrajectory
{
public:
    bool started() const { return m_previousStep >= 0; }
    // Summaries of `params`, the values at `globalStep`. The first call
    // fixes the start; each call becomes the "previous" of the next.
    // Parameters whose variable count or sizes change (another model) start
    // the trajectory again.
    std::vector<VariableSummary> measure(const Parameters &params, int64_t globalStep);

private:
    Parameters m_start;
    Parameters m_previous;
    int64_t m_previousStep = -1;
};

} // namespace parasync
