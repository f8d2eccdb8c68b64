// Which settings differ between runs: run directories written by the run's
// own writers (writeRunClusterJson, writeRunModelJson, as ps:0 writes them),
// read back and compared.
#include "config/task_options.h"
#include "formats/run_log.h"
#include "orchestration/run_settings.h"

#include <QDir>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync;

namespace {

ClusterSpec loopbackCluster(int workers)
{
    ClusterSpec spec;
    spec.ps.push_back({"127.0.0.1", 2222});
    for (int i = 0; i < workers; ++i)
        spec.workers.push_back({"127.0.0.1", uint16_t(2223 + i)});
    return spec;
}

QString writeRun(const QTemporaryDir &root, const QString &name, const TrainingOptions &training, int workers)
{
    const QString directory = root.filePath(name);
    TrainingOptions written = training;
    written.logdir = directory.toStdString();
    writeRunClusterJson(written.logdir, loopbackCluster(workers).toJson(), written.toJson());
    return directory;
}

const SettingRow *row(const std::vector<SettingRow> &rows, const char *name)
{
    for (const SettingRow &r : rows)
        if (r.name == QLatin1String(name))
            return &r;
    return nullptr;
}

} // namespace

class TestRunSettings : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aRunsSettingsAreItsFlagsAndClusterShape()
    {
        QTemporaryDir root;
        TrainingOptions training;
        training.learningRate = 0.1f;
        training.batchSize = 32;
        const RunSettings settings = readRunSettings(writeRun(root, QStringLiteral("fast"), training, 3));
        QVERIFY(settings.found);
        QCOMPARE(settings.run, QStringLiteral("fast"));
        QCOMPARE(*settings.value(QStringLiteral("learning_rate")), QStringLiteral("0.1"));
        QCOMPARE(*settings.value(QStringLiteral("batch_size")), QStringLiteral("32"));
        QCOMPARE(*settings.value(QStringLiteral("mode")), QStringLiteral("async"));
        QCOMPARE(*settings.value(QStringLiteral("workers")), QStringLiteral("3"));
        QCOMPARE(*settings.value(QStringLiteral("ps tasks")), QStringLiteral("1"));
        // The directory differs in every run: no setting of its own.
        QVERIFY(!settings.value(QStringLiteral("logdir")));
        QVERIFY(std::is_sorted(settings.values.begin(), settings.values.end()));
    }

    void onlyTheSettingsThatDifferAreTheTable()
    {
        QTemporaryDir root;
        TrainingOptions async;
        TrainingOptions sync;
        sync.mode.set_mode(proto::SYNC);
        sync.mode.set_replicas_to_aggregate(2);
        sync.learningRate = 0.1f;
        const SettingsComparison comparison
            = compareRunSettings({readRunSettings(writeRun(root, QStringLiteral("async"), async, 2)),
                                  readRunSettings(writeRun(root, QStringLiteral("sync"), sync, 2))});
        QCOMPARE(comparison.runs, (QStringList{QStringLiteral("async"), QStringLiteral("sync")}));
        QStringList differing;
        for (const SettingRow &r : comparison.differing)
            differing.append(r.name);
        QCOMPARE(differing, (QStringList{QStringLiteral("learning_rate"), QStringLiteral("mode"),
                                         QStringLiteral("replicas_to_aggregate")}));
        const SettingRow *mode = row(comparison.differing, "mode");
        QCOMPARE(*mode->values[0], QStringLiteral("async"));
        QCOMPARE(*mode->values[1], QStringLiteral("sync"));
        QCOMPARE(*row(comparison.differing, "learning_rate")->values[0], QStringLiteral("0.05"));
        QCOMPARE(*row(comparison.differing, "learning_rate")->values[1], QStringLiteral("0.1"));
        // The rest is the same in both, apart.
        const SettingRow *workers = row(comparison.shared, "workers");
        QVERIFY(workers);
        QCOMPARE(*workers->values[0], QStringLiteral("2"));
        QVERIFY(row(comparison.shared, "batch_size"));
        QVERIFY(!row(comparison.shared, "mode"));
        QVERIFY(comparison.withoutSettings.isEmpty());
    }

    void aModelAWorkerDeclaredIsTheRunsModel()
    {
        QTemporaryDir root;
        TrainingOptions training;
        const QString linear = writeRun(root, QStringLiteral("linear"), training, 2);
        const QString python = writeRun(root, QStringLiteral("python"), training, 2);
        proto::ModelSignature signature;
        signature.set_model("python:two_layer_mlp");
        writeRunModelJson(python.toStdString(), signature);
        const SettingsComparison comparison = compareRunSettings({readRunSettings(linear), readRunSettings(python)});
        QCOMPARE(int(comparison.differing.size()), 1);
        QCOMPARE(comparison.differing[0].name, QStringLiteral("model"));
        QCOMPARE(*comparison.differing[0].values[0], QStringLiteral("linear"));
        QCOMPARE(*comparison.differing[0].values[1], QStringLiteral("python:two_layer_mlp"));
    }

    void aRunWithoutClusterJsonIsNamedNotCompared()
    {
        QTemporaryDir root;
        TrainingOptions training;
        TrainingOptions other;
        other.seed = 7;
        QVERIFY(QDir(root.path()).mkpath(QStringLiteral("bare")));
        const SettingsComparison comparison
            = compareRunSettings({readRunSettings(writeRun(root, QStringLiteral("a"), training, 2)),
                                  readRunSettings(writeRun(root, QStringLiteral("b"), other, 2)),
                                  readRunSettings(root.filePath(QStringLiteral("bare")))});
        QCOMPARE(comparison.withoutSettings, QStringList{QStringLiteral("bare")});
        QCOMPARE(int(comparison.differing.size()), 1);
        QCOMPARE(comparison.differing[0].name, QStringLiteral("seed"));
        QVERIFY(!comparison.differing[0].values[2].has_value());
        // A flag an older run did not write differs: "not set" is not "same".
        const RunSettings older
            = runSettingsFromClusterJson(QStringLiteral("older"), R"({"training": {"mode": "async"}})");
        const RunSettings newer = runSettingsFromClusterJson(
            QStringLiteral("newer"), R"({"training": {"mode": "async", "straggler_threshold": 2}})");
        const SettingsComparison versions = compareRunSettings({older, newer});
        QCOMPARE(int(versions.differing.size()), 1);
        QCOMPARE(versions.differing[0].name, QStringLiteral("straggler_threshold"));
        QVERIFY(!versions.differing[0].values[0].has_value());
        QVERIFY(!runSettingsFromClusterJson(QStringLiteral("torn"), "{\"training\": {").found);
    }
};

QTEST_GUILESS_MAIN(TestRunSettings)
#include "tst_run_settings.moc"
