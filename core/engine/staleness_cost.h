#pragma once

// What a stale gradient is worth. On a sampled step (--staleness_probe_every)
// a worker keeps its batch and the gradient it pushed, computed at the
// parameters of the global step it last pulled; at the parameters the push's
// answer brings, some updates later, it computes the gradient of the same
// batch again. How far apart the two are -- their cosine, the relative error
// of the stale one -- against how many global steps lie between the two
// parameter sets is the price of staleness the update modes trade against
// pace, measured while the cluster trains. The parameters come with every
// answer anyway: the probe costs one gradient, and no round trip.

#include "engine/model.h"
#include "proto/parasync.pb.h"

#include <cstdint>
#include <optional>
#include <string>

namespace parasync {

// The stale gradient against the fresh one, over every variable's values as
// one vector.
struct GradientComparison
{
    // cos(angle): 1 when they point the same way, -1 when opposite.
    float cosine = 1.0f;
    // |stale - fresh| / |fresh|.
    float relativeError = 0.0f;
};

// Both gradients of the same variables, in the model's order. nullopt when
// either is zero (no direction to compare: a batch the model fits exactly,
// or a saturated softmax). Equal gradients compare as cosine 1, relative
// error 0.
std::optional<GradientComparison> compareGradients(const Parameters &stale, const Parameters &fresh);

// What is wrong with a pushed probe, in words, or "" when nothing is: the
// stale and the fresh step in order, up to the global step ps:0 holds; the
// cosine within [-1, 1]; the relative error finite and not negative.
std::string checkStalenessProbe(const proto::PushRequest &push, int64_t globalStep);

} // namespace parasync
