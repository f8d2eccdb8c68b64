#pragma once

// A vote for a replicated pair's lease (the PsLease service), without gRPC:
// what a voter's answer is given and what a candidate gets back.
// lease_service.h carries them over gRPC; node/lease.h decides.

#include "proto/parasync.pb.h"

#include <functional>
#include <string>

namespace parasync {

// Answers a vote; returns what is wrong with the request (refused with
// INVALID_ARGUMENT), or an empty string.
using VoteAnswer = std::function<std::string(const proto::VoteRequest &, proto::VoteResponse *)>;

// A vote asked for: the answer, or why none came.
struct VoteResult
{
    bool reached = false;
    proto::VoteResponse response;
    std::string error; // when not reached, in words
};

} // namespace parasync
