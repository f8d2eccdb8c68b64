#include "orchestration/run_replay.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/update_modes.h"
#include "formats/event_file.h"
#include "formats/run_log.h"
#include "formats/step_log_reader.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace parasync {

namespace {

// JSON null (a NaN loss in the log) reads as NaN, not 0.
float floatOrNan(const QJsonValue &value)
{
    return value.isDouble() ? float(value.toDouble()) : std::numeric_limits<float>::quiet_NaN();
}

// The keys of a step record that are not parameters.
const std::set<QString> &stepKeys()
{
    static const std::set<QString> keys = [] {
        std::set<QString> k;
        for (const char *name :
             {"type", "global_step", "wall_time", "worker", "worker_clock", "computed_from_step", "staleness",
              "outcome", "contributions", "batch_loss", "full_loss", "compute_us", "push_us", "wait_us", "wait_reason",
              "metrics", "variables", "learning_rate_scale", "staleness_probe"})
            k.insert(QString::fromLatin1(name));
        return k;
    }();
    return keys;
}

// The keys of `object` (skipping `skipped`) in the order `line` has them
// (a JSON object sorts its keys; "w" must stay before "b"). `from` is where
// the object starts in the line.
std::vector<std::string> keysInLineOrder(const QJsonObject &object, const QByteArray &line,
                                         const std::set<QString> &skipped, qsizetype from = 0)
{
    std::vector<std::pair<qsizetype, std::string>> found;
    for (auto it = object.begin(); it != object.end(); ++it) {
        if (skipped.count(it.key()))
            continue;
        const QByteArray quotedKey = "\"" + it.key().toUtf8() + "\":";
        found.emplace_back(line.indexOf(quotedKey, from), it.key().toStdString());
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> names;
    for (auto &entry : found)
        names.push_back(std::move(entry.second));
    return names;
}

std::vector<std::string> parameterNamesOf(const QJsonObject &record, const QByteArray &line)
{
    return keysInLineOrder(record, line, stepKeys());
}

// The names of a step record's "metrics" object, in the line's order.
std::vector<std::string> metricNamesOf(const QJsonObject &record, const QByteArray &line)
{
    return keysInLineOrder(record.value(QStringLiteral("metrics")).toObject(), line, {}, line.indexOf("\"metrics\":{"));
}

// The names of a step record's "variables" object, in the line's order (a
// variable's own keys come after its name, so they cannot come first).
std::vector<std::string> variableNamesOf(const QJsonObject &record, const QByteArray &line)
{
    return keysInLineOrder(record.value(QStringLiteral("variables")).toObject(), line, {},
                           line.indexOf("\"variables\":{"));
}

StepRecord stepFromJson(const QJsonObject &o, const std::vector<std::string> &parameterNames,
                        const std::vector<std::string> &metricNames, const std::vector<std::string> &variableNames)
{
    StepRecord step;
    step.globalStep = int64_t(o.value(QStringLiteral("global_step")).toDouble());
    step.wallTime = o.value(QStringLiteral("wall_time")).toDouble();
    step.worker = o.value(QStringLiteral("worker")).toInt();
    step.workerClock = int64_t(o.value(QStringLiteral("worker_clock")).toDouble());
    step.computedFromStep = int64_t(o.value(QStringLiteral("computed_from_step")).toDouble());
    step.staleness = int64_t(o.value(QStringLiteral("staleness")).toDouble());
    step.outcome = outcomeFromName(ss(o.value(QStringLiteral("outcome")).toString()));
    step.contributions = o.value(QStringLiteral("contributions")).toInt(1);
    step.batchLoss = floatOrNan(o.value(QStringLiteral("batch_loss")));
    step.fullLoss = floatOrNan(o.value(QStringLiteral("full_loss")));
    step.computeUs = int64_t(o.value(QStringLiteral("compute_us")).toDouble());
    step.pushUs = int64_t(o.value(QStringLiteral("push_us")).toDouble());
    step.waitUs = int64_t(o.value(QStringLiteral("wait_us")).toDouble());
    step.waitReason = phaseFromName(ss(o.value(QStringLiteral("wait_reason")).toString()));
    step.learningRateScale = float(o.value(QStringLiteral("learning_rate_scale")).toDouble(1.0));
    if (const QJsonValue probe = o.value(QStringLiteral("staleness_probe")); probe.isObject()) {
        const QJsonObject p = probe.toObject();
        step.probe = StepRecord::Probe{int64_t(p.value(QStringLiteral("stale_step")).toDouble()),
                                       int64_t(p.value(QStringLiteral("fresh_step")).toDouble()),
                                       floatOrNan(p.value(QStringLiteral("cosine"))),
                                       floatOrNan(p.value(QStringLiteral("relative_error")))};
    }
    for (const auto &name : parameterNames)
        step.parameters.push_back(floatOrNan(o.value(qs(name))));
    if (o.contains(QStringLiteral("metrics"))) {
        const QJsonObject metrics = o.value(QStringLiteral("metrics")).toObject();
        for (const auto &name : metricNames)
            step.metrics.push_back(floatOrNan(metrics.value(qs(name))));
    }
    if (o.contains(QStringLiteral("variables"))) {
        const QJsonObject variables = o.value(QStringLiteral("variables")).toObject();
        for (const auto &name : variableNames) {
            const QJsonObject v = variables.value(qs(name)).toObject();
            step.variables.push_back({floatOrNan(v.value(QStringLiteral("norm"))),
                                      floatOrNan(v.value(QStringLiteral("distance_from_start"))),
                                      floatOrNan(v.value(QStringLiteral("update_per_step")))});
        }
    }
    return step;
}

void replayStepLog(StepLogReader &log, RunState *state, RunDirectoryInfo *info)
{
    bool namesKnown = false;
    std::vector<std::string> names;
    std::vector<std::string> metricNames;
    std::vector<std::string> variableNames;
    std::map<int, proto::WorkerPhase> lastPhase;
    QByteArray read;
    while (log.next(&read)) {
        const QByteArray line = read.trimmed();
        if (line.isEmpty())
            continue;
        QJsonParseError error{};
        const QJsonDocument document = QJsonDocument::fromJson(line, &error);
        if (error.error != QJsonParseError::NoError || !document.isObject()) {
            ++info->skippedLines;
            continue;
        }
        const QJsonObject o = document.object();
        const QString type = o.value(QStringLiteral("type")).toString();
        ++info->records;
        if (type == QLatin1String("step")) {
            if (!namesKnown) {
                names = parameterNamesOf(o, line);
                state->setParameterNames(names);
                namesKnown = true;
            }
            // A step log written before metrics existed has none: no series.
            if (metricNames.empty() && o.contains(QStringLiteral("metrics"))) {
                metricNames = metricNamesOf(o, line);
                state->setMetricNames(metricNames);
            }
            // Only the chief's measuring steps carry variable summaries.
            if (variableNames.empty() && o.contains(QStringLiteral("variables"))) {
                variableNames = variableNamesOf(o, line);
                state->setVariableNames(variableNames);
            }
            state->addStep(stepFromJson(o, names, metricNames, variableNames));
        } else if (type == QLatin1String("mode_change")) {
            ModeMarker marker;
            marker.globalStep = int64_t(o.value(QStringLiteral("global_step")).toDouble());
            marker.wallTime = o.value(QStringLiteral("wall_time")).toDouble();
            marker.previous = modeFromJson(o.value(QStringLiteral("previous")).toObject());
            marker.current = modeFromJson(o.value(QStringLiteral("current")).toObject());
            marker.requestedBy = o.value(QStringLiteral("requested_by")).toString().toStdString();
            state->addModeChange(marker);
        } else if (type == QLatin1String("worker_state")) {
            proto::TelemetryEvent event;
            auto *w = event.mutable_worker_state();
            w->set_wall_time(o.value(QStringLiteral("wall_time")).toDouble());
            auto *status = w->mutable_status();
            status->set_worker_index(o.value(QStringLiteral("worker")).toInt());
            status->set_phase(phaseFromName(ss(o.value(QStringLiteral("phase")).toString())));
            status->set_worker_clock(int64_t(o.value(QStringLiteral("worker_clock")).toDouble()));
            status->set_waiting_for(o.value(QStringLiteral("waiting_for")).toString().toStdString());
            status->set_reason(o.value(QStringLiteral("reason")).toString().toStdString());
            lastPhase[status->worker_index()] = status->phase();
            state->apply(event);
        } else if (type == QLatin1String("checkpoint")) {
            proto::TelemetryEvent event;
            auto *c = event.mutable_checkpoint();
            c->set_wall_time(o.value(QStringLiteral("wall_time")).toDouble());
            c->set_global_step(int64_t(o.value(QStringLiteral("global_step")).toDouble()));
            c->set_path(o.value(QStringLiteral("path")).toString().toStdString());
            state->apply(event);
        } else if (type == QLatin1String("failover")) {
            proto::TelemetryEvent event;
            auto *f = event.mutable_failover();
            f->set_global_step(int64_t(o.value(QStringLiteral("global_step")).toDouble()));
            f->set_wall_time(o.value(QStringLiteral("wall_time")).toDouble());
            f->set_new_primary(o.value(QStringLiteral("new_primary")).toString().toStdString());
            f->set_old_primary(o.value(QStringLiteral("old_primary")).toString().toStdString());
            f->set_reason(o.value(QStringLiteral("reason")).toString().toStdString());
            state->apply(event);
        } else {
            ++info->skippedLines;
            --info->records;
        }
    }
    // A run whose every worker left, finished or dead, is over; one killed
    // mid-run is not.
    bool over = !lastPhase.empty();
    for (const auto &[worker, phase] : lastPhase)
        over = over && (phase == proto::FINISHED || phase == proto::DEAD || phase == proto::STOPPED);
    state->setFinished(over);
}

// metrics.csv: global_step,wall_time,worker,loss,full_loss[,w,b][,metrics];
// one row per applied gradient. No staleness, waits or mode changes: it is
// the fallback. The header does not say which of the last columns are
// parameters and which metrics (an older file has no metrics): a parameter
// is on every row, a metric only on the rows that measured it, so a column
// with an empty cell on a complete row, and every column after it, is a
// metric.
void replayMetrics(QFile &file, RunState *state, RunDirectoryInfo *info)
{
    const QStringList header = QString::fromUtf8(file.readLine().trimmed()).split(QLatin1Char(','));
    const auto column = [&header](const char *name) { return int(header.indexOf(QLatin1String(name))); };
    const int stepColumn = column("global_step");
    const int timeColumn = column("wall_time");
    const int workerColumn = column("worker");
    const int lossColumn = column("loss");
    const int fullLossColumn = column("full_loss");
    if (stepColumn < 0 || lossColumn < 0)
        throw InputError(file.fileName().toStdString()
                         + " has no global_step and loss columns: is it a Parasync metrics.csv?");
    std::vector<int> valueColumns;
    for (int i = 0; i < int(header.size()); ++i)
        if (i != stepColumn && i != timeColumn && i != workerColumn && i != lossColumn && i != fullLossColumn)
            valueColumns.push_back(i);

    std::vector<QStringList> rows;
    size_t firstMetric = valueColumns.size();
    while (!file.atEnd()) {
        const QByteArray raw = file.readLine();
        const QString line = QString::fromUtf8(raw.trimmed());
        if (line.isEmpty())
            continue;
        QStringList fields = line.split(QLatin1Char(','));
        bool stepOk = false;
        fields.value(stepColumn).toLongLong(&stepOk);
        // A torn last row has fewer fields (or no newline and a cut number).
        if (fields.size() != header.size() || !stepOk || (!raw.endsWith('\n') && file.atEnd())) {
            ++info->skippedLines;
            continue;
        }
        for (size_t i = 0; i < firstMetric; ++i)
            if (fields[valueColumns[i]].isEmpty())
                firstMetric = i;
        rows.push_back(std::move(fields));
    }
    std::vector<std::string> parameterNames;
    std::vector<std::string> metricNames;
    for (size_t i = 0; i < valueColumns.size(); ++i)
        (i < firstMetric ? parameterNames : metricNames).push_back(header[valueColumns[i]].toStdString());
    state->setParameterNames(parameterNames);
    state->setMetricNames(metricNames);

    const auto number = [](const QString &text) {
        bool ok = false;
        const double value = text.toDouble(&ok);
        return ok ? value : std::numeric_limits<double>::quiet_NaN();
    };
    std::map<int, int64_t> clocks;
    for (const QStringList &fields : rows) {
        ++info->records;
        StepRecord step;
        step.globalStep = fields[stepColumn].toLongLong();
        step.computedFromStep = step.globalStep - 1;
        step.staleness = -1;
        step.wallTime = timeColumn >= 0 ? number(fields[timeColumn]) : 0;
        step.worker = workerColumn >= 0 ? fields[workerColumn].toInt() : 0;
        step.batchLoss = float(number(fields[lossColumn]));
        step.fullLoss
            = fullLossColumn >= 0 ? float(number(fields[fullLossColumn])) : std::numeric_limits<float>::quiet_NaN();
        step.workerClock = ++clocks[step.worker]; // metrics.csv has no clock: count the worker's rows
        bool measured = false;
        for (size_t i = 0; i < valueColumns.size(); ++i) {
            const float value = float(number(fields[valueColumns[i]]));
            if (i < firstMetric) {
                step.parameters.push_back(value);
            } else {
                step.metrics.push_back(value);
                measured = measured || !std::isnan(value);
            }
        }
        if (!measured)
            step.metrics.clear();
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
        if (!metrics.open(QIODevice::ReadOnly))
            throw InputError("cannot read " + metrics.fileName().toStdString() + ": "
                             + metrics.errorString().toStdString());
        replayMetrics(metrics, state, &info);
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
    // A grouped tag other than the staleness, its cost and the variables is
    // a metric ("heldout/loss" is the metric "heldout_loss", as
    // TrainingSummaries::metricTag names it).
    const auto metricNameOf = [&](std::string tag) {
        if (tag.rfind("staleness/", 0) == 0 || tag.rfind("staleness_cost/", 0) == 0 || isVariableTag(tag)
            || tag.find('/') == std::string::npos)
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
            if (!event.has_summary())
                continue;
            for (const auto &value : event.summary().value()) {
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
