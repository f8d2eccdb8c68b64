#include "node/training_summaries.h"

#include "base/clock.h"

#include "engine/dataset.h"
#include "formats/tensorboard_plugins.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace parasync {

namespace {

// Parameters written as scalars when the model has at most this many (the
// linear demo's w and b).
constexpr Eigen::Index kMaxScalarParameters = 16;

// Events ps:0 keeps for the chief's staleness watch while it falls behind.
constexpr int kWatchBufferedEvents = 4096;

void addScalar(tensorboard::Summary *summary, const std::string &tag, double value)
{
    auto *entry = summary->add_value();
    entry->set_tag(tag);
    entry->set_simple_value(float(value));
}

} // namespace

TrainingSummaries::TrainingSummaries(const std::string &logdir, int64_t everySteps, const std::string &trainingJson,
                                     const Dataset &data, const std::vector<Variable> &variables,
                                     std::vector<std::string> metricNames, std::shared_ptr<PsClient> ps0, Log log)
    : m_writer(logdir)
    , m_everySteps(everySteps > 0 ? everySteps : 100)
    , m_data(data)
    , m_variables(variables)
    , m_metricNames(std::move(metricNames))
    , m_log(std::move(log))
    , m_ps0(std::move(ps0))
{
    // Once, first: TensorBoard's hparams dashboard lists the run by these
    // flags, and the scalars it offers beside them.
    std::vector<std::string> metricTags{"loss", "full_loss", "updates_per_sec"};
    for (const std::string &name : m_metricNames)
        metricTags.push_back(metricTag(name));
    write(hparamsEvent(trainingJson, wallTime(), metricTags));
    m_thread = std::thread(&TrainingSummaries::watchTelemetry, this);
}

TrainingSummaries::~TrainingSummaries()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
        if (m_watch)
            m_watch->cancel();
    }
    m_wake.notify_all();
    if (m_thread.joinable())
        m_thread.join();
}

void TrainingSummaries::watchTelemetry()
{
    // Only the staleness of other workers' gradients and the straggler flags
    // need ps:0's view; the chief knows everything else itself.
    for (;;) {
        proto::WatchRequest request;
        // Staleness averages survive losing events when this thread falls
        // behind; ps:0's default queue (65536 events, ~14 MB) would not be
        // worth keeping for them.
        request.set_max_buffered_events(kWatchBufferedEvents);
        {
            // ps:0 holds its last events: a stream opened after the run
            // began (ps:0 came up after this thread's first try, a
            // failover) starts with the steps it missed.
            std::lock_guard lock(m_mutex);
            request.set_resume_after_step(m_telemetryStep);
        }
        const std::unique_ptr<TelemetryStream> reader = m_ps0->watchTelemetry(0, request);
        {
            std::lock_guard lock(m_mutex);
            if (m_stopping)
                return;
            m_watch = reader.get();
        }
        proto::TelemetryBatch batch;
        while (reader->read(&batch)) {
            std::vector<proto::ModeChangeEvent> modeChanges;
            std::unique_lock lock(m_mutex);
            for (const auto &event : batch.events()) {
                if (event.has_mode_change()) {
                    modeChanges.push_back(event.mode_change());
                    continue;
                }
                if (event.has_worker_state()) {
                    const auto &status = event.worker_state().status();
                    m_stragglers[status.worker_index()] = status.straggler();
                    continue;
                }
                if (!event.has_step())
                    continue;
                const auto &step = event.step();
                m_telemetryStep = std::max(m_telemetryStep, step.global_step());
                if (step.outcome() != proto::APPLIED && step.outcome() != proto::AGGREGATED)
                    continue;
                auto &[sum, count] = m_staleness[step.worker()];
                sum += double(step.staleness());
                ++count;
                if (step.has_staleness_probe()) {
                    const auto &probe = step.staleness_probe();
                    m_probes.stepsApart += double(probe.fresh_step() - probe.stale_step());
                    m_probes.cosine += double(probe.cosine());
                    m_probes.relativeError += double(probe.relative_error());
                    ++m_probes.count;
                }
            }
            // ps:0's status (every 0.5 s, taken after the batch's events)
            // has every flag: a worker_state event this stream lost while it
            // fell behind must not leave a flag standing in the summaries.
            if (batch.has_status())
                for (const auto &w : batch.status().workers())
                    m_stragglers[w.worker_index()] = w.straggler();
            m_telemetryArrived.notify_all();
            lock.unlock();
            // Outside m_mutex: afterStep takes the writer's lock without it.
            writeModeChanges(modeChanges);
        }
        reader->finish();
        std::unique_lock lock(m_mutex);
        m_watch = nullptr;
        // ps:0 not up yet or gone (the run ended): try again a little later.
        if (m_wake.wait_for(lock, std::chrono::milliseconds(100), [this] { return m_stopping; }))
            return;
    }
}

void TrainingSummaries::write(const tensorboard::Event &event)
{
    std::lock_guard lock(m_writerMutex);
    if (m_writeFailed)
        return;
    if (!m_writer.write(event)) {
        m_writeFailed = true;
        m_log("chief: cannot write " + m_writer.path() + "; no more TensorBoard summaries this run");
    }
}

void TrainingSummaries::writeModeChanges(const std::vector<proto::ModeChangeEvent> &changes)
{
    for (const auto &change : changes) {
        const std::string text = describeModeChange(change);
        if (!m_modeChangesWritten.emplace(change.global_step(), text).second)
            continue;
        tensorboard::Event event;
        event.set_wall_time(change.wall_time());
        event.set_step(change.global_step());
        *event.mutable_summary()->add_value() = textValue(tensorboard_plugins::kModeChangeTag, text);
        write(event);
    }
}

std::string TrainingSummaries::metricTag(const std::string &metricName)
{
    std::string tag = metricName;
    if (const size_t underscore = tag.find('_'); underscore != std::string::npos && underscore > 0)
        tag[underscore] = '/';
    return tag;
}

void TrainingSummaries::afterStep(int64_t globalStep, float batchLoss, const ChiefMeasurement &measured,
                                  const Parameters &params, bool last)
{
    // The chief measures every --display_step of its own steps, summaries
    // follow the global step: keep the newest measurement for the next one.
    if (measured.metrics.size() == m_metricNames.size() && !measured.metrics.empty())
        m_pendingMetrics = measured.metrics;
    if (measured.variables.size() == m_variables.size() && !measured.variables.empty())
        m_pendingVariables = measured.variables;
    const float fullLoss = measured.fullLoss;
    if (globalStep <= m_lastStep)
        return;
    const bool due = m_lastStep < 0 || globalStep / m_everySteps > m_lastStep / m_everySteps;
    if (!due && !last)
        return;
    const double now = wallTime();

    tensorboard::Event event;
    event.set_wall_time(now);
    event.set_step(globalStep);
    auto *summary = event.mutable_summary();
    addScalar(summary, "loss", batchLoss);
    if (std::isfinite(fullLoss))
        addScalar(summary, "full_loss", fullLoss);
    Eigen::Index total = 0;
    for (const auto &p : params)
        total += p.size();
    if (total <= kMaxScalarParameters) {
        for (size_t i = 0; i < params.size() && i < m_variables.size(); ++i)
            for (Eigen::Index j = 0; j < params[i].size(); ++j)
                addScalar(summary,
                          params[i].size() == 1 ? m_variables[i].name : m_variables[i].name + "_" + std::to_string(j),
                          params[i][j]);
    }
    for (size_t i = 0; i < m_pendingMetrics.size(); ++i)
        if (std::isfinite(m_pendingMetrics[i]))
            addScalar(summary, metricTag(m_metricNames[i]), m_pendingMetrics[i]);
    m_pendingMetrics.clear();
    // Grouped by variable, so TensorBoard's tag filter shows one variable's
    // three curves together.
    for (size_t i = 0; i < m_pendingVariables.size(); ++i) {
        const std::string prefix = "variables/" + m_variables[i].name + "/";
        addScalar(summary, prefix + "norm", m_pendingVariables[i].norm);
        addScalar(summary, prefix + "distance_from_start", m_pendingVariables[i].distanceFromStart);
        if (std::isfinite(m_pendingVariables[i].updatePerStep))
            addScalar(summary, prefix + "update_per_step", m_pendingVariables[i].updatePerStep);
    }
    m_pendingVariables.clear();
    if (m_lastStep >= 0 && now > m_lastWallTime)
        addScalar(summary, "updates_per_sec", double(globalStep - m_lastStep) / (now - m_lastWallTime));
    {
        std::unique_lock lock(m_mutex);
        // The last summary speaks for the run's last stretch: give ps:0's
        // telemetry (a batch every 50 ms) a moment to bring its steps, but
        // never hold the chief's exit on a ps:0 that is gone.
        if (last)
            m_telemetryArrived.wait_for(lock, std::chrono::seconds(2),
                                        [&] { return m_stopping || m_telemetryStep >= globalStep; });
        for (auto &[worker, stats] : m_staleness) {
            if (stats.second > 0)
                addScalar(summary, "staleness/worker_" + std::to_string(worker), stats.first / double(stats.second));
            stats = {0.0, 0};
        }
        // 1 while ps:0 flags the worker as a straggler: TensorBoard draws
        // when each was slow next to the loss it cost.
        for (const auto &[worker, flagged] : m_stragglers)
            addScalar(summary, "straggler/worker_" + std::to_string(worker), flagged ? 1.0 : 0.0);
        // The staleness probes since the last summary: what the gradients
        // of this stretch of the run were worth, next to how stale they were.
        if (m_probes.count > 0) {
            const double n = double(m_probes.count);
            addScalar(summary, "staleness_cost/steps_apart", m_probes.stepsApart / n);
            addScalar(summary, "staleness_cost/cosine", m_probes.cosine / n);
            addScalar(summary, "staleness_cost/relative_error", m_probes.relativeError / n);
            m_probes = {};
        }
    }

    // pred = X W + b on the chief's shard: the values for a regression,
    // the predicted class for a classifier.
    if (params.size() == 2 && m_data.size() > 0) {
        const Eigen::Index features = m_data.featureDim();
        const Eigen::Index outputs = params[1].size();
        if (outputs > 0 && params[0].size() == features * outputs) {
            using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
            const Eigen::Map<const RowMajor> w(params[0].data(), features, outputs);
            Eigen::MatrixXf pred = m_data.features * w;
            pred.rowwise() += params[1].transpose();
            std::vector<double> values;
            values.reserve(size_t(pred.rows()));
            for (Eigen::Index r = 0; r < pred.rows(); ++r) {
                Eigen::Index best = 0;
                if (outputs > 1)
                    pred.row(r).maxCoeff(&best);
                values.push_back(outputs > 1 ? double(best) : double(pred(r, 0)));
            }
            auto *histogram = summary->add_value();
            histogram->set_tag("pred");
            *histogram->mutable_histo() = makeHistogram(values);
        }
    }

    write(event);
    m_lastStep = globalStep;
    m_lastWallTime = now;
}

} // namespace parasync
