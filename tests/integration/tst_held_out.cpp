// A held-out score for every model, with real processes: the chief scores
// its parameters on rows no worker trains on (--eval_fraction,
// --eval_dataset), and the score reaches its log line, metrics.csv, the
// TensorBoard event file and the run's replay; bad held-out flags stop a
// worker with exit code 2 and what to fix.
#include "formats/event_file.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"
#include "support/cluster_harness.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <random>
#include <set>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

// 3 classes of 2 features, 100 rows each, sorted by class, with overlapping
// clouds: a model can learn them to about 90 %, never 100 %.
QString writeClassesCsv(const QTemporaryDir &dir)
{
    std::mt19937 rng(5);
    std::normal_distribution<double> noise(0.0, 0.9);
    const double centres[3][2] = {{0, 0}, {3, 0}, {0, 3}};
    QString csv = QStringLiteral("x1,x2,class\n");
    for (int k = 0; k < 3; ++k)
        for (int i = 0; i < 100; ++i)
            csv += QStringLiteral("%1,%2,%3\n")
                       .arg(centres[k][0] + noise(rng), 0, 'f', 4)
                       .arg(centres[k][1] + noise(rng), 0, 'f', 4)
                       .arg(k);
    const QString path = dir.filePath(QStringLiteral("classes.csv"));
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(csv.toUtf8()) < 0)
        return {};
    return path;
}

} // namespace

class TestHeldOut : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void softmaxClusterReportsItsHeldOutAccuracyEverywhere()
    {
        QTemporaryDir dir;
        const QString csv = writeClassesCsv(dir);
        QVERIFY(!csv.isEmpty());
        // Paced, 2 ms a step each: the chief prints its line when its own
        // update lands on a multiple of --display_step, as the seeds do. At
        // full speed on the data links the whole run took ~60 ms: worker:1,
        // started first, took 572 of the 600 steps and the chief printed
        // none.
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--model=softmax"), QStringLiteral("--dataset=csv:") + csv,
                              QStringLiteral("--eval_fraction=0.2"), QStringLiteral("--learning_rate=0.1"),
                              QStringLiteral("--last_step=600"), QStringLiteral("--display_step=50"),
                              QStringLiteral("--compute_ms=2"), QStringLiteral("--compute_jitter=0")},
                             dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));

        // Every worker trains on its shard less the same 60 rows.
        for (int i = 0; i < 2; ++i)
            QVERIFY2(cluster.worker(i).output().contains(QStringLiteral("less the rows --eval_fraction=0.2 holds out")),
                     qPrintable(cluster.worker(i).output()));
        QVERIFY2(cluster.worker(0).output().contains(QStringLiteral("held-out data (--eval_fraction=0.2)"))
                     && cluster.worker(0).output().contains(QStringLiteral(", 60 samples")),
                 qPrintable(cluster.worker(0).output()));

        // The chief's log line: the held-out score beside the training loss.
        const auto printed = QRegularExpression(QStringLiteral("loss [0-9.]+ .*held-out loss ([0-9.]+) "
                                                               "held-out accuracy ([0-9.]+)"))
                                 .globalMatch(cluster.worker(0).output());
        double printedAccuracy = 0;
        int lines = 0;
        for (auto it = printed; it.hasNext(); ++lines)
            printedAccuracy = it.next().captured(2).toDouble();
        QVERIFY2(lines > 0, qPrintable(cluster.worker(0).output()));
        QVERIFY2(printedAccuracy > 0.8, qPrintable(cluster.worker(0).output()));
        // The other worker has no held-out data to score: it prints none.
        QVERIFY(!cluster.worker(1).output().contains(QStringLiteral("held-out")));

        // metrics.csv: the old columns in their order, then one per metric.
        const MetricsTable metrics = readMetrics(dir.path());
        QCOMPARE(metrics.header.mid(0, 5),
                 (QStringList{QStringLiteral("global_step"), QStringLiteral("wall_time"), QStringLiteral("worker"),
                              QStringLiteral("loss"), QStringLiteral("full_loss")}));
        QCOMPARE(metrics.header.mid(metrics.header.size() - 2),
                 (QStringList{QStringLiteral("heldout_loss"), QStringLiteral("heldout_accuracy")}));
        const int accuracyColumn = metrics.column(QStringLiteral("heldout_accuracy"));
        const int fullLossColumn = metrics.column(QStringLiteral("full_loss"));
        int measured = 0;
        int fullLosses = 0;
        double lastAccuracy = -1;
        for (const QStringList &row : metrics.rows) {
            const QString fullLoss = row.at(fullLossColumn);
            fullLosses += !fullLoss.isEmpty() && fullLoss != QStringLiteral("nan");
            if (row.at(accuracyColumn).isEmpty())
                continue;
            ++measured;
            lastAccuracy = row.at(accuracyColumn).toDouble();
            QCOMPARE(row.at(metrics.column(QStringLiteral("worker"))), QStringLiteral("0")); // only the chief
        }
        // The chief scores the held-out rows whenever it evaluates its full
        // shard: on its first step, then whenever the global step has passed
        // another 50 (how many of those boundaries its steps meet depends on
        // the scheduler, so the count is compared, not fixed).
        QVERIFY2(measured >= 2 && measured == fullLosses,
                 qPrintable(QStringLiteral("%1 held-out scores, %2 full-shard losses").arg(measured).arg(fullLosses)));
        QVERIFY2(lastAccuracy > 0.8 && lastAccuracy < 1.0, qPrintable(QString::number(lastAccuracy)));

        // The TensorBoard event file: heldout/accuracy and heldout/loss.
        const auto files = findEventFiles(dir.path().toStdString());
        QCOMPARE(files.size(), size_t(1));
        double tensorboardAccuracy = -1;
        int heldOutLosses = 0;
        std::set<std::string> tensorboardTags;
        for (const auto &event : readEventFile(files.front()))
            for (const auto &value : event.summary().value()) {
                tensorboardTags.insert(value.tag());
                if (value.tag() == "heldout/accuracy")
                    tensorboardAccuracy = value.simple_value();
                heldOutLosses += value.tag() == "heldout/loss";
            }
        // Every score in metrics.csv, and no other.
        QVERIFY2(
            heldOutLosses == measured,
            qPrintable(QStringLiteral("%1 in the event file, %2 in metrics.csv").arg(heldOutLosses).arg(measured)));
        QVERIFY2(tensorboardAccuracy > 0.8, qPrintable(QString::number(tensorboardAccuracy)));
        QVERIFY(tensorboardTags.count("variables/W/norm") && tensorboardTags.count("variables/b/distance_from_start")
                && tensorboardTags.count("variables/W/update_per_step"));

        // The step log: how W and b moved, on the chief's measuring steps.
        QFile stepLog(dir.filePath(QStringLiteral("steps.jsonl")));
        QVERIFY(stepLog.open(QIODevice::ReadOnly));
        int summarized = 0;
        double lastDistance = -1;
        double lastUpdate = -1;
        while (!stepLog.atEnd()) {
            const QJsonObject record = QJsonDocument::fromJson(stepLog.readLine()).object();
            if (!record.contains(QStringLiteral("variables")))
                continue;
            ++summarized;
            QCOMPARE(record.value(QStringLiteral("worker")).toInt(), 0); // the chief measures
            const QJsonObject w
                = record.value(QStringLiteral("variables")).toObject().value(QStringLiteral("W")).toObject();
            QVERIFY(w.value(QStringLiteral("norm")).toDouble() > 0);
            lastDistance = w.value(QStringLiteral("distance_from_start")).toDouble();
            lastUpdate = w.value(QStringLiteral("update_per_step")).toDouble(-1);
        }
        // Every applied measuring step has them, as it has the held-out score.
        QVERIFY2(summarized >= measured, qPrintable(QStringLiteral("%1 < %2").arg(summarized).arg(measured)));
        // W left its start (truncated normal, stddev 0.01) and still moved at the end.
        QVERIFY2(lastDistance > 0.1, qPrintable(QString::number(lastDistance)));
        QVERIFY2(lastUpdate > 0, qPrintable(QString::number(lastUpdate)));

        // The run replayed as the app opens it: a series per metric.
        RunState state;
        replayRunDirectory(dir.path().toStdString(), &state);
        const RunSnapshot replayed = state.snapshot();
        QCOMPARE(replayed.metricNames, (std::vector<std::string>{"heldout_loss", "heldout_accuracy"}));
        QCOMPARE(replayed.metricSeries[1].totalCount(), int64_t(measured));
        QVERIFY(std::abs(replayed.metricSeries[1].buckets().back().last - lastAccuracy) < 1e-6);
        QCOMPARE(replayed.variableNames, (std::vector<std::string>{"W", "b"}));
        QCOMPARE(replayed.variableSeries[0].distanceFromStart.totalCount(), int64_t(summarized));
        QVERIFY(std::abs(replayed.variableSeries[0].distanceFromStart.buckets().back().last - lastDistance) < 1e-5);

#ifdef PARASYNC_APP
        // The app's headless export: its summary line and the loss chart's table.
        const QString out = dir.filePath(QStringLiteral("export"));
        QProcess app;
        app.setProcessChannelMode(QProcess::MergedChannels);
        app.start(QStringLiteral(PARASYNC_APP), {QStringLiteral("--headless"), QStringLiteral("--open=") + dir.path(),
                                                 QStringLiteral("--export=") + out});
        QVERIFY(app.waitForFinished(120000));
        const QString said = QString::fromUtf8(app.readAll());
        QVERIFY2(app.exitStatus() == QProcess::NormalExit && app.exitCode() == 0, qPrintable(said));
        QVERIFY2(said.contains(QRegularExpression(QStringLiteral("done: global step 600, held-out loss [0-9.]+, "
                                                                 "held-out accuracy 0\\.[89]"))),
                 qPrintable(said));
        QFile loss(out + QStringLiteral("/loss.csv"));
        QVERIFY(loss.open(QIODevice::ReadOnly));
        const QString table = QString::fromUtf8(loss.readAll());
        QCOMPARE(int(table.count(
                     QRegularExpression(QStringLiteral("^held-out accuracy,"), QRegularExpression::MultilineOption))),
                 measured);
        // A softmax has no w and b to draw against their true values: the
        // parameters tab exports how W and b moved instead.
        QVERIFY(!QFile::exists(out + QStringLiteral("/parameters.png")));
        for (const char *name : {"variable_norms", "variable_distance_from_start", "variable_updates"}) {
            QFile chart(out + QLatin1Char('/') + QLatin1String(name) + QStringLiteral(".csv"));
            QVERIFY2(chart.open(QIODevice::ReadOnly), name);
            const QString rows = QString::fromUtf8(chart.readAll());
            QVERIFY2(rows.contains(QStringLiteral("\nW,")) && rows.contains(QStringLiteral("\nb,")), qPrintable(rows));
            QVERIFY(QFile::exists(out + QLatin1Char('/') + QLatin1String(name) + QStringLiteral(".png")));
        }
#endif
    }

    void aLinearClusterWithAnEvalDatasetReportsItsHeldOutLoss()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--eval_dataset=linear"), QStringLiteral("--last_step=1000"),
                              QStringLiteral("--display_step=100")},
                             dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
        const MetricsTable metrics = readMetrics(dir.path());
        QCOMPARE(metrics.header.last(), QStringLiteral("heldout_loss"));
        double last = -1;
        for (const QStringList &row : metrics.rows)
            if (!row.last().isEmpty())
                last = row.last().toDouble();
        // y = 2x + 10 + N(0, 0.33): a learnt line leaves about the noise, 0.11.
        QVERIFY2(last > 0 && last < 0.3, qPrintable(QString::number(last)));
    }

    // In async a slow chief takes few of the steps; it still scores the model
    // every --display_step global steps, so the last held-out loss written is
    // the trained line's, not the one it measured at the start.
    void aSlowChiefStillScoresTheTrainedModel()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--eval_dataset=linear"), QStringLiteral("--last_step=1000"),
                              QStringLiteral("--display_step=100")},
                             dir.path());
        // Paced, so the chief's share is about the same in a plain and a
        // ThreadSanitizer build, loaded or not: worker:1 takes at least 3 ms
        // a step, the chief at least 60.
        cluster.startPs(0);
        cluster.startWorker(0, {QStringLiteral("--straggler_ms=60")});
        cluster.startWorker(1, {QStringLiteral("--compute_ms=3"), QStringLiteral("--compute_jitter=0")});
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
        const MetricsTable metrics = readMetrics(dir.path());
        const int workerColumn = metrics.column(QStringLiteral("worker"));
        int chiefRows = 0;
        QList<double> heldOut;
        for (const QStringList &row : metrics.rows) {
            chiefRows += row.at(workerColumn) == QStringLiteral("0");
            if (!row.last().isEmpty())
                heldOut.append(row.last().toDouble());
        }
        // The setting under test: the chief took under 200 of the 1,000
        // steps, so counting its own steps it would have scored at most
        // twice; and enough of them to have crossed most 100-step marks.
        qInfo("the chief took %d of the 1,000 steps and wrote %d held-out losses", chiefRows, int(heldOut.size()));
        QVERIFY2(chiefRows >= 10 && chiefRows < 200, qPrintable(QString::number(chiefRows)));
        QVERIFY2(heldOut.size() >= 5, qPrintable(QString::number(heldOut.size())));
        QVERIFY2(heldOut.last() > 0 && heldOut.last() < 0.3, qPrintable(QString::number(heldOut.last())));
    }

    void badHeldOutFlagsExitWith2SayingWhatToFix_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QString>("expected");
        QTest::newRow("fraction 1.5") << QStringList{QStringLiteral("--eval_fraction=1.5")}
                                      << QStringLiteral("--eval_fraction=1.5: must be more than 0 and less than 1");
        QTest::newRow("both flags") << QStringList{QStringLiteral("--eval_fraction=0.2"),
                                                   QStringLiteral("--eval_dataset=linear")}
                                    << QStringLiteral("give only one of them");
        QTest::newRow("too few samples to hold any out")
            << QStringList{QStringLiteral("--eval_fraction=0.001")}
            << QStringLiteral("--eval_fraction=0.001 of 200 samples holds out none: give a larger fraction");
        QTest::newRow("other features")
            << QStringList{QStringLiteral("--model=softmax"), QStringLiteral("--dataset=blobs:3:2"),
                           QStringLiteral("--eval_dataset=blobs:3:5")}
            << QStringLiteral("the held-out data has 5 features per sample, but the model trains on 2");
        QTest::newRow("classes the model lacks")
            << QStringList{QStringLiteral("--model=softmax"), QStringLiteral("--dataset=blobs:3:2"),
                           QStringLiteral("--eval_dataset=blobs:5:2")}
            << QStringLiteral("but the softmax model has 3 classes");
    }

    void badHeldOutFlagsExitWith2SayingWhatToFix()
    {
        QFETCH(QStringList, flags);
        QFETCH(QString, expected);
        // The chief refuses before it reaches for the ps: none needs to run.
        LocalCluster cluster(1, 2, flags);
        NodeProcess &chief = cluster.startWorker(0);
        QCOMPARE(chief.waitForExit(20s), 2);
        QVERIFY2(chief.output().contains(expected), qPrintable(chief.output()));
    }
};

QTEST_GUILESS_MAIN(TestHeldOut)
#include "tst_held_out.moc"
