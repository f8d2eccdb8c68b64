#include "engine/staleness_cost.h"

#include <algorithm>
#include <cmath>

namespace parasync {

std::optional<GradientComparison> compareGradients(const Parameters &stale, const Parameters &fresh)
{
    // In double: a million float products summed in float lose the digits
    // that tell a cosine of 0.9999 from 1.
    double dot = 0, staleSquared = 0, freshSquared = 0, differenceSquared = 0;
    for (size_t v = 0; v < stale.size() && v < fresh.size(); ++v) {
        const Eigen::VectorXd s = stale[v].cast<double>();
        const Eigen::VectorXd f = fresh[v].cast<double>();
        dot += s.dot(f);
        staleSquared += s.squaredNorm();
        freshSquared += f.squaredNorm();
        differenceSquared += (s - f).squaredNorm();
    }
    // Two zero gradients say nothing about staleness: a softmax that
    // saturated on its batch (probabilities of exactly 0 and 1) gives them at
    // any parameters, and they would read as "as good as fresh".
    if (freshSquared == 0 || staleSquared == 0)
        return std::nullopt;
    if (differenceSquared == 0)
        return GradientComparison{1.0f, 0.0f};
    GradientComparison comparison;
    comparison.cosine = float(std::clamp(dot / std::sqrt(staleSquared * freshSquared), -1.0, 1.0));
    comparison.relativeError = float(std::sqrt(differenceSquared / freshSquared));
    if (!std::isfinite(comparison.relativeError))
        return std::nullopt;
    return comparison;
}

std::string checkStalenessProbe(const proto::PushRequest &push, int64_t globalStep)
{
    const proto::StalenessProbe &probe = push.staleness_probe();
    if (probe.stale_step() < 0 || probe.stale_step() > probe.fresh_step() || probe.fresh_step() > globalStep)
        return "stale_step " + std::to_string(probe.stale_step()) + " and fresh_step "
               + std::to_string(probe.fresh_step()) + " are not in order up to the global step "
               + std::to_string(globalStep)
               + ": send the global steps of the parameters the two gradients were computed at";
    if (!(probe.cosine() >= -1.0f && probe.cosine() <= 1.0f))
        return "cosine " + std::to_string(probe.cosine()) + " is not in [-1, 1]";
    if (!(probe.relative_error() >= 0.0f) || !std::isfinite(probe.relative_error()))
        return "relative_error " + std::to_string(probe.relative_error())
               + " is not a finite number of at least 0: leave the probe out when the fresh gradient is zero";
    return {};
}

} // namespace parasync
