#include "wire/token_check.h"

#include "wire/cluster_token.h"
#include "wire/rpc.h"

namespace parasync {

namespace {

// Compares without an early exit, so timing does not tell how much matched.
bool sameToken(const std::string &a, const std::string &b)
{
    if (a.size() != b.size())
        return false;
    unsigned char difference = 0;
    for (size_t i = 0; i < a.size(); ++i)
        difference |= static_cast<unsigned char>(a[i] ^ b[i]);
    return difference == 0;
}

} // namespace

TokenCheck::TokenCheck(std::string token, Log log) : m_token(std::move(token)), m_log(std::move(log)) {}

grpc::Status TokenCheck::check(const grpc::ServerContext &context, const char *method) const
{
    if (m_token.empty())
        return grpc::Status::OK;
    const auto &metadata = context.client_metadata();
    const auto it = metadata.find(kTokenMetadataKey);
    const bool present = it != metadata.end();
    if (present && sameToken(std::string(it->second.data(), it->second.size()), m_token))
        return grpc::Status::OK;

    {
        std::lock_guard lock(m_mutex);
        const auto now = std::chrono::steady_clock::now();
        if (now - m_windowStart > std::chrono::seconds(10)) {
            if (m_suppressed > 0)
                m_log("refused " + std::to_string(m_suppressed) + " more calls without the cluster token");
            m_windowStart = now;
            m_loggedInWindow = 0;
            m_suppressed = 0;
        }
        if (m_loggedInWindow < 5) {
            ++m_loggedInWindow;
            m_log(std::string("refused a call to ") + method + " from " + context.peer() + ": "
                  + (present ? "wrong" : "no") + " cluster token");
        } else {
            ++m_suppressed;
        }
    }
    return {grpc::StatusCode::UNAUTHENTICATED, std::string(present ? "wrong" : "missing")
                                                   + " cluster token: give the cluster's token through "
                                                   + kTokenEnvironmentVariable + " or --cluster_token_file"};
}

} // namespace parasync
