#pragma once

// The network checks the pre-flight runs on each host of a cluster, through
// `parasync-node` there (so they see that host's ports, routes and firewall,
// not this machine's):
//   parasync-node --check_ports=H:P,...   can a task listen on each address?
//   parasync-node --hold_ports=H:P,...    listen on each until stdin closes
//   parasync-node --probe=H:P,...         can this host connect to each?
// Each prints one line per address (see below) and exits 0. No Qt.

#include "config/cluster_spec.h"

#include <string>
#include <vector>

namespace parasync {

// Whether a server could listen on host:port now, binding as gRPC does (with
// SO_REUSEADDR): a port with only TIME_WAIT connections from a run that just
// ended is usable, one with a listener is not. On false, `why` says what
// bind() said ("address in use", "not an address of this host").
bool canListen(const std::string &host, uint16_t port, std::string *why = nullptr);

// Connects to `address` within `timeoutMs`; on failure `why` is
// "connection refused", "timed out after 3 s", "no route to host", ...
bool canConnect(const HostPort &address, int timeoutMs, std::string *why);

// Whether `args` asks for one of the commands above.
bool isNetworkCheckCommand(const std::vector<std::string> &args);
// Runs it, printing its lines to stdout; returns the exit code. Throws
// InputError for a malformed address list. Output lines:
//   "port H:P free" | "port H:P taken: WHY[ by HOLDER][; free: N]"
//   "holding H:P" | "hold H:P failed: WHY", then waits for stdin to close
//   "reach H:P ok" | "reach H:P failed: WHY"
int runNetworkCheckCommand(const std::vector<std::string> &args);

} // namespace parasync
