#include "wire/task_server.h"
#include "base/version.h"
#include "wire/lease_service.h"

#include "base/error.h"
#include "base/port_holder.h"
#include "base/step_memory.h"

#include <grpcpp/health_check_service_interface.h>

namespace parasync {

TaskControlService::TaskControlService(Callbacks callbacks, const TokenCheck *auth)
    : m_callbacks(std::move(callbacks))
    , m_auth(auth)
{
}

grpc::Status TaskControlService::authorize(const grpc::ServerContext &context, const char *method) const
{
    return m_auth ? m_auth->check(context, method) : grpc::Status::OK;
}

grpc::Status TaskControlService::GetTaskStatus(grpc::ServerContext *context, const proto::TaskStatusRequest *,
                                               proto::TaskStatusResponse *response)
{
    if (auto denied = authorize(*context, "GetTaskStatus"); !denied.ok())
        return denied;
    *response = m_callbacks.status();
    response->set_version(version());
    response->set_heap_in_use_bytes(heapInUseBytes());
    return grpc::Status::OK;
}

grpc::Status TaskControlService::Stop(grpc::ServerContext *context, const proto::StopRequest *request,
                                      proto::StopResponse *)
{
    if (auto denied = authorize(*context, "Stop"); !denied.ok())
        return denied;
    m_callbacks.stop(request->reason().empty() ? std::string("stop requested") : request->reason());
    return grpc::Status::OK;
}

grpc::Status TaskControlService::SetStraggler(grpc::ServerContext *context, const proto::SetStragglerRequest *request,
                                              proto::SetStragglerResponse *response)
{
    if (auto denied = authorize(*context, "SetStraggler"); !denied.ok())
        return denied;
    if (!m_callbacks.setStraggler)
        return {grpc::StatusCode::FAILED_PRECONDITION,
                "this task is a ps and does not train: slow down a worker instead"};
    if (request->delay_ms() < 0 || request->delay_ms() > 60000)
        return {grpc::StatusCode::INVALID_ARGUMENT, "straggler delay must be 0-60000 ms"};
    response->set_delay_ms(m_callbacks.setStraggler(request->delay_ms()));
    return grpc::Status::OK;
}

grpc::Status TaskControlService::SetPace(grpc::ServerContext *context, const proto::SetPaceRequest *request,
                                         proto::SetPaceResponse *response)
{
    if (auto denied = authorize(*context, "SetPace"); !denied.ok())
        return denied;
    if (!m_callbacks.setPace)
        return {grpc::StatusCode::FAILED_PRECONDITION,
                "this task is a ps and does not train: set the pace of the workers instead"};
    if (request->compute_ms() < 0 || request->compute_ms() > kMaxComputeMs)
        return {grpc::StatusCode::INVALID_ARGUMENT,
                "compute_ms must be 0-" + std::to_string(kMaxComputeMs) + " ms (0 is full speed)"};
    // !(x >= 0 && x <= max) also refuses NaN.
    if (request->has_compute_jitter()
        && !(request->compute_jitter() >= 0 && request->compute_jitter() <= kMaxComputeJitter))
        return {grpc::StatusCode::INVALID_ARGUMENT,
                "compute_jitter must be 0-4 (the step time's coefficient of variation)"};
    *response = m_callbacks.setPace(*request);
    return grpc::Status::OK;
}

std::string listenAddress(const HostPort &address)
{
    const bool ipv6 = address.host.find(':') != std::string::npos;
    if (address.host == "localhost")
        return "127.0.0.1:" + std::to_string(address.port);
    if (ipv6)
        return "[" + address.host + "]:" + std::to_string(address.port);
    return address.host + ":" + std::to_string(address.port);
}

std::unique_ptr<grpc::Server> startTaskServer(const TaskId &task, const HostPort &address, const RpcSettings &settings,
                                              const std::vector<grpc::Service *> &services)
{
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int selectedPort = 0;
    configureServer(builder, listenAddress(address), settings, &selectedPort);
    for (auto *service : services)
        builder.RegisterService(service);
    auto server = builder.BuildAndStart();
    if (!server || selectedPort == 0) {
        std::string message;
        if (bindPort(address.host, address.port).inUse()) {
            message = portTakenMessage(address.toString(), task.toString());
            if (const auto holder = findPortHolder(address.port))
                message += " by " + holder->describe();
            message += ". Stop that process (an old run still holding the port?) or give this task another port";
        } else {
            message = address.toString() + " (" + task.toString() + ") cannot be bound: is " + address.host
                      + " an address of this machine?";
        }
        throw InputError(message);
    }
    return server;
}

namespace {

class GrpcTaskControlServer final : public TaskControlServer
{
public:
    GrpcTaskControlServer(const TaskId &task, const HostPort &address, const RpcSettings &rpc,
                          TaskControlCallbacks callbacks, std::function<void(const std::string &)> log)
        : m_auth(rpc.clusterToken, std::move(log))
        , m_lease(callbacks.vote ? std::make_unique<PsLeaseService>(callbacks.vote, &m_auth) : nullptr)
        , m_service(std::move(callbacks), &m_auth)
        , m_server(startTaskServer(task, address, rpc, services()))
    {
    }
    ~GrpcTaskControlServer() override { m_server->Shutdown(std::chrono::system_clock::now()); }

    void shutdown(std::chrono::milliseconds grace) override
    {
        m_server->Shutdown(std::chrono::system_clock::now() + grace);
    }

private:
    std::vector<grpc::Service *> services()
    {
        std::vector<grpc::Service *> all{&m_service};
        if (m_lease)
            all.push_back(m_lease.get());
        return all;
    }
    TokenCheck m_auth;
    std::unique_ptr<PsLeaseService> m_lease;
    TaskControlService m_service;
    std::unique_ptr<grpc::Server> m_server;
};

} // namespace

std::unique_ptr<TaskControlServer> serveTaskControl(const TaskId &task, const HostPort &address, const RpcSettings &rpc,
                                                    TaskControlCallbacks callbacks,
                                                    std::function<void(const std::string &)> log)
{
    return std::make_unique<GrpcTaskControlServer>(task, address, rpc, std::move(callbacks), std::move(log));
}

} // namespace parasync
