#pragma once

// A worker's Train stream into a PsTask of the same process, with no gRPC in
// between: how the fuzzer and the tests drive the ps's training logic (join,
// push, hold, leave, a stream that ends without a goodbye) as a worker would,
// without a server or a socket.

#include "wire/ps_calls.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

namespace parasync {

class PsTask;

// One Train call. The ps's side runs PsTask::train on a thread of its own,
// as gRPC runs each stream on one of its threads; the worker's side is the
// public functions, thread-safe, callable from any thread.
class InProcessTrainCall final : private TrainStream
{
public:
    // Opens the stream: PsTask::train starts at once. `ps` must outlive the call.
    explicit InProcessTrainCall(PsTask &ps);
    // Closes the worker's side, as a killed worker would, and blocks until
    // train() returns. A push the ps holds (sync barrier, staleness bound)
    // keeps it from returning until the ps lets it go: another worker's push
    // or death, or PsTask::requestStop.
    ~InProcessTrainCall();
    InProcessTrainCall(const InProcessTrainCall &) = delete;
    InProcessTrainCall &operator=(const InProcessTrainCall &) = delete;

    // Queues a request for the ps. Does not block.
    void send(proto::TrainRequest request);
    // Ends the worker's side: the ps reads what was sent, then sees the
    // stream end (without a goodbye, unless a leave request was sent).
    void close();
    // Blocks up to `timeout` for the ps's next response; false if none came.
    bool receive(proto::TrainResponse *response, std::chrono::milliseconds timeout);
    // How far the ps got with what it was sent. A request read but not yet
    // handled is one it works on, or holds (a sync barrier, the staleness
    // bound, a join before the chief).
    struct Progress
    {
        uint64_t sent = 0;
        uint64_t read = 0;
        uint64_t handled = 0; // answered, or ended the call
        bool ended = false;   // train() returned
        bool operator==(const Progress &) const = default;
    };
    Progress progress() const;
    // Blocks up to `timeout` until the progress is other than `seen`; returns it.
    Progress waitForProgress(const Progress &seen, std::chrono::milliseconds timeout);
    // Blocks up to `timeout` for train() to return; what it returned, or
    // nothing if it still runs.
    std::optional<CallStatus> waitForEnd(std::chrono::milliseconds timeout);

private:
    // The ps's side, on the call's thread.
    bool read(proto::TrainRequest *request) override;
    bool write(proto::TrainResponse &response, const TensorValues &parameters) override;

    Progress progressLocked() const;

    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<proto::TrainRequest> m_requests;
    std::deque<proto::TrainResponse> m_responses;
    uint64_t m_sent = 0;
    uint64_t m_read = 0;
    // Requests the ps had read when it last asked for another: all handled.
    uint64_t m_handled = 0;
    bool m_closed = false;
    std::optional<CallStatus> m_end;
    std::thread m_thread;
};

} // namespace parasync
