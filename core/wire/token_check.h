#pragma once

// The server's side of the cluster token (wire/cluster_token.h): every
// service a task serves checks each call's metadata with one TokenCheck.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

namespace parasync {

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
