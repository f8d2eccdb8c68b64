#pragma once

// The cluster token: 256 random bits that every call to every task carries
// (metadata "parasync-cluster-token"). It reaches a task through the
// environment (PARASYNC_CLUSTER_TOKEN) or a file only its owner can read
// (--cluster_token_file), never on a command line, where `ps` shows it to
// every user of the machine.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
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

// Checks the token of incoming calls. Thread-safe. Refusals are logged with
// the caller's address, at most a few lines per 10 s (a port scanner must not
// flood the log) with a count of those not shown.
class TokenCheck
{
public:
    using Log = std::function<void(const std::string &)>;
    TokenCheck(std::string token, Log log);

    bool enabled() const { return !m_token.empty(); }
    // OK, or UNAUTHENTICATED with a message that says what to do.
    grpc::Status check(const grpc::ServerContext &context, const char *method) const;

private:
    std::string m_token;
    Log m_log;
    mutable std::mutex m_mutex;
    mutable std::chrono::steady_clock::time_point m_windowStart;
    mutable int m_loggedInWindow = 0;
    mutable int64_t m_suppressed = 0;
};

} // namespace parasync
