// The set-up every chart shares, as a user meets it: an empty chart says
// in grey what will show there until the run brings data; the loss legend
// has one entry per worker and the chief's; a mode change is a labelled
// line at its global step; x runs along the bottom and y up the left; bars
// keep the colour and values they were given.
#include "ui/charts/chart_setup.h"
#include "ui/charts/convergence_chart.h"
#include "ui/charts/loss_chart.h"
#include "ui/charts/parameter_path_chart.h"
#include "ui/charts/worker_stats_view.h"
#include "ui/models/chart_style.h"

#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QTest>
#include <QValueAxis>

#include <cmath>
#include <memory>

using namespace parasync;
using namespace parasync::ui;

namespace {

// Two workers on the linear demo for 200 steps, sync from step 101.
std::shared_ptr<const RunSnapshot> smallRun()
{
    auto run = std::make_shared<RunSnapshot>();
    run->startWallTime = 1000;
    run->globalStep = 200;
    run->parameterNames = {"w", "b"};
    run->parameterSeries.resize(2);
    for (int64_t step = 1; step <= 200; ++step) {
        StepRecord record;
        record.globalStep = step;
        record.worker = int(step % 2);
        record.workerClock = step / 2;
        record.computedFromStep = step - 1;
        record.wallTime = 1000 + double(step) / 100;
        const double progress = 1 - std::exp(-double(step) / 50);
        record.parameters = {float(2 * progress), float(10 * progress)};
        record.batchLoss = float(100 * (1 - progress) + 0.1);
        run->recentSteps.push_back(record);
        run->batchLossByWorker[record.worker].append(double(step), record.batchLoss);
        run->parameterSeries[0].append(double(step - 1), 2 * progress);
        run->parameterSeries[1].append(double(step - 1), 10 * progress);
        if (step % 20 == 0)
            run->fullLoss.append(double(step), record.batchLoss);
    }
    ModeMarker change;
    change.globalStep = 101;
    change.wallTime = 1001.01;
    change.previous.set_mode(proto::ASYNC);
    change.current.set_mode(proto::SYNC);
    run->modeChanges.push_back(change);
    for (int worker = 0; worker < 2; ++worker) {
        WorkerFigures figures;
        figures.index = worker;
        figures.applied = 100;
        figures.stepsPerSecond = 50;
        run->workers.push_back(figures);
    }
    return run;
}

enum class Kind { Loss, Parameters, Path, WorkerBars };

std::unique_ptr<ChartWidget> makeChart(Kind kind)
{
    switch (kind) {
    case Kind::Loss: return std::make_unique<LossChart>();
    case Kind::Parameters: return std::make_unique<ConvergenceChart>();
    case Kind::Path: return std::make_unique<ParameterPathChart>();
    case Kind::WorkerBars: return std::make_unique<WorkerBarChart>(WorkerBarChart::Figure::StepsPerSecond);
    }
    return {};
}

void setRun(ChartWidget *chart, Kind kind, std::shared_ptr<const RunSnapshot> run)
{
    switch (kind) {
    case Kind::Loss: static_cast<LossChart *>(chart)->setSnapshot(std::move(run)); break;
    case Kind::Parameters: static_cast<ConvergenceChart *>(chart)->setSnapshot(std::move(run)); break;
    case Kind::Path: static_cast<ParameterPathChart *>(chart)->setSnapshot(std::move(run)); break;
    case Kind::WorkerBars: static_cast<WorkerBarChart *>(chart)->setSnapshot(std::move(run)); break;
    }
}

// The legend's entries a user sees, sorted.
QStringList shownInLegend(QChart *chart)
{
    QStringList shown;
    for (QLegendMarker *marker : chart->legend()->markers())
        if (marker->isVisible())
            shown << marker->label();
    shown.sort();
    return shown;
}

// The grey line standing in for the chart ("No loss yet: ...").
QLabel *placeholderOf(QWidget *chart)
{
    for (QLabel *label : chart->findChildren<QLabel *>())
        if (label->text().contains(QStringLiteral("yet")))
            return label;
    return nullptr;
}

} // namespace

Q_DECLARE_METATYPE(Kind)

class TestChartSetup : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void anEmptyChartSaysWhatWillShowThere_data()
    {
        QTest::addColumn<Kind>("kind");
        QTest::newRow("loss") << Kind::Loss;
        QTest::newRow("w and b") << Kind::Parameters;
        QTest::newRow("(w, b) path") << Kind::Path;
        QTest::newRow("worker bars") << Kind::WorkerBars;
    }

    void anEmptyChartSaysWhatWillShowThere()
    {
        QFETCH(Kind, kind);
        const std::unique_ptr<ChartWidget> chart = makeChart(kind);
        chart->resize(800, 500);
        chart->show();
        QVERIFY(QTest::qWaitForWindowExposed(chart.get()));
        QLabel *placeholder = placeholderOf(chart.get());
        QVERIFY(placeholder);
        auto *view = chart->findChild<QChartView *>();
        QVERIFY(view);
        QVERIFY(placeholder->isVisible());
        QVERIFY(!view->isVisible());
        QVERIFY(placeholder->alignment() == Qt::AlignCenter);
        QVERIFY(placeholder->styleSheet().contains(QStringLiteral("gray")));

        setRun(chart.get(), kind, smallRun());
        QVERIFY(view->isVisible());
        QVERIFY(!placeholder->isVisible());
        // The chart takes the room the placeholder had.
        QTRY_VERIFY(view->height() > chart->height() / 2);

        // A run without data (a new cluster): the placeholder again.
        setRun(chart.get(), kind, std::make_shared<const RunSnapshot>());
        QVERIFY(placeholder->isVisible());
        QVERIFY(!view->isVisible());
    }

    void theLossLegendHasOneEntryPerWorkerAndTheChiefs()
    {
        LossChart chart;
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.setSnapshot(smallRun());
        QChart *qchart = chart.findChild<QChartView *>()->chart();
        // The legend lays its markers out on the next pass of the event loop.
        QTRY_COMPARE(shownInLegend(qchart),
                     (QStringList{QStringLiteral("chief full-shard loss"), QStringLiteral("worker:0 batch loss"),
                                  QStringLiteral("worker:1 batch loss")}));
        // The faint raw envelopes are drawn, but not listed.
        QCOMPARE(qchart->series().size(), 5);
    }

    // With more workers than the legend can name, one entry says how many
    // lines there are and where their colours come from.
    void manyWorkersShareOneLegendEntry()
    {
        auto run = std::make_shared<RunSnapshot>();
        for (int worker = 0; worker < 20; ++worker)
            for (int64_t step = 1; step <= 50; ++step)
                run->batchLossByWorker[worker].append(double(step), 1.0 / double(step + worker));
        LossChart chart;
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.setSnapshot(run);
        QChart *qchart = chart.findChild<QChartView *>()->chart();
        QTRY_COMPARE(shownInLegend(qchart),
                     QStringList{QStringLiteral("20 workers' batch loss (colours as in the step timeline)")});
        QCOMPARE(qchart->series().size(), 2 * 20 + 1); // every line is still drawn
    }

    // Blobs a softmax separates perfectly: the batch loss reaches exactly 0
    // by step 10. The log axis cannot draw 0, but the x axis still runs to
    // the run's last step (it stopped at step 9, the last positive loss).
    void aLossThatReachesZeroDoesNotFreezeTheStepAxis()
    {
        auto run = std::make_shared<RunSnapshot>();
        for (int64_t step = 1; step <= 300; ++step)
            run->batchLossByWorker[0].append(double(step), step < 10 ? 2.0 / double(step) : 0.0);
        LossChart chart;
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.setSnapshot(run);
        QChart *qchart = chart.findChild<QChartView *>()->chart();
        auto *x = qobject_cast<QValueAxis *>(qchart->axes(Qt::Horizontal).value(0));
        QVERIFY(x);
        QVERIFY2(x->max() >= 300, qPrintable(QString::number(x->max())));
    }

    void aDivergingLossKeepsReadableLogTicks()
    {
        // 64 async workers at too high a learning rate: the loss grows from
        // about 1 to 1e38 before it overflows. A tick per decade would be
        // forty labels crowded into ellipses.
        auto run = std::make_shared<RunSnapshot>();
        for (int64_t step = 1; step <= 380; ++step)
            run->batchLossByWorker[0].append(double(step), std::pow(10.0, double(step) / 10.0));
        LossChart chart;
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.setSnapshot(run);
        QChart *qchart = chart.findChild<QChartView *>()->chart();
        auto *y = qobject_cast<QLogValueAxis *>(qchart->axes(Qt::Vertical).value(0));
        QVERIFY(y);
        QVERIFY2(y->max() >= 1e38, qPrintable(QString::number(y->max())));
        QVERIFY2(y->tickCount() <= 11,
                 qPrintable(QStringLiteral("%1 ticks, base %2").arg(y->tickCount()).arg(y->base())));
        // A loss within a few decades keeps a tick per decade.
        auto small = std::make_shared<RunSnapshot>();
        for (int64_t step = 1; step <= 100; ++step)
            small->batchLossByWorker[0].append(double(step), 10.0 / double(step));
        chart.setSnapshot(small);
        QCOMPARE(y->base(), 10.0);
    }

    void theLossChartDrawsTheHeldOutScoreBesideTheChiefsLoss()
    {
        auto run = std::make_shared<RunSnapshot>(*smallRun());
        run->metricNames = {"heldout_loss", "heldout_accuracy"};
        run->metricSeries.resize(2);
        for (int64_t step = 20; step <= 200; step += 20) {
            run->metricSeries[0].append(double(step), 0.5 + 10.0 / double(step)); // above the training loss
            run->metricSeries[1].append(double(step), 0.9 - 2.0 / double(step));
        }
        LossChart chart;
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.setSnapshot(run);
        QChart *qchart = chart.findChild<QChartView *>()->chart();
        QTRY_COMPARE(shownInLegend(qchart),
                     (QStringList{QStringLiteral("chief full-shard loss"),
                                  QStringLiteral("held-out accuracy (right axis)"), QStringLiteral("held-out loss"),
                                  QStringLiteral("worker:0 batch loss"), QStringLiteral("worker:1 batch loss")}));
        QLineSeries *heldOutLoss = nullptr;
        QLineSeries *accuracy = nullptr;
        for (QAbstractSeries *series : qchart->series()) {
            if (series->name() == QStringLiteral("held-out loss"))
                heldOutLoss = static_cast<QLineSeries *>(series);
            if (series->name() == QStringLiteral("held-out accuracy (right axis)"))
                accuracy = static_cast<QLineSeries *>(series);
        }
        QVERIFY(heldOutLoss && accuracy);
        QCOMPARE(heldOutLoss->count(), 10);
        QCOMPARE(heldOutLoss->at(9), QPointF(200, 0.55));
        // The accuracy on its own 0-1 axis at the right, whatever the loss axis does.
        auto *accuracyAxis = qobject_cast<QValueAxis *>(accuracy->attachedAxes().value(1));
        QVERIFY(accuracyAxis);
        QVERIFY(accuracyAxis->alignment() == Qt::AlignRight);
        QCOMPARE(accuracyAxis->max(), 1.0);
        chart.setLogScale(false);
        QVERIFY(accuracy->attachedAxes().contains(accuracyAxis));
        QCOMPARE(accuracy->attachedAxes().size(), 2);
        QVERIFY(!heldOutLoss->attachedAxes().contains(accuracyAxis));
        // The export's table has both series.
        QStringList exported;
        for (const auto &row : chart.csv().rows)
            exported << row.first();
        QCOMPARE(exported.count(QStringLiteral("held-out loss")), 10);
        QCOMPARE(exported.count(QStringLiteral("held-out accuracy")), 10);
    }

    // The loss axis says which loss it is: the demo's squared error, the
    // softmax's cross-entropy, and for a model a worker declared (a Python
    // worker's MLP) just "loss": the app cannot know what it measures.
    void theLossAxisNamesTheModelsLoss_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("linearTitle");
        QTest::addColumn<QString>("logTitle");
        QTest::newRow("linear") << QStringLiteral("linear") << QStringLiteral("loss (mean squared error)")
                                << QStringLiteral("loss (mean squared error, log scale)");
        QTest::newRow("softmax") << QStringLiteral("softmax") << QStringLiteral("loss (cross-entropy)")
                                 << QStringLiteral("loss (cross-entropy, log scale)");
        QTest::newRow("declared by a worker")
            << QStringLiteral("digits-mlp-32") << QStringLiteral("loss") << QStringLiteral("loss (log scale)");
    }

    void theLossAxisNamesTheModelsLoss()
    {
        QFETCH(QString, model);
        QFETCH(QString, linearTitle);
        QFETCH(QString, logTitle);
        auto run = std::make_shared<RunSnapshot>(*smallRun());
        run->signature.set_model(model.toStdString());
        LossChart chart;
        chart.resize(800, 500);
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        chart.setSnapshot(run);
        QChart *qchart = chart.findChild<QChartView *>()->chart();
        const auto lossAxisTitle = [qchart] {
            for (const QAbstractAxis *axis : qchart->axes(Qt::Vertical))
                if (axis->alignment() == Qt::AlignLeft)
                    return axis->titleText();
            return QString();
        };
        for (const bool log : {false, true}) {
            chart.setLogScale(log);
            QTRY_COMPARE(lossAxisTitle(), log ? logTitle : linearTitle);
        }
    }

    void aModeChangeIsALabelledLineAtItsStep()
    {
        const auto lines = runMarkerLines(*smallRun());
        QCOMPARE(lines.size(), size_t(1));
        QCOMPARE(lines[0].x, 101.0);
        QVERIFY(std::isnan(lines[0].y)); // a vertical line, not a point
        QCOMPARE(lines[0].label, QStringLiteral("\u2192 sync @ 101"));
        QCOMPARE(lines[0].color, modeMarkerColor());
    }

    void aFailoverIsALineOfItsOwnColourAtItsStep()
    {
        RunSnapshot run = *smallRun();
        run.failovers.push_back({150, 0, "127.0.0.1:2232", "127.0.0.1:2222", "its primary is gone"});
        const auto lines = runMarkerLines(run);
        QCOMPARE(lines.size(), size_t(2));
        QCOMPARE(lines[1].x, 150.0);
        QVERIFY(std::isnan(lines[1].y));
        QCOMPARE(lines[1].label, QStringLiteral("ps:0 failover @ 150"));
        QCOMPARE(lines[1].color, failoverMarkerColor());
        QVERIFY(lines[1].color != lines[0].color);
    }

    void xRunsAlongTheBottomAndYUpTheLeft()
    {
        QChart chart;
        auto *x = new QValueAxis;
        auto *y = new QValueAxis;
        addAxes(&chart, x, y);
        QVERIFY(x->alignment() == Qt::AlignBottom);
        QVERIFY(y->alignment() == Qt::AlignLeft);
        auto *line = new QLineSeries;
        addSeries(&chart, line, x, y);
        QCOMPARE(chart.series().size(), 1);
        QVERIFY(line->attachedAxes() == (QList<QAbstractAxis *>{x, y}));
    }

    void barsKeepTheirColourAndValues()
    {
        QBarSeries series;
        QBarSet *set = newBarSet(QStringLiteral("async"), runColor(0), {1.5, 2.5, 4});
        series.append(set);
        series.append(newBarSet(QStringLiteral("sync"), runColor(1), {3, 5}));
        QCOMPARE(set->label(), QStringLiteral("async"));
        QCOMPARE(set->color(), runColor(0));
        QCOMPARE(set->borderColor(), QColor(Qt::white)); // neighbouring bars stay apart
        QCOMPARE(set->count(), 3);
        QCOMPARE(set->at(2), 4.0);
        QCOMPARE(barCount(&series), 5);
    }
};

QTEST_MAIN(TestChartSetup)
#include "tst_chart_setup.moc"
