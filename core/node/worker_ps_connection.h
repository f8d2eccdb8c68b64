#pragma once

// A worker task's connection to one ps task: its client (wire/ps_client.h),
// the process of its pair it trains with, its Train stream and what a push
// reuses from step to step. Private to worker_task*.cpp.

#include "node/worker_task.h"
#include "wire/ps_client.h"

#include <memory>
#include <string>

namespace parasync {

struct WorkerTask::PsConnection
{
    int index = 0;
    // Every process of the task, one or the pair's two (primary first), and
    // the calls to each; shared with the chief's duties.
    std::shared_ptr<PsClient> client;
    // The process this worker trains with; with --ps_backup_hosts, either of
    // the task's pair (the one that serves).
    size_t serving = 0;
    std::string address;
    std::unique_ptr<PsStream> stream;
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
    // With --ps_backup_hosts: the highest lease epoch the task's pair has
    // answered under. An answer under a lower one comes from a process
    // that was deposed, and is refused (answerIsCurrent).
    int64_t epoch = 0;

    // A new Train stream to the serving process, in place of the last.
    void openStream()
    {
        closeStream();
        stream = client->openStream(serving);
    }
    void closeStream()
    {
        if (stream) {
            stream->cancel();
            stream->finish();
        }
        stream.reset();
    }
};

} // namespace parasync
