#include "formats/step_records.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/update_modes.h"
#include "formats/run_log.h"
#include "formats/step_log_reader.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace parasync {

namespace {

constexpr float kFloatNaN = std::numeric_limits<float>::quiet_NaN();

// JSON null (a NaN loss in the log) reads as NaN, not 0.
float floatOrNan(const QJsonValue &value)
{
    return value.isDouble() ? float(value.toDouble()) : kFloatNaN;
}

int64_t integer(const QJsonObject &o, const char *key)
{
    return int64_t(o.value(QLatin1String(key)).toDouble());
}

// The keys of a step record that are not parameters.
const std::set<QString> &stepKeys()
{
    static const std::set<QString> keys = [] {
        std::set<QString> k;
        for (const char *name : {"type",
                                 "global_step",
                                 "wall_time",
                                 "worker",
                                 "worker_clock",
                                 "computed_from_step",
                                 "staleness",
                                 "outcome",
                                 "contributions",
                                 "batch_loss",
                                 "full_loss",
                                 "compute_us",
                                 "push_us",
                                 "wait_us",
                                 "wait_reason",
                                 "metrics",
                                 "variables",
                                 "learning_rate_scale",
                                 "staleness_probe",
                                 "lease_epoch"})
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

// The names of a step record's "metrics" or "variables" object, in the
// line's order (a variable's own keys come after its name, so they cannot
// come first).
std::vector<std::string> namesInObject(const QJsonObject &record, const QByteArray &line, const char *key)
{
    return keysInLineOrder(record.value(QLatin1String(key)).toObject(), line, {},
                           line.indexOf(QByteArray(QByteArray("\"") + key + "\":{")));
}

StepRecord stepFromJson(const QJsonObject &o, const std::vector<std::string> &parameterNames,
                        const std::vector<std::string> &metricNames, const std::vector<std::string> &variableNames)
{
    StepRecord step;
    step.globalStep = integer(o, "global_step");
    step.wallTime = o.value(QStringLiteral("wall_time")).toDouble();
    step.worker = o.value(QStringLiteral("worker")).toInt();
    step.workerClock = integer(o, "worker_clock");
    step.computedFromStep = integer(o, "computed_from_step");
    step.staleness = integer(o, "staleness");
    step.outcome = outcomeFromName(ss(o.value(QStringLiteral("outcome")).toString()));
    step.contributions = o.value(QStringLiteral("contributions")).toInt(1);
    step.batchLoss = floatOrNan(o.value(QStringLiteral("batch_loss")));
    step.fullLoss = floatOrNan(o.value(QStringLiteral("full_loss")));
    step.computeUs = integer(o, "compute_us");
    step.pushUs = integer(o, "push_us");
    step.waitUs = integer(o, "wait_us");
    step.waitReason = phaseFromName(ss(o.value(QStringLiteral("wait_reason")).toString()));
    step.learningRateScale = float(o.value(QStringLiteral("learning_rate_scale")).toDouble(1.0));
    step.leaseEpoch = integer(o, "lease_epoch");
    if (const QJsonValue probe = o.value(QStringLiteral("staleness_probe")); probe.isObject()) {
        const QJsonObject p = probe.toObject();
        step.probe = StepRecord::Probe{integer(p, "stale_step"), integer(p, "fresh_step"),
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

// The step log's other records as the telemetry events ps:0 streams; false
// for a type this reader does not know.
bool eventFromJson(const QString &type, const QJsonObject &o, proto::TelemetryEvent *event)
{
    if (type == QLatin1String("worker_state")) {
        auto *w = event->mutable_worker_state();
        w->set_wall_time(o.value(QStringLiteral("wall_time")).toDouble());
        auto *status = w->mutable_status();
        status->set_worker_index(o.value(QStringLiteral("worker")).toInt());
        status->set_phase(phaseFromName(ss(o.value(QStringLiteral("phase")).toString())));
        status->set_worker_clock(integer(o, "worker_clock"));
        status->set_waiting_for(ss(o.value(QStringLiteral("waiting_for")).toString()));
        status->set_reason(ss(o.value(QStringLiteral("reason")).toString()));
        return true;
    }
    if (type == QLatin1String("checkpoint")) {
        auto *c = event->mutable_checkpoint();
        c->set_wall_time(o.value(QStringLiteral("wall_time")).toDouble());
        c->set_global_step(integer(o, "global_step"));
        c->set_path(ss(o.value(QStringLiteral("path")).toString()));
        return true;
    }
    if (type == QLatin1String("failover")) {
        auto *f = event->mutable_failover();
        f->set_global_step(integer(o, "global_step"));
        f->set_wall_time(o.value(QStringLiteral("wall_time")).toDouble());
        f->set_new_primary(ss(o.value(QStringLiteral("new_primary")).toString()));
        f->set_old_primary(ss(o.value(QStringLiteral("old_primary")).toString()));
        f->set_epoch(integer(o, "epoch"));
        f->set_reason(ss(o.value(QStringLiteral("reason")).toString()));
        return true;
    }
    return false;
}

double numberOrNan(const QString &text)
{
    bool ok = false;
    const double value = text.toDouble(&ok);
    return ok ? value : std::numeric_limits<double>::quiet_NaN();
}

} // namespace

StepLogCounts readStepLog(StepLogReader &log, StepLogVisitor &visitor)
{
    StepLogCounts counts;
    bool parametersKnown = false;
    std::vector<std::string> parameters;
    std::vector<std::string> metrics;
    std::vector<std::string> variables;
    QByteArray read;
    while (log.next(&read)) {
        const QByteArray line = read.trimmed();
        if (line.isEmpty())
            continue;
        QJsonParseError error{};
        const QJsonDocument document = QJsonDocument::fromJson(line, &error);
        if (error.error != QJsonParseError::NoError || !document.isObject()) {
            ++counts.skippedLines;
            continue;
        }
        const QJsonObject o = document.object();
        const QString type = o.value(QStringLiteral("type")).toString();
        if (type == QLatin1String("step")) {
            if (!parametersKnown) {
                parameters = keysInLineOrder(o, line, stepKeys());
                visitor.parameterNames(parameters);
                parametersKnown = true;
            }
            // A step log written before metrics existed has none: no series.
            if (metrics.empty() && o.contains(QStringLiteral("metrics"))) {
                metrics = namesInObject(o, line, "metrics");
                visitor.metricNames(metrics);
            }
            // Only the chief's measuring steps carry variable summaries.
            if (variables.empty() && o.contains(QStringLiteral("variables"))) {
                variables = namesInObject(o, line, "variables");
                visitor.variableNames(variables);
            }
            visitor.step(stepFromJson(o, parameters, metrics, variables));
        } else if (type == QLatin1String("mode_change")) {
            ModeMarker marker;
            marker.globalStep = integer(o, "global_step");
            marker.wallTime = o.value(QStringLiteral("wall_time")).toDouble();
            marker.previous = modeFromJson(o.value(QStringLiteral("previous")).toObject());
            marker.current = modeFromJson(o.value(QStringLiteral("current")).toObject());
            marker.requestedBy = ss(o.value(QStringLiteral("requested_by")).toString());
            visitor.modeChange(marker);
        } else if (proto::TelemetryEvent event; eventFromJson(type, o, &event)) {
            visitor.event(event);
        } else {
            ++counts.skippedLines;
            continue;
        }
        ++counts.records;
    }
    return counts;
}

MetricsCsv readMetricsCsv(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw InputError("cannot read " + ss(path) + ": " + ss(file.errorString()));
    const QStringList header = QString::fromUtf8(file.readLine().trimmed()).split(QLatin1Char(','));
    const auto column = [&header](const char *name) { return int(header.indexOf(QLatin1String(name))); };
    const int stepColumn = column("global_step");
    const int timeColumn = column("wall_time");
    const int workerColumn = column("worker");
    const int lossColumn = column("loss");
    const int fullLossColumn = column("full_loss");
    if (stepColumn < 0 || timeColumn < 0 || lossColumn < 0)
        throw InputError(ss(path) + " has no global_step, wall_time and loss columns (its header: "
                         + ss(header.join(QLatin1Char(','))) + "): is it a Parasync metrics.csv?");
    std::vector<int> valueColumns;
    for (int i = 0; i < int(header.size()); ++i)
        if (i != stepColumn && i != timeColumn && i != workerColumn && i != lossColumn && i != fullLossColumn)
            valueColumns.push_back(i);

    MetricsCsv csv;
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
            ++csv.skippedLines;
            continue;
        }
        for (size_t i = 0; i < firstMetric; ++i)
            if (fields[valueColumns[i]].isEmpty())
                firstMetric = i;
        rows.push_back(std::move(fields));
    }
    for (size_t i = 0; i < valueColumns.size(); ++i)
        (i < firstMetric ? csv.parameterNames : csv.metricNames).push_back(ss(header[valueColumns[i]]));

    std::map<int, int64_t> clocks;
    csv.steps.reserve(rows.size());
    for (const QStringList &fields : rows) {
        StepRecord &step = csv.steps.emplace_back();
        step.globalStep = fields[stepColumn].toLongLong();
        step.computedFromStep = step.globalStep - 1;
        step.staleness = -1;
        step.wallTime = numberOrNan(fields[timeColumn]);
        step.worker = workerColumn >= 0 ? fields[workerColumn].toInt() : 0;
        step.batchLoss = float(numberOrNan(fields[lossColumn]));
        step.fullLoss = fullLossColumn >= 0 ? float(numberOrNan(fields[fullLossColumn])) : kFloatNaN;
        step.workerClock = ++clocks[step.worker];
        bool measured = false;
        for (size_t i = 0; i < valueColumns.size(); ++i) {
            const float value = float(numberOrNan(fields[valueColumns[i]]));
            if (i < firstMetric) {
                step.parameters.push_back(value);
            } else {
                step.metrics.push_back(value);
                measured = measured || !std::isnan(value);
            }
        }
        if (!measured)
            step.metrics.clear();
    }
    return csv;
}

} // namespace parasync
