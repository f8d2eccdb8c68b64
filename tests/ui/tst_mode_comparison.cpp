// "Compare modes": the same cluster run once per update mode, with real
// parasync-node processes on free ports. The summary is checked on a
// hand-written run directory; a short comparison leaves three run
// directories, the figure and comparison.csv, and the time-to-target order
// in the CSV is the one the runs' own metrics.csv files show (recomputed
// here, independently); a task that dies fails its mode and not the others;
// a taken port is swapped for a free one without asking; a launch that
// cannot start ends the comparison saying why; the window's action runs and
// its Cancel stops the tasks; bad flags exit 2.
#include "base/error.h"
#include "base/port_holder.h"
#include "base/version.h"
#include "config/task_options.h"
#include "config/workloads.h"
#include "formats/run_log.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/mode_comparison.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"
#include "support/cluster_harness.h"
#include "ui/charts/mode_comparison_charts.h"
#include "ui/charts/mode_comparison_view.h"
#include "ui/headless/headless_mode_comparison.h"
#include "ui/windows/main_window.h"
#include "ui/windows/mode_comparison_window.h"

#include <QAbstractSeries>
#include <QAction>
#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineSeries>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

using namespace parasync;
using namespace Qt::StringLiterals;
using namespace parasync::ui;

namespace {

void writeFile(const QString &path, const QByteArray &contents)
{
    QFile file(path);
    QVERIFY2(file.open(QIODevice::WriteOnly), qPrintable(path));
    file.write(contents);
}

proto::TelemetryEvent stepEvent(int64_t globalStep, double wallTime, int worker, proto::PushOutcome outcome,
                                float fullLoss, int64_t computeUs, int64_t pushUs, int64_t waitUs)
{
    proto::TelemetryEvent event;
    auto *step = event.mutable_step();
    step->set_global_step(globalStep);
    step->set_wall_time(wallTime);
    step->set_worker(worker);
    step->set_outcome(outcome);
    step->set_batch_loss(1);
    step->set_full_loss(fullLoss);
    step->set_compute_us(computeUs);
    step->set_push_us(pushUs);
    step->set_wait_us(waitUs);
    step->add_parameters(1.5f);
    step->add_parameters(9.0f);
    return event;
}

// The demo on free ports at a pace that keeps the test short: worker:1
// three times slower than worker:0, as in the comparison's defaults.
ModeComparisonOptions fastComparison(const QString &outputDirectory)
{
    ClusterPlan plan = ClusterPlan::demo();
    plan.cluster.ps.front().port = pickFreePort();
    for (HostPort &worker : plan.cluster.workers)
        worker.port = pickFreePort();
    plan = withComparisonDefaults(plan);
    plan.training.learningRate = 0.02f;
    plan.training.pace.computeMs = 5;
    plan.workerPace[1].computeMs = 15;
    ModeComparisonOptions options;
    options.plan = plan;
    options.modes = comparedModes(3);
    options.targetLoss = defaultTargetLoss(plan);
    options.runSeconds = 12;
    options.holdSeconds = 0.5;
    options.outputDirectory = outputDirectory;
    return options;
}

struct CsvFile
{
    QStringList header;
    std::vector<QStringList> rows;
    QString value(size_t row, const QString &column) const { return rows.at(row).value(header.indexOf(column)); }
};

CsvFile readCsv(const QString &path)
{
    CsvFile csv;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return csv;
    csv.header = QString::fromUtf8(file.readLine().trimmed()).split(QLatin1Char(','));
    while (!file.atEnd()) {
        const QString line = QString::fromUtf8(file.readLine().trimmed());
        if (!line.isEmpty())
            csv.rows.push_back(line.split(QLatin1Char(',')));
    }
    return csv;
}

// Seconds from a run's first metrics.csv row to its first row whose
// full_loss is at or below `target`: what a person would read off the file.
std::optional<double> timeToTargetFromMetrics(const QString &runDirectory, double target)
{
    const testing::MetricsTable metrics = testing::readMetrics(runDirectory);
    const int time = metrics.column(QStringLiteral("wall_time"));
    const int loss = metrics.column(QStringLiteral("full_loss"));
    if (metrics.rows.empty() || time < 0 || loss < 0)
        return std::nullopt;
    const double start = metrics.rows.front().value(time).toDouble();
    for (const QStringList &row : metrics.rows) {
        bool ok = false;
        const double value = row.value(loss).toDouble(&ok);
        if (ok && value <= target)
            return row.value(time).toDouble() - start;
    }
    return std::nullopt;
}

QStringList modesByTimeToTarget(const std::map<QString, std::optional<double>> &times)
{
    std::vector<std::pair<double, QString>> reached;
    for (const auto &[mode, time] : times)
        if (time)
            reached.emplace_back(*time, mode);
    std::sort(reached.begin(), reached.end());
    QStringList order;
    for (const auto &entry : reached)
        order << entry.second;
    return order;
}

} // namespace

class TestModeComparison : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("ParasyncTests"));
        qRegisterMetaType<parasync::RunSnapshot>();
        qRegisterMetaType<parasync::proto::ModeConfig>();
    }

    void summaryOfAHandWrittenRunDirectory()
    {
        QTemporaryDir dir;
        TrainingOptions training;
        training.mode.set_mode(proto::SSP);
        training.mode.set_staleness(3);
        writeRunClusterJson(dir.path().toStdString(), "{}", training.toJson());
        // The lines as ps:0 writes them: a dropped gradient before the first
        // update, a step without a full loss, a dip below the target that
        // does not last (it still counts: the first time), a mode change,
        // and a torn last line.
        QByteArray log;
        const auto add = [&log](const proto::TelemetryEvent &event) {
            log += QByteArray::fromStdString(RunLog::formatStepLogLine(event, {"w", "b"})) + '\n';
        };
        const float none = std::nanf("");
        proto::TelemetryEvent state;
        state.mutable_worker_state()->set_wall_time(999.0);
        add(state);
        add(stepEvent(0, 999.5, 1, proto::DROPPED_STALE, none, 1000, 0, 0));
        add(stepEvent(1, 1000.0, 0, proto::APPLIED, 5.0f, 8000, 1000, 1000));
        add(stepEvent(2, 1000.5, 1, proto::APPLIED, none, 20000, 0, 0));
        add(stepEvent(3, 1001.0, 0, proto::APPLIED, 0.4f, 8000, 1000, 11000));
        proto::TelemetryEvent change;
        change.mutable_mode_change()->set_global_step(3);
        change.mutable_mode_change()->set_wall_time(1001.5);
        change.mutable_mode_change()->mutable_current()->set_mode(proto::SYNC);
        add(change);
        add(stepEvent(4, 1002.0, 0, proto::APPLIED, 0.6f, 8000, 1000, 0));
        add(stepEvent(5, 1004.0, 1, proto::APPLIED, 0.3f, 20000, 0, 20000));
        log += QByteArray::fromStdString(
                   RunLog::formatStepLogLine(stepEvent(6, 1005.0, 0, proto::APPLIED, 0.2f, 1, 1, 1), {}))
                   .left(40);
        writeFile(dir.filePath(QStringLiteral("steps.jsonl")), log);

        const ModeRunSummary run = summarizeModeRun(dir.path(), 0.5);
        QCOMPARE(run.mode.mode(), proto::SSP);
        QCOMPARE(run.mode.staleness(), 3);
        QCOMPARE(run.modeChanges, 1);
        QCOMPARE(run.loss.size(), size_t(4));
        QCOMPARE(run.loss[0].seconds, 0.0);
        QCOMPARE(run.loss[0].loss, 5.0);
        QCOMPARE(run.loss[3].globalStep, int64_t(5));
        QVERIFY(run.secondsToTarget);
        QCOMPARE(*run.secondsToTarget, 1.0); // step 3, not the later 0.3
        QCOMPARE(run.globalStepAtTarget, int64_t(3));
        QCOMPARE(float(run.finalLoss), 0.3f); // the log has float precision
        QCOMPARE(run.seconds, 4.0);
        QCOMPARE(run.globalSteps, int64_t(5));
        QCOMPARE(run.globalStepsPerSecond, 1.0); // steps 1 to 5 in 4 s
        QCOMPARE(run.workers.size(), size_t(2));
        QCOMPARE(run.workers[0].steps, int64_t(3));
        QCOMPARE(run.workers[0].stepsPerSecond, 0.75);
        QCOMPARE(run.workers[0].waitFraction, 12000.0 / (24000 + 3000 + 12000));
        QCOMPARE(run.workers[1].steps, int64_t(3)); // the dropped one too
        QCOMPARE(run.workers[1].dropped, int64_t(1));
        QCOMPARE(run.workers[1].waitFraction, 20000.0 / (41000 + 20000));

        // A target never reached is "not reached", not a time.
        const ModeRunSummary strict = summarizeModeRun(dir.path(), 0.1);
        QVERIFY(!strict.secondsToTarget);
        QCOMPARE(strict.globalStepAtTarget, int64_t(-1));
    }

    // What a mode's pace costs, read from the log as ps:0 wrote it: the
    // staleness of every gradient that reached the model (not the dropped
    // one's), and the held-out metrics the chief logged at its evaluations.
    void stalenessAndHeldOutMetricsComeFromTheStepLog()
    {
        QTemporaryDir dir;
        TrainingOptions training; // async
        writeRunClusterJson(dir.path().toStdString(), "{}", training.toJson());
        const std::vector<std::string> metricNames{"heldout_loss", "heldout_accuracy"};
        const float none = std::nanf("");
        QByteArray log;
        // Staleness of the ten applied gradients: 0 0 1 2 2 3 5 8 13 40.
        const std::vector<int64_t> staleness{0, 0, 1, 2, 2, 3, 5, 8, 13, 40};
        for (size_t i = 0; i < staleness.size(); ++i) {
            proto::TelemetryEvent event
                = stepEvent(int64_t(i) + 1, 1000.0 + double(i), int(i % 3), proto::APPLIED, none, 1000, 0, 0);
            event.mutable_step()->set_staleness(staleness[i]);
            if (i == 2 || i == 9) { // the chief evaluated at global steps 3 and 10
                event.mutable_step()->add_metrics(i == 2 ? 1.5f : 0.25f);
                event.mutable_step()->add_metrics(i == 2 ? 0.5f : 0.875f);
            }
            if (i % 3 == 0) { // probed at i = 0, 3, 6, 9: 0, 2, 5 and 40 steps apart
                auto *probe = event.mutable_step()->mutable_staleness_probe();
                probe->set_stale_step(int64_t(i) + 1 - staleness[i]);
                probe->set_fresh_step(int64_t(i) + 1);
                probe->set_cosine(i == 0 ? 1.0f : i == 3 ? 0.75f : i == 6 ? 0.5f : -0.25f);
                probe->set_relative_error(float(i) / 10.0f);
            }
            log += QByteArray::fromStdString(RunLog::formatStepLogLine(event, {"w", "b"}, metricNames)) + '\n';
        }
        proto::TelemetryEvent dropped = stepEvent(10, 1010.0, 1, proto::DROPPED_STALE, none, 1000, 0, 0);
        dropped.mutable_step()->set_staleness(500); // never reached the model: not counted
        log += QByteArray::fromStdString(RunLog::formatStepLogLine(dropped, {"w", "b"}, metricNames)) + '\n';
        writeFile(dir.filePath(QStringLiteral("steps.jsonl")), log);

        const ModeRunSummary run = summarizeModeRun(dir.path(), 0.5);
        QCOMPARE(run.staleness.gradients, int64_t(10));
        QCOMPARE(run.staleness.max, int64_t(40));
        QCOMPARE(run.staleness.mean, 74.0 / 10);
        QCOMPARE(run.staleness.quantile(0.5), int64_t(2));  // 5 of 10 at 2 or below
        QCOMPARE(run.staleness.quantile(0.9), int64_t(13)); // 9 of 10 at 13 or below
        QCOMPARE(run.staleness.quantile(1.0), int64_t(40));
        QCOMPARE(run.staleness.quantile(0.0), int64_t(0));
        QCOMPARE(run.staleness.counts.at(2), int64_t(2));

        QCOMPARE(run.metrics.size(), size_t(2));
        const std::vector<MetricPoint> &accuracy = run.metrics.at(QStringLiteral("heldout_accuracy"));
        QCOMPARE(accuracy.size(), size_t(2));
        QCOMPARE(accuracy[0].globalStep, int64_t(3));
        QCOMPARE(accuracy[0].seconds, 2.0);
        QCOMPARE(accuracy[0].value, 0.5);
        QCOMPARE(run.finalMetric(QStringLiteral("heldout_accuracy")), 0.875);
        QCOMPARE(run.finalMetric(QStringLiteral("heldout_loss")), 0.25);
        QVERIFY(std::isnan(run.finalMetric(QStringLiteral("auc"))));

        // comparison.csv carries them, one row per run.
        ModeComparisonSummary summary;
        summary.runs = {run};
        const CsvTable table = modeComparisonTable(summary);
        const auto cell = [&table](const char *column) {
            const qsizetype c = table.header.indexOf(QLatin1String(column));
            return c < 0 ? QStringLiteral("(no column %1)").arg(QLatin1String(column)) : table.rows[0][c];
        };
        QCOMPARE(cell("mode_spec"), QStringLiteral("async"));
        QCOMPARE(cell("staleness_median"), QStringLiteral("2"));
        QCOMPARE(cell("staleness_p90"), QStringLiteral("13"));
        QCOMPARE(cell("staleness_max"), QStringLiteral("40"));
        QCOMPARE(cell("final_heldout_accuracy"), QStringLiteral("0.875"));

        // The probes, by steps apart, and their median cosine in the table.
        QCOMPARE(run.stalenessCost.count(), size_t(4));
        QCOMPARE(run.stalenessCost.buckets()[0].medianCosine(), 1.0f);   // 0 apart
        QCOMPARE(run.stalenessCost.buckets()[2].medianCosine(), 0.75f);  // 2-3
        QCOMPARE(run.stalenessCost.buckets()[3].medianCosine(), 0.5f);   // 4-7
        QCOMPARE(run.stalenessCost.buckets()[6].medianCosine(), -0.25f); // 32-63
        QCOMPARE(cell("staleness_probes"), QStringLiteral("4"));
        QCOMPARE(cell("probe_cosine_median"), QStringLiteral("0.625"));
    }

    // Contenders that share a mode get run directories of their own.
    void contendersThatShareAModeGetTheirOwnRunDirectories()
    {
        QCOMPARE(modeRunNames(comparedModes(10)), (QStringList{u"async"_s, u"sync"_s, u"ssp"_s}));
        QCOMPARE(modeRunNames(parseModeSpecList("async,sync,sync:3/4,ssp:2,ssp:30")),
                 (QStringList{u"async"_s, u"sync"_s, u"sync-3of4"_s, u"ssp-2"_s, u"ssp-30"_s}));
        QCOMPARE(modeRunNames(parseModeSpecList("async,async+lr/staleness,ssp:3+lr/staleness")),
                 (QStringList{u"async"_s, u"async-lr-by-staleness"_s, u"ssp"_s}));
    }

    // The matrix factorization's answer is known: the chief's entries were
    // seen with noise of standard deviation 0.1, so the true matrix's loss
    // there -- the floor -- is near 0.01, and the workload's target (0.02)
    // is within reach of a model that found it.
    void theFactorizationsFloorIsItsNoise()
    {
        const Workload mf = workload("mf");
        const double floor = chiefLossFloor(mf.plan);
        QVERIFY2(floor > 0.007 && floor < 0.013, qPrintable(QString::number(floor)));
        QVERIFY(mf.targetLoss > floor);
        ClusterPlan own = mf.plan;
        own.training.dataset = "csv:/nonexistent.csv"; // the user's data: no known answer
        QVERIFY(std::isnan(chiefLossFloor(own)));
    }

    // Held-out data by wall time and by global step, loss by default and
    // accuracy when chosen: the two panels follow the runs' records.
    void heldOutPanelsDrawTheChosenMetricByTimeAndByStep()
    {
        ModeComparisonSummary summary;
        for (const char *name : {"async", "sync"}) {
            ModeRunSummary &run = summary.runs.emplace_back();
            run.name = QLatin1String(name);
            run.mode.set_mode(run.name == u"sync"_s ? proto::SYNC : proto::ASYNC);
            for (int k = 1; k <= 4; ++k) {
                run.metrics[u"heldout_loss"_s].push_back({0.5 * k, 100 * k, 1.0 / k});
                run.metrics[u"heldout_accuracy"_s].push_back({0.5 * k, 100 * k, 0.2 * k});
            }
        }
        ModeComparisonView view;
        view.resize(1800, 1500);
        view.setSummary(summary);
        std::vector<ModeHeldOutChart *> charts;
        for (ModeHeldOutChart *chart : view.findChildren<ModeHeldOutChart *>())
            charts.push_back(chart);
        QCOMPARE(charts.size(), size_t(2));
        const auto lineOf = [](ModeHeldOutChart *chart, const QString &name) -> QLineSeries * {
            chart->ensureUpToDate();
            for (QAbstractSeries *series : chart->findChild<QChartView *>()->chart()->series())
                if (series->name() == name && series->type() == QAbstractSeries::SeriesTypeLine)
                    return static_cast<QLineSeries *>(series);
            return nullptr;
        };
        for (ModeHeldOutChart *chart : charts) {
            QCOMPARE(chart->metric(), u"heldout_loss"_s);
            QLineSeries *sync = lineOf(chart, u"sync"_s);
            QVERIFY(sync);
            QCOMPARE(sync->count(), 4);
            const bool byStep = chart->exportName() == u"mode_heldout_by_step"_s;
            QCOMPARE(sync->at(3), QPointF(byStep ? 400 : 2.0, 0.25));
        }
        view.setHeldOutMetric(u"heldout_accuracy"_s);
        for (ModeHeldOutChart *chart : charts) {
            QCOMPARE(chart->metric(), u"heldout_accuracy"_s);
            QCOMPARE(lineOf(chart, u"async"_s)->at(3).y(), 0.8);
        }
        // A metric no run logged: the default again.
        view.setHeldOutMetric(u"heldout_auc"_s);
        QCOMPARE(charts.front()->metric(), u"heldout_loss"_s);
    }

    void summaryFallsBackToMetricsWithoutAStepLog()
    {
        QTemporaryDir dir;
        writeFile(dir.filePath(QStringLiteral("metrics.csv")), "global_step,wall_time,worker,loss,full_loss,w,b\n"
                                                               "1,50.0,0,9,8.0,0.1,0.2\n"
                                                               "2,50.5,1,7,,0.2,0.3\n"
                                                               "3,52.0,0,2,1.5,0.5,0.9\n"
                                                               "4,53.0,1,1,0.9,1.0,2.0\n");
        const ModeRunSummary run = summarizeModeRun(dir.path(), 2.0);
        QCOMPARE(run.loss.size(), size_t(3));
        QVERIFY(run.secondsToTarget);
        QCOMPARE(*run.secondsToTarget, 2.0);
        QCOMPARE(run.globalStepsPerSecond, 1.0);
        QCOMPARE(run.workers.size(), size_t(2));
        QCOMPARE(run.workers[1].waitFraction, 0.0); // metrics.csv has no timings

        QTemporaryDir empty;
        QVERIFY_THROWS_EXCEPTION(InputError, summarizeModeRun(empty.path(), 1.0));
        const ModeComparisonSummary summary = summarizeModeComparison({dir.path(), empty.path()}, 2.0);
        QCOMPARE(summary.runs.size(), size_t(2));
        QVERIFY(summary.runs[1].failure.contains(empty.path()));
        QVERIFY(summary.failed());
    }

    // Whichever mode the data says was first is named first: here sync.
    void verdictAndCsvFollowTheDataNotAFixedOrder()
    {
        ModeComparisonSummary summary;
        summary.targetLoss = 0.25;
        const std::vector<proto::ModeConfig> modes = comparedModes(4);
        const QStringList names = modeRunNames(modes);
        for (size_t i = 0; i < modes.size(); ++i) {
            const proto::ModeConfig &mode = modes[i];
            ModeRunSummary run;
            run.mode = mode;
            run.name = names[qsizetype(i)];
            run.seconds = 10;
            run.finalLoss = 0.3;
            run.workers = {{0, 100, 0, 10, 0.5}, {1, 50, 2, 5, 0.1}};
            summary.runs.push_back(run);
        }
        summary.runs[0].secondsToTarget = 3.0;
        summary.runs[1].secondsToTarget = 1.5;
        const QString verdict = modeComparisonVerdict(summary);
        QVERIFY2(
            verdict.startsWith(QStringLiteral("sync reached a full loss of 0.25 first (1.5 s), then async (3.0 s).")),
            qPrintable(verdict));
        QVERIFY2(verdict.contains(QStringLiteral("ssp s=4 did not reach it")), qPrintable(verdict));

        const CsvTable table = modeComparisonTable(summary);
        QCOMPARE(table.header.mid(0, 9).join(QLatin1Char(',')),
                 QStringLiteral("mode,target,time_to_target_s,final_loss,global_steps_per_s,worker0_steps_per_s,"
                                "worker0_wait_fraction,worker1_steps_per_s,worker1_wait_fraction"));
        QCOMPARE(table.rows.size(), size_t(3));
        QCOMPARE(table.rows[1][0], QStringLiteral("sync"));
        QCOMPARE(table.rows[1][2], QStringLiteral("1.500"));
        QCOMPARE(table.rows[2][2], QString()); // not reached: empty
        QCOMPARE(table.rows[2][table.header.indexOf(QStringLiteral("staleness"))], QStringLiteral("4"));
    }

    // A colour means a mode in every comparison, whatever the contenders'
    // order; a second contender of one mode is told apart by its shade.
    void aModeKeepsItsColourWhateverTheOrder()
    {
        const auto runsOf = [](const char *specs) {
            std::vector<ModeRunSummary> runs;
            for (const proto::ModeConfig &mode : parseModeSpecList(specs))
                runs.emplace_back().mode = mode;
            return runs;
        };
        const std::vector<ModeRunSummary> usual = runsOf("async,sync,ssp:10");
        const std::vector<ModeRunSummary> other = runsOf("ssp:3,sync:15/16,async,ssp:10,sync");
        QCOMPARE(modeRunColor(other, 0), modeRunColor(usual, 2));
        QCOMPARE(modeRunColor(other, 1), modeRunColor(usual, 1));
        QCOMPARE(modeRunColor(other, 2), modeRunColor(usual, 0));
        QVERIFY(modeRunColor(other, 3) != modeRunColor(other, 0));
        QVERIFY(modeRunColor(other, 4) != modeRunColor(other, 1));
        std::set<QRgb> distinct;
        for (size_t i = 0; i < other.size(); ++i)
            distinct.insert(modeRunColor(other, i).rgb());
        QCOMPARE(distinct.size(), other.size());
        // Over seeds, a contender's runs share its colour, and the next
        // contender of the mode still gets its own shade.
        std::vector<ModeRunSummary> seeds = runsOf("sync,sync:15/16");
        seeds.push_back(seeds[0]);
        seeds.push_back(seeds[1]);
        for (size_t i = 0; i < seeds.size(); ++i)
            seeds[i].name = i % 2 == 0 ? u"sync"_s : u"sync-15of16"_s;
        QCOMPARE(modeRunColor(seeds, 2), modeRunColor(seeds, 0));
        QCOMPARE(modeRunColor(seeds, 3), modeRunColor(seeds, 1));
        QVERIFY(modeRunColor(seeds, 1) != modeRunColor(seeds, 0));
        // A run of no known mode (an old run directory) still gets a colour.
        std::vector<ModeRunSummary> unknown(2);
        QVERIFY(modeRunColor(unknown, 0) != modeRunColor(unknown, 1));
    }

    void badOptionsAreRefusedWithWhatToFix()
    {
        QTemporaryDir dir;
        ModeComparison comparison;
        ModeComparisonOptions options = fastComparison(dir.path());
        QString error;
        options.targetLoss = -1;
        QVERIFY(!comparison.start(options, &error));
        QVERIFY2(error.contains(QStringLiteral("target loss")), qPrintable(error));
        options.targetLoss = 1;
        options.runSeconds = 0;
        QVERIFY(!comparison.start(options, &error));
        QVERIFY2(error.contains(QStringLiteral("at least 1 second")), qPrintable(error));
        // A folder that already holds a run: the chief would restore it.
        options.runSeconds = 5;
        QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("sync")));
        writeFile(dir.filePath(QStringLiteral("sync/steps.jsonl")), "{}\n");
        QVERIFY(!comparison.start(options, &error));
        QVERIFY2(error.contains(QStringLiteral("already holds a run")), qPrintable(error));
        QVERIFY(!comparison.isRunning());
    }

    void threeModesRunHeadlesslyAndTheCsvOrderMatchesTheirMetrics()
    {
        QTemporaryDir dir;
        const ModeComparisonOptions options = fastComparison(dir.path());
        QVERIFY(std::isfinite(options.targetLoss) && options.targetLoss > 0);
        HeadlessModeComparison headless(options);
        headless.setNodeBinary(testing::nodeBinary());
        QSignalSpy finished(&headless, &HeadlessModeComparison::finished);
        QSignalSpy ended(headless.comparison(), &ModeComparison::runEnded);
        QSignalSpy soFar(headless.comparison(), &ModeComparison::runsSummarized);
        headless.start();
        QVERIFY(finished.wait(90000));
        QCOMPARE(finished.front().front().toInt(), int(HeadlessModeComparison::Success));
        QVERIFY(!headless.comparison()->launcher()->anyRunning());
        QCOMPARE(ended.size(), 3);
        // The figure grows run by run: after async, then after sync, each
        // drawn whole once it ended (and, while a run trains, as far as it
        // has come: those summaries end on a run "in progress").
        std::vector<ModeComparisonSummary> afterARun;
        for (const QList<QVariant> &arguments : std::as_const(soFar)) {
            const auto summary = arguments.front().value<ModeComparisonSummary>();
            QVERIFY(!summary.runs.empty());
            for (size_t i = 0; i + 1 < summary.runs.size(); ++i)
                QVERIFY(summary.runs[i].stopReason != QStringLiteral("in progress"));
            if (summary.runs.back().stopReason != QStringLiteral("in progress"))
                afterARun.push_back(summary);
        }
        QCOMPARE(afterARun.size(), size_t(2));
        for (int i = 0; i < 2; ++i) {
            const ModeComparisonSummary &summary = afterARun[size_t(i)];
            QCOMPARE(summary.runs.size(), size_t(i + 1));
            QCOMPARE(summary.runsToCome, 2 - i);
            QVERIFY(!summary.runs.back().loss.empty());
        }

        // Three run directories, each a whole run that Compare runs can open.
        const QDir out(dir.path());
        for (const QString &mode : {QStringLiteral("async"), QStringLiteral("sync"), QStringLiteral("ssp")}) {
            const QString run = out.filePath(mode);
            const std::vector<QJsonObject> steps = testing::readStepLog(run);
            int workers = 0;
            std::set<int> seen;
            for (const QJsonObject &record : steps)
                if (record.value(QStringLiteral("type")).toString() == QLatin1String("step"))
                    seen.insert(record.value(QStringLiteral("worker")).toInt());
            workers = int(seen.size());
            QVERIFY2(workers == 2, qPrintable(run));
            RunState state;
            replayRunDirectory(run.toStdString(), &state);
            QVERIFY2(state.snapshot().globalStep > 0, qPrintable(run));
        }
        // The figure in three formats; the PNG is an image of its size.
        for (const QString &name :
             {QStringLiteral("mode_comparison.png"), QStringLiteral("mode_comparison.svg"),
              QStringLiteral("mode_comparison.pdf"), QStringLiteral("mode_comparison_series.csv")})
            QVERIFY2(QFileInfo(out.filePath(name)).size() > 0, qPrintable(name));
        const QImage png(out.filePath(QStringLiteral("mode_comparison.png")));
        QVERIFY(!png.isNull());
        QCOMPARE(png.size(), QSize(1800, 1500));

        // comparison.csv: one row per mode; its times to the target are the
        // ones each run's metrics.csv shows, so the order is the data's.
        const CsvFile csv = readCsv(out.filePath(QStringLiteral("comparison.csv")));
        QCOMPARE(csv.rows.size(), size_t(3));
        std::map<QString, std::optional<double>> fromCsv, fromMetrics;
        for (size_t i = 0; i < csv.rows.size(); ++i) {
            const QString mode = csv.value(i, QStringLiteral("mode"));
            const double target = csv.value(i, QStringLiteral("target")).toDouble();
            QVERIFY(std::abs(target - options.targetLoss) < 1e-7);
            const QString time = csv.value(i, QStringLiteral("time_to_target_s"));
            fromCsv[mode] = time.isEmpty() ? std::nullopt : std::optional<double>(time.toDouble());
            fromMetrics[mode] = timeToTargetFromMetrics(out.filePath(mode), target);
            QCOMPARE(bool(fromCsv[mode]), bool(fromMetrics[mode]));
            if (fromCsv[mode])
                QVERIFY2(
                    std::abs(*fromCsv[mode] - *fromMetrics[mode]) < 0.002,
                    qPrintable(QStringLiteral("%1: %2 vs %3").arg(mode).arg(*fromCsv[mode]).arg(*fromMetrics[mode])));
            QVERIFY(csv.value(i, QStringLiteral("worker0_steps_per_s")).toDouble() > 0);
            QVERIFY(csv.value(i, QStringLiteral("worker1_steps_per_s")).toDouble() > 0);
        }
        QCOMPARE(fromCsv.size(), size_t(3));
        // At this pace every mode gets there well within its time.
        QCOMPARE(modesByTimeToTarget(fromCsv).size(), 3);
        QCOMPARE(modesByTimeToTarget(fromCsv), modesByTimeToTarget(fromMetrics));
        // The sync barrier holds worker:0 for the straggler; async never does.
        for (size_t i = 0; i < csv.rows.size(); ++i) {
            const double waiting = csv.value(i, QStringLiteral("worker0_wait_fraction")).toDouble();
            if (csv.value(i, QStringLiteral("mode")) == QLatin1String("sync"))
                QVERIFY2(waiting > 0.2, qPrintable(QString::number(waiting)));
            if (csv.value(i, QStringLiteral("mode")) == QLatin1String("async"))
                QCOMPARE(waiting, 0.0);
        }
        // Each mode's staleness, as the step log has it: the largest and the
        // median of the gradients that reached the model. Sync's are all 0.
        for (size_t i = 0; i < csv.rows.size(); ++i) {
            const QString mode = csv.value(i, QStringLiteral("mode"));
            std::vector<int64_t> staleness;
            for (const QJsonObject &record : testing::readStepLog(out.filePath(mode))) {
                const QString outcome = record.value(QStringLiteral("outcome")).toString();
                if (record.value(QStringLiteral("type")).toString() == QLatin1String("step")
                    && (outcome == QLatin1String("applied") || outcome == QLatin1String("aggregated")))
                    staleness.push_back(int64_t(record.value(QStringLiteral("staleness")).toDouble()));
            }
            QVERIFY2(!staleness.empty(), qPrintable(mode));
            std::sort(staleness.begin(), staleness.end());
            QCOMPARE(csv.value(i, QStringLiteral("staleness_max")).toLongLong(), staleness.back());
            QCOMPARE(csv.value(i, QStringLiteral("staleness_median")).toLongLong(),
                     staleness[(staleness.size() + 1) / 2 - 1]);
            if (mode == QLatin1String("sync"))
                QCOMPARE(staleness.back(), int64_t(0));
        }
    }

    // Over seeds: each contender runs once per seed into seed-<s>/<mode>,
    // with that seed; comparison.csv has a row a run, comparison_spread.csv
    // a row a contender whose medians and ranges are those of its runs'
    // rows, and the figure says it is a comparison over seeds.
    void aComparisonOverSeedsRunsEachContenderPerSeedAndDrawsTheSpread()
    {
        QTemporaryDir dir;
        ModeComparisonOptions options = fastComparison(dir.path());
        options.modes = parseModeSpecList("async,sync");
        options.seeds = {7, 8};
        options.runSeconds = 8;
        HeadlessModeComparison headless(options);
        headless.setNodeBinary(testing::nodeBinary());
        QSignalSpy finished(&headless, &HeadlessModeComparison::finished);
        QSignalSpy started(headless.comparison(), &ModeComparison::runStarted);
        headless.start();
        QVERIFY(finished.wait(120000));
        QCOMPARE(finished.front().front().toInt(), int(HeadlessModeComparison::Success));
        // Seed by seed: every contender of seed 7 before seed 8.
        QStringList order;
        for (const QList<QVariant> &arguments : std::as_const(started))
            order << arguments.at(1).toString();
        QCOMPARE(order, (QStringList{u"async, seed 7"_s, u"sync, seed 7"_s, u"async, seed 8"_s, u"sync, seed 8"_s}));
        const QDir out(dir.path());
        for (const QString &seed : {u"7"_s, u"8"_s}) {
            for (const QString &mode : {u"async"_s, u"sync"_s}) {
                const QString run = out.filePath(u"seed-%1/%2"_s.arg(seed, mode));
                QFile cluster(QDir(run).filePath(u"cluster.json"_s));
                QVERIFY2(cluster.open(QIODevice::ReadOnly), qPrintable(run));
                const QJsonObject training
                    = QJsonDocument::fromJson(cluster.readAll()).object().value(u"training"_s).toObject();
                QCOMPARE(training.value(u"seed"_s).toVariant().toString(), seed);
                QVERIFY2(!testing::readStepLog(run).empty(), qPrintable(run));
            }
        }

        const CsvFile runs = readCsv(out.filePath(u"comparison.csv"_s));
        QCOMPARE(runs.rows.size(), size_t(4));
        const CsvFile spreads = readCsv(out.filePath(u"comparison_spread.csv"_s));
        QCOMPARE(spreads.rows.size(), size_t(2));
        for (size_t c = 0; c < spreads.rows.size(); ++c) {
            const QString mode = spreads.value(c, u"mode"_s);
            QCOMPARE(spreads.value(c, u"runs"_s), u"2"_s);
            QCOMPARE(spreads.value(c, u"seeds"_s), u"7 8"_s);
            // The medians and ranges are those of the contender's two rows.
            for (const QString &figure : {u"final_loss"_s, u"global_steps_per_s"_s}) {
                std::vector<double> values;
                for (size_t r = 0; r < runs.rows.size(); ++r)
                    if (runs.value(r, u"mode"_s) == mode)
                        values.push_back(runs.value(r, figure).toDouble());
                QCOMPARE(values.size(), size_t(2));
                const double low = std::min(values[0], values[1]), high = std::max(values[0], values[1]);
                const auto near
                    = [](double a, double b) { return std::abs(a - b) <= 0.01 * std::max(1.0, std::abs(b)); };
                QVERIFY2(near(spreads.value(c, figure + u"_min"_s).toDouble(), low),
                         qPrintable(mode + u" "_s + figure));
                QVERIFY2(near(spreads.value(c, figure + u"_max"_s).toDouble(), high),
                         qPrintable(mode + u" "_s + figure));
                QVERIFY2(near(spreads.value(c, figure + u"_median"_s).toDouble(), (low + high) / 2),
                         qPrintable(mode + u" "_s + figure));
            }
            std::set<QString> seeds;
            for (size_t r = 0; r < runs.rows.size(); ++r)
                if (runs.value(r, u"mode"_s) == mode)
                    seeds.insert(runs.value(r, u"seed"_s));
            QCOMPARE(seeds, (std::set<QString>{u"7"_s, u"8"_s}));
        }
        // The figure: a line and a band per contender, and words over seeds.
        ModeComparisonView *view = headless.view();
        QVERIFY(view->title().contains(u"2 seeds each"_s));
        const QString verdict = modeComparisonVerdict(*view->summary());
        QVERIFY2(verdict.startsWith(u"Over 2 seeds, a difference is named only where every seed"_s),
                 qPrintable(verdict));
        QVERIFY2(verdict.contains(u"Time to a full loss of"_s), qPrintable(verdict));
        for (ModeLossChart *chart : view->findChildren<ModeLossChart *>()) {
            chart->ensureUpToDate();
            const QList<QAbstractSeries *> series = chart->findChild<QChartView *>()->chart()->series();
            QCOMPARE(std::count_if(series.begin(), series.end(),
                                   [](QAbstractSeries *s) { return s->type() == QAbstractSeries::SeriesTypeArea; }),
                     2);
            // One line a contender, named as the mode (the title says "2 seeds each").
            QVERIFY(std::any_of(series.begin(), series.end(), [](QAbstractSeries *s) {
                return s->name() == QLatin1String("async") && s->type() == QAbstractSeries::SeriesTypeLine;
            }));
        }
        const QImage png(out.filePath(u"mode_comparison.png"_s));
        QCOMPARE(png.size(), QSize(1800, 1500));
    }

    void aTaskThatDiesFailsItsModeAndTheOthersStillRun()
    {
        QTemporaryDir dir;
        HeadlessModeComparison headless(fastComparison(dir.path()));
        headless.setNodeBinary(testing::nodeBinary());
        ModeComparison *comparison = headless.comparison();
        bool killed = false;
        connect(comparison, &ModeComparison::progress, this, [&](const ModeRunProgress &progress) {
            if (killed || progress.name != QLatin1String("sync") || progress.globalStep < 5)
                return;
            ClusterLauncher *launcher = comparison->launcher();
            const int row = launcher->taskRow(TaskId{JobName::Worker, 1});
            QVERIFY(row >= 0);
            launcher->killTask(row);
            killed = true;
        });
        QSignalSpy ended(comparison, &ModeComparison::runEnded);
        QSignalSpy finished(&headless, &HeadlessModeComparison::finished);
        headless.start();
        QVERIFY(finished.wait(90000));
        QVERIFY(killed);
        QCOMPARE(finished.front().front().toInt(), int(HeadlessModeComparison::RunFailed));
        QCOMPARE(ended.size(), 3);
        // sync says which task died and why; async and ssp went as planned.
        for (const QList<QVariant> &run : std::as_const(ended)) {
            const QString name = run.at(1).toString();
            const QString failure = run.at(3).toString();
            if (name == QLatin1String("sync"))
                QVERIFY2(failure.contains(QStringLiteral("worker:1")) && failure.contains(QStringLiteral("SIGKILL")),
                         qPrintable(failure));
            else
                QVERIFY2(failure.isEmpty(), qPrintable(name + QStringLiteral(": ") + failure));
        }
        // What the failed run recorded is still in the figure and the CSV.
        const CsvFile csv = readCsv(QDir(dir.path()).filePath(QStringLiteral("comparison.csv")));
        QCOMPARE(csv.rows.size(), size_t(3));
        QVERIFY(csv.value(1, QStringLiteral("failure")).contains(QStringLiteral("worker:1")));
        QVERIFY(csv.value(1, QStringLiteral("global_steps_per_s")).toDouble() > 0);
        QVERIFY(QFileInfo(QDir(dir.path()).filePath(QStringLiteral("mode_comparison.png"))).size() > 0);
        QVERIFY(!comparison->launcher()->anyRunning());
    }

    void aTakenPortIsSwappedForAFreeOneWithoutAskingAndTheRunTrains()
    {
        // A demo left running in the window holds the plan's ps port: the
        // comparison has no one to ask, so its run takes the free port.
        QTemporaryDir dir;
        ModeComparisonOptions options = fastComparison(dir.path());
        options.modes = {comparedModes(3).front()};
        const uint16_t taken = options.plan.cluster.ps.front().port;
        testing::HeldPort stale(taken);
        QVERIFY(stale.ok());
        ModeComparison comparison;
        comparison.setNodeBinary(testing::nodeBinary());
        QSignalSpy ended(&comparison, &ModeComparison::runEnded);
        QSignalSpy finished(&comparison, &ModeComparison::finished);
        QString error;
        QVERIFY2(comparison.start(options, &error), qPrintable(error));
        QVERIFY(finished.wait(60000));

        QCOMPARE(ended.size(), 1);
        QCOMPARE(ended.front().at(3).toString(), QString());
        QCOMPARE(ended.front().at(2).toString(), QStringLiteral("target reached"));
        const ClusterPlan &launched = comparison.launcher()->plan();
        QCOMPARE(launched.cluster.ps.size(), size_t(1));
        QVERIFY(launched.cluster.ps.front().port != 0 && launched.cluster.ps.front().port != taken);
        QCOMPARE(launched.cluster.workers, options.plan.cluster.workers);
        const auto summary = finished.front().front().value<ModeComparisonSummary>();
        QVERIFY(!summary.failed());
        QCOMPARE(summary.runs.size(), size_t(1));
        QVERIFY(summary.runs.front().secondsToTarget);
        QVERIFY(!comparison.launcher()->anyRunning());
    }

    // The backup-worker contender (sync:1/2: each step takes the first of
    // the two workers' gradients), run past its target for its whole time:
    // the run still says when it got there, and its records are of that mode.
    void aBackupWorkerContenderTrainsItsWholeTimeAndIsTimedToTheTarget()
    {
        QTemporaryDir dir;
        ModeComparisonOptions options = fastComparison(dir.path());
        options.modes = parseModeSpecList("sync:1/2");
        options.stopAtTarget = false;
        options.runSeconds = 4;
        ModeComparison comparison;
        comparison.setNodeBinary(testing::nodeBinary());
        QSignalSpy ended(&comparison, &ModeComparison::runEnded);
        QSignalSpy finished(&comparison, &ModeComparison::finished);
        QString error;
        QVERIFY2(comparison.start(options, &error), qPrintable(error));
        QVERIFY(finished.wait(60000));
        QCOMPARE(ended.size(), 1);
        QCOMPARE(ended.front().at(3).toString(), QString());
        QCOMPARE(ended.front().at(2).toString(), QStringLiteral("time limit"));
        const auto summary = finished.front().front().value<ModeComparisonSummary>();
        QCOMPARE(summary.runs.size(), size_t(1));
        const ModeRunSummary &run = summary.runs.front();
        QCOMPARE(run.name, QStringLiteral("sync"));
        QCOMPARE(run.mode.replicas_to_aggregate(), 1);
        QCOMPARE(run.mode.total_num_replicas(), 2);
        QVERIFY(run.secondsToTarget);
        QVERIFY2(run.seconds > *run.secondsToTarget, qPrintable(QString::number(run.seconds)));
        // Every step took one gradient; the slower worker's, computed
        // against a step that had closed meanwhile, were dropped.
        int64_t aggregated = 0;
        for (const QJsonObject &record : testing::readStepLog(run.directory)) {
            if (record.value(QStringLiteral("type")).toString() != QLatin1String("step")
                || record.value(QStringLiteral("outcome")).toString() != QLatin1String("aggregated"))
                continue;
            ++aggregated;
            QCOMPARE(record.value(QStringLiteral("contributions")).toInt(), 1);
            QCOMPARE(record.value(QStringLiteral("staleness")).toInt(), 0);
        }
        QCOMPARE(aggregated, run.staleness.gradients);
        int64_t dropped = 0;
        for (const WorkerStepFigures &worker : run.workers)
            dropped += worker.dropped;
        QVERIFY2(dropped > 0, "the straggler's late gradients are dropped");
    }

    void aRunThatCannotStartEndsTheComparisonSayingWhy()
    {
        QTemporaryDir dir;
        ModeComparison comparison;
        comparison.setNodeBinary(QStringLiteral("/nonexistent/parasync-node"));
        QSignalSpy ended(&comparison, &ModeComparison::runEnded);
        QSignalSpy lines(&comparison, &ModeComparison::line);
        QSignalSpy finished(&comparison, &ModeComparison::finished);
        QString error;
        QVERIFY2(comparison.start(fastComparison(dir.path()), &error), qPrintable(error));
        QVERIFY(finished.wait(30000));

        // What stops the first launch would stop the others: they are not tried.
        QCOMPARE(ended.size(), 1);
        QCOMPARE(ended.front().at(1).toString(), QStringLiteral("async"));
        QCOMPARE(ended.front().at(2).toString(), QStringLiteral("not started"));
        const QString failure = ended.front().at(3).toString();
        QVERIFY2(failure.startsWith(QStringLiteral("could not start: "))
                     && failure.contains(QStringLiteral("cannot find the parasync-node program")),
                 qPrintable(failure));
        bool said = false;
        for (const QList<QVariant> &line : std::as_const(lines))
            said = said || line.front().toString().startsWith(QStringLiteral("async could not start: "));
        QVERIFY(said);
        const auto summary = finished.front().front().value<ModeComparisonSummary>();
        QVERIFY(summary.failed());
        QCOMPARE(summary.runs.size(), size_t(1));
        QCOMPARE(summary.runs.front().failure, failure);
        QVERIFY(!comparison.isRunning());
        QVERIFY(comparison.launcher()->tasks().empty());
    }

    void compareModesActionShowsProgressAndCancelStopsTheTasks()
    {
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        ClusterPlan demo = ClusterPlan::demo();
        demo.cluster.ps.front().port = pickFreePort();
        for (HostPort &worker : demo.cluster.workers)
            worker.port = pickFreePort();
        window.setDemoPlan(demo);
        window.show();

        auto *action = window.findChild<QAction *>(QStringLiteral("compareModes"));
        QVERIFY(action);
        action->trigger();
        ModeComparisonWindow *comparisonWindow = window.findChild<ModeComparisonWindow *>();
        QVERIFY(comparisonWindow);
        QVERIFY(comparisonWindow->isVisible());
        ModeComparison *comparison = comparisonWindow->comparison();
        QVERIFY(comparison->isRunning());
        QCOMPARE(comparison->options().modes.size(), size_t(3));
        QVERIFY(comparison->options().outputDirectory.startsWith(
            QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation)));
        // The status names the mode that trains and its step.
        auto *status = comparisonWindow->findChild<QLabel *>(QStringLiteral("modeComparisonStatus"));
        QVERIFY(status);
        QTRY_VERIFY_WITH_TIMEOUT(status->text().contains(QStringLiteral("async"))
                                     && status->text().contains(QStringLiteral("global step"))
                                     && !status->text().contains(QStringLiteral("global step 0,")),
                                 30000);
        // The figure draws the first run while it trains, and the bar says
        // which run it is and how far.
        QTRY_VERIFY_WITH_TIMEOUT(comparisonWindow->view()->summary()
                                     && comparisonWindow->view()->summary()->runs.size() == 1
                                     && !comparisonWindow->view()->summary()->runs.front().loss.empty(),
                                 30000);
        QCOMPARE(comparisonWindow->view()->summary()->runs.front().stopReason, QStringLiteral("in progress"));
        QVERIFY(comparisonWindow->view()->summary()->runs.front().inProgress);
        QVERIFY2(modeComparisonVerdict(*comparisonWindow->view()->summary())
                     .contains(QStringLiteral("so far"), Qt::CaseInsensitive),
                 qPrintable(modeComparisonVerdict(*comparisonWindow->view()->summary())));
        auto *bar = comparisonWindow->findChild<QProgressBar *>();
        QVERIFY(bar);
        QVERIFY2(bar->text().startsWith(QStringLiteral("run 1 of 3: ")), qPrintable(bar->text()));
        std::vector<qint64> pids;
        for (const TaskInfo &task : comparison->launcher()->tasks())
            pids.push_back(task.pid);

        QSignalSpy done(comparisonWindow, &ModeComparisonWindow::comparisonFinished);
        auto *cancel = comparisonWindow->findChild<QPushButton *>(QStringLiteral("cancelModeComparison"));
        QVERIFY(cancel);
        cancel->click();
        QVERIFY(done.wait(20000));
        QVERIFY(!comparison->launcher()->anyRunning());
        QVERIFY(comparisonWindow->isDone());
        // Only the run made so far is shown, and it says it was cancelled.
        QCOMPARE(comparisonWindow->view()->summary()->runs.size(), size_t(1));
        QCOMPARE(comparisonWindow->view()->summary()->runs.front().stopReason, QStringLiteral("cancelled"));
        QVERIFY(comparisonWindow->view()->summary()->cancelled);
        QVERIFY(!pids.empty());
        QDir(comparison->options().outputDirectory).removeRecursively();
        comparisonWindow->close();
    }

    // One click to the price of staleness: the staleness workload's five
    // contenders on 16 workers, the first run drawn with its held-out loss
    // and its stale gradients while it trains.
    void thePriceOfStalenessIsOneClickAway()
    {
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();
        auto *action = window.findChild<QAction *>(QStringLiteral("compareModesStaleness"));
        QVERIFY(action);
        // Each workload has its entry, saying what it trains.
        auto *mlp = window.findChild<QAction *>(QStringLiteral("compareModesMlp"));
        QVERIFY(mlp);
        QVERIFY2(mlp->text().contains(QStringLiteral("MLP")) && mlp->toolTip().contains(QStringLiteral("MLP")),
                 qPrintable(mlp->text() + u" / "_s + mlp->toolTip()));
        action->trigger();
        ModeComparisonWindow *comparisonWindow = window.findChild<ModeComparisonWindow *>();
        QVERIFY(comparisonWindow);
        ModeComparison *comparison = comparisonWindow->comparison();
        QVERIFY(comparison->isRunning());
        const ModeComparisonOptions &options = comparison->options();
        QCOMPARE(modeRunNames(options.modes),
                 (QStringList{u"async"_s, u"sync"_s, u"sync-15of16"_s, u"ssp-3"_s, u"ssp-10"_s}));
        QCOMPARE(options.plan.cluster.numWorkers(), 16);
        QVERIFY(options.plan.training.hasHeldOutData());
        QVERIFY(!options.stopAtTarget);
        // Each contender over three seeds: the figure draws the spread.
        QCOMPARE(options.seeds, (std::vector<uint64_t>{1, 2, 3}));
        // async, drawn as it trains: every worker pushing, held-out loss
        // logged, gradients stale.
        QTRY_VERIFY_WITH_TIMEOUT(
            comparisonWindow->view()->summary() && !comparisonWindow->view()->summary()->runs.empty()
                && comparisonWindow->view()->summary()->runs.front().metrics.count(u"heldout_loss"_s)
                && comparisonWindow->view()->summary()->runs.front().staleness.max > 0
                && comparisonWindow->view()->summary()->runs.front().workers.size() == 16,
            60000);
        // Held-out loss is drawn; accuracy is one choice away.
        auto *metric = comparisonWindow->findChild<QComboBox *>(QStringLiteral("heldOutMetric"));
        QVERIFY(metric);
        QTRY_COMPARE_WITH_TIMEOUT(metric->count(), 2, 10000);
        QCOMPARE(metric->currentData().toString(), u"heldout_loss"_s);
        QVERIFY(metric->isEnabled());
        const int accuracy = metric->findData(u"heldout_accuracy"_s);
        QVERIFY(accuracy >= 0);
        metric->setCurrentIndex(accuracy);
        Q_EMIT metric->activated(accuracy); // as a click on the item
        for (ModeHeldOutChart *chart : comparisonWindow->view()->findChildren<ModeHeldOutChart *>())
            QCOMPARE(chart->metric(), u"heldout_accuracy"_s);
        QSignalSpy done(comparisonWindow, &ModeComparisonWindow::comparisonFinished);
        comparisonWindow->findChild<QPushButton *>(QStringLiteral("cancelModeComparison"))->click();
        QVERIFY(done.wait(30000));
        QVERIFY(!comparison->launcher()->anyRunning());
        QDir(options.outputDirectory).removeRecursively();
        comparisonWindow->close();
    }

    void badFlagsExitWithTwoAndSayWhatToFix_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("seconds") << QStringList{QStringLiteral("--compare_seconds=soon")}
                                 << QStringLiteral("--compare_seconds");
        QTest::newRow("target") << QStringList{QStringLiteral("--target_loss=-3")} << QStringLiteral("--target_loss");
        QTest::newRow("mode") << QStringList{QStringLiteral("--mode=sync")} << QStringLiteral("leave out --mode");
        QTest::newRow("no export") << QStringList{} << QStringLiteral("--export");
        QTest::newRow("unknown contender")
            << QStringList{QStringLiteral("--modes=async,semi")} << QStringLiteral("the mode 'semi' is not one");
        QTest::newRow("contender twice") << QStringList{QStringLiteral("--modes=ssp:3,ssp:3")}
                                         << QStringLiteral("twice");
        QTest::newRow("unknown workload")
            << QStringList{QStringLiteral("--workload=bogus")} << QStringLiteral("unknown workload 'bogus'");
        QTest::newRow("seed not a number")
            << QStringList{QStringLiteral("--seeds=1,two")} << QStringLiteral("--seeds takes whole numbers");
        QTest::newRow("seed twice") << QStringList{QStringLiteral("--seeds=3,3")}
                                    << QStringLiteral("--seeds names 3 twice");
        QTest::newRow("more replicas than workers")
            << QStringList{QStringLiteral("--modes=async,sync:3")} << QStringLiteral("sync:3");
        // Bad input is 2 whoever finds it, Qt's parser included.
        QTest::newRow("unknown flag") << QStringList{QStringLiteral("--bogus")}
                                      << QStringLiteral("Unknown option 'bogus'");
        QTest::newRow("a typo") << QStringList{QStringLiteral("--lerning_rate=0.1")}
                                << QStringLiteral("Did you mean --learning_rate?");
    }

    // --version names the protocol, as parasync-node's does: the two must share it.
    void theVersionNamesTheProtocol()
    {
        QProcess app;
        app.start(QStringLiteral(PARASYNC_APP), {QStringLiteral("--version")});
        QVERIFY(app.waitForFinished(30000));
        QCOMPARE(app.exitCode(), 0);
        const QString out = QString::fromLocal8Bit(app.readAllStandardOutput());
        QVERIFY2(out.contains(
                     QStringLiteral("parasync %1 (protocol %2)").arg(QLatin1String(version())).arg(kProtocolVersion)),
                 qPrintable(out));
    }

    void badFlagsExitWithTwoAndSayWhatToFix()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, mentions);
        QTemporaryDir dir;
        QStringList command{QStringLiteral("--headless"), QStringLiteral("--compare_modes")};
        if (mentions != QLatin1String("--export"))
            command << QStringLiteral("--export=") + dir.path();
        QProcess app;
        app.start(QStringLiteral(PARASYNC_APP), command + arguments);
        QVERIFY(app.waitForFinished(30000));
        const QString errors = QString::fromLocal8Bit(app.readAllStandardError());
        QCOMPARE(app.exitCode(), 2);
        QVERIFY2(errors.contains(mentions), qPrintable(errors));
        QVERIFY(QDir(dir.path()).isEmpty()); // nothing started
    }

    // A comparison flag without --compare_modes would be ignored in silence.
    void comparisonFlagsWithoutCompareModesAreRefused()
    {
        QProcess app;
        app.start(QStringLiteral(PARASYNC_APP), {QStringLiteral("--headless"), QStringLiteral("--modes=async,sync")});
        QVERIFY(app.waitForFinished(30000));
        QCOMPARE(app.exitCode(), 2);
        const QString errors = QString::fromLocal8Bit(app.readAllStandardError());
        QVERIFY2(errors.contains(QStringLiteral("--modes only means something with --compare_modes")),
                 qPrintable(errors));
    }
};

QTEST_MAIN(TestModeComparison)
#include "tst_mode_comparison.moc"
