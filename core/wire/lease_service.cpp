#include "wire/lease_service.h"

#include "wire/rpc.h"

namespace parasync {

PsLeaseService::PsLeaseService(VoteAnswer answer, const TokenCheck *auth) : m_answer(std::move(answer)), m_auth(auth) {}

grpc::Status PsLeaseService::Vote(grpc::ServerContext *context, const proto::VoteRequest *request,
                                  proto::VoteResponse *response)
{
    if (m_auth)
        if (auto denied = m_auth->check(*context, "Vote"); !denied.ok())
            return denied;
    if (const std::string wrong = m_answer(*request, response); !wrong.empty())
        return {grpc::StatusCode::INVALID_ARGUMENT, wrong};
    return grpc::Status::OK;
}

VoteResult LeaseVoters::ask(const std::string &address, const proto::VoteRequest &request,
                            std::chrono::milliseconds timeout)
{
    std::shared_ptr<proto::PsLease::Stub> stub;
    {
        std::lock_guard lock(m_mutex);
        auto &kept = m_stubs[address];
        if (!kept)
            kept = proto::PsLease::NewStub(makeChannel(address, m_rpc));
        stub = kept;
    }
    auto context = makeContext(m_rpc, timeout);
    VoteResult result;
    const grpc::Status status = stub->Vote(context.get(), request, &result.response);
    result.reached = status.ok();
    if (!status.ok())
        result.error = describeRpcError(status);
    return result;
}

} // namespace parasync
