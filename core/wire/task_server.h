#pragma once

#include "config/cluster_spec.h"
#include "proto/parasync.grpc.pb.h"
#include "wire/rpc.h"
#include "wire/task_control.h"
#include "wire/token_check.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace parasync {

// TaskControl over gRPC (task_control.h): the owner's callbacks answer;
// calls arrive on gRPC threads.
class TaskControlService final : public proto::TaskControl::Service
{
public:
    using Callbacks = TaskControlCallbacks;
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
