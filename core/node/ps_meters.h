#pragma once

// What a ps task counts for its metrics endpoint (--metrics_port) beyond the
// state it keeps anyway: ps:0 reads the step events it publishes (staleness,
// the workers' compute, push and wait times, the chief's losses and held-out
// metrics), every ps task the gradient bytes it receives. Rendered by
// PsTask::metricsText() (ps_task_metrics.cpp). Not thread-safe: the
// ps task calls it under its lock.

#include "engine/model.h"
#include "proto/parasync.pb.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace parasync {

struct PsMeters
{
    struct Worker
    {
        // Staleness of its applied or aggregated gradients, summed, and how many.
        double stalenessSum = 0;
        int64_t stalenessCount = 0;
        // As its step events report them, in microseconds (summed exactly):
        // computing, the push round trip less the hold, and the hold (sync
        // barrier, staleness bound).
        int64_t computeUs = 0;
        int64_t pushUs = 0;
        int64_t waitUs = 0;
        float batchLoss = std::nanf("");
    };
    std::vector<Worker> workers; // by index, grown as events come

    // The chief's latest figures (from the worker acting as chief): its
    // batch loss, the loss over its shard and the held-out metrics, each
    // NaN until measured; `metrics` is aligned with the signature's
    // metric_names.
    float chiefBatchLoss = std::nanf("");
    float fullLoss = std::nanf("");
    std::vector<float> metrics;

    // Every ps task: the gradients' values it received (4 bytes a value),
    // and how many pushes brought them.
    int64_t gradientBytes = 0;
    int64_t gradientPushes = 0;
    int64_t modeChanges = 0;

    // A published event (ps:0).
    void observe(const proto::TelemetryEvent &event, int actingChief);
    // A push's gradients, as this task checked them.
    void countGradient(const GradientView &gradient);
};

} // namespace parasync
