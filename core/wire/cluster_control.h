#pragma once

// Blocking control calls on a running cluster, for the command line
// (`parasync-node --set_mode=...`, `--status`) and tools. Thread-safe; each
// call blocks up to 10 s: a ps that refuses connections is reported at once,
// a connection that breaks while it is set up (a loaded ps) is tried again.

#include "config/control_command.h"
#include "proto/parasync.pb.h"
#include "wire/rpc.h"

#include <string>

namespace parasync {

// Changes the update mode through ps:0 at `psAddress`. Throws InputError
// with ps:0's reason (bad numbers, a refused token), Unavailable when it did
// not answer.
proto::SetModeResponse setClusterMode(const std::string &psAddress, const proto::ModeConfig &mode,
                                      const std::string &requestedBy, const RpcSettings &settings = {});

// ps:0's view of the cluster. Throws Unavailable when it does not answer,
// InputError when it refuses the caller (token, TLS identity).
proto::ClusterStatusResponse getClusterStatus(const std::string &psAddress, const RpcSettings &settings = {});

// Human-readable status, a few lines (global step, mode, each worker).
std::string formatClusterStatus(const proto::ClusterStatusResponse &status);

// Runs `parasync-node --status` or `--set_mode=...` (parseControlCommand)
// against ps:0, with the command's TLS files and cluster token, and returns
// what to print: the status, or the mode now in force. Numbers --set_mode
// does not give keep ps:0's current values. Throws InputError when the
// token or TLS files are wrong or ps:0 refuses the mode, Unavailable when
// ps:0 (and its backup) cannot be reached. Blocks up to 10 s per ps:0
// process it asks.
std::string runControlCommand(const ControlCommand &command);

} // namespace parasync
