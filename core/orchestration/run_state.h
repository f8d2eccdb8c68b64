#pragma once

// The live (or replayed) state of one training run, as the desktop app and the
// headless exporter show it. Fed with telemetry events from ps:0 or with the
// records of a run directory's step log; hands out value snapshots that any
// thread may keep. No widgets, no sockets.

#include "formats/step_records.h" // StepRecord, ModeMarker, FailoverMarker
#include "orchestration/staleness_cost_table.h"
#include "proto/parasync.pb.h"

#include <QMetaType>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

// A bounded series over the global step: at most `capacity` buckets; when
// full, neighbouring buckets merge and the bucket width doubles, so a run of
// any length keeps its whole shape in bounded memory (min/max per bucket, as
// a plot needs to draw spikes honestly).
// The width counts appended values, not x units: every bucket holds
// bucketWidth() values (the last one up to that many). Two series fed the
// same number of values therefore have buckets that cover the same values
// (e.g. fullLoss and fullLossByTime), and no x scale has to be guessed
// before the first value arrives.
class DecimatedSeries
{
public:
    struct Bucket
    {
        double x = 0;    // first x in the bucket (global step or wall time)
        double last = 0; // last y that fell in the bucket
        double min = 0;
        double max = 0;
        double sum = 0;
        int64_t count = 0;
        double mean() const { return count ? sum / double(count) : 0; }
    };

    explicit DecimatedSeries(size_t capacity = 2048);
    // Appends (x, y); x must not decrease (older x values are merged into the
    // last bucket). Non-finite y values are ignored.
    void append(double x, double y);
    const std::vector<Bucket> &buckets() const { return m_buckets; }
    double bucketWidth() const { return m_width; } // values per bucket
    int64_t totalCount() const { return m_total; }
    bool isEmpty() const { return m_buckets.empty(); }
    void clear();

private:
    void compact();
    size_t m_capacity;
    double m_width = 1;
    std::vector<Bucket> m_buckets;
    int64_t m_total = 0;
};

// The probes of one bucket of StalenessCostTable, for charts and tables.
struct StalenessCostFigures
{
    std::string label; // "0", "2-3", "128+": global steps between the stale and the fresh parameters
    int64_t lowest = 0;
    int64_t count = 0;
    float medianCosine = 0;
    float medianRelativeError = 0;
};

// One variable's summaries over the run, x = the global step the measured
// parameters belong to.
struct VariableSeries
{
    explicit VariableSeries(size_t capacity = 2048)
        : norm(capacity)
        , distanceFromStart(capacity)
        , updatePerStep(capacity)
    {
    }
    DecimatedSeries norm;
    DecimatedSeries distanceFromStart;
    DecimatedSeries updatePerStep;
};

// A count's rate per second over the last ~2 s of a clock: a worker's steps,
// the global step. Samples about 50 ms apart, so a bounded few dozen
// however fast the count grows. Records may come out of order (several
// workers' events); the rate is taken from the highest count seen.
class WindowedRate
{
public:
    void record(double time, int64_t count);
    // Per second at `now` (the clock's newest reading): 0 when nothing was
    // recorded within the window, so a count that stopped reads 0.
    double perSecond(double now) const;

private:
    std::deque<std::pair<double, int64_t>> m_samples; // (time, count)
    double m_latestTime = 0;
    int64_t m_latestCount = 0;
};

struct WorkerFigures
{
    int index = 0;
    proto::WorkerPhase phase = proto::WORKER_PHASE_UNSPECIFIED;
    std::string waitingFor; // what a blocked worker waits for
    std::string reason;     // why it is dead
    int64_t clock = 0;
    int64_t applied = 0;
    int64_t dropped = 0;
    int64_t nonfinite = 0; // gradients with NaN/Inf (rejected, or applied and counted)
    // This worker's steps (gradients it pushed) per second, over the last
    // ~2 s of the run's clock. Not global steps: in sync a global step
    // takes one gradient from each of several workers.
    double stepsPerSecond = 0;
    double waitFraction = 0;                 // waitUs / (compute + push + wait), whole run
    std::vector<int64_t> stalenessHistogram; // [staleness] -> count; last bin is ">= size-1"
    int64_t pid = 0;
    // ps:0's straggler watch (--straggler_threshold): whether it flags this
    // worker, and its pace in seconds a step, the time ps:0 held it left out
    // (0 until ps:0 can judge it).
    bool straggler = false;
    double secondsPerStep = 0;
};

// ps:0 flagged a worker as a straggler, or unflagged it: where the timeline
// marks it.
struct StragglerMarker
{
    int worker = 0;
    int64_t globalStep = 0;
    double wallTime = 0;
    bool flagged = false;
    double secondsPerStep = 0;
};

// Everything a chart needs, copied out of RunState: cheap enough to produce
// 10-20 times a second and safe to hand to the GUI thread.
struct RunSnapshot
{
    int64_t globalStep = 0;
    // The two rates of a run, over the last ~2 s of the run's clock, each
    // defined here only: global steps per second (updates to the model) and
    // gradients per second (steps of all workers, applied or dropped). In
    // async they agree; in sync the first is the second divided by the
    // gradients a step aggregates.
    double globalStepsPerSecond = 0;
    double gradientsPerSecond = 0;
    double rateClock = 0; // the run's wall time (ps:0's clock) the rates were taken at
    proto::ModeConfig mode;
    int64_t lastStep = 0;
    bool finished = false;
    int64_t lostEvents = 0;                  // telemetry the watcher lost because it was slow
    std::vector<std::string> parameterNames; // "w", "b" when the model is small
    double startWallTime = 0;

    // Per worker, by index.
    std::vector<WorkerFigures> workers;
    std::map<int, DecimatedSeries> batchLossByWorker; // x = global step
    DecimatedSeries fullLoss;                         // chief's full-shard loss, x = global step
    DecimatedSeries fullLossByTime;                   // x = seconds since start
    std::vector<DecimatedSeries> parameterSeries;     // one per parameter name, x = global step
    // The metrics the workers report, as the model signature names them
    // ("heldout_loss", "heldout_accuracy"), and one series per name; x =
    // the global step the measured parameters belong to.
    std::vector<std::string> metricNames;
    std::vector<DecimatedSeries> metricSeries;
    // How each variable moves, for models with more parameters than the
    // parameterSeries show: the signature's variable names, one series set
    // per name.
    std::vector<std::string> variableNames;
    std::vector<VariableSeries> variableSeries;
    // The most recent steps in full detail, for the step-interleaving lanes
    // (bounded; older steps are only in the decimated series).
    std::vector<StepRecord> recentSteps;
    std::vector<ModeMarker> modeChanges;
    std::vector<std::pair<int64_t, double>> checkpoints; // global step, wall time
    std::vector<FailoverMarker> failovers;
    std::vector<StragglerMarker> stragglerChanges;
    // What staleness costs, from the workers' probes: one entry per bucket
    // of steps apart that holds a probe, in order.
    std::vector<StalenessCostFigures> stalenessCost;
    int64_t stalenessProbes = 0;
    // ps:0's pair as the process watched describes it (--ps_backup_hosts;
    // role unspecified without a backup).
    proto::ReplicaStatus psReplica;

    // The cluster as ps:0 (or the run's cluster.json) describes it: worker i's
    // own address is workerHosts[i] (for TaskControl calls such as a
    // straggler delay on a cluster this app did not start).
    std::vector<std::string> psHosts;
    std::vector<std::string> workerHosts;
    std::string trainingJson;        // the run's training flags (TrainingOptions::toJson format)
    proto::ModelSignature signature; // empty until the chief initialised the variables
    bool initialized = false;        // the chief initialised the variables
    int64_t droppedTotal = 0;        // gradients dropped as stale, all workers
    // ps:0's hang watchdog: seconds the global step has not moved although
    // workers are alive (0: it moves), and whom ps:0 waits for.
    double stallSeconds = 0;
    std::string stallWaitingFor;
    // ps:0 cannot write the run's records: why, and where they stop (empty
    // while they are written).
    std::string recordsProblem;
    int actingChief = 0;     // the worker doing the chief's duties
    int64_t stepEvents = 0;  // step records seen (applied, aggregated and dropped)
    double lastWallTime = 0; // wall time of the newest record
};

// The workers ps:0 flags as stragglers, in words for a banner: their pace
// against the others' and, in sync, how many backup workers would keep the
// steps from waiting for them. Empty while none is flagged or the run is over.
std::string describeStragglers(const RunSnapshot &snapshot);

// What each of `numPs` ps tasks holds of the model `signature` declares, in
// words ("W rows 0-391 of 784 (15.3 KiB), b (40 bytes)", then each table's
// share: "table weights: 1/2 of its rows, by id hash"), by ps index:
// where each slice of a partitioned variable lives. Empty when the signature
// declares nothing yet or a placement that cannot be read.
std::vector<std::string> variablesHeldByPs(const proto::ModelSignature &signature, int numPs);

// Accumulates a run's events. Not thread-safe: one owner (the watcher's
// thread, or the replay code) feeds it and takes snapshots.
class RunState
{
public:
    explicit RunState(size_t recentStepCapacity = 20000, size_t seriesCapacity = 2048);

    void apply(const proto::TelemetryEvent &event);
    void apply(const proto::TelemetryBatch &batch); // events + status + lost count
    void applyStatus(const proto::ClusterStatusResponse &status);
    void addStep(const StepRecord &step);
    void addModeChange(const ModeMarker &marker);
    void setParameterNames(std::vector<std::string> names);
    // Names the metric series; values that came before under provisional
    // names ("metric[0]") keep their series when the count matches.
    void setMetricNames(std::vector<std::string> names);
    // Names the variable summary series, the same way.
    void setVariableNames(std::vector<std::string> names);
    // Reads a run's cluster.json ({"cluster": {...}, "training": {...}}) or a
    // bare training-flags object (ClusterStatusResponse.cluster_json): hosts,
    // last step, and the mode in force at the start when none is known yet.
    // Ignores text that does not parse.
    void setClusterJson(const std::string &json);
    // The model the chief declared (ps:0's status, a run's model.json): its
    // variables name the parameters, its metric names the metric series.
    void setSignature(const proto::ModelSignature &signature);
    void setFinished(bool finished) { m_snapshot.finished = finished; }
    // True when steps carry parameter values but no model signature named
    // them yet (they are kept as "param[i]" and renamed once one arrives):
    // the watcher then asks ps:0 for its status.
    bool wantsSignature() const { return m_provisionalNames || m_provisionalMetricNames || m_provisionalVariableNames; }

    RunSnapshot snapshot() const;
    int64_t globalStep() const { return m_snapshot.globalStep; }
    void clear();

private:
    WorkerFigures &worker(int index);
    // A worker's straggler flag and pace as ps:0 reports them; a flag that
    // changed is marked at the current global step.
    void applyStraggler(WorkerFigures &figures, const proto::WorkerStatus &status, double wallTime);
    void setNamesFromSignature(const proto::ModelSignature &signature);

    RunSnapshot m_snapshot;
    bool m_modeKnown = false;
    bool m_provisionalNames = false;
    bool m_provisionalMetricNames = false;
    bool m_provisionalVariableNames = false;
    size_t m_recentCapacity;
    size_t m_seriesCapacity;
    std::deque<StepRecord> m_recent;
    struct Rate
    {
        WindowedRate steps; // the worker's clock
        int64_t computeUs = 0, pushUs = 0, waitUs = 0;
        // Counts from the step events seen, and as ps:0 last reported them.
        int64_t appliedSeen = 0, droppedSeen = 0, rejectedSeen = 0;
        int64_t appliedReported = 0, droppedReported = 0, nonfiniteReported = 0;
    };
    std::map<int, Rate> m_rates;
    WindowedRate m_globalSteps;
    StalenessCostTable m_stalenessCost;
    double m_psClock = 0; // ps:0's wall time of the newest telemetry batch
};

} // namespace parasync

Q_DECLARE_METATYPE(parasync::RunSnapshot)
