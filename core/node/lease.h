#pragma once

// The lease that keeps a replicated ps pair to one primary (the PsLease
// service in core/proto/parasync.proto says the protocol): a voter's
// promise (LeaseVote) and what a candidate holds of the voters' promises
// (LeaseHold). Both are plain state with the time passed in, so that the
// tests drive them through every order of events without a clock.

#include "config/cluster_spec.h"
#include "proto/parasync.pb.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace parasync {

using LeaseClock = std::chrono::steady_clock;

// Clocks of two hosts may run at different rates: a holder counts a promise
// of L as L * (1 - kLeaseClockDrift) from the moment it asked, so that it
// stops before the voter's L is over even when its clock runs that much
// slower. NTP keeps rates within 500 ppm; 5% also covers a virtual machine's
// clock that lags while its host is loaded.
constexpr double kLeaseClockDrift = 0.05;

// A candidate that serves alone (VoteRequest.alone_turn: it acknowledges
// updates the pair's other process does not hold) keeps a voter from voting
// for the other process, unless that one holds the state of that turn, until
// it has not asked for this many of its leases. A primary cut off for a
// moment comes back with its updates; one gone that long took them with it,
// and the other process takes over without them.
constexpr int kAloneGraceLeases = 10;

// One voter's vote for one pair: promised to one candidate at a time.
class LeaseVote
{
public:
    struct Answer
    {
        bool granted = false;
        int64_t epoch = 0;                 // the highest this voter has seen
        std::string holder;                // refused: whom the vote is promised to
        std::chrono::milliseconds left{0}; // refused: how long that promise lasts
        std::string reason;                // refused: why, in words
        // The process that last served the pair alone, when it is not the
        // candidate (VoteResponse.served_alone_by).
        std::string servedAloneBy;
    };

    // `voter` names this voter in the reasons ("the witness worker:0 at
    // 127.0.0.1:2223"). Until `startedAt + lease` it promises nothing: a
    // process started again may have promised its vote in its last life.
    LeaseVote(std::string voter, LeaseClock::time_point startedAt, std::chrono::milliseconds lease);

    // Promises the vote to `candidate` until now + `lease`, under `epoch`,
    // unless it is promised to another until later, or a higher epoch was
    // seen (a candidate asking again under its own epoch keeps it), or
    // another process serves the pair alone in a turn later than
    // `holdsTurn` and asked less than kAloneGraceLeases of its leases ago.
    // `aloneTurn` (above 0): the candidate serves alone, in that turn.
    Answer ask(const std::string &candidate, int64_t epoch, std::chrono::milliseconds lease, LeaseClock::time_point now,
               int64_t aloneTurn = 0, int64_t holdsTurn = 0);
    // A higher epoch learned elsewhere (the replicated state); never lowers it.
    void sawEpoch(int64_t epoch);
    int64_t epoch() const { return m_epoch; }
    // Gives up a promise to `candidate` (a primary that stops serving, a
    // candidate that did not win): another may be promised the vote at once.
    void release(const std::string &candidate);

private:
    std::string m_voter;
    LeaseClock::time_point m_quietUntil;
    std::string m_holder;
    LeaseClock::time_point m_until;
    int64_t m_epoch = 0;
    // The last holder that said it serves alone, in which turn, and until
    // when it keeps the other process out (its last such ask plus
    // kAloneGraceLeases leases).
    std::string m_aloneHolder;
    int64_t m_aloneTurn = 0;
    LeaseClock::time_point m_aloneUntil;
};

// A candidate's side: which voters promised it their vote, until when by its
// own clock. It holds the lease while its own vote and at least one other
// are promised to it.
class LeaseHold
{
public:
    // A promise of `lease` asked for at `askedAt` (before the request left).
    void granted(const std::string &voter, LeaseClock::time_point askedAt, std::chrono::milliseconds lease);
    void refused(const std::string &voter);
    void clear() { m_until.clear(); }
    // Whether some voter's promise still holds at `now`.
    bool held(LeaseClock::time_point now) const;
    // When the last promise it holds ends (the clock's zero if none).
    LeaseClock::time_point until() const;

private:
    std::map<std::string, LeaseClock::time_point> m_until;
};

// A process's votes: a ps process's for its own pair, the witness's (the
// chief worker:0) for every pair. Checks each request as a hostile client
// would fill it. Thread-safe.
class LeaseVoter
{
public:
    // `name` as the reasons say it ("the witness worker:0 at 127.0.0.1:2223");
    // `pairs` the ps indexes it votes for. It grants at most `lease` (its own
    // --ps_lease_ms) and nothing in its first `lease`: a promise it made in a
    // life it no longer remembers has ended by then.
    LeaseVoter(ClusterSpec cluster, std::string name, std::vector<int> pairs, std::chrono::milliseconds lease,
               LeaseClock::time_point startedAt = LeaseClock::now());

    // The PsLease.Vote call: what is wrong with the request, or "" and the
    // answer in `response`.
    std::string vote(const proto::VoteRequest &request, proto::VoteResponse *response,
                     LeaseClock::time_point now = LeaseClock::now());
    // This process's own vote, for itself or a higher epoch learned.
    LeaseVote::Answer askOwn(int pair, const std::string &candidate, int64_t epoch, LeaseClock::time_point now,
                             int64_t aloneTurn = 0, int64_t holdsTurn = 0);
    void release(int pair, const std::string &candidate);
    void sawEpoch(int pair, int64_t epoch);
    int64_t epoch(int pair) const;
    std::chrono::milliseconds lease() const { return m_lease; }

private:
    ClusterSpec m_cluster;
    std::chrono::milliseconds m_lease;
    mutable std::mutex m_mutex;
    std::map<int, LeaseVote> m_votes;
};

} // namespace parasync
