#pragma once

// The rule for who may serve what: a task serving an address other machines
// can reach must know who calls it -- by the cluster token or by mutual TLS
// -- or anyone who reaches it could steer the cluster (change its mode, stop
// its tasks, feed it gradients). A loopback address serves this machine only
// and needs neither. Applied once, when a task prepares to serve, next to the
// token check (cluster_token.h) that then holds every call to it.

#include "config/cluster_spec.h"
#include "config/task_options.h"
#include "wire/rpc_settings.h"

#include <functional>
#include <string>

namespace parasync {

// Whether `task` may serve `address` with `rpc`. Returns empty when it may;
// the warning to log when only `insecure` (--insecure: the user says the
// network is theirs alone) lets it; otherwise throws InputError naming the
// ways out: a token (--cluster_token_file or PARASYNC_CLUSTER_TOKEN), mutual
// TLS (--tls_mutual) or --insecure. Pure: reads no file, binds nothing.
std::string checkServingSecurity(const TaskId &task, const HostPort &address, const RpcSettings &rpc, bool insecure);

// What a task serves and calls with: the connection flags' settings (TLS
// files read, its certificate checked to name the task's address), the
// cluster token (--cluster_token_file, else the environment), and the rule
// above, whose warning, if any, goes to `log` before the task starts.
// Throws InputError. Called on main's thread before the task is built.
RpcSettings servingRpcSettings(const NodeOptions &options, const std::function<void(const std::string &)> &log);

} // namespace parasync
