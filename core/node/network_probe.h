#pragma once

// The network checks the pre-flight runs on each host of a cluster, through
// `parasync-node` there (so they see that host's ports, routes and firewall,
// not this machine's):
//   parasync-node --check_ports=H:P,...   can a task listen on each address?
//   parasync-node --hold_ports=H:P,...    listen on each until stdin closes
// (both bind as port_holder.h's bindPort(), as the task itself would)
//   parasync-node --probe=H:P,...         can this host connect to each?
// Each prints one line per address (see below) and exits 0. No Qt.

#include "config/cluster_spec.h"

#include <string>
#include <vector>

namespace parasync {

// Whether `args` asks for one of the commands above.
bool isNetworkCheckCommand(const std::vector<std::string> &args);
// Runs it, printing its lines to stdout; returns the exit code. Throws
// InputError for a malformed address list. Output lines:
//   "port H:P free" | "port H:P taken: WHY[ by HOLDER][; free: N]"
//   "holding H:P" | "hold H:P failed: WHY", then waits for stdin to close
//   "reach H:P ok" | "reach H:P failed: WHY"
int runNetworkCheckCommand(const std::vector<std::string> &args);

} // namespace parasync
