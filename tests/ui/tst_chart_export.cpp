// Every chart, fed a hand-made run, exported as a person would use it: a PNG
// that opens and shows more than a blank canvas, an SVG that parses and
// carries its title, axis labels and legend, a CSV with the header and the
// series, and a marker for the mode change on every chart.
#include "ui/charts/chart_exporter.h"
#include "ui/charts/convergence_chart.h"
#include "ui/charts/loss_chart.h"
#include "ui/charts/run_charts_view.h"
#include "ui/charts/step_timeline_view.h"
#include "ui/charts/worker_stats_view.h"

#include <QFile>
#include <QImage>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

#include <cmath>
#include <map>

using namespace parasync;
using namespace parasync::ui;

namespace {

// Two workers on the linear demo: async for 300 steps (worker:1 slower),
// then sync with the barrier's waits and one dropped stale gradient.
std::shared_ptr<const RunSnapshot> handMadeRun()
{
    auto run = std::make_shared<RunSnapshot>();
    run->startWallTime = 1700000000.0;
    run->lastStep = 600;
    run->globalStep = 600;
    run->parameterNames = {"w", "b"};
    run->parameterSeries.resize(2);
    run->mode.set_mode(proto::SYNC);
    double time = run->startWallTime;
    int64_t clocks[2] = {0, 0};
    for (int64_t step = 1; step <= 600; ++step) {
        const bool sync = step > 300;
        for (int worker = 0; worker < 2; ++worker) {
            if (!sync && (step % 3 == 0) != (worker == 1))
                continue; // async: worker:0 does two steps of three
            StepRecord record;
            record.globalStep = step;
            record.worker = worker;
            record.workerClock = ++clocks[worker];
            record.computedFromStep = step - 1;
            record.staleness = sync ? 0 : step % 3;
            record.wallTime = time;
            record.computeUs = 800;
            record.pushUs = 100;
            record.outcome = sync ? proto::AGGREGATED : proto::APPLIED;
            if (sync) {
                record.waitUs = worker == 0 ? 1500 : 200;
                record.waitReason = proto::BLOCKED_BY_SYNC;
            }
            const double progress = 1 - std::exp(-double(step) / 80.0);
            const double w = 2 * progress, b = 10 * progress;
            record.parameters = {float(w), float(b)};
            record.batchLoss = float((w - 2) * (w - 2) / 3 + (b - 10) * (b - 10) + 0.1 + 0.02 * (step % 7));
            record.fullLoss = std::nanf("");
            run->recentSteps.push_back(record);
            run->batchLossByWorker[worker].append(double(step), record.batchLoss);
            run->parameterSeries[0].append(double(record.computedFromStep), w);
            run->parameterSeries[1].append(double(record.computedFromStep), b);
            if (worker == 0 && step % 20 == 0) {
                run->fullLoss.append(double(step), record.batchLoss);
                run->fullLossByTime.append(time - run->startWallTime, record.batchLoss);
            }
        }
        time += 0.002;
    }
    StepRecord dropped = run->recentSteps.back();
    dropped.outcome = proto::DROPPED_STALE;
    dropped.staleness = 1;
    dropped.worker = 1;
    run->recentSteps.push_back(dropped);

    ModeMarker change;
    change.globalStep = 301;
    change.wallTime = run->startWallTime + 300 * 0.002;
    change.previous.set_mode(proto::ASYNC);
    change.current.set_mode(proto::SYNC);
    change.requestedBy = "tst_chart_export";
    run->modeChanges.push_back(change);
    run->checkpoints.emplace_back(600, time);
    // The workers' staleness probes: the async half's gradients, 0 to 2
    // steps old.
    run->stalenessCost = {{"0", 0, 30, 1.0f, 0.0f}, {"1", 1, 20, 0.98f, 0.1f}, {"2-3", 2, 10, 0.9f, 0.35f}};
    run->stalenessProbes = 60;
    for (int worker = 0; worker < 2; ++worker) {
        WorkerFigures figures;
        figures.index = worker;
        figures.phase = proto::FINISHED;
        figures.clock = clocks[worker];
        figures.applied = clocks[worker];
        figures.dropped = worker;
        figures.stepsPerSecond = worker == 0 ? 400 : 250;
        figures.waitFraction = worker == 0 ? 0.3 : 0.1;
        figures.stalenessHistogram = {200, 80, 20, 0, 0, 0, 0, 0, 0, 0, 0};
        run->workers.push_back(figures);
    }
    return run;
}

// A PNG that opens, at the chart's size, with more than a few colours.
void verifyPng(const QString &path, QSize size)
{
    QImage image;
    QVERIFY2(image.load(path, "PNG"), qPrintable(path));
    QCOMPARE(image.size(), size);
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7)
        for (int x = 0; x < image.width(); x += 7)
            colours.insert(image.pixel(x, y));
    QVERIFY2(colours.size() > 8, qPrintable(QStringLiteral("%1: only %2 colours").arg(path).arg(colours.size())));
}

// An SVG that parses as XML, with every expected text somewhere in it.
void verifySvg(const QString &path, const QStringList &texts)
{
    QFile file(path);
    QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(path));
    const QByteArray bytes = file.readAll();
    QXmlStreamReader xml(bytes);
    QString allText;
    bool sawSvg = false;
    while (!xml.atEnd()) {
        xml.readNext();
        if (xml.isStartElement() && xml.name() == QStringLiteral("svg"))
            sawSvg = true;
        if (xml.isCharacters())
            allText += xml.text() + QLatin1Char(' ');
    }
    QVERIFY2(!xml.hasError(), qPrintable(path + QStringLiteral(": ") + xml.errorString()));
    QVERIFY(sawSvg);
    for (const QString &text : texts)
        QVERIFY2(allText.contains(text), qPrintable(QStringLiteral("%1 lacks '%2'").arg(path, text)));
}

// RFC 4180: fields may be quoted, with "" for a quote inside.
QList<QStringList> readCsv(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly | QIODevice::Text))
        return {};
    QList<QStringList> rows;
    QStringList row;
    QString field;
    bool quoted = false;
    const QString text = QString::fromUtf8(file.readAll());
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar c = text[i];
        if (quoted) {
            if (c == QLatin1Char('"') && i + 1 < text.size() && text[i + 1] == QLatin1Char('"')) {
                field += c;
                ++i;
            } else if (c == QLatin1Char('"')) {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == QLatin1Char('"')) {
            quoted = true;
        } else if (c == QLatin1Char(',')) {
            row.append(field);
            field.clear();
        } else if (c == QLatin1Char('\n')) {
            row.append(field);
            field.clear();
            rows.append(row);
            row.clear();
        } else {
            field += c;
        }
    }
    return rows;
}

QSet<QString> column(const QList<QStringList> &rows, int index)
{
    QSet<QString> values;
    for (qsizetype i = 1; i < rows.size(); ++i)
        if (index < rows[i].size())
            values.insert(rows[i][index]);
    return values;
}

} // namespace

class TestChartExport : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void everyChartShowsTheRunAndItsModeChange()
    {
        RunChartsView view;
        view.setSnapshot(handMadeRun());
        view.flush();
        const auto charts = view.charts();
        QVERIFY(charts.size() >= 8);
        for (ExportableChart *chart : charts) {
            QTemporaryDir dir;
            QString error;
            // Rendering brings a hidden chart up to date.
            QVERIFY2(ChartExporter::exportPng(chart, dir.filePath(QStringLiteral("x.png")), &error), qPrintable(error));
            QVERIFY2(chart->pointCount() > 0, qPrintable(chart->exportName()));
            // The staleness cost's axis is the staleness itself: a gradient
            // so many steps old costs what it costs whichever mode made it.
            if (chart->exportName() == QStringLiteral("staleness_cost"))
                continue;
            QVERIFY2(chart->modeMarkerCount() >= 1,
                     qPrintable(chart->exportName() + QStringLiteral(" has no mode marker")));
        }
    }

    void exportAllWritesEveryChartInEveryFormat()
    {
        QTemporaryDir dir;
        RunChartsView view;
        view.resize(1200, 800);
        const auto run = handMadeRun();
        view.setSnapshot(run);
        QStringList written;
        QString error;
        const QString target = dir.filePath(QStringLiteral("export"));
        QVERIFY2(view.exportAll(target, &written, &error), qPrintable(error));
        QCOMPARE(written.size(), view.charts().size() * 4 + 3); // + mode_changes.csv, run_report.pdf, trace.json

        for (ExportableChart *chart : view.charts()) {
            const QString base = target + QLatin1Char('/') + chart->exportName();
            verifyPng(base + QStringLiteral(".png"), chart->exportSize());
            const QList<QStringList> rows = readCsv(base + QStringLiteral(".csv"));
            QVERIFY2(rows.size() > 1, qPrintable(base + QStringLiteral(".csv is empty")));
            for (const QStringList &row : rows)
                QCOMPARE(row.size(), rows.first().size());
        }

        verifySvg(target + QStringLiteral("/loss.svg"),
                  {view.loss()->title(), QStringLiteral("global step"), QStringLiteral("loss (mean squared error"),
                   QStringLiteral("worker:0 batch loss"), QStringLiteral("worker:1 batch loss"),
                   QStringLiteral("chief full-shard loss"), QStringLiteral("sync @ 301")});
        verifySvg(target + QStringLiteral("/parameters.svg"),
                  {view.convergence()->title(), QStringLiteral("parameter value"), QStringLiteral("true w = 2"),
                   QStringLiteral("true b = 10"), QStringLiteral("sync @ 301")});
        verifySvg(target + QStringLiteral("/parameter_path.svg"),
                  {QStringLiteral("(w, b) path over the loss surface"), QStringLiteral("MSE contours"),
                   QStringLiteral("true (2, 10)")});
        verifySvg(target + QStringLiteral("/step_timeline.svg"),
                  {QStringLiteral("Step interleaving"), QStringLiteral("global step"), QStringLiteral("worker:0"),
                   QStringLiteral("worker:1"), QStringLiteral("blocked by sync barrier"),
                   QStringLiteral("dropped stale gradient")});
        verifySvg(target + QStringLiteral("/step_timeline_overview.svg"), {QStringLiteral("sync @ 301")});
        verifySvg(target + QStringLiteral("/worker_steps_per_second.svg"),
                  {QStringLiteral("Steps per second by worker"), QStringLiteral("steps per second"),
                   QStringLiteral("async, steps 1"), QStringLiteral("sync, steps 301")});
        verifySvg(target + QStringLiteral("/staleness_histogram.svg"),
                  {QStringLiteral("Staleness of gradients"), QStringLiteral("staleness (global steps)")});
        verifySvg(target + QStringLiteral("/staleness_cost.svg"),
                  {QStringLiteral("What a stale gradient is worth"),
                   QStringLiteral("median cosine with the fresh gradient"), QStringLiteral("median relative error"),
                   QStringLiteral("2-3 (10)")});
        const auto cost = readCsv(target + QStringLiteral("/staleness_cost.csv"));
        QCOMPARE(cost.size(), 4);
        QCOMPARE(cost[3], (QStringList{QStringLiteral("2-3"), QStringLiteral("10"), QStringLiteral("0.9"),
                                       QStringLiteral("0.35")}));

        const auto loss = readCsv(target + QStringLiteral("/loss.csv"));
        QCOMPARE(loss.first(), (QStringList{QStringLiteral("series"), QStringLiteral("global_step"),
                                            QStringLiteral("min"), QStringLiteral("max"), QStringLiteral("mean"),
                                            QStringLiteral("count"), QStringLiteral("smoothed")}));
        QCOMPARE(column(loss, 0),
                 (QSet<QString>{QStringLiteral("worker:0 batch loss"), QStringLiteral("worker:1 batch loss"),
                                QStringLiteral("chief full loss")}));
        const auto parameters = readCsv(target + QStringLiteral("/parameters.csv"));
        QCOMPARE(column(parameters, 0), (QSet<QString>{QStringLiteral("w"), QStringLiteral("b")}));
        const auto timeline = readCsv(target + QStringLiteral("/step_timeline.csv"));
        QCOMPARE(qsizetype(timeline.size() - 1), qsizetype(run->recentSteps.size()));
        QVERIFY(column(timeline, 5).contains(QStringLiteral("dropped_stale")));
        QVERIFY(column(timeline, 7).contains(QStringLiteral("sync_barrier")));
        const auto modes = readCsv(target + QStringLiteral("/mode_changes.csv"));
        QCOMPARE(modes.size(), 2);
        QCOMPARE(modes[1][0], QStringLiteral("301"));
        QVERIFY(modes[1][3].startsWith(QStringLiteral("sync (replicas_to_aggregate=")));
    }

    void smoothingAndLogScaleChangeWhatIsDrawn()
    {
        LossChart chart;
        chart.setSnapshot(handMadeRun());
        chart.setSmoothing(0);
        const CsvTable raw = chart.csv();
        chart.setSmoothing(0.95);
        const CsvTable smooth = chart.csv();
        QCOMPARE(raw.rows.size(), smooth.rows.size());
        // Without smoothing the EMA is the bucket mean; with it, it lags.
        int differing = 0;
        for (size_t i = 0; i < raw.rows.size(); ++i) {
            if (raw.rows[i][0] == QStringLiteral("chief full loss"))
                continue;
            QVERIFY(std::abs(raw.rows[i][6].toDouble() - raw.rows[i][4].toDouble()) < 1e-4);
            differing += std::abs(smooth.rows[i][6].toDouble() - smooth.rows[i][4].toDouble()) > 1e-4;
        }
        QVERIFY(differing > 10);
        chart.setLogScale(false);
        QVERIFY(!chart.logScale());
        chart.setLogScale(true);
        QVERIFY(chart.logScale());
        QTemporaryDir dir;
        QString error;
        QVERIFY(ChartExporter::exportSvg(&chart, dir.filePath(QStringLiteral("loss.svg")), &error));
        verifySvg(dir.filePath(QStringLiteral("loss.svg")), {QStringLiteral("log scale")});
    }

    // A few workers' staleness is a histogram each; sixteen workers' is one
    // histogram of them all (256 slivers cannot be read), in shares.
    void manyWorkersShareOneStalenessHistogram()
    {
        for (const int workers : {2, 16}) {
            auto run = std::make_shared<RunSnapshot>();
            for (int worker = 0; worker < workers; ++worker) {
                WorkerFigures figures;
                figures.index = worker;
                figures.stalenessHistogram = {worker % 2 == 0 ? 30 : 10, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0};
                run->workers.push_back(figures);
            }
            WorkerBarChart chart(WorkerBarChart::Figure::StalenessHistogram);
            chart.setSnapshot(run);
            std::map<QString, std::map<QString, double>> shares; // series -> staleness -> %
            for (const QStringList &row : chart.csv().rows)
                shares[row[0]][row[1]] = row[2].toDouble();
            if (workers == 2) {
                QCOMPARE(shares.size(), size_t(2));
                QCOMPARE(shares[QStringLiteral("worker:0")][QStringLiteral("0")], 75.0);
                QCOMPARE(shares[QStringLiteral("worker:1")][QStringLiteral("0")], 50.0);
            } else {
                QCOMPARE(shares.size(), size_t(1));
                // 8 x 30 + 8 x 10 at staleness 0 of 8 x 40 + 8 x 20 in all.
                // (The CSV keeps 8 significant digits.)
                QVERIFY(std::abs(shares[QStringLiteral("all 16 workers")][QStringLiteral("0")] - 100.0 * 320 / 480)
                        < 1e-5);
                QVERIFY(std::abs(shares[QStringLiteral("all 16 workers")][QStringLiteral("1")] - 100.0 * 160 / 480)
                        < 1e-5);
            }
        }
    }

    void anEmptyRunStillExportsValidFiles()
    {
        // Exporting before any step arrived must not crash or write junk.
        QTemporaryDir dir;
        RunChartsView view;
        view.setSnapshot(std::make_shared<const RunSnapshot>());
        QStringList written;
        QString error;
        QVERIFY2(view.exportAll(dir.path(), &written, &error), qPrintable(error));
        for (const QString &path : std::as_const(written)) {
            if (path.endsWith(QStringLiteral(".svg")))
                verifySvg(path, {});
            if (path.endsWith(QStringLiteral(".png")))
                QVERIFY(!QImage(path).isNull());
        }
    }

    void exportToAFolderThatCannotExistSaysWhich()
    {
        RunChartsView view;
        view.setSnapshot(handMadeRun());
        QStringList written;
        QString error;
        QVERIFY(!view.exportAll(QStringLiteral("/proc/parasync-cannot-be-here"), &written, &error));
        QVERIFY2(error.contains(QStringLiteral("/proc/parasync-cannot-be-here")), qPrintable(error));
    }

    void timelineFollowsTheHeadUntilPanned()
    {
        StepTimelineChart chart;
        chart.resize(1000, 400);
        chart.show();
        chart.setSnapshot(handMadeRun());
        StepTimelineView *view = chart.view();
        QVERIFY(view->followHead());
        QVERIFY(view->mapping().end >= 600);
        QVERIFY(view->mapping().start > 0); // a window on the newest steps, not everything
        QTest::mouseMove(view, QPoint(500, 200));
        QTest::mousePress(view, Qt::LeftButton, {}, QPoint(500, 200));
        QTest::mouseMove(view, QPoint(700, 200));
        QTest::mouseRelease(view, Qt::LeftButton, {}, QPoint(700, 200));
        QVERIFY(!view->followHead());
        view->fitAll();
        QVERIFY(view->mapping().start <= 1 && view->mapping().end >= 600);
        view->setAxis(StepTimelineView::Axis::WallTime);
        QVERIFY(view->mapping().end < 10); // seconds now, not steps
    }
};

QTEST_MAIN(TestChartExport)
#include "tst_chart_export.moc"
