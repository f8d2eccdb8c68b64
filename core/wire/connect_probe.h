#pragma once

// Whether this host can open a TCP connection to an address: the pre-flight's
// reachability probe (node/network_probe.h), and a ps asking whether its
// pair's peer is there at all when a gRPC call to it failed (ps_server.cpp):
// gRPC says UNAVAILABLE both for nobody listening and for a slow peer.

#include "config/cluster_spec.h"

#include <string>

namespace parasync {

// Connects to `address` within `timeoutMs`; on failure `why` is
// "connection refused", "timed out after 3 s", "no route to host", ...
bool canConnect(const HostPort &address, int timeoutMs, std::string *why);

} // namespace parasync
