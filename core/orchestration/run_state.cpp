#include "orchestration/run_state.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/update_modes.h"
#include "engine/variable_placement.h"
#include "formats/event_file.h"
#include "formats/run_log.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace parasync {

namespace {

constexpr size_t kStalenessBins = 16; // 0..14, and ">= 15"
constexpr double kRateWindowSeconds = 2.0;
constexpr double kRateSampleSeconds = 0.05;
constexpr int kMaxWorkerIndex = 1 << 16;    // guards the workers vector against a corrupt record
constexpr int64_t kMaxNamedParameters = 16; // as ps:0's metrics.csv columns
constexpr size_t kMaxMetrics = 32;          // as ps:0 accepts in a model signature
// Series sets kept for variables named by no signature yet: a bound on what
// a stranger's step events can make the app allocate.
constexpr size_t kMaxVariables = 256;

void mergeInto(DecimatedSeries::Bucket &into, const DecimatedSeries::Bucket &from)
{
    into.min = std::min(into.min, from.min);
    into.max = std::max(into.max, from.max);
    into.sum += from.sum;
    into.count += from.count;
    into.last = from.last;
}

} // namespace

// ---------------------------------------------------------------------------
// DecimatedSeries
// ---------------------------------------------------------------------------

DecimatedSeries::DecimatedSeries(size_t capacity) : m_capacity(std::max<size_t>(capacity, 2))
{
    m_buckets.reserve(m_capacity);
}

void DecimatedSeries::append(double x, double y)
{
    if (!std::isfinite(y) || std::isnan(x))
        return;
    ++m_total;
    if (!m_buckets.empty()) {
        Bucket &last = m_buckets.back();
        // An older x (telemetry of interleaved workers is not strictly
        // ordered) joins the last bucket so that bucket x never decreases.
        if (x < last.x || double(last.count) < m_width) {
            last.min = std::min(last.min, y);
            last.max = std::max(last.max, y);
            last.sum += y;
            ++last.count;
            last.last = y;
            return;
        }
        if (m_buckets.size() >= m_capacity)
            compact();
    }
    m_buckets.push_back(Bucket{x, y, y, y, y, 1});
}

void DecimatedSeries::compact()
{
    // Pairs merge in place: bucket i takes 2i and 2i+1. O(capacity), once per
    // capacity/2 appends, so appending stays O(1) amortised.
    size_t out = 0;
    for (size_t i = 0; i < m_buckets.size(); i += 2, ++out) {
        Bucket merged = m_buckets[i];
        if (i + 1 < m_buckets.size())
            mergeInto(merged, m_buckets[i + 1]);
        m_buckets[out] = merged;
    }
    m_buckets.resize(out);
    m_width *= 2;
}

void DecimatedSeries::clear()
{
    m_buckets.clear();
    m_width = 1;
    m_total = 0;
}

// ---------------------------------------------------------------------------
// RunState
// ---------------------------------------------------------------------------

RunState::RunState(size_t recentStepCapacity, size_t seriesCapacity)
    : m_recentCapacity(std::max<size_t>(recentStepCapacity, 1))
    , m_seriesCapacity(seriesCapacity)
{
    clear();
}

void RunState::clear()
{
    m_snapshot = RunSnapshot();
    m_snapshot.fullLoss = DecimatedSeries(m_seriesCapacity);
    m_snapshot.fullLossByTime = DecimatedSeries(m_seriesCapacity);
    m_modeKnown = false;
    m_provisionalNames = false;
    m_provisionalMetricNames = false;
    m_provisionalVariableNames = false;
    m_recent.clear();
    m_rates.clear();
    m_globalSteps = {};
    m_stalenessCost.clear();
    m_psClock = 0;
}

WorkerFigures &RunState::worker(int index)
{
    auto &workers = m_snapshot.workers;
    const size_t slot = size_t(std::clamp(index, 0, kMaxWorkerIndex));
    while (workers.size() <= slot) {
        WorkerFigures figures;
        figures.index = int(workers.size());
        figures.stalenessHistogram.assign(kStalenessBins, 0);
        workers.push_back(std::move(figures));
    }
    return workers[slot];
}

void RunState::setParameterNames(std::vector<std::string> names)
{
    m_provisionalNames = false;
    if (names == m_snapshot.parameterNames)
        return;
    m_snapshot.parameterNames = std::move(names);
    m_snapshot.parameterSeries.assign(m_snapshot.parameterNames.size(), DecimatedSeries(m_seriesCapacity));
}

void RunState::setMetricNames(std::vector<std::string> names)
{
    const bool keepSeries = m_provisionalMetricNames && names.size() == m_snapshot.metricSeries.size();
    m_provisionalMetricNames = false;
    if (names == m_snapshot.metricNames)
        return;
    m_snapshot.metricNames = std::move(names);
    if (!keepSeries)
        m_snapshot.metricSeries.assign(m_snapshot.metricNames.size(), DecimatedSeries(m_seriesCapacity));
}

void RunState::setVariableNames(std::vector<std::string> names)
{
    const bool keepSeries = m_provisionalVariableNames && names.size() == m_snapshot.variableSeries.size();
    m_provisionalVariableNames = false;
    if (names == m_snapshot.variableNames)
        return;
    m_snapshot.variableNames = std::move(names);
    if (!keepSeries)
        m_snapshot.variableSeries.assign(m_snapshot.variableNames.size(), VariableSeries(m_seriesCapacity));
}

void RunState::setSignature(const proto::ModelSignature &signature)
{
    if (signature.variables_size() == 0)
        return; // not initialised yet
    m_snapshot.signature = signature;
    setMetricNames({signature.metric_names().begin(), signature.metric_names().end()});
    std::vector<std::string> variableNames;
    for (const auto &variable : signature.variables())
        variableNames.push_back(variable.name());
    setVariableNames(std::move(variableNames));
    if (m_snapshot.parameterNames.empty() || m_provisionalNames)
        setNamesFromSignature(signature);
}

void RunState::setNamesFromSignature(const proto::ModelSignature &signature)
{
    // The same names ps:0 gives metrics.csv's columns: a size-1 variable by
    // its name, larger ones element by element, nothing for large models.
    std::vector<std::string> names;
    int64_t total = 0;
    for (const auto &variable : signature.variables()) {
        int64_t size = 1;
        for (const auto dimension : variable.shape())
            size *= dimension;
        total += size;
        if (total > kMaxNamedParameters)
            return;
        for (int64_t i = 0; i < size; ++i)
            names.push_back(size == 1 ? variable.name() : variable.name() + "[" + std::to_string(i) + "]");
    }
    if (names.empty())
        return;
    // Values that arrived before the signature keep their series.
    if (m_provisionalNames && names.size() == m_snapshot.parameterSeries.size()) {
        m_snapshot.parameterNames = std::move(names);
        m_provisionalNames = false;
        return;
    }
    setParameterNames(std::move(names));
}

void RunState::apply(const proto::TelemetryEvent &event)
{
    if (event.has_step()) {
        const auto &s = event.step();
        StepRecord step;
        step.globalStep = s.global_step();
        step.wallTime = s.wall_time();
        step.worker = s.worker();
        step.workerClock = s.worker_clock();
        step.staleness = s.staleness();
        step.computedFromStep = s.computed_from_step();
        step.batchLoss = s.batch_loss();
        step.fullLoss = s.full_loss();
        step.outcome = s.outcome();
        step.contributions = s.contributions();
        step.computeUs = s.compute_us();
        step.pushUs = s.push_us();
        step.waitUs = s.wait_us();
        step.waitReason = s.wait_reason();
        step.parameters.assign(s.parameters().begin(), s.parameters().end());
        step.metrics.assign(s.metrics().begin(), s.metrics().end());
        for (const auto &v : s.variable_summaries())
            step.variables.push_back({v.norm(), v.distance_from_start(), v.update_per_step()});
        if (s.learning_rate_scale() > 0)
            step.learningRateScale = s.learning_rate_scale();
        if (s.has_staleness_probe())
            step.probe = StepRecord::Probe{s.staleness_probe().stale_step(), s.staleness_probe().fresh_step(),
                                           s.staleness_probe().cosine(), s.staleness_probe().relative_error()};
        addStep(step);
    } else if (event.has_mode_change()) {
        const auto &m = event.mode_change();
        ModeMarker marker;
        marker.globalStep = m.global_step();
        marker.wallTime = m.wall_time();
        marker.previous = m.previous();
        marker.current = m.current();
        marker.requestedBy = m.requested_by();
        addModeChange(marker);
    } else if (event.has_worker_state()) {
        const auto &status = event.worker_state().status();
        WorkerFigures &figures = worker(status.worker_index());
        figures.phase = status.phase();
        figures.waitingFor = status.waiting_for();
        figures.reason = status.reason();
        figures.clock = std::max(figures.clock, status.worker_clock());
        if (status.pid() != 0)
            figures.pid = status.pid();
        if (status.phase() == proto::FINISHED || status.phase() == proto::DEAD || status.phase() == proto::STOPPED)
            figures.stepsPerSecond = 0;
        applyStraggler(figures, status, event.worker_state().wall_time());
        m_snapshot.lastWallTime = std::max(m_snapshot.lastWallTime, event.worker_state().wall_time());
    } else if (event.has_checkpoint()) {
        const auto &c = event.checkpoint();
        m_snapshot.checkpoints.emplace_back(c.global_step(), c.wall_time());
    } else if (event.has_failover()) {
        const auto &f = event.failover();
        m_snapshot.failovers.push_back({f.global_step(), f.wall_time(), f.new_primary(), f.old_primary(), f.reason()});
    }
}

void RunState::apply(const proto::TelemetryBatch &batch)
{
    for (const auto &event : batch.events())
        apply(event);
    m_snapshot.lostEvents += batch.lost_events();
    m_psClock = std::max(m_psClock, batch.wall_time());
    // ps:0 takes the status after collecting the batch's events, so it is
    // at least as new as they are.
    if (batch.has_status())
        applyStatus(batch.status());
    if (batch.cluster_finished())
        m_snapshot.finished = true;
}

void RunState::applyStraggler(WorkerFigures &figures, const proto::WorkerStatus &status, double wallTime)
{
    figures.secondsPerStep = status.seconds_per_step();
    if (status.straggler() == figures.straggler)
        return;
    figures.straggler = status.straggler();
    m_snapshot.stragglerChanges.push_back(
        {figures.index, m_snapshot.globalStep, wallTime, figures.straggler, figures.secondsPerStep});
}

void RunState::applyStatus(const proto::ClusterStatusResponse &status)
{
    m_snapshot.globalStep = std::max(m_snapshot.globalStep, status.global_step());
    if (status.has_mode() && status.mode().mode() != proto::UPDATE_MODE_UNSPECIFIED) {
        m_snapshot.mode = status.mode();
        m_modeKnown = true;
    }
    m_snapshot.lastStep = status.last_step();
    m_snapshot.initialized = status.initialized();
    m_snapshot.droppedTotal = status.dropped_total();
    m_snapshot.stallSeconds = status.stall().seconds();
    m_snapshot.stallWaitingFor = status.stall().waiting_for();
    m_snapshot.recordsProblem = status.records_problem();
    m_snapshot.actingChief = status.acting_chief();
    m_snapshot.psHosts.assign(status.ps_hosts().begin(), status.ps_hosts().end());
    m_snapshot.psReplica = status.replica();
    m_snapshot.workerHosts.assign(status.worker_hosts().begin(), status.worker_hosts().end());
    if (!status.cluster_json().empty())
        m_snapshot.trainingJson = status.cluster_json();
    if (status.has_signature())
        setSignature(status.signature());
    for (const auto &w : status.workers()) {
        WorkerFigures &figures = worker(w.worker_index());
        figures.phase = w.phase();
        figures.clock = std::max(figures.clock, w.worker_clock());
        // A late subscriber never saw the first steps, and lost events are
        // not counted locally, so ps:0's counts may be higher; but its status
        // can also count steps whose events are still on their way, and adding
        // those twice would overcount: the larger of the two is right.
        Rate &rate = m_rates[figures.index];
        rate.appliedReported = w.applied();
        rate.droppedReported = w.dropped();
        figures.applied = std::max(rate.appliedSeen, rate.appliedReported);
        figures.dropped = std::max(rate.droppedSeen, rate.droppedReported);
        rate.nonfiniteReported = w.nonfinite();
        figures.nonfinite = std::max(rate.rejectedSeen, rate.nonfiniteReported);
        figures.waitingFor = w.waiting_for();
        figures.reason = w.reason();
        if (w.pid() != 0)
            figures.pid = w.pid();
        if (w.phase() == proto::FINISHED || w.phase() == proto::DEAD || w.phase() == proto::STOPPED)
            figures.stepsPerSecond = 0;
        applyStraggler(figures, w, m_psClock);
    }
    // One entry per worker of the spec, even those ps:0 has not seen.
    if (status.worker_hosts_size() > 0)
        worker(status.worker_hosts_size() - 1);
}

void RunState::addStep(const StepRecord &step)
{
    RunSnapshot &s = m_snapshot;
    ++s.stepEvents;
    s.globalStep = std::max(s.globalStep, step.globalStep);
    if (s.startWallTime == 0 || step.wallTime < s.startWallTime)
        s.startWallTime = step.wallTime;
    s.lastWallTime = std::max(s.lastWallTime, step.wallTime);

    // Only applied or aggregated gradients changed the model; stale ones
    // were dropped; any other outcome (unknown to this build) is neither.
    const bool counted = step.outcome == proto::APPLIED || step.outcome == proto::AGGREGATED;
    WorkerFigures &figures = worker(step.worker);
    Rate &rate = m_rates[figures.index];
    figures.clock = std::max(figures.clock, step.workerClock);
    if (step.outcome == proto::DROPPED_STALE)
        figures.dropped = std::max(++rate.droppedSeen, rate.droppedReported);
    else if (step.outcome == proto::REJECTED_NONFINITE)
        figures.nonfinite = std::max(++rate.rejectedSeen, rate.nonfiniteReported);
    else if (counted)
        figures.applied = std::max(++rate.appliedSeen, rate.appliedReported);
    if (figures.phase == proto::WORKER_PHASE_UNSPECIFIED || figures.phase == proto::WAITING_FOR_CHIEF)
        figures.phase = proto::TRAINING;
    if (step.staleness >= 0) {
        const size_t bin = std::min<size_t>(size_t(step.staleness), kStalenessBins - 1);
        ++figures.stalenessHistogram[bin];
    }
    if (step.probe)
        m_stalenessCost.add(step.probe->freshStep - step.probe->staleStep, step.probe->cosine,
                            step.probe->relativeError);

    rate.computeUs += step.computeUs;
    rate.pushUs += step.pushUs;
    rate.waitUs += step.waitUs;
    const int64_t busy = rate.computeUs + rate.pushUs + rate.waitUs;
    figures.waitFraction = busy > 0 ? double(rate.waitUs) / double(busy) : 0;
    rate.steps.record(step.wallTime, step.workerClock);
    if (counted)
        m_globalSteps.record(step.wallTime, step.globalStep);

    m_recent.push_back(step);
    while (m_recent.size() > m_recentCapacity)
        m_recent.pop_front();

    // A gradient that was not applied changed nothing: its loss is not a
    // point of the run.
    if (!counted)
        return;
    const double x = double(step.globalStep);
    s.batchLossByWorker.try_emplace(figures.index, m_seriesCapacity).first->second.append(x, step.batchLoss);
    if (std::isfinite(step.fullLoss)) {
        s.fullLoss.append(x, step.fullLoss);
        s.fullLossByTime.append(step.wallTime - s.startWallTime, step.fullLoss);
    }
    // Steps can come before the status that names the parameters (a short
    // run, a watcher that connected before the chief initialised): keep the
    // values under provisional names rather than lose them.
    if (s.parameterNames.empty() && !step.parameters.empty()
        && int64_t(step.parameters.size()) <= kMaxNamedParameters) {
        std::vector<std::string> names;
        for (size_t i = 0; i < step.parameters.size(); ++i)
            names.push_back("param[" + std::to_string(i) + "]");
        setParameterNames(std::move(names));
        m_provisionalNames = true;
    }
    // The values are those the gradient was computed from: they belong to
    // computedFromStep, not to the step the update produced.
    const size_t n = std::min(step.parameters.size(), s.parameterSeries.size());
    for (size_t i = 0; i < n; ++i)
        s.parameterSeries[i].append(double(step.computedFromStep), step.parameters[i]);
    // Metrics before the signature that names them: kept, as parameters are.
    if (step.metrics.size() > s.metricSeries.size() && step.metrics.size() <= kMaxMetrics) {
        std::vector<std::string> names = s.metricNames;
        for (size_t i = names.size(); i < step.metrics.size(); ++i)
            names.push_back("metric[" + std::to_string(i) + "]");
        s.metricNames = std::move(names);
        s.metricSeries.resize(s.metricNames.size(), DecimatedSeries(m_seriesCapacity));
        m_provisionalMetricNames = true;
    }
    // Measured on the parameters the gradient was computed from, as above.
    const size_t m = std::min(step.metrics.size(), s.metricSeries.size());
    for (size_t i = 0; i < m; ++i)
        s.metricSeries[i].append(double(step.computedFromStep), step.metrics[i]);
    // Variable summaries before the signature that names them: kept too.
    if (step.variables.size() > s.variableSeries.size() && step.variables.size() <= kMaxVariables) {
        std::vector<std::string> names = s.variableNames;
        for (size_t i = names.size(); i < step.variables.size(); ++i)
            names.push_back("variable[" + std::to_string(i) + "]");
        s.variableNames = std::move(names);
        s.variableSeries.resize(s.variableNames.size(), VariableSeries(m_seriesCapacity));
        m_provisionalVariableNames = true;
    }
    const double at = double(step.computedFromStep);
    const size_t v = std::min(step.variables.size(), s.variableSeries.size());
    for (size_t i = 0; i < v; ++i) {
        s.variableSeries[i].norm.append(at, step.variables[i].norm);
        s.variableSeries[i].distanceFromStart.append(at, step.variables[i].distanceFromStart);
        s.variableSeries[i].updatePerStep.append(at, step.variables[i].updatePerStep); // NaN at the first: skipped
    }
}

void RunState::addModeChange(const ModeMarker &marker)
{
    m_snapshot.modeChanges.push_back(marker);
    m_snapshot.mode = marker.current;
    m_modeKnown = true;
    m_snapshot.globalStep = std::max(m_snapshot.globalStep, marker.globalStep);
    m_snapshot.lastWallTime = std::max(m_snapshot.lastWallTime, marker.wallTime);
}

void RunState::setClusterJson(const std::string &json)
{
    const QJsonObject root = QJsonDocument::fromJson(QByteArray::fromStdString(json)).object();
    if (root.isEmpty())
        return;
    const QJsonObject cluster = root.value(QStringLiteral("cluster")).toObject();
    const auto hosts = [](const QJsonValue &value) {
        std::vector<std::string> out;
        for (const auto &host : value.toArray())
            out.push_back(host.toString().toStdString());
        return out;
    };
    if (!cluster.isEmpty()) {
        m_snapshot.psHosts = hosts(cluster.value(QStringLiteral("ps")));
        m_snapshot.workerHosts = hosts(cluster.value(QStringLiteral("worker")));
        if (!m_snapshot.workerHosts.empty())
            worker(int(m_snapshot.workerHosts.size()) - 1);
    }
    const QJsonObject training
        = root.contains(QStringLiteral("training")) ? root.value(QStringLiteral("training")).toObject() : root;
    if (training.isEmpty())
        return;
    m_snapshot.trainingJson = QJsonDocument(training).toJson(QJsonDocument::Compact).toStdString();
    if (training.contains(QStringLiteral("last_step")))
        m_snapshot.lastStep = int64_t(training.value(QStringLiteral("last_step")).toDouble());
    if (!m_modeKnown && training.contains(QStringLiteral("mode"))) {
        // An unknown mode name reads as unspecified: left unknown rather than guessed.
        if (const proto::ModeConfig mode = modeFromJson(training); mode.mode() != proto::UPDATE_MODE_UNSPECIFIED) {
            m_snapshot.mode = mode;
            m_modeKnown = true;
        }
    }
}

RunSnapshot RunState::snapshot() const
{
    RunSnapshot out = m_snapshot;
    out.recentSteps.assign(m_recent.begin(), m_recent.end());
    out.stalenessProbes = int64_t(m_stalenessCost.count());
    for (const StalenessCostTable::Bucket &bucket : m_stalenessCost.buckets())
        if (bucket.count() > 0)
            out.stalenessCost.push_back({bucket.label(), bucket.lowest, int64_t(bucket.count()), bucket.medianCosine(),
                                         bucket.medianRelativeError()});
    // Steps per second over the last ~2 s of the run's own clock (ps:0's),
    // so a replay shows the speeds the run had, and a worker that stopped
    // while others go on falls to 0. Live, ps:0's clock also moves with the
    // batches it sends, so a cluster that stands still falls to 0 too.
    const double now = std::max(m_snapshot.lastWallTime, m_psClock);
    out.gradientsPerSecond = 0;
    for (auto &figures : out.workers) {
        const auto it = m_rates.find(figures.index);
        const bool gone
            = figures.phase == proto::FINISHED || figures.phase == proto::DEAD || figures.phase == proto::STOPPED;
        const double rate = it == m_rates.end() ? 0 : it->second.steps.perSecond(now);
        // A worker that is gone steps no more: its own figure reads 0 at
        // once. The cluster's gradients/s counts what arrived in the window,
        // its last ones too, as the step log does.
        figures.stepsPerSecond = gone ? 0 : rate;
        out.gradientsPerSecond += rate;
    }
    out.globalStepsPerSecond = m_globalSteps.perSecond(now);
    out.rateClock = now;
    return out;
}

void WindowedRate::record(double time, int64_t count)
{
    m_latestTime = std::max(m_latestTime, time);
    m_latestCount = std::max(m_latestCount, count);
    // Samples ~50 ms apart, the newest always the latest record: a burst that
    // ends (a straggler slows a sync step to seconds) must not leave its last
    // 50 ms uncounted in the base, or later rates come out too high.
    const size_t n = m_samples.size();
    if (n >= 2 && time >= m_samples.back().first && time - m_samples[n - 2].first < kRateSampleSeconds)
        m_samples.back() = {time, std::max(m_samples.back().second, count)};
    else if (n == 0 || time > m_samples.back().first)
        m_samples.emplace_back(time, count);
    // Keep one sample at or before the window's start as the rate's base.
    while (m_samples.size() > 2 && m_samples[1].first <= m_latestTime - kRateWindowSeconds)
        m_samples.pop_front();
}

double WindowedRate::perSecond(double now) const
{
    if (m_samples.empty() || m_latestTime < now - kRateWindowSeconds)
        return 0;
    // The newest sample at or before the window's start is the base.
    auto base = m_samples.front();
    for (const auto &sample : m_samples) {
        if (sample.first > now - kRateWindowSeconds)
            break;
        base = sample;
    }
    const double span = now - base.first;
    return span > 0 ? double(m_latestCount - base.second) / span : 0;
}

std::vector<std::string> variablesHeldByPs(const proto::ModelSignature &signature, int numPs)
{
    if ((signature.variables_size() == 0 && signature.tables_size() == 0) || numPs < 1)
        return {};
    std::vector<std::string> held(static_cast<size_t>(numPs));
    if (signature.variables_size() > 0) {
        try {
            const VariablePlacement placement = VariablePlacement::fromSignature(signature, numPs);
            for (int k = 0; k < numPs; ++k)
                held[size_t(k)] = placement.describe(k);
        } catch (const InputError &) {
            return {}; // ps:0 refuses such a signature; nothing to show
        }
    }
    // A table's rows are placed by their ids' hash, not by ranges: which
    // rows, and how many, each task holds is the Tables tab's live figure.
    for (const proto::TableSpec &table : signature.tables()) {
        const std::string rows
            = "table " + table.name()
              + (numPs == 1 ? ": every row" : ": 1/" + std::to_string(numPs) + " of its rows, by id hash");
        for (std::string &text : held)
            text += (text.empty() ? "" : ", ") + rows;
    }
    return held;
}

std::string describeStragglers(const RunSnapshot &snapshot)
{
    if (snapshot.finished)
        return {};
    std::vector<int> flagged;
    std::vector<double> slowest; // the flagged workers' paces
    std::vector<double> others;
    int live = 0;
    for (const WorkerFigures &w : snapshot.workers) {
        if (w.phase != proto::TRAINING && w.phase != proto::BLOCKED_BY_SYNC && w.phase != proto::BLOCKED_BY_STALENESS)
            continue;
        ++live;
        if (w.straggler) {
            flagged.push_back(w.index);
            slowest.push_back(w.secondsPerStep);
        } else if (w.secondsPerStep > 0) {
            others.push_back(w.secondsPerStep);
        }
    }
    if (flagged.empty())
        return {};
    const auto seconds = [](double value) {
        char text[32];
        std::snprintf(text, sizeof text, value < 1 ? "%.3f s" : "%.2f s", value);
        return std::string(text);
    };
    const int count = int(flagged.size());
    std::string text;
    for (int i = 0; i < count; ++i)
        text += (i == 0           ? ""
                 : i + 1 == count ? " and "
                                  : ", ")
                + std::string("worker:") + std::to_string(flagged[i]) + " (" + seconds(slowest[size_t(i)]) + " a step)";
    text += count == 1 ? " is a straggler" : " are stragglers";
    if (!others.empty()) {
        std::sort(others.begin(), others.end());
        const size_t middle = others.size() / 2;
        const double median = others.size() % 2 == 1 ? others[middle] : 0.5 * (others[middle - 1] + others[middle]);
        text += ": the others take " + seconds(median) + " a step, not counting the time ps:0 holds them";
    }
    text += ".";
    const std::string them = count == 1 ? "it" : "them";
    switch (snapshot.mode.mode()) {
    case proto::SYNC: {
        const int aggregated = snapshot.mode.replicas_to_aggregate();
        if (aggregated > 0 && aggregated < live)
            text += " A sync step aggregates " + std::to_string(aggregated) + " of the " + std::to_string(live)
                    + " live workers' gradients (--replicas_to_aggregate): it closes without the slowest.";
        else if (live - count >= 1)
            text += " Every sync step waits for " + them
                    + "; with --replicas_to_aggregate=" + std::to_string(live - count) + " (" + std::to_string(count)
                    + " backup worker" + (count == 1 ? "" : "s") + ") the steps would not.";
        break;
    }
    case proto::SSP:
        text += " The staleness bound holds the others whenever they get too far ahead of " + them + ".";
        break;
    case proto::ASYNC:
        text += " In async nobody waits for " + them + ", but " + (count == 1 ? "its" : "their")
                + " gradients arrive staler than the others'.";
        break;
    default: break;
    }
    return text;
}

} // namespace parasync
