#pragma once

// A worker's way to one ps task, whatever carries it: the calls the worker
// and the chief make (the task's status, Initialize, Snapshot, a checkpoint
// report) and the Train stream. WorkerTask and ChiefDuties speak only this;
// makeGrpcPsClient() is the real one, over gRPC (grpc_ps_client.cpp, the
// only file behind it that names gRPC), and node/in_process_ps_client.h
// reaches a PsTask of the same process, so that a worker is tested without a
// server or a socket as the ps task is. No gRPC header is reached from here.
//
// A ps task is one process, or with --ps_backup_hosts a pair (primary
// first); every call names the process it goes to. Unary calls are
// thread-safe; a stream is used by one thread at a time, but for cancel().

#include "proto/parasync.pb.h"
#include "wire/call_result.h"
#include "wire/data_link.h"
#include "wire/rpc_settings.h"
#include "wire/tensor_spans.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace parasync {

// The worker's end of one Train stream.
class PsStream
{
public:
    // How a push's values go on a data link: on the calling thread before
    // writeSharingValues() returns, or Overlapped: what the socket does not
    // take at once goes on the link's I/O thread while the caller starts its
    // writes to other ps tasks.
    enum class LinkWrite { Here, Overlapped };

    virtual ~PsStream() = default;

    virtual bool write(const proto::TrainRequest &request) = 0;
    // A push whose gradients go out from where they lie: leave them and the
    // request unchanged until the answer to it has been read.
    virtual bool writeSharingValues(proto::TrainRequest &request, const TensorValues &gradients, LinkWrite linkWrite)
        = 0;
    // Keeps the storage of `response`'s push for the next: pass the same
    // message every step.
    virtual bool read(proto::TrainResponse *response) = 0;
    // A push answer's parameters go straight to `destinations` when it has
    // their form, and *delivered says whether they did (else they are in the
    // message).
    virtual bool read(proto::TrainResponse *response, const TensorDestinations &destinations, bool *delivered) = 0;
    virtual bool writesDone() = 0;
    // Ends the stream from any thread: a blocked read or write returns false.
    virtual void cancel() = 0;
    // How the stream ended; call once, after a write or read failed, or
    // after writesDone().
    virtual CallResult finish() = 0;

    // After a join answer that grants a data link: connects it to `host`
    // within `timeout`; false, with *error, when it cannot be made (the
    // stream carries everything as before). See TrainCall::openDataLink.
    virtual bool openDataLink(DataLinkContext &context, const std::string &host, const proto::DataLinkGrant &grant,
                              std::chrono::milliseconds timeout, std::chrono::milliseconds stall, std::string *error)
        = 0;
    virtual bool hasDataLink() const = 0;
    virtual bool messagesOnDataLink() const = 0;
};

// The telemetry a process streams to a watcher (Telemetry.Watch).
class TelemetryStream
{
public:
    virtual ~TelemetryStream() = default;
    // The next batch; false once the stream ended (see finish()).
    virtual bool read(proto::TelemetryBatch *batch) = 0;
    // Ends it from any thread: a blocked read returns false.
    virtual void cancel() = 0;
    virtual CallResult finish() = 0;
};

// One ps task's processes, and the calls to each.
class PsClient
{
public:
    virtual ~PsClient() = default;

    // "host:port" of each process: one, or the pair's two (primary first).
    virtual const std::vector<std::string> &addresses() const = 0;

    // TaskControl.GetTaskStatus, answered within `deadline`.
    virtual CallResult taskStatus(size_t process, std::chrono::milliseconds deadline,
                                  proto::TaskStatusResponse *response)
        = 0;
    virtual CallResult initialize(size_t process, const proto::InitializeRequest &request,
                                  std::chrono::milliseconds deadline, proto::InitializeResponse *response)
        = 0;
    virtual CallResult snapshot(size_t process, std::chrono::milliseconds deadline, proto::SnapshotResponse *response)
        = 0;
    // Telemetry.ReportCheckpoint: what the chief saved, for the watchers.
    virtual CallResult reportCheckpoint(size_t process, const proto::ReportCheckpointRequest &request,
                                        std::chrono::milliseconds deadline)
        = 0;
    // A new Train stream to `process`.
    virtual std::unique_ptr<PsStream> openStream(size_t process) = 0;
    // Follows `process`'s telemetry.
    virtual std::unique_ptr<TelemetryStream> watchTelemetry(size_t process, const proto::WatchRequest &request) = 0;
};

// The ps task at `addresses` over gRPC, with `rpc`'s token and TLS.
std::unique_ptr<PsClient> makeGrpcPsClient(std::vector<std::string> addresses, const RpcSettings &rpc);

} // namespace parasync
