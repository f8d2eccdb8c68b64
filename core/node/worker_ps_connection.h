#pragma once

// A worker task's connection to one ps task: its channels, its Train stream
// and what a push reuses from step to step. Private to worker_task*.cpp.

#include "node/worker_task.h"
#include "wire/train_call.h"

#include <memory>
#include <string>
#include <vector>

namespace parasync {

struct WorkerTask::PsConnection
{
    int index = 0;
    // The process this worker trains with; with --ps_backup_hosts, either of
    // the task's pair (the one that serves).
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    // Every process of the task: one, or the pair's two (primary first).
    std::vector<std::string> addresses;
    std::vector<std::shared_ptr<grpc::Channel>> channels; // also the chief's, for its calls to this ps
    std::unique_ptr<proto::ParameterService::Stub> parameters;
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<TrainCall> stream;
    // Kept from step to step, so that a push's tensors reuse their storage
    // (wire/train_call.h): the push to this ps and its answer.
    proto::TrainRequest push;
    proto::TrainResponse answer;
    // Where the push's gradient values lie (slices of m_gradient), refilled
    // every step into the same vector: no allocation per step.
    TensorValues gradient;
    // Where this ps's answer puts its parameters' values: the rows of
    // m_params its slices cover (parameterDestinations()).
    TensorDestinations parameterRows;
    // ps:0 only: the last global step it acknowledged, told to it when
    // joining again, so that a replicated ps:0 that took over can tell
    // whether acknowledged updates were lost.
    int64_t acknowledged = 0;

    void closeStream()
    {
        if (stream) {
            context->TryCancel();
            stream->finish();
        }
        stream.reset();
        context.reset();
    }
};

} // namespace parasync
