#pragma once

// What a call to a ps task is made of, without gRPC: the outcome it answers
// (CallStatus) and the two streams it serves (a worker's Train stream, a
// watcher's Telemetry stream). PsTask's logic speaks these; ps_service.cpp
// translates them to and from gRPC, and the fuzzer and tests drive the same
// logic in-process through them (in_process_train_call.h).

#include "engine/parameter_shard.h"
#include "proto/parasync.pb.h"

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

// One worker's Train stream, as PsTask::train sees it. Both calls are made
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
    // `parameters` (empty for other responses): the stream sends them from
    // there, or copies them into the message (ValuesSnapshot::copyInto).
    virtual bool write(proto::TrainResponse &response, const ValuesSnapshot &parameters) = 0;
};

// A watcher's Telemetry stream, as PsTask::watch sees it. Called from the
// thread running watch() only; may block while the watcher is slow to read.
class WatchStream
{
public:
    virtual ~WatchStream() = default;
    // Sends one batch; false when the watcher is gone (cancelled or
    // disconnected), which ends the watch.
    virtual bool write(const proto::TelemetryBatch &batch) = 0;
};

// A backup's Follow stream, as its primary's PsTask::follow sees it: the
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

} // namespace parasync
