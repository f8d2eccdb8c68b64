#pragma once

// The PsLease service (core/proto/parasync.proto) without its logic: a
// replicated pair's processes and the witness (the chief worker:0) answer
// votes through a callback (node/lease.h decides), and a candidate asks a
// voter through a LeaseVoters client.

#include "proto/parasync.grpc.pb.h"
#include "wire/lease_calls.h"
#include "wire/rpc_settings.h"
#include "wire/token_check.h"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace parasync {

class PsLeaseService final : public proto::PsLease::Service
{
public:
    // `auth` (may be null: no token) must outlive the service.
    PsLeaseService(VoteAnswer answer, const TokenCheck *auth);
    grpc::Status Vote(grpc::ServerContext *context, const proto::VoteRequest *request,
                      proto::VoteResponse *response) override;

private:
    VoteAnswer m_answer;
    const TokenCheck *m_auth;
};

// A candidate's calls to its voters: one channel per address, kept, since a
// primary asks each voter a few times a lease. Thread-safe.
class LeaseVoters
{
public:
    explicit LeaseVoters(RpcSettings rpc) : m_rpc(std::move(rpc)) {}
    VoteResult ask(const std::string &address, const proto::VoteRequest &request, std::chrono::milliseconds timeout);

private:
    RpcSettings m_rpc;
    std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<proto::PsLease::Stub>> m_stubs;
};

} // namespace parasync
