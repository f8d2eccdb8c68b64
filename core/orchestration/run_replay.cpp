#include "orchestration/run_replay.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/update_modes.h"
#include "formats/event_file.h"
#include "formats/run_log.h"
#include "formats/step_log_reader.h"
#include "formats/step_records.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <limits>

namespace parasync {

namespace {

// The step log's records into the run state, as they came live.
class StepLogReplay : public StepLogVisitor
{
public:
    explicit StepLogReplay(RunState *state) : m_state(state) {}

    void parameterNames(const std::vector<std::string> &names) override { m_state->setParameterNames(names); }
    void metricNames(const std::vector<std::string> &names) override { m_state->setMetricNames(names); }
    void variableNames(const std::vector<std::string> &names) override { m_state->setVariableNames(names); }
    void step(const StepRecord &step) override { m_state->addStep(step); }
    void modeChange(const ModeMarker &change) override { m_state->addModeChange(change); }
    void event(const proto::TelemetryEvent &event) override
    {
        if (event.has_worker_state())
            m_lastPhase[event.worker_state().status().worker_index()] = event.worker_state().status().phase();
        m_state->apply(event);
    }

    // A run whose every worker left, finished or dead, is over; one killed
    // mid-run is not.
    bool over() const
    {
        bool over = !m_lastPhase.empty();
        for (const auto &[worker, phase] : m_lastPhase)
            over = over && (phase == proto::FINISHED || phase == proto::DEAD || phase == proto::STOPPED);
        return over;
    }

private:
    RunState *m_state;
    std::map<int, proto::WorkerPhase> m_lastPhase;
};

void replayStepLog(StepLogReader &log, RunState *state, RunDirectoryInfo *info)
{
    StepLogReplay replay(state);
    const StepLogCounts counts = readStepLog(log, replay);
    info->records += counts.records;
    info->skippedLines += counts.skippedLines;
    state->setFinished(replay.over());
}

void replayMetrics(const QString &path, RunState *state, RunDirectoryInfo *info)
{
    const MetricsCsv csv = readMetricsCsv(path);
    info->skippedLines += csv.skippedLines;
    state->setParameterNames(csv.parameterNames);
    state->setMetricNames(csv.metricNames);
    for (const StepRecord &step : csv.steps) {
        ++info->records;
        state->addStep(step);
    }
}

} // namespace

RunDirectoryInfo replayRunDirectory(const std::string &directory, RunState *state)
{
    RunDirectoryInfo info;
    info.directory = directory;
    const QDir dir(qs(directory));
    if (!dir.exists())
        throw InputError("cannot open the run directory " + directory + ": it does not exist");

    QFile cluster(dir.filePath(QLatin1String(run_files::kCluster)));
    if (cluster.open(QIODevice::ReadOnly))
        info.clusterJson = cluster.readAll().toStdString();

    StepLogReader stepLog(dir.path());
    QFile metrics(dir.filePath(QLatin1String(run_files::kMetrics)));
    const bool haveStepLog = stepLog.exists();
    if (!haveStepLog && !metrics.exists()) {
        // A chief's --logdir on another machine holds only its TensorBoard
        // event files: they carry the chief's loss and parameters.
        if (!findEventFiles(directory).empty()) {
            state->clear();
            if (!info.clusterJson.empty())
                state->setClusterJson(info.clusterJson);
            replayEventFiles(directory, state, &info);
            return info;
        }
        throw InputError("no run in " + directory + ": it holds neither " + run_files::kStepLog + " nor "
                         + run_files::kMetrics + " nor TensorBoard event files (open the --logdir of a run)");
    }

    state->clear();
    if (!info.clusterJson.empty())
        state->setClusterJson(info.clusterJson);
    if (proto::ModelSignature signature; readRunModelJson(directory, &signature))
        state->setSignature(signature);
    if (haveStepLog) {
        replayStepLog(stepLog, state, &info);
        QFile records(dir.filePath(QLatin1String(run_files::kRecords)));
        if (records.open(QIODevice::ReadOnly))
            info.recordsNote = QJsonDocument::fromJson(records.readAll())
                                   .object()
                                   .value(QStringLiteral("said"))
                                   .toString()
                                   .toStdString();
    } else {
        replayMetrics(metrics.fileName(), state, &info);
        // metrics.csv does not say when workers left; reaching --last_step does.
        const RunSnapshot replayed = state->snapshot();
        state->setFinished(replayed.lastStep > 0 && replayed.globalStep >= replayed.lastStep);
    }
    return info;
}

void replayEventFiles(const std::string &directory, RunState *state, RunDirectoryInfo *info)
{
    // Tags the chief writes that are not model parameters (see
    // TrainingSummaries); every other scalar tag without a '/' is one.
    const auto isParameterTag = [](const std::string &tag) {
        return tag != "loss" && tag != "full_loss" && tag != "updates_per_sec" && tag.find('/') == std::string::npos;
    };
    // "variables/<name>/norm", ".../distance_from_start", ".../update_per_step":
    // one variable's summaries (a name may hold '/' itself: "hidden/w").
    static const std::string kVariables = "variables/";
    const auto isVariableTag = [](const std::string &tag) { return tag.rfind(kVariables, 0) == 0; };
    const auto variableNameOf = [](const std::string &tag) {
        const size_t last = tag.rfind('/');
        return last > kVariables.size() ? tag.substr(kVariables.size(), last - kVariables.size()) : std::string();
    };
    // A grouped tag other than the staleness, its cost, the straggler flags
    // and the variables is a metric ("heldout/loss" is the metric
    // "heldout_loss", as TrainingSummaries::metricTag names it).
    const auto metricNameOf = [&](std::string tag) {
        if (tag.rfind("staleness/", 0) == 0 || tag.rfind("staleness_cost/", 0) == 0 || tag.rfind("straggler/", 0) == 0
            || isVariableTag(tag) || tag.find('/') == std::string::npos)
            return std::string();
        tag[tag.find('/')] = '_';
        return tag;
    };
    std::vector<std::string> names;
    std::vector<std::string> metricNames;
    std::vector<std::string> variableNames;
    std::vector<tensorboard::Event> summaries;
    for (const std::string &path : findEventFiles(directory)) {
        for (auto &event : readEventFile(path)) {
            ++info->records;
            // The hparams and the mode changes' text hold no scalar: not a step.
            const auto &values = event.summary().value();
            if (!event.has_summary()
                || std::none_of(values.begin(), values.end(), [](const auto &v) { return v.has_simple_value(); }))
                continue;
            for (const auto &value : values) {
                if (!value.has_simple_value())
                    continue;
                const std::string metric = metricNameOf(value.tag());
                if (!metric.empty() && std::find(metricNames.begin(), metricNames.end(), metric) == metricNames.end())
                    metricNames.push_back(metric);
                if (isParameterTag(value.tag()) && std::find(names.begin(), names.end(), value.tag()) == names.end())
                    names.push_back(value.tag());
                const std::string variable = isVariableTag(value.tag()) ? variableNameOf(value.tag()) : "";
                if (!variable.empty()
                    && std::find(variableNames.begin(), variableNames.end(), variable) == variableNames.end())
                    variableNames.push_back(variable);
            }
            summaries.push_back(std::move(event));
        }
    }
    state->setParameterNames(names);
    state->setMetricNames(metricNames);
    state->setVariableNames(variableNames);
    int64_t clock = 0;
    for (const auto &event : summaries) {
        StepRecord step;
        step.globalStep = event.step();
        step.computedFromStep = event.step() - 1;
        step.wallTime = event.wall_time();
        step.worker = 0; // the chief writes the summaries
        step.workerClock = ++clock;
        step.staleness = -1;
        step.batchLoss = std::numeric_limits<float>::quiet_NaN();
        step.fullLoss = std::numeric_limits<float>::quiet_NaN();
        step.parameters.assign(names.size(), std::numeric_limits<float>::quiet_NaN());
        step.metrics.assign(metricNames.size(), std::numeric_limits<float>::quiet_NaN());
        constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
        step.variables.assign(variableNames.size(), VariableSummary{kNaN, kNaN, kNaN});
        bool measuredVariables = false;
        for (const auto &value : event.summary().value()) {
            if (!value.has_simple_value())
                continue;
            const std::string &tag = value.tag();
            if (isVariableTag(tag)) {
                const auto v = std::find(variableNames.begin(), variableNames.end(), variableNameOf(tag));
                if (v == variableNames.end())
                    continue;
                VariableSummary &summary = step.variables[size_t(v - variableNames.begin())];
                const std::string stat = tag.substr(tag.rfind('/') + 1);
                if (stat == "norm")
                    summary.norm = value.simple_value();
                else if (stat == "distance_from_start")
                    summary.distanceFromStart = value.simple_value();
                else if (stat == "update_per_step")
                    summary.updatePerStep = value.simple_value();
                measuredVariables = true;
            } else if (tag == "loss")
                step.batchLoss = value.simple_value();
            else if (tag == "full_loss")
                step.fullLoss = value.simple_value();
            else if (tag == "staleness/worker_0")
                step.staleness = int64_t(std::lround(value.simple_value()));
            else if (const auto it = std::find(names.begin(), names.end(), tag); it != names.end())
                step.parameters[size_t(it - names.begin())] = value.simple_value();
            else if (const auto m = std::find(metricNames.begin(), metricNames.end(), metricNameOf(tag));
                     m != metricNames.end())
                step.metrics[size_t(m - metricNames.begin())] = value.simple_value();
        }
        if (std::all_of(step.metrics.begin(), step.metrics.end(), [](float v) { return std::isnan(v); }))
            step.metrics.clear();
        if (std::all_of(step.parameters.begin(), step.parameters.end(), [](float v) { return std::isnan(v); }))
            step.parameters.clear();
        if (!measuredVariables)
            step.variables.clear();
        state->addStep(step);
    }
}

} // namespace parasync
