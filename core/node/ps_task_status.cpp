// PsTask: what it tells -- its own status, ps:0's view of the cluster, and
// the telemetry stream the app and the chief's summaries watch.

#include "node/ps_task.h"

#include "base/clock.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <unistd.h>

namespace parasync {

proto::TaskStatusResponse PsTask::taskStatus()
{
    std::lock_guard lock(m_mutex);
    proto::TaskStatusResponse status;
    status.set_job_name("ps");
    status.set_task_index(m_options.task.index);
    status.set_pid(::getpid());
    status.set_steps(m_policy ? m_policy->globalStep() : m_updatesApplied);
    // A primary with variables that does not hold its lease serves nobody
    // until it does: it answers as a process still taking its role, so that
    // a worker (or the app) that reaches both processes of the pair turns
    // to the other. Before the chief initialised it, a worker's join is
    // told to wait for the chief, which needs no lease.
    const bool servesNow = m_role != proto::REPLICA_PRIMARY || !m_initialized || leaseHeldLocked(LeaseClock::now());
    status.set_state(
        m_finished ? "finished"
        : m_role == proto::REPLICA_ROLE_UNSPECIFIED && m_options.cluster.replicated()
            ? "starting: asking the other process of " + psName() + "'s pair which one serves"
        : m_role == proto::REPLICA_BACKUP ? "backup of " + psName() + ", following its primary at " + peerAddress()
        : !servesNow ? "primary of " + psName() + " without its lease, acknowledging nothing: " + leaseProblemLocked()
        : m_initialized ? "serving"
                        : "waiting for the chief worker:0 to initialise the variables");
    status.set_replica_role(servesNow ? m_role : proto::REPLICA_ROLE_UNSPECIFIED);
    status.set_replica_holds_state(m_role == proto::REPLICA_BACKUP ? m_hasState : m_initialized);
    if (m_options.cluster.replicated())
        status.set_replica_peer(peerAddress());
    for (proto::TableStatus &table : tableStatusLocked())
        *status.add_tables() = std::move(table);
    return status;
}

void PsTask::publishLocked(const proto::TelemetryEvent &event)
{
    // Behind the changes still waiting (for the backup, or for the lease
    // after the backup went), so that the step log keeps their order.
    if (m_follower || (m_role == proto::REPLICA_PRIMARY && !m_unacknowledgedEvents.empty())) {
        m_unacknowledgedEvents.emplace_back(m_recordSequence, event);
        return;
    }
    if (m_role == proto::REPLICA_BACKUP) {
        // The last ones only: the primary's step log writer is at most
        // ~100 ms behind what it published, far fewer events than these.
        if (m_heldEvents.size() >= kHeldEvents)
            m_heldEvents.pop_front();
        m_heldEvents.emplace_back(m_applyingSequence, event);
        return;
    }
    publishNowLocked(event);
}

void PsTask::publishNowLocked(const proto::TelemetryEvent &event)
{
    m_telemetry.publish(event);
    m_meters.observe(event, m_actingChief);
    if (m_runLog)
        m_runLog->record(event);
}

proto::WorkerStatus PsTask::workerStatusLocked(int worker) const
{
    const auto &info = m_workers[size_t(worker)];
    proto::WorkerStatus status;
    status.set_worker_index(worker);
    status.set_phase(info.phase);
    status.set_pid(info.pid);
    status.set_reason(info.reason);
    status.set_waiting_for(info.waitingFor);
    status.set_nonfinite(info.nonfinite);
    if (m_policy) {
        status.set_worker_clock(m_policy->workerClock(worker));
        status.set_applied(m_policy->applied(worker));
        status.set_dropped(m_policy->dropped(worker));
    }
    if (m_stragglers) {
        status.set_straggler(m_stragglers->flagged(worker));
        status.set_seconds_per_step(m_stragglers->secondsPerStep(worker));
    }
    return status;
}

void PsTask::publishWorkerStateLocked(int worker)
{
    proto::TelemetryEvent event;
    event.mutable_worker_state()->set_wall_time(wallTime());
    *event.mutable_worker_state()->mutable_status() = workerStatusLocked(worker);
    publishLocked(event);
}

proto::ClusterStatusResponse PsTask::clusterStatus()
{
    std::lock_guard lock(m_mutex);
    return clusterStatusLocked();
}

proto::ClusterStatusResponse PsTask::clusterStatusLocked() const
{
    proto::ClusterStatusResponse status;
    status.set_initialized(m_initialized);
    status.set_last_step(lastStep());
    for (const auto &ps : m_options.cluster.ps)
        status.add_ps_hosts(ps.toString());
    for (const auto &w : m_options.cluster.workers)
        status.add_worker_hosts(w.toString());
    // Newcomers of an elastic cluster by the address they joined with; an
    // index between them that never joined has none.
    int lastJoined = -1;
    for (int i = m_options.cluster.numWorkers(); i < int(m_workers.size()); ++i)
        if (m_workers[size_t(i)].everJoined)
            lastJoined = i;
    for (int i = m_options.cluster.numWorkers(); i <= lastJoined; ++i)
        status.add_worker_hosts(m_workers[size_t(i)].address);
    *status.mutable_signature() = m_signature;
    status.set_cluster_json(m_options.training.toJson());
    if (m_policy) {
        status.set_global_step(m_policy->globalStep());
        *status.mutable_mode() = m_policy->mode();
        status.set_dropped_total(m_policy->droppedTotal());
        *status.mutable_stall() = m_stall;
        status.set_acting_chief(m_actingChief);
    }
    for (int i = 0; i < int(m_workers.size()); ++i)
        if (!isNewcomerIndex(i) || m_workers[size_t(i)].everJoined)
            *status.add_workers() = workerStatusLocked(i);
    if (m_options.cluster.replicated())
        *status.mutable_replica() = replicaStatusLocked();
    if (m_runLog)
        status.set_records_problem(m_runLog->problem());
    return status;
}

CallStatus PsTask::watch(const proto::WatchRequest &request, WatchStream &stream)
{
    if (request.has_resume_after_step() && request.resume_after_step() < 0)
        return CallStatus::invalidArgument("a Watch request resumes after global step "
                                           + std::to_string(request.resume_after_step())
                                           + ": give the last global step seen (0 or more), or leave it unset");
    std::optional<int64_t> resumeAfter;
    if (request.has_resume_after_step())
        resumeAfter = request.resume_after_step();
    auto subscription = m_telemetry.subscribe(size_t(std::max(0, request.max_buffered_events())), resumeAfter);
    auto lastStatus = std::chrono::steady_clock::now();
    bool first = true;
    for (;;) {
        proto::TelemetryBatch batch;
        // Batches of up to 50 ms keep the subscriber live (>= 10 refreshes a
        // second) without one message per event.
        const bool open = subscription->next(&batch, std::chrono::milliseconds(50));
        const auto now = std::chrono::steady_clock::now();
        // A failover changes which process serves: the watcher learns the
        // new primary's role with the event, not up to 0.5 s after it (the
        // panel would show the dead ps:0 serving meanwhile).
        const bool failover = std::any_of(batch.events().begin(), batch.events().end(),
                                          [](const proto::TelemetryEvent &event) { return event.has_failover(); });
        if ((first && request.include_status()) || failover || now - lastStatus > std::chrono::milliseconds(500)) {
            *batch.mutable_status() = clusterStatus();
            lastStatus = now;
        }
        first = false;
        batch.set_wall_time(wallTime());
        if (!open)
            batch.set_cluster_finished(true);
        if (!stream.write(batch) || !open)
            break;
    }
    m_telemetry.unsubscribe(subscription);
    return {};
}

void PsTask::reportCheckpoint(const proto::ReportCheckpointRequest &request)
{
    std::lock_guard lock(m_mutex);
    proto::TelemetryEvent event;
    *event.mutable_checkpoint() = request.checkpoint();
    publishLocked(event);
}

} // namespace parasync
