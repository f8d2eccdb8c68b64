// WorkerTask: its own metrics for Prometheus (--metrics_port,
// docs/metrics.md): its steps, where their time went, its latest batch loss.
// The cluster's view of every worker is ps:0's (ps_task_metrics.cpp); these
// are what the worker itself measured, named parasync_local_* so that the
// two never meet in one series.

#include "node/worker_task.h"

#include "base/version.h"

#include <cmath>

namespace parasync {

namespace {

MetricFamily family(std::string name, MetricType type, std::string help, double value)
{
    MetricFamily f;
    f.name = std::move(name);
    f.type = type;
    f.help = std::move(help);
    if (!std::isnan(value))
        f.add(value);
    return f;
}

} // namespace

void WorkerTask::addToMeters(const proto::PushResponse &decision, int64_t computeUs, float batchLoss)
{
    WorkerMeters::Step step;
    step.computeUs = computeUs;
    step.pushUs = m_previousPushUs;
    step.waitUs = decision.waited_us();
    for (const auto &gradient : m_gradient)
        step.gradientBytes += int64_t(sizeof(float)) * int64_t(gradient.size());
    step.batchLoss = batchLoss;
    step.globalStep = decision.global_step();
    switch (decision.outcome()) {
    case proto::APPLIED:
    case proto::AGGREGATED: step.outcome = WorkerMeters::Step::Outcome::Applied; break;
    case proto::DROPPED_STALE: step.outcome = WorkerMeters::Step::Outcome::Dropped; break;
    case proto::REJECTED_NONFINITE: step.outcome = WorkerMeters::Step::Outcome::Rejected; break;
    default: break;
    }
    m_meters.addStep(step);
}

std::string WorkerTask::metricsText(ExpositionFormat format) const
{
    const WorkerMeters::Totals t = m_meters.totals();
    std::vector<MetricFamily> families;
    MetricFamily task;
    task.name = "parasync_task";
    task.type = MetricType::Info;
    task.help = "This task (ps:0, worker:2, ...) and its Parasync version";
    task.add(1, {{"task", m_options.task.toString()}, {"version", version()}});
    families.push_back(std::move(task));
    const auto counter = MetricType::Counter;
    const auto gauge = MetricType::Gauge;
    families.push_back(family("parasync_local_steps", counter, "Steps this worker finished (its worker clock)",
                              double(m_clock.load())));
    families.push_back(family("parasync_local_applied", counter,
                              "This worker's gradients that ps:0 applied or aggregated", double(t.applied)));
    families.push_back(
        family("parasync_local_dropped", counter, "This worker's gradients ps:0 dropped as stale", double(t.dropped)));
    families.push_back(family("parasync_local_rejected", counter,
                              "This worker's gradients ps:0 rejected for NaN or infinite values", double(t.rejected)));
    families.push_back(family("parasync_local_compute_seconds", counter,
                              "Seconds spent computing gradients (a straggler delay and --compute_ms included)",
                              double(t.computeUs) / 1e6));
    families.push_back(family("parasync_local_push_seconds", counter,
                              "Seconds of push round trips to the ps tasks, less the time ps:0 held them",
                              double(t.pushUs) / 1e6));
    families.push_back(family("parasync_local_wait_seconds", counter,
                              "Seconds ps:0 held this worker's pushes (sync barrier, staleness bound)",
                              double(t.waitUs) / 1e6));
    families.push_back(family("parasync_local_gradient_bytes", counter,
                              "Bytes of gradient values this worker pushed to the ps tasks", double(t.gradientBytes)));
    families.push_back(
        family("parasync_local_batch_loss", gauge, "This worker's latest batch loss", metricValueOf(t.batchLoss)));
    families.push_back(family("parasync_local_global_step", gauge,
                              "The global step in ps:0's latest answer to this worker", double(t.globalStep)));
    families.push_back(family("parasync_local_straggler_delay_seconds", gauge,
                              "Delay added to each step (--straggler_ms, TaskControl.SetStraggler)",
                              double(m_stragglerMs.load()) / 1000.0));
    return renderMetrics(families, format);
}

} // namespace parasync
