// PsTask: which workers take part -- a worker index claimed by one
// connection at a time, joins held until the chief has initialised, leaves,
// deaths, the acting chief, the end of the run, and the watchdog that says
// why the global step stands still.

#include "node/ps_task.h"

#include "config/flag_values.h"
#include "node/ps_signature_check.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace parasync {

namespace {

// "21:05:03 UTC": when a worker joined, for the refusal of a second claimant.
std::string clockTime(std::chrono::system_clock::time_point when)
{
    const std::time_t t = std::chrono::system_clock::to_time_t(when);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%H:%M:%S UTC", &utc);
    return text;
}

} // namespace

CallStatus PsTask::claimIndexLocked(std::unique_lock<std::mutex> &lock, int index, const proto::JoinRequest &join)
{
    const WorkerInfo &holder = m_workers[size_t(index)];
    // The same process opening a new stream (it reconnects after a lost
    // link) takes its index back; the old stream's end then changes nothing.
    // A pid of 0 proves nothing: a client that sends none never takes over.
    const auto sameProcess = [&] { return holder.pid != 0 && holder.pid == join.pid() && holder.host == join.host(); };
    // A worker killed and started again may join before its old stream's end
    // has reached this task: give that end a moment to arrive.
    m_changed.wait_for(lock, m_identityTimings.oldStreamGrace,
                       [&] { return !holder.streamOpen || sameProcess() || m_finished; });
    if (m_finished)
        return CallStatus::failedPrecondition(psName() + " is stopping: " + m_stopReason);
    if (!holder.streamOpen || sameProcess())
        return {};
    const std::string name = "worker:" + std::to_string(index);
    const std::string who = "pid " + std::to_string(holder.pid) + " on host '" + holder.host + "'";
    const auto quietFor = std::chrono::steady_clock::now() - holder.lastSeen;
    const double quietSeconds = std::chrono::duration<double>(quietFor).count();
    // Evidence that the holder lives: ps:0 is holding it at a barrier, or it
    // spoke a moment ago. Without that evidence its connection may be dead
    // but not yet noticed (a killed host, a cut link), and the claimant is
    // told to retry rather than refused for good: keepalive closes a dead
    // connection within about two --heartbeat_ms, a live holder speaks again
    // within a step and the next attempt gets the refusal below.
    const bool held = holder.phase == proto::BLOCKED_BY_SYNC || holder.phase == proto::BLOCKED_BY_STALENESS;
    char quiet[32];
    std::snprintf(quiet, sizeof quiet, "%.1f", quietSeconds);
    if (held || quietFor < m_identityTimings.holderHeardRecently) {
        return CallStatus::alreadyExists(
            psName() + " refuses a second " + name + " (pid " + std::to_string(join.pid()) + " on host '" + join.host()
            + "'): " + name + " is " + who + ", in the cluster since " + clockTime(holder.heldSince)
            + ", last heard from " + quiet + " s ago. Two processes cannot share --task_index=" + std::to_string(index)
            + ": stop one of them, or give this one its own index and address in --worker_hosts");
    }
    return CallStatus::retryLater("retry: the old connection of " + name + " (" + who + ", in the cluster since "
                                  + clockTime(holder.heldSince) + ", silent for " + quiet + " s) is still open; "
                                  + psName() + " lets the index go once that connection closes");
}

void PsTask::releaseIndex(int worker, uint64_t streamId)
{
    std::lock_guard lock(m_mutex);
    releaseIndexLocked(worker, streamId);
}

void PsTask::releaseIndexLocked(int worker, uint64_t streamId)
{
    if (worker < 0)
        return;
    auto &info = m_workers[size_t(worker)];
    if (info.streamId == streamId && info.streamOpen) {
        info.streamOpen = false;
        m_changed.notify_all(); // a claimant may be waiting for this index
    }
}

std::string PsTask::checkJoinIndex(const proto::JoinRequest &join) const
{
    const int index = join.worker_index();
    const int listed = m_options.cluster.numWorkers();
    if (index < 0 || index >= int(m_workers.size()))
        return "worker index " + std::to_string(index) + " is not in the cluster (" + std::to_string(listed)
               + " workers in --worker_hosts"
               + (int(m_workers.size()) > listed
                      ? ", up to " + std::to_string(m_workers.size()) + " with --max_workers"
                      : std::string("; a worker beyond them needs --max_workers on every task"))
               + "): check --task_index, --worker_hosts and --max_workers";
    if (join.address().size() > 255)
        return "worker:" + std::to_string(index) + "'s JoinRequest.address is " + std::to_string(join.address().size())
               + " bytes: send the HOST:PORT it serves TaskControl on";
    if (!join.address().empty()) {
        try {
            parseHostPort(join.address());
        } catch (const InputError &e) {
            return "worker:" + std::to_string(index) + "'s JoinRequest.address: " + e.what();
        }
    }
    if (isNewcomerIndex(index) && join.address().empty())
        return "worker:" + std::to_string(index) + " joins beyond --worker_hosts (" + std::to_string(listed)
               + " workers) without its address: send the HOST:PORT it serves TaskControl on (JoinRequest.address), as "
                 "parasync-node does, so that the cluster's status can name it";
    return {};
}

proto::TrainResponse PsTask::joinLocked(std::unique_lock<std::mutex> &lock, int worker, const proto::JoinRequest &join,
                                        CallStatus *error)
{
    proto::TrainResponse response;
    auto *out = response.mutable_join();
    auto &info = m_workers[size_t(worker)];
    if (!m_initialized && isCoordinator() && info.phase != proto::WAITING_FOR_CHIEF) {
        info.phase = proto::WAITING_FOR_CHIEF;
        publishWorkerStateLocked(worker);
    }
    // Hold the join a while rather than have the worker poll: it starts the
    // moment the chief has initialised (a sync cluster then starts with every
    // worker), and still hears back often enough to say what it waits for.
    m_changed.wait_for(lock, std::chrono::seconds(1), [this] { return m_initialized || m_finished; });
    if (!m_initialized) {
        out->set_ready(false);
        out->set_waiting_for("the chief worker:0 at " + m_options.cluster.workers.front().toString()
                             + " to initialise the variables");
        return response;
    }
    if (const auto difference = signatureDifference(m_signature, join.signature()); !difference.what.empty()) {
        *error = CallStatus::failedPrecondition(psName() + " refuses worker:" + std::to_string(worker) + ": "
                                                + difference.what + ". " + difference.fix);
        note(error->message());
        return response;
    }
    out->set_ready(true);
    out->set_last_step(lastStep());
    m_shard.copyValuesTo(out->mutable_parameters());
    if (isCoordinator()) {
        out->set_global_step(m_policy->globalStep());
        *out->mutable_mode() = m_policy->mode();
        admitWorkerLocked(worker, join.pid(), join.host());
        checkAcknowledgedLocked(worker, join.acknowledged_step());
        out->set_acting_chief(m_actingChief);
        proto::ReplicaRecord record;
        auto *joined = record.mutable_membership();
        joined->set_worker(worker);
        joined->set_change(proto::ReplicaMembership::JOINED);
        joined->set_pid(join.pid());
        joined->set_host(join.host());
        recordLocked(std::move(record));
    } else {
        out->set_global_step(m_updatesApplied);
    }
    return response;
}

void PsTask::checkAcknowledgedLocked(int worker, int64_t acknowledged)
{
    // Without a backup, a ps that died restarts from the chief's checkpoint,
    // which says so itself; a pair promises that nothing acknowledged is lost.
    const int64_t held = m_policy->globalStep();
    if (!m_options.cluster.replicated() || acknowledged <= held)
        return;
    const int64_t lost = acknowledged - held;
    if (lost <= m_acknowledgedLost)
        return;
    m_acknowledgedLost = lost;
    note(psName() + " at " + ownAddress() + " holds global step " + std::to_string(held)
         + ", but worker:" + std::to_string(worker) + " had global step " + std::to_string(acknowledged)
         + " acknowledged: " + std::to_string(lost) + (lost == 1 ? " update is" : " updates are")
         + " lost. The other process of the pair acknowledged them without a backup holding them (it had lost "
           "its backup, or both processes went in turn) and is gone. Training goes on from global step "
         + std::to_string(held) + ": global steps " + std::to_string(held + 1) + " to " + std::to_string(acknowledged)
         + " are taken a second time");
}

void PsTask::admitWorkerLocked(int worker, int64_t pid, const std::string &host)
{
    auto &info = m_workers[size_t(worker)];
    const bool rejoin = info.everJoined;
    // An elastic cluster's newcomer starts level in ssp (UpdatePolicy::join).
    m_policy->join(worker,
                   isNewcomerIndex(worker) ? UpdatePolicy::JoinClock::LevelWithSlowest : UpdatePolicy::JoinClock::Kept);
    info.everJoined = true;
    info.phase = proto::TRAINING;
    info.reason.clear();
    info.pid = pid;
    info.host = host;
    info.lastSeen = std::chrono::steady_clock::now();
    updateActingChiefLocked();
    if (isNewcomerIndex(worker) && !rejoin) {
        const int live = m_policy->liveWorkers();
        note("worker:" + std::to_string(worker) + " joined at global step " + std::to_string(m_policy->globalStep())
             + ", beyond --worker_hosts (--max_workers=" + std::to_string(m_workers.size()) + "), serving at "
             + info.address + ": " + std::to_string(live) + " live workers now");
    } else {
        note("worker:" + std::to_string(worker) + (rejoin ? " rejoined" : " joined") + " at global step "
             + std::to_string(m_policy->globalStep()));
    }
    publishWorkerStateLocked(worker);
    m_changed.notify_all();
}

void PsTask::leaveLocked(int worker, const proto::LeaveRequest &leave)
{
    proto::ReplicaRecord record;
    auto *left = record.mutable_membership();
    left->set_worker(worker);
    left->set_change(leave.finished() ? proto::ReplicaMembership::FINISHED : proto::ReplicaMembership::STOPPED);
    left->set_worker_clock(leave.worker_clock());
    recordLocked(std::move(record));
    auto &info = m_workers[size_t(worker)];
    if (leave.finished()) {
        info.phase = proto::FINISHED;
        m_policy->setFinished(worker);
        note("worker:" + std::to_string(worker) + " finished at clock " + std::to_string(leave.worker_clock()));
    } else {
        info.phase = proto::STOPPED;
        info.reason = "it was stopped before the last step";
        m_policy->setAlive(worker, false);
        note("worker:" + std::to_string(worker) + " left: " + info.reason);
    }
    updateActingChiefLocked();
    publishWorkerStateLocked(worker);
    m_changed.notify_all();
    checkFinishedLocked();
}

void PsTask::streamEndedLocked(int worker, uint64_t streamId, const std::string &reason)
{
    auto &info = m_workers[size_t(worker)];
    if (info.streamId != streamId)
        return;
    markDeadLocked(worker, reason);
}

void PsTask::markDeadLocked(int worker, const std::string &reason)
{
    auto &info = m_workers[size_t(worker)];
    if (info.phase == proto::FINISHED || info.phase == proto::DEAD || info.phase == proto::STOPPED)
        return;
    proto::ReplicaRecord record;
    auto *died = record.mutable_membership();
    died->set_worker(worker);
    died->set_change(proto::ReplicaMembership::DEAD);
    died->set_reason(reason);
    recordLocked(std::move(record));
    info.phase = proto::DEAD;
    info.reason = reason;
    m_policy->setAlive(worker, false);
    note("worker:" + std::to_string(worker) + " is dead: " + reason + "; not waiting for it");
    updateActingChiefLocked();
    publishWorkerStateLocked(worker);
    m_changed.notify_all();
    checkFinishedLocked();
}

void PsTask::checkFinishedLocked()
{
    if (!doneLocked() || m_finished)
        return;
    std::string neverJoined;
    for (int i = 0; i < int(m_workers.size()); ++i) {
        const auto &info = m_workers[size_t(i)];
        if (info.everJoined && info.phase != proto::FINISHED && info.phase != proto::DEAD
            && info.phase != proto::STOPPED)
            return;
        // An elastic cluster's indexes beyond --worker_hosts may never be used.
        if (!info.everJoined && !isNewcomerIndex(i))
            neverJoined += (neverJoined.empty() ? "" : ", ") + ("worker:" + std::to_string(i));
    }
    if (!neverJoined.empty() && !m_finishDeadline) {
        // A worker started late still gets to join, see the last step and
        // finish, rather than find no ps and retry forever.
        m_finishDeadline = std::chrono::steady_clock::now() + kLateWorkerGrace;
        note("the last step is reached; waiting up to "
             + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kLateWorkerGrace).count()) + " s for "
             + neverJoined + " (never joined) before exiting");
        return;
    }
    if (!neverJoined.empty() && std::chrono::steady_clock::now() < *m_finishDeadline)
        return;
    m_finished = true;
    m_allWorkersFinished = true;
    m_stopReason = "all workers finished at global step " + std::to_string(m_policy->globalStep()) + "; exiting"
                   + (neverJoined.empty() ? std::string() : " (" + neverJoined + " never joined)");
    m_changed.notify_all();
    m_runWake.notify_all();
}

bool PsTask::isLiveLocked(int worker) const
{
    const auto &info = m_workers[size_t(worker)];
    return info.everJoined && info.phase != proto::DEAD && info.phase != proto::FINISHED
           && info.phase != proto::STOPPED;
}

int PsTask::actingChiefLocked() const
{
    if (!m_options.training.chiefHandover || isLiveLocked(0) || !m_workers.front().everJoined)
        return 0;
    for (int i = 1; i < int(m_workers.size()); ++i)
        if (isLiveLocked(i))
            return i;
    return 0;
}

void PsTask::updateActingChiefLocked()
{
    const int acting = actingChiefLocked();
    if (acting == m_actingChief)
        return;
    if (acting == 0)
        note("the chief worker:0 is back: it takes its duties back from worker:" + std::to_string(m_actingChief));
    else
        note("the chief worker:0 is " + std::string(m_workers.front().phase == proto::DEAD ? "dead" : "gone")
             + ": worker:" + std::to_string(acting)
             + " takes over its duties (checkpoints, the full-shard loss) as --chief_handover=1 asks");
    m_actingChief = acting;
}

// In sentences that read on their own in the log and inside the app's
// banner ("ps:0 is waiting for ..."), without parentheses inside parentheses.
std::string PsTask::describeWaitLocked() const
{
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::string> working;
    std::vector<std::string> held;
    for (int i = 0; i < int(m_workers.size()); ++i) {
        if (!isLiveLocked(i))
            continue;
        const auto &info = m_workers[size_t(i)];
        const std::string name = "worker:" + std::to_string(i);
        if (info.phase == proto::BLOCKED_BY_SYNC || info.phase == proto::BLOCKED_BY_STALENESS) {
            const std::string why = !info.waitingFor.empty() ? info.waitingFor : proto::WorkerPhase_Name(info.phase);
            held.push_back(
                name + (info.phase == proto::BLOCKED_BY_SYNC ? " is held in " : " is held by the staleness bound: ")
                + why);
            continue;
        }
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f", std::chrono::duration<double>(now - info.lastSeen).count());
        working.push_back(name + ", last heard from " + seconds + " s ago");
    }
    const auto join = [](const std::vector<std::string> &parts, const char *separator, const char *last) {
        std::string text;
        for (size_t i = 0; i < parts.size(); ++i)
            text += (i == 0 ? "" : i + 1 == parts.size() ? last : separator) + parts[i];
        return text;
    };
    std::string text;
    if (!working.empty())
        text = join(working, "; ", "; and ") + (working.size() == 1 ? ". It is" : ". They are")
               + " still computing a step: slowed by a straggler delay, or frozen by SIGSTOP, swapping or a link "
                 "that drops data but not the connection";
    if (!held.empty())
        text += (text.empty() ? "" : ". ") + join(held, ". ", ". ");
    return text.empty() ? std::string("no live worker") : text;
}

void PsTask::watchForHangLocked()
{
    const int timeout = m_options.training.hangTimeoutSecs;
    const auto now = std::chrono::steady_clock::now();
    const int64_t step = m_policy->globalStep();
    // run() calls this on every wake-up, often many times a step: the
    // common case (the step moved) returns before looking at the workers.
    bool anyLive = false;
    for (int i = 0; step == m_progressStep && !anyLive && i < int(m_workers.size()); ++i)
        anyLive = isLiveLocked(i);
    if (step != m_progressStep || !m_initialized || doneLocked() || !anyLive || timeout <= 0) {
        if (m_stall.seconds() > 0 && step != m_progressStep)
            note("hang watchdog: the global step moves again (" + std::to_string(step) + ") after "
                 + std::to_string(int(m_stall.seconds())) + " s");
        m_progressStep = step;
        m_progressTime = now;
        m_stall.Clear();
        m_lastStallLog = {};
        return;
    }
    const double stalled = std::chrono::duration<double>(now - m_progressTime).count();
    if (stalled < timeout)
        return;
    m_stall.set_seconds(stalled);
    m_stall.set_global_step(step);
    m_stall.set_waiting_for(describeWaitLocked());
    // A line when the stall is first seen, then every timeout period.
    if (now - m_lastStallLog >= std::chrono::seconds(timeout)) {
        m_lastStallLog = now;
        note("hang watchdog: the global step has not moved from " + std::to_string(step) + " for "
             + std::to_string(int(stalled)) + " s (mode " + describeMode(m_policy->mode()) + "); waiting for "
             + m_stall.waiting_for());
    }
}

void PsTask::watchForStragglersLocked()
{
    const auto now = std::chrono::steady_clock::now();
    if (!m_stragglers || !m_initialized || doneLocked() || now - m_lastStragglerLook < std::chrono::milliseconds(900))
        return;
    m_lastStragglerLook = now;
    std::vector<StragglerDetector::Sample> live;
    for (int i = 0; i < int(m_workers.size()); ++i) {
        // One still turning to a new primary after a failover is not slow:
        // its pace starts afresh once it trains again.
        if (!isLiveLocked(i) || m_workers[size_t(i)].phase == proto::REJOINING)
            continue;
        const auto &info = m_workers[size_t(i)];
        auto held = info.heldTotal;
        if (info.heldFrom)
            held += std::chrono::duration_cast<std::chrono::microseconds>(now - *info.heldFrom);
        live.push_back({i, m_policy->workerClock(i), held});
    }
    for (const auto &change : m_stragglers->look(now, live)) {
        note(describeStragglerLocked(change));
        publishWorkerStateLocked(change.worker);
    }
}

// What a flag means in the mode in force: in sync, how many backup workers
// (tf.train.SyncReplicasOptimizer's replicas_to_aggregate below the worker
// count) would keep the step from waiting for the stragglers.
std::string PsTask::describeStragglerLocked(const StragglerDetector::Change &change) const
{
    const auto seconds = [](double value) {
        char text[32];
        std::snprintf(text, sizeof text, value < 1 ? "%.3f" : "%.2f", value);
        return std::string(text);
    };
    const std::string name = "worker:" + std::to_string(change.worker);
    const std::string pace = seconds(change.secondsPerStep) + " s a step against the others' "
                             + seconds(change.othersSecondsPerStep) + " s, not counting the time the ps held them";
    if (!change.straggler)
        return name + " is no longer a straggler: " + pace;
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.1f",
                  change.othersSecondsPerStep > 0 ? change.secondsPerStep / change.othersSecondsPerStep : 0.0);
    std::string text = name + " is a straggler: " + pace + " (" + ratio + " times, more than --straggler_threshold="
                       + floatText(m_options.training.stragglerThreshold) + ")";
    switch (m_policy->mode().mode()) {
    case proto::SYNC: {
        const int live = m_policy->liveWorkers();
        const int stragglers = int(m_stragglers->stragglers().size());
        const int aggregated = m_policy->mode().replicas_to_aggregate();
        if (aggregated > 0 && aggregated < live)
            text += "; with --replicas_to_aggregate=" + std::to_string(aggregated) + " a sync step closes without the "
                    + std::to_string(live - aggregated) + " slowest of the " + std::to_string(live)
                    + " live workers, whose late gradients are dropped";
        else if (live - stragglers >= 1)
            text += "; every sync step waits for it. With --replicas_to_aggregate=" + std::to_string(live - stragglers)
                    + " (" + std::to_string(stragglers) + " backup worker" + (stragglers == 1 ? "" : "s")
                    + " among the " + std::to_string(live) + " live) the steps would not wait for "
                    + (stragglers == 1 ? "it" : "the stragglers");
        break;
    }
    case proto::SSP: text += "; the staleness bound holds the others whenever they get too far ahead of it"; break;
    default: text += "; in async nobody waits for it, but its gradients arrive staler than the others'"; break;
    }
    return text;
}

} // namespace parasync
