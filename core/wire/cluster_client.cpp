// ClusterClient over gRPC: ClusterControl, Telemetry and TaskControl stubs on
// one channel of its own.

#include "wire/cluster_client.h"

#include "wire/grpc_calls.h"
#include "wire/rpc.h"

namespace parasync {

CallContext::CallContext(const RpcSettings &settings, std::chrono::milliseconds deadline)
    : m_context(makeContext(settings, deadline))
{
}

CallContext::~CallContext() = default;

void CallContext::cancel()
{
    // TryCancel is thread-safe, before the call too: the call then ends at once.
    m_context->TryCancel();
}

struct ClusterClient::Stubs
{
    explicit Stubs(const std::shared_ptr<grpc::Channel> &channel)
        : control(proto::ClusterControl::NewStub(channel))
        , telemetry(proto::Telemetry::NewStub(channel))
        , task(proto::TaskControl::NewStub(channel))
    {
    }
    std::unique_ptr<proto::ClusterControl::Stub> control;
    std::unique_ptr<proto::Telemetry::Stub> telemetry;
    std::unique_ptr<proto::TaskControl::Stub> task;
};

ClusterClient::ClusterClient(std::string address, const RpcSettings &settings)
    : m_address(std::move(address))
    , m_settings(settings)
    , m_stubs(std::make_unique<Stubs>(makeChannel(m_address, m_settings)))
{
}

ClusterClient::~ClusterClient() = default;

CallResult ClusterClient::clusterStatus(CallContext &context, proto::ClusterStatusResponse *response)
{
    return resultOf(m_stubs->control->GetClusterStatus(context.m_context.get(), {}, response));
}

CallResult ClusterClient::setMode(CallContext &context, const proto::SetModeRequest &request,
                                  proto::SetModeResponse *response)
{
    return resultOf(m_stubs->control->SetMode(context.m_context.get(), request, response));
}

std::unique_ptr<TelemetryStream> ClusterClient::watch(const proto::WatchRequest &request)
{
    return openTelemetryStream(*m_stubs->telemetry, m_settings, request);
}

CallResult ClusterClient::taskStatus(CallContext &context, proto::TaskStatusResponse *response)
{
    return resultOf(m_stubs->task->GetTaskStatus(context.m_context.get(), {}, response));
}

CallResult ClusterClient::stop(CallContext &context, const proto::StopRequest &request, proto::StopResponse *response)
{
    return resultOf(m_stubs->task->Stop(context.m_context.get(), request, response));
}

CallResult ClusterClient::setStraggler(CallContext &context, const proto::SetStragglerRequest &request,
                                       proto::SetStragglerResponse *response)
{
    return resultOf(m_stubs->task->SetStraggler(context.m_context.get(), request, response));
}

CallResult ClusterClient::setPace(CallContext &context, const proto::SetPaceRequest &request,
                                  proto::SetPaceResponse *response)
{
    return resultOf(m_stubs->task->SetPace(context.m_context.get(), request, response));
}

} // namespace parasync
