#pragma once

// A worker's own figures for its metrics endpoint (--metrics_port): the
// training thread adds each step, a scrape on the endpoint's thread reads
// them. Rendered by WorkerTask::metricsText() (worker_task_metrics.cpp).

#include <cmath>
#include <cstdint>
#include <mutex>

namespace parasync {

class WorkerMeters
{
public:
    struct Totals
    {
        int64_t steps = 0;    // steps whose gradient ps:0 decided on (the worker clock)
        int64_t applied = 0;  // of them applied or aggregated
        int64_t dropped = 0;  // of them dropped as stale
        int64_t rejected = 0; // of them rejected (NaN or infinite values)
        int64_t computeUs = 0;
        int64_t pushUs = 0; // the round trips, less the holds
        int64_t waitUs = 0; // held by the policy (sync barrier, staleness bound)
        int64_t gradientBytes = 0;
        float batchLoss = std::nanf("");
        int64_t globalStep = 0; // in the last answer
    };

    struct Step
    {
        int64_t computeUs = 0;
        int64_t pushUs = 0;
        int64_t waitUs = 0;
        int64_t gradientBytes = 0;
        float batchLoss = 0;
        int64_t globalStep = 0;
        // What ps:0 did with the gradient (proto::PushOutcome's meaning).
        enum class Outcome { Applied, Dropped, Rejected, None } outcome = Outcome::None;
    };

    // Thread-safe.
    void addStep(const Step &step)
    {
        std::lock_guard lock(m_mutex);
        m_totals.steps += step.outcome == Step::Outcome::None ? 0 : 1;
        m_totals.applied += step.outcome == Step::Outcome::Applied ? 1 : 0;
        m_totals.dropped += step.outcome == Step::Outcome::Dropped ? 1 : 0;
        m_totals.rejected += step.outcome == Step::Outcome::Rejected ? 1 : 0;
        m_totals.computeUs += step.computeUs;
        m_totals.pushUs += step.pushUs;
        m_totals.waitUs += step.waitUs;
        m_totals.gradientBytes += step.gradientBytes;
        m_totals.batchLoss = step.batchLoss;
        m_totals.globalStep = step.globalStep;
    }
    // Thread-safe.
    Totals totals() const
    {
        std::lock_guard lock(m_mutex);
        return m_totals;
    }

private:
    mutable std::mutex m_mutex;
    Totals m_totals;
};

} // namespace parasync
