#pragma once

// Train stream requests written by hand, as a client of
// core/proto/parasync.proto that is not ours writes them (a stranger's
// worker, a rogue one): for the tests that speak to a ps task directly,
// in-process or over a socket.

#include "proto/parasync.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parasync::testing {

// The linear demo's model (y = w·x + b, trained with SGD): variables w and
// b of one value each. `model` names another model with the same variables,
// for a signature that disagrees.
inline proto::ModelSignature linearDemoSignature(const std::string &model = "linear")
{
    proto::ModelSignature signature;
    signature.set_model(model);
    signature.set_feature_dim(1);
    signature.set_output_dim(1);
    signature.set_optimizer("sgd");
    for (const char *name : {"w", "b"}) {
        auto *variable = signature.add_variables();
        variable->set_name(name);
        variable->add_shape(1);
    }
    return signature;
}

// What the linear demo's chief sends: w = b = 0 at global step 0.
inline proto::InitializeRequest linearDemoInitialization()
{
    proto::InitializeRequest request;
    request.set_origin("fresh");
    *request.mutable_signature() = linearDemoSignature();
    for (const char *name : {"w", "b"}) {
        auto *variable = request.mutable_shard()->add_variables();
        variable->set_name(name);
        variable->mutable_value()->add_shape(1);
        variable->mutable_value()->add_values(0.0f);
    }
    return request;
}

// A linear-demo worker's join as worker `worker`.
inline proto::TrainRequest linearDemoJoin(int worker, const std::string &model = "linear")
{
    proto::TrainRequest request;
    request.mutable_join()->set_worker_index(worker);
    *request.mutable_join()->mutable_signature() = linearDemoSignature(model);
    return request;
}

// A push computed from global step `fromStep`: one gradient a size in
// `sizes`, each value `value`.
inline proto::TrainRequest pushOf(int64_t fromStep, const std::vector<int> &sizes, float value)
{
    proto::TrainRequest request;
    request.mutable_push()->set_computed_from_step(fromStep);
    for (int size : sizes) {
        auto *gradient = request.mutable_push()->add_gradients();
        gradient->add_shape(size);
        for (int i = 0; i < size; ++i)
            gradient->add_values(value);
    }
    return request;
}

} // namespace parasync::testing
