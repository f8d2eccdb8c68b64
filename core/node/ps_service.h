#pragma once

// The ps task's gRPC side: the services it serves (ParameterService on every
// ps task; ClusterControl and Telemetry on ps:0; TaskControl), each checking
// the cluster token and handing the call to PsTask through ps_calls.h, and
// the one call a ps task makes (ps:0 telling the others to stop). The logic
// those calls reach is in ps_task.cpp; this header keeps gRPC's headers out
// of it, so that it compiles, and is tested, without them.

#include "config/task_options.h"
#include "node/ps_calls.h"
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
class PsTask;
class TokenCheck;

// A ps task's server, serving from construction until shutdown() or
// destruction. Calls arrive on gRPC's threads and go to `task`, which must
// outlive the server.
class PsServer
{
public:
    using Log = std::function<void(const std::string &)>;

    // Binds the task's address (options.task on options.cluster) and starts
    // serving. Throws InputError when the address cannot be bound, naming
    // the process that holds it.
    PsServer(PsTask &task, const NodeOptions &options, const RpcSettings &rpc, Log log);
    // Shuts down with calls in flight given 1 s, if shutdown() was not called.
    ~PsServer();
    PsServer(const PsServer &) = delete;
    PsServer &operator=(const PsServer &) = delete;

    // Stops accepting calls, gives those in flight `grace` to end (then
    // cancels them) and blocks until the server is gone.
    void shutdown(std::chrono::milliseconds grace);
    // The port its data links are accepted on (a firewall must let the
    // workers reach it); 0 without data links.
    int dataLinkPort() const;

private:
    std::unique_ptr<TokenCheck> m_auth;
    // Before the server: its streams' links go before the acceptor does.
    std::unique_ptr<DataLinkAcceptor> m_dataLinks;
    std::vector<std::unique_ptr<grpc::Service>> m_services;
    std::unique_ptr<grpc::Server> m_server;
};

// A backup's call to its primary's PsReplication.Follow at `address`.
std::unique_ptr<PrimaryLink> openPrimaryLink(const std::string &address, const RpcSettings &rpc);
// Asks the task at `address` who it is (TaskControl.GetTaskStatus), waiting
// at most `timeout`: the other process of a ps pair, before a role is taken.
PeerStatus askPeer(const std::string &address, const RpcSettings &rpc, std::chrono::milliseconds timeout);

// ps:0 at the end of the run: asks every other ps task of `cluster` to stop
// (TaskControl.Stop), logging those it cannot reach. Blocks up to 2 s a task.
// With backups, every other process of every pair but `own` (this task's address).
void stopOtherPsTasks(const ClusterSpec &cluster, const std::string &own, const RpcSettings &rpc,
                      const PsServer::Log &log);

} // namespace parasync
