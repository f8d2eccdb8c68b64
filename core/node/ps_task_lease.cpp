// PsTask's lease (--ps_backup_hosts): at most one process of a pair serves.
//
// Three votes decide who may (node/lease.h; the PsLease service in
// core/proto/parasync.proto): the pair's two processes and the witness,
// the chief worker:0. A primary asks its backup and the witness for their
// votes a few times a lease, each on a thread of its own, and acknowledges
// anything -- a push, a join, an initialisation, a mode change -- only
// while its own vote and one other are promised to it. A backup takes over
// only once it has won its own vote and one other under a higher epoch;
// its own vote stays promised to its primary for a lease after the last
// time the primary asked, so it never wins while a live primary still
// renews. A primary cut off from both voters stops acknowledging before
// either may promise its vote to the backup.
//
// The lease decides who serves; it does not move state. A primary whose
// lease ended and that learns of a higher epoch drops what it holds (the
// other process may have acknowledged updates it never saw) and follows
// the process that serves now, as a backup started again would.

#include "base/error.h"
#include "formats/run_log.h"
#include "formats/task_state_line.h"
#include "node/ps_task.h"

#include <algorithm>

namespace parasync {

std::chrono::milliseconds PsTask::leaseLength() const
{
    return std::chrono::milliseconds(m_options.connection.psLeaseMs);
}

std::string PsTask::witnessAddress() const
{
    return m_options.cluster.workers.empty() ? std::string() : m_options.cluster.workers.front().toString();
}

std::string PsTask::describeVoter(const std::string &address) const
{
    if (address == ownAddress())
        return "its own vote";
    return address == witnessAddress() ? "the witness worker:0 at " + address
                                       : "the pair's other process at " + address;
}

std::string PsTask::vote(const proto::VoteRequest &request, proto::VoteResponse *response)
{
    if (!m_voter)
        return psName() + " at " + ownAddress() + " votes for no lease (--ps_lease_ms=0)";
    return m_voter->vote(request, response);
}

bool PsTask::leaseHeldLocked(LeaseClock::time_point now) const
{
    return !leased() || (m_role == proto::REPLICA_PRIMARY && m_lease.held(now));
}

std::string PsTask::leaseProblemLocked() const
{
    std::string words;
    for (const auto &[voter, problem] : m_voterProblems)
        words += (words.empty() ? "" : "; ") + describeVoter(voter) + ": " + problem;
    return words.empty() ? std::string("no voter has answered yet") : words;
}

CallStatus PsTask::awaitLeaseLocked(std::unique_lock<std::mutex> &lock)
{
    // A lease that lapsed for a moment (a voter slow to answer on a loaded
    // machine) is usually renewed within one: wait that long before saying no.
    const auto deadline = LeaseClock::now() + leaseLength();
    m_leaseChanged.wait_until(lock, deadline, [&] {
        return m_finished || m_role != proto::REPLICA_PRIMARY || m_lease.held(LeaseClock::now());
    });
    if (m_finished)
        return CallStatus::failedPrecondition(psName() + " is stopping: " + m_stopReason);
    if (m_role != proto::REPLICA_PRIMARY)
        return CallStatus::unavailable(psName() + " at " + ownAddress()
                                       + " stopped serving: the pair's other process at " + peerAddress()
                                       + " holds its lease now; turn to it");
    if (m_lease.held(LeaseClock::now()))
        return {};
    return CallStatus::unavailable(psName() + " at " + ownAddress() + " does not hold its lease (epoch "
                                   + std::to_string(m_epoch) + "), so it acknowledges nothing: " + leaseProblemLocked()
                                   + ". It serves again once its backup or the witness renews it; ask again");
}

bool PsTask::servesAloneLocked() const
{
    return !m_follower || m_ackedSequence < m_follower->stateSequence;
}

VoteResult PsTask::askVoteUnlocked(std::unique_lock<std::mutex> &lock, const std::string &voter, int64_t epoch,
                                   int64_t aloneTurn, int64_t holdsTurn)
{
    proto::VoteRequest request;
    request.set_ps_index(m_options.task.index);
    request.set_candidate(ownAddress());
    request.set_epoch(epoch);
    request.set_lease_ms(leaseLength().count());
    request.set_alone_turn(aloneTurn);
    request.set_holds_turn(holdsTurn);
    // The call may wait up to half a lease for a voter that does not
    // answer: never with the task's lock held.
    lock.unlock();
    VoteResult result = m_transport.askVote ? m_transport.askVote(voter, request, leaseLength() / 2)
                                            : VoteResult{false, {}, "this task is reached in-process only"};
    lock.lock();
    return result;
}

void PsTask::startLeaseRenewal()
{
    for (const std::string &voter : {peerAddress(), witnessAddress()})
        if (!voter.empty())
            m_leaseThreads.emplace_back([this, voter] { renewLease(voter); });
}

void PsTask::renewLease(const std::string &voter)
{
    const auto lease = leaseLength();
    const int pair = m_options.task.index;
    const std::string self = ownAddress();
    std::unique_lock lock(m_mutex);
    while (!m_finished) {
        if (m_role != proto::REPLICA_PRIMARY) {
            m_leaseChanged.wait_for(lock, lease / 4);
            continue;
        }
        m_epoch = std::max<int64_t>(m_epoch, 1);
        const int64_t epoch = m_epoch;
        const uint64_t round = m_leaseRound;
        const int64_t aloneTurn = servesAloneLocked() ? m_aloneTurns : 0;
        // Its own vote first, for as long as it will count the other's.
        const auto askedAt = LeaseClock::now();
        const LeaseVote::Answer own = m_voter->askOwn(pair, self, epoch, askedAt, aloneTurn, m_aloneTurns);
        VoteResult result;
        if (own.granted) {
            result = askVoteUnlocked(lock, voter, epoch, aloneTurn, m_aloneTurns);
        } else {
            result.reached = true;
            result.response.set_epoch(own.epoch);
            result.response.set_holder(own.holder);
            result.response.set_reason(own.reason);
        }
        if (m_finished)
            break;
        // A vote asked before the round changed (the backup went) no
        // longer counts: the lease is asked for afresh at once.
        if (own.granted)
            m_voterProblems.erase(self); // what its own vote said at start no longer holds
        if (m_role == proto::REPLICA_PRIMARY && m_epoch == epoch && m_leaseRound == round)
            countVoteLocked(own.granted ? voter : self, epoch, askedAt, result);
        // Asked again at once when the backup takes the state: the voters
        // then stop keeping the backup out.
        m_leaseChanged.wait_for(lock, lease / 4, [&] {
            return m_finished || m_leaseRound != round || (aloneTurn > 0 && !servesAloneLocked());
        });
    }
}

void PsTask::countVoteLocked(const std::string &voter, int64_t epoch, LeaseClock::time_point askedAt,
                             const VoteResult &result)
{
    const bool heldBefore = m_lease.held(LeaseClock::now());
    if (result.reached && result.response.granted()) {
        m_lease.granted(voter, askedAt, leaseLength());
        m_voterProblems.erase(voter);
    } else {
        m_voterProblems[voter] = result.reached ? result.response.reason() : result.error;
    }
    const int64_t higher = result.reached ? result.response.epoch() : 0;
    const bool held = m_lease.held(LeaseClock::now());
    if (higher > epoch) {
        if (held) {
            // A candidate asked under a higher epoch and did not win (this
            // process still holds the lease): serve on under one above it,
            // so that the voter that promised it votes here again.
            m_epoch = higher + 1;
            m_log(psName() + " at " + ownAddress() + " serves on under epoch " + std::to_string(m_epoch) + ": "
                  + describeVoter(voter) + " had seen epoch " + std::to_string(higher)
                  + " from a takeover that did not win the lease");
        } else {
            stepDownLocked(describeVoter(voter) + " has seen epoch " + std::to_string(higher) + " begin"
                           + (result.response.holder().empty() ? std::string() : " at " + result.response.holder())
                           + " while this process did not hold the lease");
            return;
        }
    }
    if (held && !heldBefore) {
        publishAcknowledgedLocked(); // what waited for a backup that went
        m_leaseLapseLogged = false;
        m_log(psName() + " at " + ownAddress() + " holds its lease (epoch " + std::to_string(m_epoch) + "; "
              + describeVoter(voter) + " voted for it)");
        m_leaseChanged.notify_all();
    } else if (!held && !m_leaseLapseLogged) {
        m_leaseLapseLogged = true;
        // Said once a lapse; at start, while the voters' first lease passes,
        // in gentler words (the same facts).
        m_log(psName() + " at " + ownAddress()
              + (m_leaseEverHeld ? " does not hold its lease (epoch " + std::to_string(m_epoch)
                                       + ") and acknowledges nothing until it does: "
                                 : " waits for its first lease (epoch " + std::to_string(m_epoch)
                                       + ") before it acknowledges anything: ")
              + leaseProblemLocked());
    }
    m_leaseEverHeld = m_leaseEverHeld || held;
}

CallStatus PsTask::winLeaseLocked(std::unique_lock<std::mutex> &lock)
{
    const std::string self = psName() + " at " + ownAddress();
    const int pair = m_options.task.index;
    const auto lease = leaseLength();
    // A vote still promised to the old primary (it renewed a moment before
    // it died) ends within a lease: waited for here, so that the worker
    // whose call made this backup take over is answered as soon as it may.
    const auto deadline = LeaseClock::now() + 2 * lease;
    const auto waitFor = [&](std::chrono::milliseconds left) {
        if (left <= std::chrono::milliseconds(0) || LeaseClock::now() + left >= deadline)
            return false;
        m_leaseChanged.wait_for(lock, left + std::chrono::milliseconds(1));
        return !m_finished && m_role == proto::REPLICA_BACKUP;
    };
    for (;;) {
        if (m_campaigning)
            return CallStatus::unavailable(self + " is taking over as the pair's primary; ask again in a moment");
        const int64_t epoch = std::max({m_epoch, m_epochSeen, m_voter->epoch(pair)}) + 1;
        const auto askedAt = LeaseClock::now();
        // The turns of serving alone whose updates it holds: those of the
        // state it took (none without one).
        const int64_t holds = m_hasState ? m_aloneTurns : 0;
        const LeaseVote::Answer own = m_voter->askOwn(pair, ownAddress(), epoch, askedAt, 0, holds);
        m_wonOverAlone = own.servedAloneBy;
        if (!own.granted) {
            if (waitFor(own.left))
                continue;
            if (m_role != proto::REPLICA_BACKUP)
                return {};
            return CallStatus::unavailable(self + " cannot take over yet: " + own.reason + "; ask again");
        }
        m_campaigning = true;
        std::string refusals;
        std::chrono::milliseconds soonest{0};
        for (const std::string &voter : {witnessAddress(), peerAddress()}) {
            const VoteResult result = askVoteUnlocked(lock, voter, epoch, 0, holds);
            if (result.reached && result.response.granted()) {
                if (!result.response.served_alone_by().empty())
                    m_wonOverAlone = result.response.served_alone_by();
                m_campaigning = false;
                m_epoch = epoch;
                m_lease.clear();
                m_lease.granted(voter, askedAt, lease);
                m_voterProblems.clear();
                m_leaseLapseLogged = false;
                m_leaseEverHeld = true;
                return {};
            }
            if (result.reached) {
                m_epochSeen = std::max(m_epochSeen, result.response.epoch());
                const std::chrono::milliseconds left(result.response.promised_ms());
                if (left.count() > 0 && (soonest.count() == 0 || left < soonest))
                    soonest = left;
            }
            refusals += (refusals.empty() ? "" : "; ") + describeVoter(voter) + ": "
                        + (result.reached ? result.response.reason() : result.error);
        }
        m_campaigning = false;
        m_voter->release(pair, ownAddress());
        if (waitFor(soonest))
            continue;
        if (m_role != proto::REPLICA_BACKUP)
            return {};
        return CallStatus::unavailable(self + " cannot take over as the pair's primary: it needs one vote beside its "
                                       + "own (" + refusals + "); ask again");
    }
}

void PsTask::stepDownLocked(const std::string &why)
{
    m_role = proto::REPLICA_BACKUP;
    m_lease.clear();
    m_voter->release(m_options.task.index, ownAddress());
    // What it holds may miss updates the other process acknowledged under
    // the higher epoch: it takes the pair's state afresh from it.
    m_hasState = false;
    m_following = false;
    m_primaryGoneSince.reset();
    m_follower.reset();
    m_unacknowledgedEvents.clear();
    // The step log is the serving process's: a backup that wrote the events
    // it replays would write each step a second time (one host, one
    // --logdir). Opened again if this process takes over again.
    if (m_runLog) {
        m_runLog->flush();
        m_runLog.reset();
    }
    m_log(psName() + " at " + ownAddress() + " stops serving: " + why
          + ". Another process may have served under it, so this one drops what it holds and follows the pair's "
            "primary at "
          + peerAddress() + " as its backup");
    m_log(taskStateLine(
        {m_options.task, TaskPhase::Waiting, "backup of " + psName() + ": following its primary at " + peerAddress()}));
    m_replicaChanged.notify_all();
    m_recordQueued.notify_all();
    m_changed.notify_all();
    m_leaseChanged.notify_all();
    if (!m_followThreadRunning) {
        if (m_followThread.joinable())
            m_followThread.join(); // it has returned (it said so under this lock)
        m_followThreadRunning = true;
        m_followThread = std::thread([this] { followPrimary(); });
    }
}

} // namespace parasync
