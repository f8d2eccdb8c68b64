#include "orchestration/run_settings.h"

#include "formats/run_log.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <map>
#include <set>

namespace parasync {

namespace {

QString valueText(const QJsonValue &value)
{
    if (value.isDouble())
        return QString::number(value.toDouble(), 'g', 10);
    if (value.isBool())
        return value.toBool() ? QStringLiteral("1") : QStringLiteral("0");
    return value.toVariant().toString();
}

void setValue(RunSettings *settings, const QString &name, const QString &value)
{
    auto &values = settings->values;
    const auto at = std::lower_bound(values.begin(), values.end(), name,
                                     [](const auto &entry, const QString &key) { return entry.first < key; });
    if (at != values.end() && at->first == name)
        at->second = value;
    else
        values.insert(at, {name, value});
}

} // namespace

const QString *RunSettings::value(const QString &name) const
{
    for (const auto &[key, text] : values)
        if (key == name)
            return &text;
    return nullptr;
}

RunSettings runSettingsFromClusterJson(const QString &run, const QByteArray &clusterJson)
{
    RunSettings settings;
    settings.run = run;
    const QJsonDocument document = QJsonDocument::fromJson(clusterJson);
    if (!document.isObject())
        return settings;
    const QJsonObject root = document.object();
    const QJsonObject training = root.value(QStringLiteral("training")).toObject();
    for (auto it = training.begin(); it != training.end(); ++it)
        if (it.key() != QLatin1String("logdir"))
            setValue(&settings, it.key(), valueText(it.value()));
    // How big the cluster was matters as much as a flag (sync aggregates one
    // gradient per worker); its addresses do not.
    const QJsonObject cluster = root.value(QStringLiteral("cluster")).toObject();
    if (cluster.contains(QLatin1String("ps")))
        setValue(&settings, QStringLiteral("ps tasks"),
                 QString::number(cluster.value(QStringLiteral("ps")).toArray().size()));
    if (cluster.contains(QLatin1String("worker")))
        setValue(&settings, QStringLiteral("workers"),
                 QString::number(cluster.value(QStringLiteral("worker")).toArray().size()));
    settings.found = !training.isEmpty() || !cluster.isEmpty();
    return settings;
}

RunSettings readRunSettings(const QString &directory)
{
    const QDir dir(directory);
    const QString name = QFileInfo(dir.absolutePath()).fileName();
    QFile file(dir.filePath(QLatin1String(run_files::kCluster)));
    RunSettings settings = file.open(QIODevice::ReadOnly) ? runSettingsFromClusterJson(name, file.readAll())
                                                          : RunSettings{name, {}, false};
    if (proto::ModelSignature signature;
        readRunModelJson(directory.toStdString(), &signature) && !signature.model().empty())
        setValue(&settings, QStringLiteral("model"), QString::fromStdString(signature.model()));
    return settings;
}

SettingsComparison compareRunSettings(const std::vector<RunSettings> &runs)
{
    SettingsComparison comparison;
    std::set<QString> names;
    for (const RunSettings &run : runs) {
        comparison.runs.append(run.run);
        if (!run.found) {
            comparison.withoutSettings.append(run.run);
            continue;
        }
        for (const auto &entry : run.values)
            names.insert(entry.first);
    }
    for (const QString &name : names) {
        SettingRow row;
        row.name = name;
        std::set<QString> distinct;
        bool missing = false;
        for (const RunSettings &run : runs) {
            if (!run.found) {
                // Nothing known: neither the same nor different.
                row.values.emplace_back();
                continue;
            }
            const QString *value = run.value(name);
            row.values.push_back(value ? std::optional<QString>(*value) : std::nullopt);
            if (value)
                distinct.insert(*value);
            else
                missing = true;
        }
        (distinct.size() > 1 || missing ? comparison.differing : comparison.shared).push_back(std::move(row));
    }
    return comparison;
}

} // namespace parasync
