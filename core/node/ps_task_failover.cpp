// PsTask's failover (--ps_backup_hosts): when the backup of a pair takes
// over, and what the new primary does then.
//
// It takes over only when a worker (or the chief, or a control client) turns
// to it and the primary does not answer as primary -- with the pair's state,
// or, after the primary has been gone a few heartbeats, without it (nobody
// holds it any more). The new primary then waits for the workers to rejoin:
// they are REJOINING, not training, until they do, and dead if they do not
// come back soon.

#include "base/clock.h"
#include "formats/task_state_line.h"
#include "node/ps_task.h"

namespace parasync {

CallStatus PsTask::takeOverIfPrimaryGone(std::unique_lock<std::mutex> &lock)
{
    const std::string primary = peerAddress();
    const std::string self = psName() + " at " + ownAddress();
    if (!m_hasState)
        return takeOverWithoutStateIfPrimaryGone(lock);
    if (m_following)
        return CallStatus::unavailable(self + " is the backup and still follows its primary at " + primary
                                       + "; turn to it (if it is gone, this backup notices within about two "
                                         "--heartbeat_ms and takes over)");
    lock.unlock();
    const PeerStatus peer = askPeer(primary, std::chrono::milliseconds(m_rpc.heartbeatMs));
    lock.lock();
    if (m_role != proto::REPLICA_BACKUP)
        return {}; // another call made it take over meanwhile
    if (peer.reached && peer.role == proto::REPLICA_PRIMARY)
        return CallStatus::unavailable(self + " is the backup; its primary at " + primary + " serves: turn to it");
    if (leased())
        if (const CallStatus won = winLeaseLocked(lock); !won.ok() || m_role != proto::REPLICA_BACKUP)
            return won;
    takeOverLocked(peer.reached ? "its primary at " + primary + " answers as a backup"
                                : "its primary at " + primary + " is gone (" + m_primaryLostReason
                                      + "; asked again: " + peer.error + ")");
    return {};
}

CallStatus PsTask::takeOverWithoutStateIfPrimaryGone(std::unique_lock<std::mutex> &lock)
{
    // The primary went before this backup held its state (it trained alone
    // before the backup attached, or the backup came after it died). Waiting
    // for a state nobody holds any more would hang the cluster, so this
    // process serves in the primary's place as a ps that lost its memory, as
    // a restarted ps without a backup does: the chief gives it the variables
    // again, and the workers' joins say how many acknowledged updates went
    // with the primary (checkAcknowledgedLocked). Only once the primary has
    // been gone for a few heartbeats and does not answer now: a primary that
    // is merely starting a moment after its backup keeps its role.
    const std::string primary = peerAddress();
    const std::string self = psName() + " at " + ownAddress();
    const auto goneFor = m_primaryGoneSince ? std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - *m_primaryGoneSince)
                                            : std::chrono::milliseconds(0);
    if (goneFor < emptyTakeOverAfter())
        return CallStatus::unavailable(self + " is a backup that holds no state yet; the pair's primary is " + primary
                                       + (m_primaryGoneSince
                                              ? " and has not answered for " + std::to_string(goneFor.count()) + " ms ("
                                                    + m_primaryLostReason + "); if it stays gone for "
                                                    + std::to_string(emptyTakeOverAfter().count())
                                                    + " ms this backup serves in its place, without the state"
                                              : ""));
    lock.unlock();
    const PeerStatus peer = askPeer(primary, std::chrono::milliseconds(m_rpc.heartbeatMs));
    lock.lock();
    if (m_role != proto::REPLICA_BACKUP)
        return {}; // another call made it take over meanwhile
    if (m_hasState)
        return takeOverIfPrimaryGone(lock); // it attached meanwhile
    if (peer.reached)
        return CallStatus::unavailable(self + " is a backup that holds no state yet; its primary at " + primary
                                       + " answers again: turn to it");
    if (leased())
        if (const CallStatus won = winLeaseLocked(lock); !won.ok() || m_role != proto::REPLICA_BACKUP)
            return won;
    takeOverLocked("its primary at " + primary + " is gone (" + m_primaryLostReason + "; asked again: " + peer.error
                   + ") and no process holds the pair's state: the primary trained without a backup attached");
    return {};
}

void PsTask::takeOverLocked(const std::string &why)
{
    const bool empty = !m_hasState;
    m_role = proto::REPLICA_PRIMARY;
    ++m_aloneTurns; // its old primary, the backup it had, holds nothing of what comes
    m_ackedSequence = m_recordSequence = 0;
    ++m_failovers;
    m_lastFailoverStep = m_policy ? m_policy->globalStep() : m_updatesApplied;
    m_backupLostReason = "it took over from " + peerAddress() + ", which has not come back as its backup yet";
    if (m_policy && m_initialized)
        openRunLogLocked();
    // The workers' streams were the old primary's: each turns here and joins
    // again. Until it has, it is not training (whatever the old primary last
    // said of it, a hold at its barrier included); one that does not come
    // back soon counts as dead, so that a sync step does not wait for it
    // forever.
    if (m_policy) {
        for (int i = 0; i < int(m_workers.size()); ++i) {
            WorkerInfo &info = m_workers[size_t(i)];
            info.streamOpen = false;
            if (!isLiveLocked(i))
                continue;
            info.phase = proto::REJOINING;
            info.waitingFor.clear();
            info.heldFrom.reset();
        }
        m_rejoinDeadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(4 * m_rpc.heartbeatMs)
                           + std::chrono::seconds(5);
    }
    const std::string at = m_policy ? "global step " + std::to_string(m_policy->globalStep())
                                    : std::to_string(m_updatesApplied) + " updates";
    // What the last changes brought about: to the watchers what the old
    // primary did not publish; to the step log also the steps it published
    // but may not have written before it died (the log skips any it has);
    // and to a watcher that resumes its stream here, those published ones
    // too: they may have died in the old primary's send queue.
    for (const auto &[sequence, held] : m_heldEvents) {
        if (sequence > m_primaryPublishedThrough) {
            publishNowLocked(held);
            continue;
        }
        m_telemetry.remember(held);
        if (m_runLog && held.has_step())
            m_runLog->record(held);
    }
    m_heldEvents.clear();
    if (m_runLog)
        m_runLog->stopSkipping();
    if (m_policy) {
        proto::TelemetryEvent event;
        auto *failover = event.mutable_failover();
        failover->set_global_step(m_policy->globalStep());
        failover->set_wall_time(wallTime());
        failover->set_new_primary(ownAddress());
        failover->set_old_primary(peerAddress());
        failover->set_reason(why);
        failover->set_epoch(m_epoch);
        publishLocked(event);
        // After the old primary's last events: the watchers and the step log
        // see each worker rejoining from here on.
        for (int i = 0; i < int(m_workers.size()); ++i)
            if (m_workers[size_t(i)].phase == proto::REJOINING)
                publishWorkerStateLocked(i);
    }
    if (empty) {
        m_tookOverEmpty = true;
        m_hasState = true; // the pair's state is what this process serves from now on
        m_log(psName() + " at " + ownAddress() + " takes over as the pair's primary WITHOUT its state (epoch "
              + std::to_string(m_epoch) + "): " + why
              + ". It lost the pair's memory as a restarted ps without a backup does: the chief gives it the "
                "variables again (from its newest checkpoint, or the chief's own last values), and every update the "
                "old primary acknowledged after that point is lost; each worker that rejoins says how many it had "
                "acknowledged. A backup started again at "
              + peerAddress() + " follows it");
    } else if (!m_wonOverAlone.empty()) {
        m_log(psName() + " at " + ownAddress() + " takes over as the pair's primary WITHOUT the updates that "
              + m_wonOverAlone + " acknowledged alone (epoch " + std::to_string(m_epoch) + "), at " + at + ": " + why
              + ". That process served without a backup holding its updates and has not asked for its lease for "
              + std::to_string(kAloneGraceLeases)
              + " leases: what it acknowledged alone is lost, and each worker that rejoins says how many. A backup "
                "started again at "
              + peerAddress() + " follows it");
    } else {
        m_log(psName() + " at " + ownAddress() + " takes over as the pair's primary at " + at + " (epoch "
              + std::to_string(m_epoch) + "): " + why
              + ". No acknowledged update is lost; the workers turn to it, and a backup started again at "
              + peerAddress() + " follows it");
    }
    m_wonOverAlone.clear();
    m_log(taskStateLine(
        {m_options.task, TaskPhase::Serving, "primary of " + psName() + " (took over from " + peerAddress() + ")"}));
    m_changed.notify_all();
    m_runWake.notify_all();
    m_leaseChanged.notify_all();
}

void PsTask::checkRejoinDeadlineLocked()
{
    if (std::chrono::steady_clock::now() < *m_rejoinDeadline)
        return;
    m_rejoinDeadline.reset();
    // Only the ones that never came back: a worker that rejoined and has
    // left since (a goodbye, or a stream cut) was told apart when it went.
    for (int i = 0; i < int(m_workers.size()); ++i)
        if (m_workers[size_t(i)].phase == proto::REJOINING)
            markDeadLocked(i, "it did not turn to " + psName() + "'s new primary at " + ownAddress()
                                  + " after the failover");
}

} // namespace parasync
