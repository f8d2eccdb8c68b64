// The figures the exported CSVs state, recomputed from the run directory's
// own step log: a real cluster trains in async, is switched to sync, and
// its run directory is replayed and exported as the app and the headless
// runner export it. Each worker's steps per second, share of time waiting
// and dropped gradients, per mode, must be what the step log says.

#include "formats/step_log_reader.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"
#include "support/cluster_harness.h"
#include "ui/charts/run_charts_view.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <limits>
#include <map>

using namespace parasync;
using namespace parasync::testing;
using namespace parasync::ui;

namespace {

// One stretch of the run under one mode, from the step log alone.
struct Period
{
    int64_t fromStep = 1; // global steps at or after it belong here
    double firstTime = std::numeric_limits<double>::max();
    double lastTime = std::numeric_limits<double>::lowest();
    struct Worker
    {
        int64_t gradients = 0;
        int64_t dropped = 0;
        int64_t waitUs = 0;
        int64_t busyUs = 0;
    };
    std::map<int, Worker> workers;
};

std::vector<Period> periodsFromStepLog(const QString &logdir)
{
    std::vector<QJsonObject> records;
    std::vector<Period> periods(1);
    StepLogReader log(logdir);
    QByteArray line;
    while (log.next(&line)) {
        const QJsonObject o = QJsonDocument::fromJson(line).object();
        const QString type = o.value(QStringLiteral("type")).toString();
        if (type == QLatin1String("mode_change")) {
            Period next;
            next.fromStep = int64_t(o.value(QStringLiteral("global_step")).toDouble());
            periods.push_back(next);
        } else if (type == QLatin1String("step")) {
            records.push_back(o);
        }
    }
    for (const QJsonObject &o : records) {
        const int64_t step = int64_t(o.value(QStringLiteral("global_step")).toDouble());
        size_t index = 0;
        while (index + 1 < periods.size() && step >= periods[index + 1].fromStep)
            ++index;
        Period &period = periods[index];
        const double time = o.value(QStringLiteral("wall_time")).toDouble();
        period.firstTime = std::min(period.firstTime, time);
        period.lastTime = std::max(period.lastTime, time);
        Period::Worker &worker = period.workers[o.value(QStringLiteral("worker")).toInt()];
        ++worker.gradients;
        if (o.value(QStringLiteral("outcome")).toString() == QLatin1String("dropped_stale"))
            ++worker.dropped;
        const int64_t wait = int64_t(o.value(QStringLiteral("wait_us")).toDouble());
        worker.waitUs += wait;
        worker.busyUs += wait + int64_t(o.value(QStringLiteral("compute_us")).toDouble())
                         + int64_t(o.value(QStringLiteral("push_us")).toDouble());
    }
    return periods;
}

// "series,worker,value" rows of one of the worker figures' CSVs, keyed by
// series then worker index.
std::map<QString, std::map<int, double>> readWorkerCsv(const QString &path)
{
    std::map<QString, std::map<int, double>> values;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return values;
    static const QRegularExpression row(QStringLiteral("^(\"[^\"]*\"|[^,]*),worker:(\\d+),([-0-9.e+]+)$"));
    const QStringList lines = QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    for (const QString &line : lines) {
        const auto match = row.match(line);
        if (!match.hasMatch())
            continue; // the header
        QString series = match.captured(1);
        if (series.startsWith(QLatin1Char('"')))
            series = series.mid(1, series.size() - 2);
        values[series][match.captured(2).toInt()] = match.captured(3).toDouble();
    }
    return values;
}

// The CSV's series for the period beginning at `fromStep`: its label says
// "…, steps FROM–TO".
const std::map<int, double> *seriesOf(const std::map<QString, std::map<int, double>> &csv, int64_t fromStep)
{
    for (const auto &[series, values] : csv)
        if (series.contains(QStringLiteral("steps %1\u2013").arg(fromStep)))
            return &values;
    return nullptr;
}

bool close(double shown, double recomputed)
{
    return std::abs(shown - recomputed) <= 1e-4 * std::max(1.0, std::abs(recomputed));
}

} // namespace

class TestExportedFigures : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void theExportedWorkerFiguresAreTheStepLogs()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        // worker:1 a straggler, so that sync holds worker:0 and ssp-free
        // async drops nothing while sync drops the stale gradients of the
        // switch.
        LocalCluster cluster(
            1, 2,
            {QStringLiteral("--mode=async"), QStringLiteral("--compute_ms=3"), QStringLiteral("--last_step=1500")},
            dir.path());
        cluster.startPs(0);
        cluster.startWorker(1, {QStringLiteral("--straggler_ms=6")});
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const proto::ClusterStatusResponse &s) { return s.global_step() >= 600; }));
        proto::ModeConfig sync;
        sync.set_mode(proto::SYNC);
        QVERIFY(cluster.setMode(sync).ok());
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));

        RunState state;
        replayRunDirectory(dir.path().toStdString(), &state);
        RunChartsView view;
        view.resize(1200, 800);
        view.setSnapshot(std::make_shared<const RunSnapshot>(state.snapshot()));
        const QString target = dir.filePath(QStringLiteral("export"));
        QStringList written;
        QString error;
        QVERIFY2(view.exportAll(target, &written, &error), qPrintable(error));

        const std::vector<Period> periods = periodsFromStepLog(dir.path());
        QCOMPARE(periods.size(), size_t(2)); // async, then sync
        const auto stepsPerSecond = readWorkerCsv(target + QStringLiteral("/worker_steps_per_second.csv"));
        const auto waiting = readWorkerCsv(target + QStringLiteral("/worker_wait_fraction.csv"));
        const auto dropped = readWorkerCsv(target + QStringLiteral("/worker_dropped_gradients.csv"));
        int checked = 0;
        int64_t droppedInAll = 0;
        for (const Period &period : periods) {
            const auto *shownRate = seriesOf(stepsPerSecond, period.fromStep);
            const auto *shownWait = seriesOf(waiting, period.fromStep);
            QVERIFY2(shownRate && shownWait, qPrintable(QStringLiteral("no series from step %1").arg(period.fromStep)));
            const double seconds = period.lastTime - period.firstTime;
            for (const auto &[worker, figures] : period.workers) {
                const QString who = QStringLiteral("worker:%1 from step %2: ").arg(worker).arg(period.fromStep);
                const double rate = double(figures.gradients) / seconds;
                QVERIFY2(close(shownRate->at(worker), rate),
                         qPrintable(who
                                    + QStringLiteral("%1 steps/s exported, %2 in the step log")
                                          .arg(shownRate->at(worker))
                                          .arg(rate)));
                const double share = double(figures.waitUs) / double(figures.busyUs);
                QVERIFY2(close(shownWait->at(worker), share),
                         qPrintable(who
                                    + QStringLiteral("waiting %1 exported, %2 in the step log")
                                          .arg(shownWait->at(worker))
                                          .arg(share)));
                if (const auto *shownDropped = seriesOf(dropped, period.fromStep))
                    QCOMPARE(int64_t(shownDropped->at(worker)), figures.dropped);
                droppedInAll += figures.dropped;
                ++checked;
            }
        }
        QCOMPARE(checked, 4);
        // The whole run's drops, as the dropped-gradient chart's first series says.
        const auto whole = dropped.find(QStringLiteral("whole run"));
        QVERIFY(whole != dropped.end());
        QCOMPARE(int64_t(whole->second.at(0) + whole->second.at(1)), droppedInAll);
        // In sync each worker stepped at the straggler's pace.
        const auto *syncRate = seriesOf(stepsPerSecond, periods[1].fromStep);
        QVERIFY(std::abs(syncRate->at(0) - syncRate->at(1)) <= 0.1 * syncRate->at(1));
    }
};

QTEST_MAIN(TestExportedFigures)
#include "tst_exported_figures.moc"
