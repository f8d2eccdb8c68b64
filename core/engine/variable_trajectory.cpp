#include "engine/variable_trajectory.h"

#include <algorithm>
#include <cmath>

namespace parasync {

namespace {
bool sameShapes(const Parameters &a, const Parameters &b)
{
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].size() != b[i].size())
            return false;
    return true;
}
} // namespace

std::vector<VariableSummary> VariableTrajectory::measure(const Parameters &params, int64_t globalStep)
{
    if (!started() || !sameShapes(params, m_start)) {
        m_start = params;
        m_previous = params;
        m_previousStep = -1;
    }
    // A sync run's chief may measure twice at one global step (its gradient
    // was aggregated, the step not yet closed): the change is then over at
    // least one step, never a division by zero.
    const double steps = m_previousStep < 0 ? 0.0 : double(std::max<int64_t>(globalStep - m_previousStep, 1));
    std::vector<VariableSummary> summaries(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
        summaries[i].norm = params[i].norm();
        summaries[i].distanceFromStart = (params[i] - m_start[i]).norm();
        summaries[i].updatePerStep = steps > 0 ? float((params[i] - m_previous[i]).norm() / steps) : std::nanf("");
        m_previous[i] = params[i];
    }
    m_previousStep = globalStep;
    return summaries;
}

} // namespace parasync
