// PsTask's replication (--ps_backup_hosts): a ps task as a pair of processes.
//
// The primary numbers every change of its state -- a worker joined, left or
// died; a gradient went into the policy; an update was applied; the mode
// changed; the chief initialised the variables -- and sends the changes, in
// that order, to its backup, which makes each one to its own copy by the same
// code (the policy and the optimizer are deterministic). A worker's answer
// waits until the backup has applied every change the answer reflects: an
// update a worker saw acknowledged survives the primary's death.
//
// The backup takes over only when a worker (or the chief, or a control
// client) turns to it, its replication stream has ended and the primary does
// not answer as primary. A backup cut off from a live primary therefore
// never takes over by itself: the workers still reach the primary and never
// ask it, and the pair cannot split into two primaries.

#include "base/clock.h"
#include "base/error.h"
#include "formats/task_state_line.h"
#include "node/ps_task.h"

#include <unistd.h>

#include <algorithm>

namespace parasync {

namespace {

// The longest host name a backup may give (RFC 1035 names are shorter).
constexpr size_t kMaxHostName = 255;

std::string describeFollower(const proto::FollowRequest &hello)
{
    return hello.address() + " (pid " + std::to_string(hello.pid()) + " on host '" + hello.host() + "')";
}

std::string checkWorker(int worker, size_t numWorkers)
{
    if (worker < 0 || size_t(worker) >= numWorkers)
        return "worker index " + std::to_string(worker) + " is not in the cluster (" + std::to_string(numWorkers)
               + " workers)";
    return {};
}

} // namespace

std::string PsTask::ownAddress() const
{
    return m_options.cluster.address(m_options.task).toString();
}

std::string PsTask::peerAddress() const
{
    const std::vector<HostPort> pair = m_options.cluster.psPair(m_options.task.index);
    if (pair.size() < 2)
        return {};
    return (m_options.task.job == JobName::PsBackup ? pair[0] : pair[1]).toString();
}

PeerStatus PsTask::askPeer(const std::string &address, std::chrono::milliseconds timeout) const
{
    if (m_transport.askPeer)
        return m_transport.askPeer(address, timeout);
    PeerStatus absent;
    absent.absent = true;
    absent.error = "this task is reached in-process only";
    return absent;
}

void PsTask::chooseRole()
{
    // Either process of a pair may be either side. One started with
    // --job_name=ps serves unless the other holds the pair's state already
    // (it took over while this one was gone): then this one follows it.
    // The server already answers while the role is chosen: calls read m_role
    // under the lock, and a call that comes before it is chosen is told to
    // ask again (serves()).
    const auto take = [this](proto::ReplicaRole role) {
        std::lock_guard lock(m_mutex);
        m_role = role;
        if (role == proto::REPLICA_PRIMARY)
            ++m_aloneTurns; // no backup holds anything of it yet
    };
    if (m_options.task.job == JobName::PsBackup) {
        take(proto::REPLICA_BACKUP);
        return;
    }
    // A peer that is there but slow to answer (a loaded machine) may be the
    // one serving the workers: serving beside it would make two primaries,
    // which is worse than starting late. Only a refused connection, or an
    // answer, settles the role; a peer that accepts connections but does
    // not answer is asked, with ever longer deadlines, for thirty heartbeats
    // (half a minute at the default --heartbeat_ms). Under a sanitizer on
    // two loaded cores a live primary took over five seconds to answer.
    const auto heartbeat = std::chrono::milliseconds(m_rpc.heartbeatMs);
    const auto giveUpAt = std::chrono::steady_clock::now() + 30 * heartbeat;
    PeerStatus peer = askPeer(peerAddress(), heartbeat);
    bool askedAgain = false;
    for (auto timeout = 2 * heartbeat; !peer.reached && !peer.absent; timeout *= 2) {
        const auto left
            = std::chrono::duration_cast<std::chrono::milliseconds>(giveUpAt - std::chrono::steady_clock::now());
        if (left <= std::chrono::milliseconds(0))
            break;
        m_log(psName() + " at " + ownAddress() + ": the other process of the pair, at " + peerAddress()
              + ", does not answer yet (" + peer.error + "); asking again before taking a role");
        peer = askPeer(peerAddress(), std::min(timeout, left));
        askedAgain = true;
    }
    // Said whenever it was asked again and never answered: the asking ended
    // on a refused connection or after thirty heartbeats of a peer that
    // accepts connections but does not answer.
    if (!peer.reached && askedAgain)
        m_log(psName() + " at " + ownAddress() + ": the other process of the pair, at " + peerAddress()
              + ", did not answer (" + peer.error
              + "); this one serves as the pair's primary. If that process serves workers, stop one of the two");
    if (peer.reached && (peer.role == proto::REPLICA_PRIMARY || peer.holdsState)) {
        take(proto::REPLICA_BACKUP);
        m_log(psName() + " at " + ownAddress() + ": the other process of the pair, at " + peerAddress()
              + ", holds the pair's state (it took over while this one was gone); this one follows it as its backup");
        return;
    }
    take(proto::REPLICA_PRIMARY);
}

CallStatus PsTask::servesLocked(std::unique_lock<std::mutex> &lock, bool acknowledges)
{
    if (m_role == proto::REPLICA_ROLE_UNSPECIFIED && m_options.cluster.replicated())
        return CallStatus::unavailable(psName() + " at " + ownAddress()
                                       + " is starting: it is asking the other process of its pair, at " + peerAddress()
                                       + ", which of the two serves; ask again in a moment");
    if (m_role == proto::REPLICA_BACKUP)
        return takeOverIfPrimaryGone(lock);
    if (acknowledges && m_role == proto::REPLICA_PRIMARY && leased() && !m_lease.held(LeaseClock::now()))
        return awaitLeaseLocked(lock);
    return {};
}

void PsTask::recordLocked(proto::ReplicaRecord &&record)
{
    if (!m_follower)
        return;
    record.set_sequence(++m_recordSequence);
    m_follower->queue.push_back(std::move(record));
    m_recordQueued.notify_one();
}

void PsTask::publishAcknowledgedLocked()
{
    while (!m_unacknowledgedEvents.empty()
           && (!m_follower || m_unacknowledgedEvents.front().first <= m_ackedSequence)) {
        publishNowLocked(m_unacknowledgedEvents.front().second);
        m_unacknowledgedEvents.pop_front();
    }
}

CallStatus PsTask::awaitBackup(int64_t sequence, int64_t *epoch, bool acknowledges)
{
    if (!m_options.cluster.replicated())
        return {};
    std::unique_lock lock(m_mutex);
    // Without a backup (it died or never came) the primary trains on alone:
    // follow() said so when it went.
    if (sequence != 0)
        m_replicaChanged.wait(lock, [&] { return m_ackedSequence >= sequence || !m_follower || m_finished; });
    if (!leased())
        return {};
    if (acknowledges && !leaseHeldLocked(LeaseClock::now()))
        if (const CallStatus notHeld = awaitLeaseLocked(lock); !notHeld.ok())
            return notHeld;
    if (epoch)
        *epoch = m_epoch;
    return {};
}

CallStatus PsTask::follow(FollowStream &stream)
{
    proto::FollowRequest hello;
    if (!stream.read(&hello))
        return {};
    // Every field, as a stranger might fill it.
    if (hello.ps_index() != m_options.task.index)
        return CallStatus::invalidArgument("a backup of ps:" + std::to_string(hello.ps_index()) + " turned to "
                                           + psName() + " at " + ownAddress()
                                           + ": start each backup with its ps task's --task_index");
    if (hello.address() != peerAddress())
        return CallStatus::invalidArgument("a backup at '" + hello.address() + "' turned to " + psName() + " at "
                                           + ownAddress() + ", whose backup is " + peerAddress()
                                           + " by --ps_backup_hosts: give every task the same cluster");
    if (hello.applied_through() != 0)
        return CallStatus::invalidArgument("a backup's first FollowRequest acknowledges record "
                                           + std::to_string(hello.applied_through())
                                           + " before it was sent any: applied_through must be 0");
    if (hello.pid() < 0 || hello.host().size() > kMaxHostName)
        return CallStatus::invalidArgument("a backup named itself with pid " + std::to_string(hello.pid())
                                           + " and a host of " + std::to_string(hello.host().size())
                                           + " bytes: a pid is not negative, a host at most 255 bytes");
    const std::string who = describeFollower(hello);
    uint64_t id = 0;
    {
        std::lock_guard lock(m_mutex);
        if (m_finished)
            return CallStatus::failedPrecondition(psName() + " is stopping: " + m_stopReason);
        if (m_role == proto::REPLICA_ROLE_UNSPECIFIED)
            return CallStatus::unavailable(psName() + " at " + ownAddress()
                                           + " is starting and has not taken a role yet; ask again in a moment");
        if (m_role != proto::REPLICA_PRIMARY)
            return CallStatus::unavailable(psName() + " at " + ownAddress()
                                           + " is a backup itself; the pair's primary is " + peerAddress());
        if (m_follower)
            return CallStatus::alreadyExists(psName() + " at " + ownAddress() + " already has its backup, "
                                             + m_follower->who + "; a second (" + who
                                             + ") is refused: stop one of them");
        id = m_nextFollowerId++;
        m_follower = Follower{id, who, {}, 0};
        proto::ReplicaRecord state;
        *state.mutable_state() = exportStateLocked();
        recordLocked(std::move(state));
        m_follower->stateSequence = m_recordSequence;
        m_log(psName() + ": backup " + who + " attached"
              + (m_policy ? " at global step " + std::to_string(m_policy->globalStep()) : std::string())
              + "; every update is acknowledged only once it holds it");
    }

    // Acknowledgements on a thread of their own: the records go out on this one.
    std::string lostBecause;
    std::thread acknowledgements([&] {
        proto::FollowRequest ack;
        std::string why = "its replication stream ended (process killed, or the link cut)";
        while (stream.read(&ack)) {
            std::lock_guard lock(m_mutex);
            if (!m_follower || m_follower->id != id)
                break;
            if (ack.applied_through() < m_ackedSequence || ack.applied_through() > m_recordSequence) {
                why = "it acknowledged record " + std::to_string(ack.applied_through()) + ", but "
                      + std::to_string(m_recordSequence) + " were sent and " + std::to_string(m_ackedSequence)
                      + " acknowledged";
                break;
            }
            const bool tookState
                = m_ackedSequence < m_follower->stateSequence && ack.applied_through() >= m_follower->stateSequence;
            m_ackedSequence = ack.applied_through();
            if (tookState)
                m_leaseChanged.notify_all(); // no longer alone: the voters hear it at once
            publishAcknowledgedLocked();
            m_replicaChanged.notify_all();
        }
        std::lock_guard lock(m_mutex);
        if (lostBecause.empty())
            lostBecause = why;
        m_replicaChanged.notify_all();
        m_recordQueued.notify_all();
    });

    // Every record queued goes out in one batch: gRPC sends them together
    // (buffer hints) instead of flushing each, when many workers step at once.
    std::deque<proto::ReplicaRecord> batch;
    for (;;) {
        {
            std::unique_lock lock(m_mutex);
            m_recordQueued.wait(lock, [&] {
                return m_finished || !lostBecause.empty() || !m_follower || m_follower->id != id
                       || !m_follower->queue.empty();
            });
            if (m_finished || !lostBecause.empty() || !m_follower || m_follower->id != id)
                break;
            batch.swap(m_follower->queue);
            for (auto &record : batch)
                record.set_published_through(m_ackedSequence);
        }
        bool sent = true;
        for (size_t i = 0; i < batch.size() && sent; ++i)
            sent = stream.write(batch[i], i + 1 < batch.size());
        batch.clear();
        if (!sent) {
            std::lock_guard lock(m_mutex);
            if (lostBecause.empty())
                lostBecause = "it can no longer be reached (process killed, or the link cut)";
            break;
        }
    }
    stream.cancel();
    acknowledgements.join();

    std::lock_guard lock(m_mutex);
    if (m_follower && m_follower->id == id) {
        m_follower.reset();
        ++m_aloneTurns;
        // The changes the backup had not acknowledged are this process's to
        // publish (and log) only once it acknowledges them: at once without
        // a lease, else when it holds the lease again (countVoteLocked). It
        // may have been cut off and another process have taken over with
        // them; then it steps down and drops them.
        if (!leased())
            publishAcknowledgedLocked();
        m_backupLostReason = "its backup " + who + " went: " + lostBecause;
        // Acknowledging alone from now on, it must know that no other
        // process may serve meanwhile: a vote promised before the backup
        // went does not say so (the witness may be cut off with the
        // backup, which then takes over without these updates). Until a
        // voter promises its vote afresh, nothing is acknowledged.
        m_lease.clear();
        ++m_leaseRound;
        m_leaseChanged.notify_all();
        if (!m_finished)
            m_log(psName() + " lost its backup " + who + ": " + lostBecause
                  + ". It trains on alone, and its updates are not replicated until a backup attaches again (start "
                    "one at "
                  + peerAddress() + " with --job_name=ps_backup --task_index=" + std::to_string(m_options.task.index)
                  + ")");
    }
    m_replicaChanged.notify_all();
    return {};
}

proto::ReplicaStatus PsTask::replicaStatusLocked() const
{
    proto::ReplicaStatus status;
    status.set_role(m_role);
    status.set_address(ownAddress());
    status.set_peer(peerAddress());
    if (m_role == proto::REPLICA_PRIMARY) {
        // Attached once it holds the state: a backup that came back after a
        // cut and has not applied it yet would take over with an old one.
        status.set_peer_attached(m_follower && m_ackedSequence >= m_follower->stateSequence);
        if (!m_follower)
            status.set_peer_lost_reason(m_backupLostReason);
        else if (!status.peer_attached())
            status.set_peer_lost_reason(m_follower->who + " is receiving the state");
    } else {
        status.set_peer_attached(m_following);
        if (!m_following)
            status.set_peer_lost_reason(m_primaryLostReason.empty() ? "not following its primary yet"
                                                                    : m_primaryLostReason);
    }
    status.set_failovers(m_failovers);
    status.set_last_failover_step(m_lastFailoverStep);
    status.set_acknowledged_updates_lost(m_acknowledgedLost);
    status.set_epoch(m_epoch);
    if (m_role == proto::REPLICA_PRIMARY) {
        status.set_lease_held(!leased() || m_lease.held(LeaseClock::now()));
        if (!status.lease_held())
            status.set_lease_problem(leaseProblemLocked());
    }
    return status;
}

proto::ReplicaState PsTask::exportStateLocked() const
{
    proto::ReplicaState state;
    state.set_initialized(m_initialized);
    if (m_initialized) {
        *state.mutable_signature() = m_signature;
        *state.mutable_shard() = m_shard.save(m_options.task.index);
    }
    state.set_updates_applied(m_updatesApplied);
    state.set_failovers(m_failovers);
    state.set_last_failover_step(m_lastFailoverStep);
    state.set_epoch(m_epoch);
    state.set_alone_turns(m_aloneTurns);
    for (const int64_t update : m_incompleteUpdates)
        state.add_incomplete_updates(update);
    if (m_policy) {
        *state.mutable_policy() = m_policy->exportState();
        for (const WorkerInfo &info : m_workers) {
            auto *worker = state.add_workers();
            worker->set_phase(info.phase);
            worker->set_ever_joined(info.everJoined);
            worker->set_pid(info.pid);
            worker->set_host(info.host);
            worker->set_reason(info.reason);
            worker->set_nonfinite(info.nonfinite);
        }
    }
    return state;
}

void PsTask::importStateLocked(const proto::ReplicaState &state)
{
    if (m_policy && state.workers_size() != int(m_workers.size()))
        throw InputError("the primary's state has " + std::to_string(state.workers_size()) + " workers, this cluster "
                         + std::to_string(m_workers.size()) + ": give both processes of the pair the same cluster");
    if (state.initialized()) {
        m_shard.declareTables(tablesOf(state.signature()));
        m_shard.load(state.shard());
        adoptSignatureLocked(state.signature());
    }
    m_initialized = state.initialized();
    m_updatesApplied = state.updates_applied();
    m_failovers = state.failovers();
    m_lastFailoverStep = state.last_failover_step();
    m_epoch = state.epoch();
    m_aloneTurns = state.alone_turns();
    if (m_voter)
        m_voter->sawEpoch(m_options.task.index, m_epoch);
    m_incompleteUpdates = {state.incomplete_updates().begin(), state.incomplete_updates().end()};
    m_pendingUpdates.clear();
    if (m_policy) {
        m_policy->importState(state.policy());
        for (int i = 0; i < state.workers_size(); ++i) {
            const auto &in = state.workers(i);
            WorkerInfo &info = m_workers[size_t(i)];
            info = WorkerInfo{};
            info.phase = in.phase();
            info.everJoined = in.ever_joined();
            info.pid = in.pid();
            info.host = in.host();
            info.reason = in.reason();
            info.nonfinite = in.nonfinite();
            info.lastSeen = std::chrono::steady_clock::now();
        }
        updateActingChiefLocked();
    }
    m_hasState = true;
}

void PsTask::applyRecordLocked(const proto::ReplicaRecord &record)
{
    switch (record.change_case()) {
    case proto::ReplicaRecord::kState: importStateLocked(record.state()); return;
    case proto::ReplicaRecord::kInitialize: {
        proto::InitializeResponse ignored;
        if (const CallStatus status = initializeLocked(record.initialize(), &ignored); !status.ok())
            throw InputError("the primary's initialisation does not apply here: " + status.message());
        return;
    }
    case proto::ReplicaRecord::kMembership: {
        const auto &change = record.membership();
        if (!m_policy)
            throw InputError("a worker's membership sent to " + psName() + ", which keeps none (ps:0 does)");
        if (const std::string problem = checkWorker(change.worker(), m_workers.size()); !problem.empty())
            throw InputError("a membership record names " + problem);
        switch (change.change()) {
        case proto::ReplicaMembership::JOINED: admitWorkerLocked(change.worker(), change.pid(), change.host()); return;
        case proto::ReplicaMembership::FINISHED:
        case proto::ReplicaMembership::STOPPED: {
            proto::LeaveRequest leave;
            leave.set_finished(change.change() == proto::ReplicaMembership::FINISHED);
            leave.set_worker_clock(change.worker_clock());
            leaveLocked(change.worker(), leave);
            return;
        }
        case proto::ReplicaMembership::DEAD: markDeadLocked(change.worker(), change.reason()); return;
        default: throw InputError("a membership record without a known change");
        }
    }
    case proto::ReplicaRecord::kPush: {
        const auto &push = record.push();
        if (!m_policy || !m_initialized)
            throw InputError("a gradient for the policy sent to " + psName()
                             + (m_policy ? " before its variables were initialised" : ", which keeps none"));
        if (const std::string problem = checkWorker(push.worker(), m_workers.size()); !problem.empty())
            throw InputError("a push record names " + problem);
        std::string error;
        const GradientView gradient = parseGradients(push.push(), &error);
        const RowGradientView rows = error.empty() ? parseRowGradients(push.push(), &error) : RowGradientView{};
        if (error.empty())
            error = pullProblem(push.push().pull());
        if (!error.empty())
            throw InputError("a push record: " + error);
        takeGradientLocked(push.worker(), push.push(), gradient, rows);
        m_changed.notify_all();
        return;
    }
    case proto::ReplicaRecord::kShardUpdate: {
        const auto &update = record.shard_update();
        if (m_policy || !m_initialized)
            throw InputError(
                "an applied update sent to " + psName()
                + (m_policy ? ", whose updates its policy makes" : " before its variables were initialised"));
        std::string error;
        const GradientView average = viewGradients(update.gradient(), &error);
        if (error.empty())
            error = rowBlocksProblem(update.row_gradients(), m_tables, m_options.task.index, m_options.cluster.numPs(),
                                     "row_gradients");
        if (!error.empty())
            throw InputError("an applied update: " + error);
        const float learningRateScale = update.learning_rate_scale() == 0.0f ? 1.0f : update.learning_rate_scale();
        if (!(learningRateScale > 0.0f && learningRateScale <= 1.0f))
            throw InputError("an applied update with learning_rate_scale "
                             + std::to_string(update.learning_rate_scale()) + ", outside (0, 1]");
        applyShardUpdateLocked(update.update(), average, viewOf(update.row_gradients()), update.incomplete(),
                               learningRateScale);
        return;
    }
    case proto::ReplicaRecord::kRowsMade: {
        if (!m_initialized)
            throw InputError("rows made before the variables were initialised");
        if (std::string problem = pullProblem(record.rows_made().tables()); !problem.empty())
            throw InputError("rows made by a pull: " + problem);
        google::protobuf::RepeatedPtrField<proto::SparseRows> made;
        gatherRowsLocked(record.rows_made().tables(), false, &made);
        return;
    }
    case proto::ReplicaRecord::kShardRows:
        // The replication stream joins them to their record (formats/shard_pieces.h).
        throw InputError("rows of a shard without the state or initialisation they belong to");
    case proto::ReplicaRecord::kSetMode:
        if (!m_policy)
            throw InputError("a mode change sent to " + psName() + ", which keeps no mode (ps:0 does)");
        setModeLocked(record.set_mode());
        return;
    case proto::ReplicaRecord::CHANGE_NOT_SET: break;
    }
    throw InputError("a replication record without a change");
}

void PsTask::followPrimary()
{
    const std::string primary = peerAddress();
    bool saidLost = false;
    for (;;) {
        PrimaryLink *link = nullptr;
        {
            std::lock_guard lock(m_mutex);
            if (m_finished || m_role != proto::REPLICA_BACKUP) {
                m_followThreadRunning = false;
                return;
            }
            m_primaryLink = m_transport.followPrimary(primary);
            link = m_primaryLink.get();
        }
        proto::FollowRequest hello;
        hello.set_ps_index(m_options.task.index);
        hello.set_address(ownAddress());
        hello.set_pid(::getpid());
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) == 0)
            hello.set_host(host);
        std::string broke;
        int64_t applied = 0;
        bool streamEnded = false; // rather than left by this side
        if (link->write(hello)) {
            proto::ReplicaRecord record;
            for (;;) {
                if (!link->read(&record)) {
                    streamEnded = true;
                    break;
                }
                {
                    std::lock_guard lock(m_mutex);
                    if (m_role != proto::REPLICA_BACKUP)
                        break;
                    if (applied == 0 ? !record.has_state() : record.sequence() != applied + 1) {
                        broke = "its primary sent record " + std::to_string(record.sequence()) + " after "
                                + std::to_string(applied) + (applied == 0 ? " before its state" : "");
                        break;
                    }
                    if (record.has_state())
                        m_heldEvents.clear(); // the primary published everything before its state
                    m_applyingSequence = record.sequence();
                    m_replaying = true;
                    try {
                        applyRecordLocked(record);
                    } catch (const InputError &e) {
                        broke = e.what();
                    }
                    m_replaying = false;
                    m_primaryPublishedThrough = record.published_through();
                    if (!broke.empty()) {
                        // What it holds is no copy of the primary's any more.
                        m_hasState = false;
                        break;
                    }
                    applied = record.sequence();
                    if (record.has_state()) {
                        m_following = true;
                        m_primaryGoneSince.reset();
                        saidLost = false;
                        m_log(psName() + " at " + ownAddress() + " follows its primary at " + primary
                              + ": holds its state"
                              + (m_policy ? " at global step " + std::to_string(m_policy->globalStep()) : std::string())
                              + " and every change from now on");
                        m_log(taskStateLine({m_options.task, TaskPhase::Serving,
                                             "backup of " + psName() + ", following its primary at " + primary}));
                    }
                }
                proto::FollowRequest ack;
                ack.set_applied_through(applied);
                if (!link->write(ack))
                    break;
            }
        }
        if (!streamEnded)
            link->cancel();
        const std::string ended = link->finish();
        std::unique_lock lock(m_mutex);
        m_primaryLink.reset();
        m_following = false;
        if (m_finished || m_role != proto::REPLICA_BACKUP) {
            m_followThreadRunning = false;
            return;
        }
        m_primaryLostReason = broke.empty() ? ended : broke;
        if (!m_primaryGoneSince)
            m_primaryGoneSince = std::chrono::steady_clock::now();
        if (!saidLost) {
            saidLost = true;
            m_log(psName() + " at " + ownAddress() + " cannot follow its primary at " + primary + ": "
                  + m_primaryLostReason
                  + (m_hasState ? ". It holds the state up to the last acknowledged update and takes over when a "
                                  "worker turns to it"
                                : ". It holds no state yet; it keeps trying, and serves in its primary's place "
                                  "(empty: the chief gives it the variables again) if a worker turns to it after "
                                  "its primary has been gone for "
                                      + std::to_string(emptyTakeOverAfter().count()) + " ms"));
        }
        // The primary may be back (or answer again) in a moment; a worker may
        // come first and make this one take over.
        m_changed.wait_for(lock, std::chrono::milliseconds(500),
                           [this] { return m_finished || m_role != proto::REPLICA_BACKUP; });
        if (m_hasState && !m_finished && m_role == proto::REPLICA_BACKUP) {
            // The primary came back without its state and follows this one:
            // take over now rather than wait for a worker.
            lock.unlock();
            const PeerStatus peer = askPeer(primary, std::chrono::milliseconds(m_rpc.heartbeatMs));
            lock.lock();
            if (peer.reached && peer.role == proto::REPLICA_BACKUP && !peer.holdsState
                && m_role == proto::REPLICA_BACKUP && (!leased() || winLeaseLocked(lock).ok())
                && m_role == proto::REPLICA_BACKUP)
                takeOverLocked("the process at " + primary + " came back without the state and follows this one");
        }
    }
}

} // namespace parasync
