// PsTask: its metrics for Prometheus (--metrics_port, docs/metrics.md).
// ps:0 carries the cluster's view -- the global step, the mode, each
// worker's steps, holds, pace, straggler flag and staleness, the chief's
// losses -- and every ps task its own shard's updates and bytes. The figures
// are taken under the task's lock and rendered after it is let go.

#include "node/ps_task.h"

#include "base/version.h"
#include "config/update_modes.h"
#include "formats/run_log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

namespace parasync {

void PsMeters::observe(const proto::TelemetryEvent &event, int actingChief)
{
    if (event.has_mode_change()) {
        ++modeChanges;
        return;
    }
    if (!event.has_step())
        return;
    const proto::StepEvent &step = event.step();
    if (step.worker() < 0)
        return;
    if (size_t(step.worker()) >= workers.size())
        workers.resize(size_t(step.worker()) + 1);
    Worker &worker = workers[size_t(step.worker())];
    worker.batchLoss = step.batch_loss();
    worker.computeUs += step.compute_us();
    worker.pushUs += step.push_us();
    worker.waitUs += step.wait_us();
    if (step.outcome() == proto::APPLIED || step.outcome() == proto::AGGREGATED) {
        worker.stalenessSum += double(step.staleness());
        ++worker.stalenessCount;
    }
    if (step.worker() == actingChief)
        chiefBatchLoss = step.batch_loss();
    // The chief measures every --display_step steps; between, NaN and no metrics.
    if (!std::isnan(step.full_loss()))
        fullLoss = step.full_loss();
    if (step.metrics_size() > 0) {
        metrics.resize(size_t(step.metrics_size()), std::nanf(""));
        for (int i = 0; i < step.metrics_size(); ++i)
            if (!std::isnan(step.metrics(i)))
                metrics[size_t(i)] = step.metrics(i);
    }
}

void PsMeters::countGradient(const GradientView &gradient)
{
    for (std::span<const float> g : gradient)
        gradientBytes += int64_t(g.size_bytes());
    ++gradientPushes;
}

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

double seconds(int64_t micros)
{
    return double(micros) / 1e6;
}

MetricFamily family(std::string name, MetricType type, std::string help)
{
    MetricFamily f;
    f.name = std::move(name);
    f.type = type;
    f.help = std::move(help);
    return f;
}

int64_t elementsOf(const google::protobuf::RepeatedField<int64_t> &shape)
{
    int64_t n = 1;
    for (const int64_t d : shape)
        n *= d;
    return n;
}

// The figures of one scrape, copied under the task's lock.
struct PsFigures
{
    int psIndex = 0;
    proto::ReplicaRole role = proto::REPLICA_ROLE_UNSPECIFIED;
    bool replicated = false;
    int failovers = 0;
    // With a lease (--ps_lease_ms above 0): the epoch, and whether this
    // process, as primary, holds the lease now.
    bool leased = false;
    int64_t epoch = 0;
    bool leaseHeld = false;
    int64_t updatesApplied = 0;
    int64_t shardBytes = 0;
    int shardVariables = 0;
    PsMeters meters;
    // ps:0 only (the primary of its pair): the cluster's view.
    std::optional<proto::ClusterStatusResponse> cluster;
    std::vector<double> heldSeconds;        // by worker
    std::vector<proto::TableStatus> tables; // a sparse model's, as held here
};

// Every ps task's own: what it is, its shard and the updates it applied.
void addTaskFamilies(const PsFigures &f, std::vector<MetricFamily> *out)
{
    const Labels ps = {{"ps", std::to_string(f.psIndex)}};
    out->push_back(family("parasync_task", MetricType::Info, "This task (ps:0, worker:2, ...) and its Parasync version")
                       .add(1, {{"task", "ps:" + std::to_string(f.psIndex)}, {"version", version()}}));
    out->push_back(family("parasync_ps_updates_applied", MetricType::Counter,
                          "Updates this ps task applied to its shard (on ps:0, the global step)")
                       .add(double(f.updatesApplied), ps));
    out->push_back(family("parasync_ps_gradient_bytes", MetricType::Counter,
                          "Bytes of gradient values this ps task received from the workers' pushes")
                       .add(double(f.meters.gradientBytes), ps));
    out->push_back(
        family("parasync_ps_gradient_pushes", MetricType::Counter, "Pushes whose gradients this ps task received")
            .add(double(f.meters.gradientPushes), ps));
    out->push_back(family("parasync_ps_shard_bytes", MetricType::Gauge,
                          "Bytes of the variables (or slices) this ps task holds, 4 a value")
                       .add(double(f.shardBytes), ps));
    out->push_back(
        family("parasync_ps_shard_variables", MetricType::Gauge, "Variables (or variable slices) this ps task holds")
            .add(double(f.shardVariables), ps));
    // A sparse model's tables: whether the ids spread evenly over the ps
    // tasks is these figures side by side.
    if (!f.tables.empty()) {
        MetricFamily rows = family("parasync_ps_table_rows", MetricType::Gauge,
                                   "Rows of the embedding table this ps task holds (made on their first pull)");
        MetricFamily memory = family("parasync_ps_table_memory_bytes", MetricType::Gauge,
                                     "Bytes the table takes on this ps task: rows, optimizer state, id index, slack");
        MetricFamily pulled = family("parasync_ps_table_rows_pulled", MetricType::Counter,
                                     "Rows of the table workers pulled from here");
        MetricFamily pushed
            = family("parasync_ps_table_rows_pushed", MetricType::Counter, "Row gradients of the table applied here");
        MetricFamily wire = family("parasync_ps_table_wire_bytes", MetricType::Counter,
                                   "Bytes of ids and values of the table's rows that crossed the wire here, both ways");
        for (const proto::TableStatus &table : f.tables) {
            const Labels labels = {{"ps", std::to_string(f.psIndex)}, {"table", table.name()}};
            rows.add(double(table.rows()), labels);
            memory.add(double(table.memory_bytes()), labels);
            pulled.add(double(table.rows_pulled()), labels);
            pushed.add(double(table.rows_pushed()), labels);
            wire.add(double(table.wire_bytes()), labels);
        }
        for (MetricFamily *family : {&rows, &memory, &pulled, &pushed, &wire})
            out->push_back(std::move(*family));
    }
    if (f.replicated) {
        const char *role = f.role == proto::REPLICA_PRIMARY  ? "primary"
                           : f.role == proto::REPLICA_BACKUP ? "backup"
                                                             : "starting";
        out->push_back(family("parasync_ps_replica_role", MetricType::Info,
                              "Which side of its primary/backup pair this process is (--ps_backup_hosts)")
                           .add(1, {{"ps", std::to_string(f.psIndex)}, {"role", role}}));
        out->push_back(family("parasync_failovers", MetricType::Counter,
                              "Times a backup of this ps task's pair took over during the run, as this process knows")
                           .add(double(f.failovers), ps));
        if (f.leased) {
            out->push_back(family("parasync_ps_lease_epoch", MetricType::Gauge,
                                  "The lease epoch the pair's primary serves under, as this process knows it")
                               .add(double(f.epoch), ps));
            // An alert on "primary without its lease" is a cut-off primary.
            if (f.role == proto::REPLICA_PRIMARY)
                out->push_back(family("parasync_ps_lease_held", MetricType::Gauge,
                                      "1 while this primary holds its lease and may acknowledge; 0: it serves "
                                      "nobody (cut off from its backup and the witness)")
                                   .add(f.leaseHeld ? 1 : 0, ps));
        }
    }
}

// ps:0: the cluster as a whole.
void addClusterFamilies(const proto::ClusterStatusResponse &s, const PsMeters &meters, std::vector<MetricFamily> *out)
{
    const proto::ModeConfig &mode = s.mode();
    out->push_back(family("parasync_global_step", MetricType::Gauge, "The global step: updates ps:0 applied")
                       .add(double(s.global_step())));
    out->push_back(family("parasync_last_step", MetricType::Gauge, "--last_step; 0 trains until stopped")
                       .add(double(s.last_step())));
    out->push_back(family("parasync_initialized", MetricType::Gauge, "1 once the chief initialised the variables")
                       .add(s.initialized() ? 1 : 0));
    out->push_back(family("parasync_mode", MetricType::Info, "The update mode in force (async, sync, ssp)")
                       .add(1, {{"mode", updateModeName(mode.mode())}}));
    out->push_back(family("parasync_staleness_bound", MetricType::Gauge,
                          "ssp: steps a worker may run ahead of the slowest live worker (ModeConfig.staleness)")
                       .add(mode.staleness()));
    out->push_back(family("parasync_replicas_to_aggregate", MetricType::Gauge,
                          "sync: gradients averaged per step; 0 is the number of live workers")
                       .add(mode.replicas_to_aggregate()));
    out->push_back(family("parasync_total_num_replicas", MetricType::Gauge,
                          "sync: workers expected per step; 0 is the number of workers")
                       .add(mode.total_num_replicas()));
    out->push_back(family("parasync_learning_rate_by_staleness", MetricType::Gauge,
                          "1 when async and ssp divide the learning rate by a gradient's staleness")
                       .add(mode.learning_rate_by_staleness() ? 1 : 0));
    out->push_back(family("parasync_mode_changes", MetricType::Counter, "Changes of update mode while training")
                       .add(double(meters.modeChanges)));
    out->push_back(family("parasync_dropped_gradients", MetricType::Counter, "Gradients dropped as stale, all workers")
                       .add(double(s.dropped_total())));
    out->push_back(family("parasync_stall_seconds", MetricType::Gauge,
                          "Seconds the global step has not moved while workers are alive (0: no stall)")
                       .add(s.stall().seconds()));
    out->push_back(family("parasync_acting_chief", MetricType::Gauge, "The worker doing the chief's duties")
                       .add(s.acting_chief()));
    int64_t modelBytes = 0;
    for (const proto::VariableSpec &v : s.signature().variables())
        modelBytes += 4 * elementsOf(v.shape());
    out->push_back(family("parasync_step_gradient_bytes", MetricType::Gauge,
                          "Bytes of gradient values one worker pushes per step, over all ps tasks (the model's size)")
                       .add(double(modelBytes)));

    // The chief's figures, as they arrive in its pushes.
    auto chief = family("parasync_chief_batch_loss", MetricType::Gauge,
                        "The acting chief's latest batch loss (its latest step's mean loss over its batch)");
    if (!std::isnan(meters.chiefBatchLoss))
        chief.add(metricValueOf(meters.chiefBatchLoss));
    out->push_back(std::move(chief));
    auto full = family("parasync_full_loss", MetricType::Gauge,
                       "The chief's latest loss over its whole shard (measured every --display_step steps)");
    if (!std::isnan(meters.fullLoss))
        full.add(metricValueOf(meters.fullLoss));
    out->push_back(std::move(full));
    auto heldOut = family("parasync_chief_metric", MetricType::Gauge,
                          "The chief's latest held-out metrics (--eval_dataset, --eval_fraction), by name");
    for (size_t i = 0; i < meters.metrics.size() && i < size_t(s.signature().metric_names_size()); ++i)
        if (!std::isnan(meters.metrics[i]))
            heldOut.add(metricValueOf(meters.metrics[i]), {{"metric", s.signature().metric_names(int(i))}});
    out->push_back(std::move(heldOut));
}

// ps:0: one sample per worker (label worker="N") in each family.
void addWorkerFamilies(const proto::ClusterStatusResponse &s, const PsMeters &meters,
                       const std::vector<double> &heldSeconds, std::vector<MetricFamily> *out)
{
    auto steps = family("parasync_worker_steps", MetricType::Counter, "Steps the worker finished (its worker clock)");
    auto applied = family("parasync_worker_applied", MetricType::Counter,
                          "The worker's gradients that were applied or aggregated");
    auto dropped = family("parasync_worker_dropped", MetricType::Counter, "The worker's gradients dropped as stale");
    auto nonfinite = family("parasync_worker_nonfinite", MetricType::Counter,
                            "The worker's gradients with NaN or infinite values");
    auto held = family("parasync_worker_held_seconds", MetricType::Counter,
                       "Seconds ps:0 held the worker's pushes (sync barrier, staleness bound)");
    auto compute = family("parasync_worker_compute_seconds", MetricType::Counter,
                          "Seconds the worker spent computing its gradients, as its steps report");
    auto push = family("parasync_worker_push_seconds", MetricType::Counter,
                       "Seconds the worker's push round trips took, less the holds, as its steps report");
    auto wait = family("parasync_worker_wait_seconds", MetricType::Counter,
                       "Seconds the worker's steps were held by the policy, as its steps report");
    auto stalenessSum = family("parasync_worker_staleness_steps", MetricType::Counter,
                               "Staleness of the worker's applied gradients, summed (global steps)");
    auto stalenessCount = family("parasync_worker_staleness_gradients", MetricType::Counter,
                                 "The worker's applied gradients whose staleness is summed");
    auto pace = family("parasync_worker_seconds_per_step", MetricType::Gauge,
                       "The worker's pace over ps:0's straggler window: seconds a step when not held; absent until "
                       "judged");
    auto straggler = family("parasync_worker_straggler", MetricType::Gauge,
                            "1 while ps:0 flags the worker as a straggler (--straggler_threshold)");
    auto loss = family("parasync_worker_batch_loss", MetricType::Gauge, "The worker's latest batch loss");
    auto phase = family("parasync_worker_phase", MetricType::Gauge,
                        "1 for the phase the worker is in, 0 for the others (a state set)");
    static constexpr proto::WorkerPhase kPhases[]
        = {proto::WAITING_FOR_CHIEF, proto::TRAINING, proto::BLOCKED_BY_SYNC, proto::BLOCKED_BY_STALENESS,
           proto::FINISHED,          proto::DEAD,     proto::STOPPED,         proto::REJOINING};
    for (const proto::WorkerStatus &w : s.workers()) {
        const std::string index = std::to_string(w.worker_index());
        const Labels labels = {{"worker", index}};
        steps.add(double(w.worker_clock()), labels);
        applied.add(double(w.applied()), labels);
        dropped.add(double(w.dropped()), labels);
        nonfinite.add(double(w.nonfinite()), labels);
        if (size_t(w.worker_index()) < heldSeconds.size())
            held.add(heldSeconds[size_t(w.worker_index())], labels);
        const PsMeters::Worker seen = size_t(w.worker_index()) < meters.workers.size()
                                          ? meters.workers[size_t(w.worker_index())]
                                          : PsMeters::Worker();
        compute.add(seconds(seen.computeUs), labels);
        push.add(seconds(seen.pushUs), labels);
        wait.add(seconds(seen.waitUs), labels);
        stalenessSum.add(seen.stalenessSum, labels);
        stalenessCount.add(double(seen.stalenessCount), labels);
        if (!std::isnan(seen.batchLoss))
            loss.add(metricValueOf(seen.batchLoss), labels);
        if (w.seconds_per_step() > 0)
            pace.add(w.seconds_per_step(), labels);
        straggler.add(w.straggler() ? 1 : 0, labels);
        if (w.phase() != proto::WORKER_PHASE_UNSPECIFIED)
            for (const proto::WorkerPhase p : kPhases)
                phase.add(w.phase() == p ? 1 : 0, {{"worker", index}, {"phase", phaseName(p)}});
    }
    for (auto *f : {&steps, &applied, &dropped, &nonfinite, &held, &compute, &push, &wait, &stalenessSum,
                    &stalenessCount, &pace, &straggler, &loss, &phase})
        out->push_back(std::move(*f));
}

} // namespace

std::string PsTask::metricsText(ExpositionFormat format) const
{
    PsFigures f;
    {
        std::lock_guard lock(m_mutex);
        f.psIndex = m_options.task.index;
        f.role = m_role;
        f.replicated = m_options.cluster.replicated();
        f.failovers = m_failovers;
        f.leased = leased();
        f.epoch = m_epoch;
        f.leaseHeld = m_role == proto::REPLICA_PRIMARY && leaseHeldLocked(LeaseClock::now());
        f.updatesApplied = m_policy ? m_policy->globalStep() : m_updatesApplied;
        f.shardVariables = m_shard.size();
        for (int i = 0; i < m_shard.size(); ++i) {
            int64_t n = 1;
            for (const int64_t d : m_shard.shape(i))
                n *= d;
            f.shardBytes += 4 * n;
        }
        f.meters = m_meters;
        f.tables = tableStatusLocked();
        // A backup replays ps:0's state but does not serve it: its view
        // would be a second, lagging copy of the cluster's.
        if (m_policy && m_role != proto::REPLICA_BACKUP) {
            // What clusterStatusLocked() gives, less what a scrape does not
            // show: its cluster.json (made anew from the flags each time) and
            // host lists would lengthen the hold every push waits behind.
            proto::ClusterStatusResponse &s = f.cluster.emplace();
            s.set_initialized(m_initialized);
            s.set_last_step(lastStep());
            *s.mutable_signature() = m_signature;
            s.set_global_step(m_policy->globalStep());
            *s.mutable_mode() = m_policy->mode();
            s.set_dropped_total(m_policy->droppedTotal());
            *s.mutable_stall() = m_stall;
            s.set_acting_chief(m_actingChief);
            const auto now = std::chrono::steady_clock::now();
            f.heldSeconds.resize(m_workers.size());
            for (int i = 0; i < int(m_workers.size()); ++i) {
                // An elastic cluster's indexes that never joined are no workers yet.
                if (isNewcomerIndex(i) && !m_workers[size_t(i)].everJoined)
                    continue;
                *s.add_workers() = workerStatusLocked(i);
                const WorkerInfo &info = m_workers[size_t(i)];
                auto held = info.heldTotal;
                if (info.heldFrom)
                    held += std::chrono::duration_cast<std::chrono::microseconds>(now - *info.heldFrom);
                f.heldSeconds[size_t(i)] = std::chrono::duration<double>(held).count();
            }
        }
    }
    std::vector<MetricFamily> families;
    addTaskFamilies(f, &families);
    if (f.cluster) {
        addClusterFamilies(*f.cluster, f.meters, &families);
        addWorkerFamilies(*f.cluster, f.meters, f.heldSeconds, &families);
    }
    return renderMetrics(families, format);
}

} // namespace parasync
