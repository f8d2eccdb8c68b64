#pragma once

#include "config/cluster_spec.h"
#include "proto/parasync.grpc.pb.h"
#include "wire/cluster_token.h"
#include "wire/rpc.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace parasync {

// What every task answers on its own address (as a tf.train.Server does):
// status, stop, and a straggler delay and pace for experiments. The owner supplies
// the answers through callbacks; calls arrive on gRPC threads.
class TaskControlService final : public proto::TaskControl::Service
{
public:
    struct Callbacks
    {
        std::function<proto::TaskStatusResponse()> status;
        std::function<void(const std::string &reason)> stop;
        // Empty for ps tasks, which do not train.
        std::function<int(int delayMs)> setStraggler;
        // Empty for ps tasks. Gets a checked request; answers the pace in force.
        std::function<proto::SetPaceResponse(const proto::SetPaceRequest &)> setPace;
    };
    // `auth` (may be null: no token) must outlive the service.
    TaskControlService(Callbacks callbacks, const TokenCheck *auth);

    grpc::Status GetTaskStatus(grpc::ServerContext *context, const proto::TaskStatusRequest *,
                               proto::TaskStatusResponse *response) override;
    grpc::Status Stop(grpc::ServerContext *context, const proto::StopRequest *request, proto::StopResponse *) override;
    grpc::Status SetStraggler(grpc::ServerContext *context, const proto::SetStragglerRequest *request,
                              proto::SetStragglerResponse *response) override;
    grpc::Status SetPace(grpc::ServerContext *context, const proto::SetPaceRequest *request,
                         proto::SetPaceResponse *response) override;

private:
    grpc::Status authorize(const grpc::ServerContext &context, const char *method) const;
    Callbacks m_callbacks;
    const TokenCheck *m_auth;
};

// Starts a gRPC server for `task` on its cluster address with the given
// services and the standard health service. Throws InputError when the
// address cannot be bound, naming it and, where /proc tells, the process
// holding it ("127.0.0.1:2222 (ps:0) is already in use by pid 1234
// (parasync-node --job_name=ps ...): stop that process or choose another port").
std::unique_ptr<grpc::Server> startTaskServer(const TaskId &task, const HostPort &address, const RpcSettings &settings,
                                              const std::vector<grpc::Service *> &services);

// The address a task listens on: its cluster host, or 0.0.0.0 when the host is
// a name that is not this machine's loopback (the cluster spec names the
// address others use to reach it).
std::string listenAddress(const HostPort &address);

} // namespace parasync
