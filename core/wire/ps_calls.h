#pragma once

// What a call to a ps task is made of, without gRPC: the outcome it answers
// (CallStatus), the streams it serves (a worker's Train stream, a watcher's
// Telemetry stream, a backup's Follow stream) and the calls themselves
// (PsHandler), as TensorFlow's WorkerInterface names a worker's calls apart
// from the RPC system that carries them. node/ps_task.h implements them;
// wire/ps_server.cpp serves them over gRPC, and the fuzzer and tests call the
// same logic in-process (node/in_process_train_call.h).

#include "proto/parasync.pb.h"
#include "wire/tensor_spans.h"

#include <google/protobuf/repeated_ptr_field.h>

#include <string>
#include <utility>

namespace parasync {

// OK, or a refusal whose message is shown to the caller as it is. The gRPC
// adapter maps each code to the status code of the same name.
class CallStatus
{
public:
    enum class Code {
        Ok,
        InvalidArgument,    // the request itself is wrong (bad numbers, sizes, index)
        FailedPrecondition, // the request is fine, the cluster is not ready for it
        AlreadyExists,      // what the request claims (a worker index) is another's
        RetryLater,         // may succeed when asked again shortly (gRPC ABORTED)
        Unavailable,        // this process does not serve the call now; the other of its ps pair may
    };

    // OK.
    CallStatus() = default;
    CallStatus(Code code, std::string message) : m_code(code), m_message(std::move(message)) {}

    static CallStatus invalidArgument(std::string message) { return {Code::InvalidArgument, std::move(message)}; }
    static CallStatus failedPrecondition(std::string message) { return {Code::FailedPrecondition, std::move(message)}; }
    static CallStatus alreadyExists(std::string message) { return {Code::AlreadyExists, std::move(message)}; }
    static CallStatus retryLater(std::string message) { return {Code::RetryLater, std::move(message)}; }
    static CallStatus unavailable(std::string message) { return {Code::Unavailable, std::move(message)}; }

    bool ok() const { return m_code == Code::Ok; }
    Code code() const { return m_code; }
    const std::string &message() const { return m_message; }

private:
    Code m_code = Code::Ok;
    std::string m_message;
};

// One worker's Train stream, as PsHandler::train sees it. Both calls are made
// from the thread running train() only, and may block.
class TrainStream
{
public:
    virtual ~TrainStream() = default;
    // Blocks until the worker's next request; false once the stream is over
    // (the worker closed it, or its connection is gone).
    virtual bool read(proto::TrainRequest *request) = 0;
    // Sends one response; false when the worker can no longer be reached.
    // The stream may send the response's tensors from their own storage: the
    // caller leaves the response as it is until the next read(). An answer
    // to a push carries its parameters' shapes only, their values are in
    // `parameters` (empty for other responses), which stay valid until
    // write() returns: the stream sends them from there, or copies them into
    // the message (copyTensorValues below).
    virtual bool write(proto::TrainResponse &response, const TensorValues &parameters) = 0;
    // Whether the worker is gone (its call cancelled: the process killed, the
    // connection closed) while this thread does not read: a push held at a
    // barrier looks, or a worker killed there would keep its index.
    virtual bool gone() const { return false; }
};

// Copies `values` into `tensors`, one span a tensor, into tensors that hold
// their shapes already (the answer to a push, as ParameterShard::share left it).
inline void copyTensorValues(const TensorValues &values, google::protobuf::RepeatedPtrField<proto::Tensor> *tensors)
{
    for (size_t i = 0; i < values.size() && int(i) < tensors->size(); ++i) {
        auto *out = (*tensors)[int(i)].mutable_values();
        out->Clear();
        out->Reserve(int(values[i].size()));
        out->Add(values[i].begin(), values[i].end());
    }
}

// A watcher's Telemetry stream, as PsHandler::watch sees it. Called from the
// thread running watch() only; may block while the watcher is slow to read.
class WatchStream
{
public:
    virtual ~WatchStream() = default;
    // Sends one batch; false when the watcher is gone (cancelled or
    // disconnected), which ends the watch.
    virtual bool write(const proto::TelemetryBatch &batch) = 0;
};

// A backup's Follow stream, as its primary's PsHandler::follow sees it: the
// backup's requests (who it is, then acknowledgements) and the records sent
// to it. read() is called from one thread and write() from another.
class FollowStream
{
public:
    virtual ~FollowStream() = default;
    // Blocks until the backup's next message; false once the stream is over.
    virtual bool read(proto::FollowRequest *request) = 0;
    // Sends one record; false when the backup can no longer be reached.
    // With `more`, gRPC may hold it back to go out with the next one (the
    // last of a batch is sent without).
    virtual bool write(const proto::ReplicaRecord &record, bool more) = 0;
    // Ends the call from another thread: read() returns false.
    virtual void cancel() = 0;
};

// The backup's end of the same stream: a call to its primary's Follow.
class PrimaryLink
{
public:
    virtual ~PrimaryLink() = default;
    virtual bool write(const proto::FollowRequest &request) = 0;
    // Blocks until the next record; false once the stream is over.
    virtual bool read(proto::ReplicaRecord *record) = 0;
    // Ends the call from another thread: read() returns false.
    virtual void cancel() = 0;
    // After read() returned false: why the stream ended, in words.
    virtual std::string finish() = 0;
};

// What the other process of a ps pair answered when asked who it is.
struct PeerStatus
{
    bool reached = false;
    // Nothing listens at the address (the connection was refused): unlike a
    // deadline that passed, this says the process is not there.
    bool absent = false;
    proto::ReplicaRole role = proto::REPLICA_ROLE_UNSPECIFIED;
    bool holdsState = false; // TaskStatusResponse.replica_holds_state
    std::string error;       // when not reached, in words
};

// The calls a ps task serves, whatever carries them: what ps_server.cpp's
// gRPC services hand on, one method a call of core/proto/parasync.proto.
// Each may be called from many threads at once, and may block (a sync
// barrier, a staleness bound, a stream's life).
class PsHandler
{
public:
    virtual ~PsHandler() = default;

    // ParameterService, on every ps task.
    virtual CallStatus train(TrainStream &stream) = 0;
    virtual CallStatus initialize(const proto::InitializeRequest &request, proto::InitializeResponse *response) = 0;
    virtual CallStatus snapshot(proto::SnapshotResponse *response) = 0;
    // PsReplication, on a replicated pair's primary.
    virtual CallStatus follow(FollowStream &stream) = 0;
    // PsLease, on both processes of a replicated pair: this process's vote
    // for its pair's lease. Returns what is wrong with the request, or "".
    virtual std::string vote(const proto::VoteRequest &request, proto::VoteResponse *response) = 0;
    // ClusterControl and Telemetry, on ps:0.
    virtual CallStatus setMode(const proto::SetModeRequest &request, proto::SetModeResponse *response) = 0;
    virtual proto::ClusterStatusResponse clusterStatus() = 0;
    virtual CallStatus watch(const proto::WatchRequest &request, WatchStream &stream) = 0;
    virtual void reportCheckpoint(const proto::ReportCheckpointRequest &request) = 0;
    // TaskControl, on every task.
    virtual proto::TaskStatusResponse taskStatus() = 0;
    virtual void requestStop(const std::string &reason) = 0;
};

} // namespace parasync
