#pragma once

// A run directory's records as values: the step log's lines and
// metrics.csv's rows read by one reader each, beside RunLog, their writer.
// Replay (orchestration/run_replay) and the mode comparison
// (orchestration/mode_comparison) both read a run through these, so they
// cannot disagree on a column.

#include "base/variable_summary.h"
#include "proto/parasync.pb.h"

#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

class StepLogReader;

// One applied, aggregated or dropped gradient (a telemetry StepEvent, a
// step log "step" record, a metrics.csv row).
struct StepRecord
{
    int64_t globalStep = 0;
    double wallTime = 0;
    int worker = 0;
    int64_t workerClock = 0;
    int64_t staleness = 0;        // -1: unknown (a run replayed from metrics.csv)
    int64_t computedFromStep = 0; // the global step `parameters` belong to
    float batchLoss = 0;
    float fullLoss = 0; // NaN when not evaluated
    proto::PushOutcome outcome = proto::APPLIED;
    int contributions = 1;
    int64_t computeUs = 0;
    int64_t pushUs = 0;
    int64_t waitUs = 0;
    proto::WorkerPhase waitReason = proto::WORKER_PHASE_UNSPECIFIED;
    std::vector<float> parameters; // w, b for the linear model
    // The metrics the worker reported with this step (held-out loss, ...),
    // aligned with the run's metric names; empty when none was measured,
    // NaN for one that was not.
    std::vector<float> metrics;
    // The chief's summary of every variable (norm, distance from the start,
    // update per step), aligned with the run's variable names; empty on
    // steps that measured nothing.
    std::vector<VariableSummary> variables;
    // What ps:0 multiplied the learning rate by for this gradient (a
    // staleness-aware rule); 1 otherwise.
    float learningRateScale = 1.0f;
    // The worker's staleness probe on this step (--staleness_probe_every).
    struct Probe
    {
        int64_t staleStep = 0; // the global steps of the parameters the two gradients were computed at
        int64_t freshStep = 0;
        float cosine = 1.0f;
        float relativeError = 0.0f;
    };
    std::optional<Probe> probe;
    // The lease epoch ps:0 applied it under (--ps_lease_ms); 0 without one.
    int64_t leaseEpoch = 0;

    // Whether the global step moved with it: applied alone or aggregated
    // into a sync step (not dropped as stale).
    bool counted() const { return outcome == proto::APPLIED || outcome == proto::AGGREGATED; }
};

// An update mode change, as ps:0 logged it.
struct ModeMarker
{
    int64_t globalStep = 0;
    double wallTime = 0;
    proto::ModeConfig previous;
    proto::ModeConfig current;
    std::string requestedBy;
};

// ps:0's backup took over (--ps_backup_hosts): at which global step, when,
// and the step log's words.
struct FailoverMarker
{
    int64_t globalStep = 0;
    double wallTime = 0;
    std::string newPrimary;
    std::string oldPrimary;
    std::string reason;
};

// What a step log's reader is handed, record by record, in the log's order.
// Every method does nothing unless overridden: a reader that wants only the
// steps overrides step().
class StepLogVisitor
{
public:
    virtual ~StepLogVisitor() = default;
    // The names a step record's values are aligned with, each given once,
    // by the first step record that carries them (in the line's order: the
    // linear model's "w" before "b"), before that step.
    virtual void parameterNames(const std::vector<std::string> & /*names*/) {}
    virtual void metricNames(const std::vector<std::string> & /*names*/) {}
    virtual void variableNames(const std::vector<std::string> & /*names*/) {}
    virtual void step(const StepRecord & /*step*/) {}
    virtual void modeChange(const ModeMarker & /*change*/) {}
    // A worker's state change, a checkpoint or a failover, as ps:0's
    // telemetry stream carries it.
    virtual void event(const proto::TelemetryEvent & /*event*/) {}
};

struct StepLogCounts
{
    int64_t records = 0;      // of a known type, handed to the visitor
    int64_t skippedLines = 0; // torn, not JSON, or of a type this reader does not know
};

// Reads every line the reader gives (the rotated segments and steps.jsonl)
// into `visitor`. Throws InputError as StepLogReader::next does.
StepLogCounts readStepLog(StepLogReader &log, StepLogVisitor &visitor);

// metrics.csv read whole. The header names the parameter and metric columns
// after the fixed ones but not which is which (an older file has no
// metrics): a parameter is on every row, a metric only on the rows that
// measured it, so a column with an empty cell on a complete row, and every
// column after it, is a metric. The rows come as step records: staleness -1
// (unknown), no timings, the parameters they were computed from the step
// before, each worker's clock counted by its rows.
struct MetricsCsv
{
    std::vector<std::string> parameterNames;
    std::vector<std::string> metricNames;
    std::vector<StepRecord> steps;
    int64_t skippedLines = 0; // a torn last row
};
// Throws InputError when the file cannot be read or lacks the global_step,
// wall_time and loss columns every metrics.csv has, naming the file.
MetricsCsv readMetricsCsv(const QString &path);

} // namespace parasync
