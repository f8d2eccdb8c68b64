#pragma once

// Which settings made the difference between runs: each run's settings read
// from its directory (cluster.json's training flags and cluster shape, the
// model model.json names), and the table of those that differ between the
// chosen runs, the ones they share kept apart. For Compare runs; no widgets.

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <optional>
#include <utility>
#include <vector>

namespace parasync {

// One run's settings, by name ("learning_rate", "mode", "workers"), in name
// order. A value is what cluster.json says in words: numbers as the flag
// takes them ("0.05", "2000"), texts as written, "" for an unset text flag.
struct RunSettings
{
    QString run; // the run's name (its directory's)
    std::vector<std::pair<QString, QString>> values;
    bool found = false; // the directory had a cluster.json that parsed
    // The value of `name`, or null when the run does not have it.
    const QString *value(const QString &name) const;
};

// The settings of a run from its cluster.json text ({"cluster": {...},
// "training": {...}}, writeRunClusterJson's form): the training flags but
// --logdir (a path, different for every run), and the ps and worker counts
// of the cluster. Text that does not parse gives found = false.
RunSettings runSettingsFromClusterJson(const QString &run, const QByteArray &clusterJson);

// The settings in `directory`: its cluster.json, the model named by its
// model.json when there is one (a model a Python worker declared, which the
// ps's flags do not know). found = false without a readable cluster.json.
RunSettings readRunSettings(const QString &directory);

// A setting's value in each run, in the order of the runs; null where a run
// does not have it (an older run, a run without cluster.json).
struct SettingRow
{
    QString name;
    std::vector<std::optional<QString>> values;
};

struct SettingsComparison
{
    QStringList runs;
    // Settings whose values are not the same in every run (a setting one run
    // lacks differs), in name order.
    std::vector<SettingRow> differing;
    // Settings every run has with one value.
    std::vector<SettingRow> shared;
    // Runs with no settings to compare (no cluster.json).
    QStringList withoutSettings;
};
SettingsComparison compareRunSettings(const std::vector<RunSettings> &runs);

} // namespace parasync
