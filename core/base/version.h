#pragma once

// What `parasync-node --version` prints, and what the pre-flight check
// compares between this app and the parasync-node of every remote host.

#include <string>

namespace parasync {

// Bumped whenever parasync.proto or the tasks' flags change in a way that
// makes nodes of different builds unable to work together.
inline constexpr int kProtocolVersion = 1;

// The release, CMake's PROJECT_VERSION ("0.1.0"). Defined in version.cpp
// alone, from a generated header, so a version bump recompiles one file.
const char *version();

// "parasync-node 0.4.0 (protocol 1)".
std::string nodeVersionLine();

} // namespace parasync
