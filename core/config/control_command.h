#pragma once

#include "config/task_options.h"

#include <optional>
#include <string>
#include <vector>

namespace parasync {

// A command run against a live cluster through ps:0 instead of starting a
// task, for users without the desktop app:
//   parasync-node --ps_hosts=HOST:PORT [--ps_backup_hosts=HOST:PORT] --status
//   parasync-node --ps_hosts=HOST:PORT --set_mode=async|sync|ssp [--staleness=N]
//                 [--replicas_to_aggregate=N] [--total_num_replicas=N]
// It takes no task, so it reads only these flags and the connection's.
struct ControlCommand
{
    enum class Action { Status, SetMode };
    Action action = Action::Status;
    std::string ps0;              // --ps_hosts' first address
    std::string ps0Backup;        // --ps_backup_hosts' first address (empty: none)
    ConnectionOptions connection; // --tls_* --max_message_bytes --heartbeat_ms
    std::string clusterTokenFile; // --cluster_token_file (empty: PARASYNC_CLUSTER_TOKEN, if set)
    // --set_mode and the numbers given with it; numbers not given keep the
    // values ps:0 has now.
    proto::UpdateMode mode = proto::UPDATE_MODE_UNSPECIFIED;
    std::optional<int32_t> staleness;            // --staleness
    std::optional<int32_t> replicasToAggregate;  // --replicas_to_aggregate
    std::optional<int32_t> totalNumReplicas;     // --total_num_replicas
    std::optional<bool> learningRateByStaleness; // --learning_rate_by_staleness

    // The mode --set_mode asks for, given the one ps:0 has now.
    proto::ModeConfig modeFrom(const proto::ModeConfig &current) const;
};

// The control command a parasync-node command line asks for (--status or
// --set_mode, written --name=value), or nullopt when it asks for none: then
// it starts a task (parseNodeOptions). Flags it does not use are ignored, so
// a task's own command line plus --status works. Throws InputError naming the
// flag and what to do (a missing --ps_hosts, an unknown mode, a number that
// is not one).
std::optional<ControlCommand> parseControlCommand(const std::vector<std::string> &args);

} // namespace parasync
