#pragma once

// The cluster token: 256 random bits that every call to every task carries
// (metadata "parasync-cluster-token"). It reaches a task through the
// environment (PARASYNC_CLUSTER_TOKEN) or a file only its owner can read
// (--cluster_token_file), never on a command line, where `ps` shows it to
// every user of the machine.

#include <string>

namespace parasync {

inline constexpr const char *kTokenEnvironmentVariable = "PARASYNC_CLUSTER_TOKEN";

// 64 hex digits from the system's random source.
std::string generateClusterToken();

// Reads a token file. Throws InputError when it is missing, readable by
// group or others ("chmod 600 FILE"), or does not hold a token.
std::string readClusterTokenFile(const std::string &path);
// Checks a token given by hand (pasted into the app): InputError naming
// `origin` unless it looks like one. Returns it without surrounding spaces.
std::string checkClusterToken(const std::string &token, const std::string &origin);
// Writes a token file with mode 0600 (replacing an existing file).
void writeClusterTokenFile(const std::string &path, const std::string &token);

// The token a task uses: --cluster_token_file if given, else the
// environment, else empty (no authentication).
std::string resolveClusterToken(const std::string &tokenFile);

} // namespace parasync
