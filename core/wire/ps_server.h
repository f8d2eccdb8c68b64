#pragma once

// The ps task's gRPC side: the services it serves (ParameterService on every
// ps task; PsReplication on a pair's primary; ClusterControl and Telemetry on
// ps:0; TaskControl), each checking the cluster token and handing the call to
// a PsHandler (ps_calls.h), and the calls a ps task makes to the other ps
// processes: together its PsTransport. The logic those calls reach is
// node/ps_task's, which knows only these interfaces: it compiles, and is
// tested, without gRPC (TensorFlow's rpc/ and distributed_runtime/ split).

#include "config/task_options.h"
#include "wire/ps_transport.h"
#include "wire/rpc_settings.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace grpc {
class Server;
class Service;
} // namespace grpc

namespace parasync {

class DataLinkAcceptor;
class TokenCheck;

// A ps task's server, serving from construction until shutdown() or
// destruction. Calls arrive on gRPC's threads and go to `task`, which must
// outlive the server.
class PsServer final : public PsServing
{
public:
    using Log = std::function<void(const std::string &)>;

    // Binds the task's address (options.task on options.cluster) and starts
    // serving. Throws InputError when the address cannot be bound, naming
    // the process that holds it.
    PsServer(PsHandler &task, const NodeOptions &options, const RpcSettings &rpc, Log log);
    // Shuts down with calls in flight given 1 s, if shutdown() was not called.
    ~PsServer() override;
    PsServer(const PsServer &) = delete;
    PsServer &operator=(const PsServer &) = delete;

    void shutdown(std::chrono::milliseconds grace) override;
    int dataLinkPort() const override;

private:
    std::unique_ptr<TokenCheck> m_auth;
    // Before the server: its streams' links go before the acceptor does.
    std::unique_ptr<DataLinkAcceptor> m_dataLinks;
    std::vector<std::unique_ptr<grpc::Service>> m_services;
    std::unique_ptr<grpc::Server> m_server;
};

// The gRPC transport of a ps task: the server above, built around the task
// when it starts, and its calls to the other ps processes (a backup's
// Follow, asking its peer who it is, ps:0 telling the others to stop at the
// end). parasync-node gives it to the ps task it runs.
PsTransport grpcPsTransport(const NodeOptions &options, const RpcSettings &rpc, PsServer::Log log);

} // namespace parasync
