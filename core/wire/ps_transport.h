#pragma once

// How a ps task reaches the world, given to it rather than built inside it:
// the server that hands it its calls, and the calls it makes to the other
// ps processes (its pair's peer, the other tasks at the end of the run).
// parasync-node wires the gRPC ones (ps_server.h's grpcPsTransport); a
// task given none is reached in-process only, as the tests and the fuzzer
// reach it.

#include "wire/lease_calls.h"
#include "wire/ps_calls.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace parasync {

// The server around a ps task, serving from the task's start() until
// shutdown() (or destruction).
class PsServing
{
public:
    virtual ~PsServing() = default;
    // Stops accepting calls, gives those in flight `grace` to end (then
    // cancels them) and blocks until the server is gone.
    virtual void shutdown(std::chrono::milliseconds grace) = 0;
    // The port its data links are accepted on (a firewall must let the
    // workers reach it); 0 without data links.
    virtual int dataLinkPort() const = 0;
};

struct PsTransport
{
    // Binds the task's address and starts serving it; throws InputError
    // when the address cannot be bound. Called once, first thing in start().
    std::function<std::unique_ptr<PsServing>(PsHandler &task)> serve;
    // A backup's Follow call to its primary at `address`.
    std::function<std::unique_ptr<PrimaryLink>(const std::string &address)> followPrimary;
    // Asks the process at `address` who it is, waiting at most `timeout`.
    std::function<PeerStatus(const std::string &address, std::chrono::milliseconds timeout)> askPeer;
    // Asks the voter at `address` (the pair's other process, or the witness)
    // for its vote, waiting at most `timeout`.
    std::function<VoteResult(const std::string &address, const proto::VoteRequest &request,
                             std::chrono::milliseconds timeout)>
        askVote;
    // ps:0 at the end of the run: asks every other ps process but `own` to
    // stop; blocks up to 2 s a process.
    std::function<void(const std::string &own)> stopOtherPsTasks;
};

} // namespace parasync
