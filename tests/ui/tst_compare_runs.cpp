// Compare runs: two real runs (a softmax model with held-out data, async at
// one learning rate and sync at another) read from the directories their
// clusters wrote, and a linear run without held-out data. The window's table
// shows the settings that differ, and only those until asked; the metric
// picker offers what the runs recorded, and picking a metric draws it.

#include "support/cluster_harness.h"
#include "ui/windows/compare_runs_window.h"

#include <QAbstractItemModel>
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <map>

using namespace parasync;
using namespace parasync::testing;
using namespace parasync::ui;

namespace {

// The table as the user reads it: setting -> the runs' values.
std::map<QString, QStringList> tableRows(const QAbstractItemModel &model)
{
    std::map<QString, QStringList> rows;
    for (int r = 0; r < model.rowCount(); ++r) {
        QStringList values;
        for (int c = 1; c < model.columnCount(); ++c)
            values.append(model.index(r, c).data().toString());
        rows[model.index(r, 0).data().toString()] = values;
    }
    return rows;
}

QStringList pickerItems(const QComboBox &picker)
{
    QStringList items;
    for (int i = 0; i < picker.count(); ++i)
        items.append(picker.itemText(i));
    return items;
}

bool pick(QComboBox *picker, const QString &text)
{
    const int index = picker->findText(text);
    if (index < 0)
        return false;
    picker->setCurrentIndex(index);
    return true;
}

} // namespace

class TestCompareRuns : public QObject
{
    Q_OBJECT

    QTemporaryDir m_root;
    QString m_async;
    QString m_sync;
    QString m_linear;

    bool train(const QString &directory, QStringList flags, QString *report)
    {
        flags << QStringLiteral("--last_step=600") << QStringLiteral("--display_step=50")
              << QStringLiteral("--compute_ms=2") << QStringLiteral("--compute_jitter=0");
        LocalCluster cluster(1, 2, flags, directory);
        cluster.startAll();
        return cluster.waitAllExitCleanly(report);
    }

    void loadInto(CompareRunsWindow *window, const QStringList &directories)
    {
        QSignalSpy loaded(window, &CompareRunsWindow::runsLoaded);
        const size_t before = window->runs().size();
        for (const QString &directory : directories)
            window->addRunDirectory(directory);
        QVERIFY(loaded.wait(30000) || !loaded.isEmpty());
        QCOMPARE(window->runs().size(), before + size_t(directories.size()));
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_root.isValid());
        const QDir root(m_root.path());
        m_async = root.filePath(QStringLiteral("softmax_async"));
        m_sync = root.filePath(QStringLiteral("softmax_sync"));
        m_linear = root.filePath(QStringLiteral("linear_async"));
        const QStringList softmax{QStringLiteral("--model=softmax"), QStringLiteral("--eval_fraction=0.2")};
        QString report;
        QVERIFY2(train(m_async, softmax + QStringList{QStringLiteral("--learning_rate=0.1")}, &report),
                 qPrintable(report));
        QVERIFY2(train(m_sync,
                       softmax + QStringList{QStringLiteral("--mode=sync"), QStringLiteral("--learning_rate=0.3")},
                       &report),
                 qPrintable(report));
        QVERIFY2(train(m_linear, {}, &report), qPrintable(report));
    }

    void theTableShowsTheSettingsThatDiffer()
    {
        CompareRunsWindow window;
        window.show();
        loadInto(&window, {m_async, m_sync});
        const QAbstractItemModel &model = *window.settingsView()->model();
        QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QStringLiteral("softmax_async"));
        QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QStringLiteral("softmax_sync"));
        const auto differing = tableRows(model);
        QCOMPARE(differing.at(QStringLiteral("mode")), (QStringList{QStringLiteral("async"), QStringLiteral("sync")}));
        QCOMPARE(differing.at(QStringLiteral("learning_rate")),
                 (QStringList{QStringLiteral("0.1"), QStringLiteral("0.3")}));
        // What the runs share is not in the way...
        QVERIFY(!differing.count(QStringLiteral("model")));
        QVERIFY(!differing.count(QStringLiteral("eval_fraction")));
        QVERIFY(!differing.count(QStringLiteral("logdir")));
        // ...until asked for, after the differing ones.
        window.sharedSettingsToggle()->setChecked(true);
        const auto all = tableRows(model);
        QVERIFY(all.size() > differing.size() + 10);
        QCOMPARE(all.at(QStringLiteral("model")), (QStringList{QStringLiteral("softmax"), QStringLiteral("softmax")}));
        QCOMPARE(all.at(QStringLiteral("workers")), (QStringList{QStringLiteral("2"), QStringLiteral("2")}));
        for (int r = 0; r < int(differing.size()); ++r)
            QVERIFY(differing.count(model.index(r, 0).data().toString()));
    }

    void pickingAMetricDrawsIt()
    {
        CompareRunsWindow window;
        window.show();
        loadInto(&window, {m_async, m_sync});
        QComboBox *picker = window.metricPicker();
        const QStringList offered = pickerItems(*picker);
        for (const char *name : {"Held-out accuracy", "Held-out loss", "Throughput", "Staleness"})
            QVERIFY2(offered.contains(QLatin1String(name)), qPrintable(offered.join(QStringLiteral(", "))));
        ComparisonChart *chart = window.chart();

        QVERIFY(pick(picker, QStringLiteral("Held-out accuracy")));
        chart->ensureUpToDate();
        QCOMPARE(chart->metric(), ComparedMetric::HeldOutAccuracy);
        QCOMPARE(chart->title(), QStringLiteral("Held-out accuracy by global step"));
        QCOMPARE(chart->yAxisTitle(), QStringLiteral("held-out accuracy (fraction correct)"));
        QVERIFY(chart->pointCount() > 0);
        // A line per run, every point a fraction; both runs learnt the blobs.
        std::map<QString, double> lastAccuracy;
        for (const QStringList &row : chart->csv().rows) {
            const double accuracy = row.at(2).toDouble();
            QVERIFY(accuracy >= 0 && accuracy <= 1);
            lastAccuracy[row.at(0)] = accuracy;
        }
        QCOMPARE(int(lastAccuracy.size()), 2);
        for (const auto &[run, accuracy] : lastAccuracy)
            QVERIFY2(accuracy > 0.7, qPrintable(QStringLiteral("%1: %2").arg(run).arg(accuracy)));

        QVERIFY(pick(picker, QStringLiteral("Throughput")));
        chart->ensureUpToDate();
        QCOMPARE(chart->yAxisTitle(), QStringLiteral("global steps per second"));
        QVERIFY(chart->pointCount() > 0);
        for (const QStringList &row : chart->csv().rows)
            QVERIFY(row.at(2).toDouble() > 0);

        // Sync applies every gradient to the parameters it was computed
        // from: no staleness. Async's workers overtake each other.
        QVERIFY(pick(picker, QStringLiteral("Staleness")));
        chart->ensureUpToDate();
        std::map<QString, double> mostStale;
        for (const QStringList &row : chart->csv().rows)
            mostStale[row.at(0)] = std::max(mostStale[row.at(0)], row.at(2).toDouble());
        QCOMPARE(int(mostStale.size()), 2);
        QCOMPARE(mostStale.at(QStringLiteral("softmax_sync")), 0.0);

        // By wall time: the same metric on seconds since the start.
        QVERIFY(pick(picker, QStringLiteral("Held-out loss")));
        window.axisPicker()->setCurrentIndex(1);
        chart->ensureUpToDate();
        QCOMPARE(chart->title(), QStringLiteral("Held-out loss by wall time"));
        QCOMPARE(chart->yAxisTitle(), QStringLiteral("loss on held-out data (log scale)"));
        QVERIFY(chart->pointCount() > 0);
        QCOMPARE(chart->exportName(), QStringLiteral("compare_heldout_loss_by_time"));

        // The figure a user looks at, for the record (PARASYNC_SCREENSHOT_DIR).
        const QString shots = qEnvironmentVariable("PARASYNC_SCREENSHOT_DIR");
        if (!shots.isEmpty()) {
            window.axisPicker()->setCurrentIndex(0);
            QVERIFY(pick(picker, QStringLiteral("Held-out accuracy")));
            window.resize(1400, 900);
            chart->ensureUpToDate();
            // The chart's scene lays out its new axes and title on the event loop.
            QCoreApplication::sendPostedEvents();
            QCoreApplication::processEvents();
            QVERIFY(QDir().mkpath(shots));
            QVERIFY(window.grab().save(QDir(shots).filePath(QStringLiteral("compare_runs.png"))));
        }
    }

    void thePickerOffersOnlyWhatTheRunsRecorded()
    {
        CompareRunsWindow window;
        window.show();
        loadInto(&window, {m_linear});
        const QStringList offered = pickerItems(*window.metricPicker());
        QVERIFY2(!offered.contains(QStringLiteral("Held-out accuracy"))
                     && !offered.contains(QStringLiteral("Held-out loss")),
                 qPrintable(offered.join(QStringLiteral(", "))));
        QVERIFY(offered.contains(QStringLiteral("Throughput")));
        QCOMPARE(comparedMetricName(window.chart()->metric()), window.metricPicker()->currentText());
        // One run: nothing to compare its settings with yet.
        QCOMPARE(window.settingsView()->model()->rowCount(), 0);
        // A second run with held-out data brings its metrics to the picker.
        loadInto(&window, {m_async});
        QVERIFY(pickerItems(*window.metricPicker()).contains(QStringLiteral("Held-out accuracy")));
        const auto differing = tableRows(*window.settingsView()->model());
        QCOMPARE(differing.at(QStringLiteral("model")),
                 (QStringList{QStringLiteral("linear"), QStringLiteral("softmax")}));
    }
};

QTEST_MAIN(TestCompareRuns)
#include "tst_compare_runs.moc"
