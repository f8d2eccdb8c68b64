#pragma once

// The chief's TensorBoard summaries (as tf.train.Supervisor writes them on
// the chief only): every --display_step global steps and at the last step, an
// Event with the scalars loss (the chief's batch loss), full_loss (when the
// chief evaluated its shard), the model's parameters when there are few
// (w, b), updates_per_sec (global steps per second since the previous
// summary) and staleness/worker_N (mean staleness of worker N's gradients
// since the previous summary, from ps:0's telemetry), straggler/worker_N (1
// while ps:0 flags worker N as a straggler, else 0), the chief's latest
// metrics (ModelSignature.metric_names: heldout/loss, heldout/accuracy, the
// name's first '_' read as TensorBoard's group separator), and the histogram
// "pred" of the model's predictions on the chief's shard (the seeds'
// tf.summary.histogram('pred', pred)). The file opens with the run's training
// flags as TensorBoard hparams, and each mode change ps:0 reports becomes a
// text summary "mode_change" at its global step
// (formats/tensorboard_plugins.h).

#include "engine/model.h"
#include "formats/event_file.h"
#include "node/chief_measurement.h"
#include "wire/ps_client.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace parasync {

struct Dataset;

class TrainingSummaries
{
public:
    using Log = std::function<void(const std::string &)>;

    // Opens a new event file in `logdir` (InputError when it cannot) and
    // starts a thread that follows ps:0's telemetry for the workers'
    // staleness and mode changes. `everySteps` <= 0 means every 100 global
    // steps. `trainingJson` (TrainingOptions::toJson) becomes the hparams.
    // `data` and `variables` must outlive this object.
    TrainingSummaries(const std::string &logdir, int64_t everySteps, const std::string &trainingJson,
                      const Dataset &data, const std::vector<Variable> &variables, std::vector<std::string> metricNames,
                      std::shared_ptr<PsClient> ps0, Log log);
    ~TrainingSummaries(); // cancels the telemetry stream; never blocks long

    // Called by the chief after each step with the global step its
    // parameters now belong to. Writes a summary when the global step passed
    // a multiple of `everySteps`, or when `last` is set; otherwise costs a
    // comparison. What the chief `measured` this step (metrics, variable
    // summaries) goes into the next summary written. Not thread-safe: the
    // chief's training thread calls it.
    void afterStep(int64_t globalStep, float batchLoss, const ChiefMeasurement &measured, const Parameters &params,
                   bool last);

    // The TensorBoard tag of a metric: "heldout_loss" -> "heldout/loss".
    static std::string metricTag(const std::string &metricName);

    const std::string &path() const { return m_writer.path(); }

private:
    void watchTelemetry();
    // Appends `event` unless a write failed before; says so once when it fails.
    void write(const tensorboard::Event &event);
    void writeModeChanges(const std::vector<proto::ModeChangeEvent> &changes);

    // The training thread writes summaries, the telemetry thread mode
    // changes: m_writerMutex guards the writer and m_writeFailed.
    std::mutex m_writerMutex;
    EventFileWriter m_writer;
    int64_t m_everySteps;
    const Dataset &m_data;
    const std::vector<Variable> &m_variables;
    std::vector<std::string> m_metricNames;
    std::vector<float> m_pendingMetrics; // measured since the last summary
    std::vector<VariableSummary> m_pendingVariables;
    Log m_log;
    int64_t m_lastStep = -1;
    double m_lastWallTime = 0;
    bool m_writeFailed = false;

    // Per worker: sum and count of staleness since the last summary.
    std::mutex m_mutex;
    std::map<int, std::pair<double, int64_t>> m_staleness;
    // Per worker seen in ps:0's worker states: whether it is flagged.
    std::map<int, bool> m_stragglers;
    // Sums over the staleness probes since the last summary.
    struct ProbeSums
    {
        double stepsApart = 0, cosine = 0, relativeError = 0;
        int64_t count = 0;
    };
    ProbeSums m_probes;
    // The newest global step of ps:0's telemetry: a stream (re)opened late
    // resumes after it, and what arrives late goes into the next summary.
    int64_t m_telemetryStep = 0;
    // The mode changes written (global step, text): a reopened stream
    // brings ps:0's held events again. With the telemetry thread only.
    std::set<std::pair<int64_t, std::string>> m_modeChangesWritten;
    bool m_stopping = false;
    std::condition_variable m_wake;
    std::condition_variable m_telemetryArrived;
    std::shared_ptr<PsClient> m_ps0;
    TelemetryStream *m_watch = nullptr; // the stream being read, with m_mutex
    std::thread m_thread;
};

} // namespace parasync
