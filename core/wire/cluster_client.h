#pragma once

// The app's way to a running cluster's processes, without gRPC's types:
// ps:0's status, its telemetry and a mode change (ClusterControl, Telemetry),
// and a task's own status and controls (TaskControl: its status, stop, a
// straggler delay, a pace).
// Every call is given a CallContext made before it, so that another thread
// (a window closing, a watcher disconnecting) can end it while it blocks.
// cluster_client.cpp is the only file behind it that names gRPC.

#include "proto/parasync.pb.h"
#include "wire/call_result.h"
#include "wire/ps_client.h"
#include "wire/rpc_settings.h"

#include <chrono>
#include <memory>
#include <string>

namespace grpc {
class ClientContext;
}

namespace parasync {

// One call's context: its deadline (none: no deadline), the token and TLS of
// `settings`, and a cancel() that any thread may call, before the call or
// while it blocks. Used for one call.
class CallContext
{
public:
    explicit CallContext(const RpcSettings &settings, std::chrono::milliseconds deadline = {});
    ~CallContext();
    CallContext(const CallContext &) = delete;
    CallContext &operator=(const CallContext &) = delete;

    void cancel();

private:
    friend class ClusterClient;
    std::unique_ptr<grpc::ClientContext> m_context;
};

// The process at `address` ("host:port"), over a channel of its own: a
// channel whose connection was refused waits out gRPC's reconnect back-off
// (seconds) before it tries again, even after the process came up, so a
// caller that tries again makes a new client. Thread-safe.
class ClusterClient
{
public:
    ClusterClient(std::string address, const RpcSettings &settings);
    ~ClusterClient();

    const std::string &address() const { return m_address; }

    // ps:0's services.
    CallResult clusterStatus(CallContext &context, proto::ClusterStatusResponse *response);
    CallResult setMode(CallContext &context, const proto::SetModeRequest &request, proto::SetModeResponse *response);
    // Telemetry.Watch, ended by the stream's cancel() (the stream holds its
    // own context).
    std::unique_ptr<TelemetryStream> watch(const proto::WatchRequest &request);

    // Every task's TaskControl. taskStatus: what the task is doing and, from
    // a ps task of a sparse model, what its embedding tables hold.
    CallResult taskStatus(CallContext &context, proto::TaskStatusResponse *response);
    CallResult stop(CallContext &context, const proto::StopRequest &request, proto::StopResponse *response);
    CallResult setStraggler(CallContext &context, const proto::SetStragglerRequest &request,
                            proto::SetStragglerResponse *response);
    CallResult setPace(CallContext &context, const proto::SetPaceRequest &request, proto::SetPaceResponse *response);

private:
    struct Stubs;
    std::string m_address;
    RpcSettings m_settings;
    std::unique_ptr<Stubs> m_stubs;
};

} // namespace parasync
