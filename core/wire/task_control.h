#pragma once

// What every task answers on its own address (as a tf.train.Server does):
// status, stop, and a straggler delay and pace for experiments -- as
// callbacks, without gRPC. serveTaskControl() puts them behind the
// TaskControl service on a gRPC server (task_server.cpp); a task holds only
// the handle, so that it can run with another transport, or none, in tests.

#include "config/cluster_spec.h"
#include "proto/parasync.pb.h"
#include "wire/lease_calls.h"
#include "wire/rpc_settings.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace parasync {

// The answers; calls arrive on the server's threads.
struct TaskControlCallbacks
{
    std::function<proto::TaskStatusResponse()> status;
    std::function<void(const std::string &reason)> stop;
    // Empty for ps tasks, which do not train.
    std::function<int(int delayMs)> setStraggler;
    // Empty for ps tasks. Gets a checked request; answers the pace in force.
    std::function<proto::SetPaceResponse(const proto::SetPaceRequest &)> setPace;
    // The chief worker:0 of a cluster with --ps_backup_hosts: its vote as
    // the witness of every pair's lease (the PsLease service); empty
    // otherwise, and the service is not offered.
    VoteAnswer vote;
};

// A running server; destroying it stops it at once.
class TaskControlServer
{
public:
    virtual ~TaskControlServer() = default;
    // Stops taking calls, letting those under way finish within `grace`.
    virtual void shutdown(std::chrono::milliseconds grace) = 0;
};

// Serves `callbacks` for `task` at `address` over gRPC, checking `rpc`'s
// cluster token (a refusal goes to `log`). Throws InputError when the
// address cannot be bound, naming the holder (see startTaskServer).
std::unique_ptr<TaskControlServer> serveTaskControl(const TaskId &task, const HostPort &address, const RpcSettings &rpc,
                                                    TaskControlCallbacks callbacks,
                                                    std::function<void(const std::string &)> log);

} // namespace parasync
