#pragma once

// What `parasync-node --version` prints, and what the pre-flight check
// compares between this app and the parasync-node of every remote host.

#include <string>

namespace parasync {

// Bumped whenever parasync.proto or the tasks' flags change in a way that
// makes nodes of different builds unable to work together.
inline constexpr int kProtocolVersion = 1;

// "parasync-node 0.4.0 (protocol 1)".
inline std::string nodeVersionLine()
{
    return std::string("parasync-node ") + PARASYNC_VERSION + " (protocol " + std::to_string(kProtocolVersion) + ")";
}

} // namespace parasync
