// The step timeline's lanes without a window: a lane per worker, holds that
// start where the cluster was when the worker was stopped, the update under
// the cursor, holds merged per pixel, one tick per pixel column and, zoomed
// out, each worker's share of a column -- what the painter draws and the
// tooltip names.
#include "ui/models/timeline_lanes.h"

#include <QTest>

#include <algorithm>
#include <cmath>

using namespace parasync;
using namespace parasync::ui;

namespace {

constexpr double kStart = 1000; // the run's start, in wall time

StepRecord step(int64_t globalStep, double seconds, int worker)
{
    StepRecord record;
    record.globalStep = globalStep;
    record.wallTime = kStart + seconds;
    record.worker = worker;
    record.workerClock = globalStep;
    return record;
}

// Steps 1..count, a tenth of a second apart, alternating between two workers.
RunSnapshot alternating(int count)
{
    RunSnapshot run;
    run.startWallTime = kStart;
    for (int w = 0; w < 2; ++w) {
        WorkerFigures figures;
        figures.index = w;
        run.workers.push_back(figures);
    }
    for (int i = 1; i <= count; ++i)
        run.recentSteps.push_back(step(i, i * 0.1, i % 2));
    run.globalStep = count;
    return run;
}

// Steps 1..count, a tenth of a second apart, round-robin over `workers`.
RunSnapshot roundRobin(int workers, int count)
{
    RunSnapshot run;
    run.startWallTime = kStart;
    for (int w = 0; w < workers; ++w) {
        WorkerFigures figures;
        figures.index = w;
        run.workers.push_back(figures);
    }
    for (int i = 1; i <= count; ++i)
        run.recentSteps.push_back(step(i, i * 0.1, i % workers));
    run.globalStep = count;
    return run;
}

TimelineMapping range(double start, double end)
{
    TimelineMapping map;
    map.start = start;
    map.end = end;
    return map;
}

} // namespace

class TestTimelineLanes : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void everyWorkerHasALaneInIndexOrder()
    {
        RunSnapshot run;
        run.startWallTime = kStart;
        for (const int index : {2, 0}) {
            WorkerFigures figures;
            figures.index = index;
            run.workers.push_back(figures);
        }
        // worker:1 is not listed yet, but it pushed: it gets a lane too.
        run.recentSteps = {step(1, 0.1, 2), step(2, 0.2, 1), step(3, 0.3, 0)};
        const TimelineLanes lanes(run, TimelineAxis::GlobalStep);
        QCOMPARE(lanes.laneWorkers(), (std::vector<int>{0, 1, 2}));
        for (const TimelineItem &item : lanes.items())
            QCOMPARE(lanes.laneWorkers()[size_t(item.lane)], item.worker);
    }

    void aHoldStartsWhereTheClusterWasWhenItBegan()
    {
        RunSnapshot run = alternating(20);
        // Step 20 (at 2.0 s) was held half a second: since about step 15.
        run.recentSteps.back().waitUs = 500000;
        run.recentSteps.back().waitReason = proto::BLOCKED_BY_SYNC;
        TimelineLanes lanes(run, TimelineAxis::GlobalStep);
        const TimelineItem &held = lanes.items().back();
        QCOMPARE(held.step, 20.0);
        QVERIFY2(std::abs(lanes.waitStartOf(held) - 15) < 1e-6, qPrintable(QString::number(lanes.waitStartOf(held))));
        QVERIFY(std::abs(held.waitStartSeconds - 1.5) < 1e-9);
        lanes.setAxis(TimelineAxis::WallTime);
        QVERIFY(std::abs(lanes.waitStartOf(lanes.items().back()) - 1.5) < 1e-9);
        // A hold longer than the recent steps: "fit all" begins where it does.
        run.recentSteps.back().waitUs = 2500000;
        QVERIFY(std::abs(TimelineLanes(run, TimelineAxis::WallTime).earliestValue() - -0.5) < 1e-9);
    }

    void theWallTimeAxisOrdersByWhenUpdatesArrived()
    {
        RunSnapshot run;
        run.startWallTime = kStart;
        // Async: step 6 arrived before step 5.
        run.recentSteps = {step(5, 2.0, 0), step(6, 1.0, 1), step(7, 3.0, 0)};
        run.globalStep = 9; // the ps is further than the recent steps show
        TimelineLanes lanes(run, TimelineAxis::GlobalStep);
        QCOMPARE(lanes.items()[0].step, 5.0);
        QCOMPARE(lanes.headValue(), 9.0);
        lanes.setAxis(TimelineAxis::WallTime);
        QCOMPARE(lanes.items()[0].step, 6.0);
        QCOMPARE(lanes.items()[1].step, 5.0);
        QCOMPARE(lanes.firstValue(), 1.0);
        QCOMPARE(lanes.headValue(), 3.0);
    }

    void theLayoutStacksTitleLegendLanesAndAxis()
    {
        const TimelineLayout layout = TimelineLayout::forRect(QRectF(0, 0, 1000, 400), 4);
        QVERIFY(layout.title.bottom() <= layout.legend.top());
        QVERIFY(layout.legend.bottom() <= layout.plot.top());
        QVERIFY(layout.plot.bottom() <= layout.axis.top());
        QVERIFY(layout.axis.bottom() <= 400);
        QCOMPARE(layout.labels.right(), layout.plot.left()); // lane names left of their lanes
        QCOMPARE(layout.laneHeight * 4, layout.plot.height());
        QCOMPARE(layout.laneTop(2), layout.plot.top() + layout.plot.height() / 2);
        const TimelineMapping map = layout.onPlot(range(0, 100));
        QCOMPARE(map.mapToX(0), layout.plot.left());
        QCOMPARE(map.mapToX(100), layout.plot.right());
        // Too small a box still leaves a plot to draw in.
        const TimelineLayout tiny = TimelineLayout::forRect(QRectF(0, 0, 50, 50), 3);
        QVERIFY(tiny.plot.width() >= 10 && tiny.plot.height() >= 10);
    }

    void hoverNamesTheUpdateUnderTheCursor()
    {
        const TimelineLanes lanes(alternating(100), TimelineAxis::GlobalStep);
        const TimelineLayout layout = TimelineLayout::forRect(QRectF(0, 0, 1130, 300), lanes.laneCount());
        const TimelineMapping map = layout.onPlot(range(0, 100)); // 10 px a step
        const double lane1 = layout.laneTop(1) + layout.laneHeight / 2;
        const TimelineItem *item = lanes.itemAt(layout, map, QPointF(map.mapToX(51) + 3, lane1));
        QVERIFY(item);
        QCOMPARE(item->step, 51.0);
        QCOMPARE(item->worker, 1);
        // Step 50 is worker:0's: nothing of worker:1 within 4 px there.
        QVERIFY(!lanes.itemAt(layout, map, QPointF(map.mapToX(50), lane1)));
        // Between two of its updates, none is near enough.
        QVERIFY(!lanes.itemAt(layout, map, QPointF(map.mapToX(52), lane1)));
        // Off the plot: over the lane names.
        QVERIFY(!lanes.itemAt(layout, map, QPointF(layout.labels.center().x(), lane1)));
    }

    void neighbouringHoldsOfOneReasonAreOneSpan()
    {
        RunSnapshot run = alternating(40);
        // worker:0 held by the barrier before steps 20, 22 and 24, back to back ...
        for (const int i : {20, 22, 24}) {
            run.recentSteps[size_t(i - 1)].waitUs = 200000;
            run.recentSteps[size_t(i - 1)].waitReason = proto::BLOCKED_BY_SYNC;
        }
        // ... then by the staleness bound before step 26.
        run.recentSteps[25].waitUs = 200000;
        run.recentSteps[25].waitReason = proto::BLOCKED_BY_STALENESS;
        // worker:1 held by the barrier before step 31.
        run.recentSteps[30].waitUs = 100000;
        run.recentSteps[30].waitReason = proto::BLOCKED_BY_SYNC;
        const TimelineLanes lanes(run, TimelineAxis::GlobalStep);
        const TimelineLayout layout = TimelineLayout::forRect(QRectF(0, 0, 1130, 300), lanes.laneCount());
        const auto spans = lanes.spansIn(layout.onPlot(range(0, 40)));
        QCOMPARE(spans.size(), size_t(3));
        const TimelineMapping map = layout.onPlot(range(0, 40));
        int barrier = 0;
        for (const TimelineSpan &span : spans) {
            QVERIFY(span.x1 > span.x0);
            if (span.lane == 0 && span.reason == proto::BLOCKED_BY_SYNC) {
                ++barrier;
                // From the first hold's start (step 18) to step 24.
                QVERIFY2(std::abs(span.x0 - map.mapToX(18)) < 1e-6, qPrintable(QString::number(span.x0)));
                QVERIFY(std::abs(span.x1 - map.mapToX(24)) < 1e-6);
            }
        }
        QCOMPARE(barrier, 1);
        QVERIFY(std::any_of(spans.begin(), spans.end(), [](const TimelineSpan &s) {
            return s.lane == 0 && s.reason == proto::BLOCKED_BY_STALENESS;
        }));
        QVERIFY(std::any_of(spans.begin(), spans.end(), [](const TimelineSpan &s) { return s.lane == 1; }));
        // A hold that began left of the view still shows, cut at the edge.
        const auto later = lanes.spansIn(layout.onPlot(range(23, 40)));
        QVERIFY(std::any_of(later.begin(), later.end(), [&](const TimelineSpan &s) {
            return s.lane == 0 && s.reason == proto::BLOCKED_BY_SYNC && s.x0 < layout.plot.left();
        }));
    }

    void zoomedInEveryUpdateIsATick()
    {
        RunSnapshot run = alternating(100);
        run.recentSteps[59].outcome = proto::DROPPED_STALE;
        const TimelineLanes lanes(run, TimelineAxis::GlobalStep);
        const TimelineLayout layout = TimelineLayout::forRect(QRectF(0, 0, 1130, 300), lanes.laneCount());
        const TimelineMarks marks = lanes.marksIn(layout.onPlot(range(0, 100)));
        QVERIFY(!marks.dense);
        QVERIFY(marks.bars.empty());
        // Every step but the dropped one, in its worker's lane.
        QCOMPARE(marks.ticks.size(), size_t(99));
        for (const TimelineMarks::Tick &tick : marks.ticks)
            QCOMPARE(lanes.laneWorkers()[size_t(tick.lane)], tick.worker);
        QCOMPARE(marks.drops.size(), size_t(1));
        QCOMPARE(marks.drops.front().worker, 0);
        QVERIFY(std::abs(marks.drops.front().x - layout.onPlot(range(0, 100)).mapToX(60)) < 1e-9);
    }

    void zoomedOutALanesBarIsItsShareOfTheColumn()
    {
        // worker:0 does three steps of four: a straggler's lane thins out.
        RunSnapshot run = alternating(4000);
        for (size_t i = 0; i < run.recentSteps.size(); ++i)
            run.recentSteps[i].worker = i % 4 == 3 ? 1 : 0;
        const TimelineLanes lanes(run, TimelineAxis::GlobalStep);
        const TimelineLayout layout = TimelineLayout::forRect(QRectF(0, 0, 546, 300), lanes.laneCount());
        const TimelineMapping map = layout.onPlot(range(0, 4000));
        QCOMPARE(map.width, 400.0); // 10 steps a pixel
        const TimelineMarks marks = lanes.marksIn(map);
        QVERIFY(marks.dense);
        QVERIFY(marks.ticks.empty());
        double shares[2] = {0, 0};
        int columns[2] = {0, 0};
        for (const TimelineMarks::Bar &bar : marks.bars) {
            QVERIFY(bar.share > 0 && bar.share <= 1);
            shares[bar.lane] += bar.share;
            ++columns[bar.lane];
        }
        QVERIFY(columns[0] >= 390 && columns[1] >= 390);
        QVERIFY2(std::abs(shares[0] / columns[0] - 0.75) < 0.05, qPrintable(QString::number(shares[0] / columns[0])));
        QVERIFY2(std::abs(shares[1] / columns[1] - 0.25) < 0.05, qPrintable(QString::number(shares[1] / columns[1])));
        // On the wall-time axis there are no per-column bars.
        TimelineLanes byTime = lanes;
        byTime.setAxis(TimelineAxis::WallTime);
        QVERIFY(!byTime.marksIn(layout.onPlot(range(0, 400))).dense);
    }

    void manyWorkersScrollInLanesATickCanBeSeenIn()
    {
        // 64 workers in a window 300 px high: 6 px lanes, as many as fit, scrolled to.
        const QRectF box(0, 0, 1000, 300);
        const TimelineLayout top = TimelineLayout::forRect(box, 64, 6);
        QVERIFY(top.laneHeight >= 6);
        QCOMPARE(top.visibleLanes, int(top.plot.height() / 6));
        QVERIFY(top.visibleLanes < 64);
        QCOMPARE(top.firstLane, 0);
        QCOMPARE(top.lastFirstLane(), 64 - top.visibleLanes);
        QCOMPARE(top.laneTop(top.visibleLanes), top.plot.bottom()); // the shown lanes fill the plot
        QCOMPARE(top.laneAt(top.plot.top() + 1), 0);
        QCOMPARE(top.laneAt(top.plot.bottom() + 1), -1);
        // Scrolled past the end: the last lane sits at the bottom.
        const TimelineLayout bottom = TimelineLayout::forRect(box, 64, 6, 1000);
        QCOMPARE(bottom.firstLane, bottom.lastFirstLane());
        QVERIFY(bottom.showsLane(63) && !bottom.showsLane(bottom.firstLane - 1));
        QCOMPARE(bottom.laneAt(bottom.plot.bottom() - 1), 63);
        // An export (no minimum) draws every lane, however thin.
        const TimelineLayout all = TimelineLayout::forRect(box, 64);
        QCOMPARE(all.visibleLanes, 64);
        QVERIFY(all.showsLane(0) && all.showsLane(63));
        // Few workers: every lane fits and nothing scrolls.
        QCOMPARE(TimelineLayout::forRect(box, 4, 6, 3).firstLane, 0);
    }

    void thinLanesShareTheirNames()
    {
        // A name 15 px tall: a lane each while lanes are that tall, else 2, 4, 8 lanes a name.
        QCOMPARE(TimelineLayout::forRect(QRectF(0, 0, 1000, 400), 4).labelStride(15), 1);
        const TimelineLayout many = TimelineLayout::forRect(QRectF(0, 0, 1000, 500), 64, 6);
        QVERIFY(many.laneHeight >= 6 && many.laneHeight < 7.5);
        QCOMPARE(many.labelStride(15), 4);
        QVERIFY(many.labelStride(15) * many.laneHeight >= 15);
        // Never more lanes a name than there are lanes.
        QCOMPARE(TimelineLayout::forRect(QRectF(0, 0, 1000, 100), 3).labelStride(500), 4);
    }

    void hoverInAScrolledViewNamesTheScrolledToWorker()
    {
        const TimelineLanes lanes(roundRobin(64, 640), TimelineAxis::GlobalStep);
        const TimelineLayout layout = TimelineLayout::forRect(QRectF(0, 0, 1130, 300), lanes.laneCount(), 6, 20);
        QCOMPARE(layout.firstLane, 20);
        const TimelineMapping map = layout.onPlot(range(0, 200)); // 5 px a step
        // The top row is lane 20: worker:20, whose updates are steps 20, 84, 148.
        const double row = layout.plot.top() + layout.laneHeight / 2;
        const TimelineItem *item = lanes.itemAt(layout, map, QPointF(map.mapToX(84), row));
        QVERIFY(item);
        QCOMPARE(item->worker, 20);
        QCOMPARE(item->step, 84.0);
    }

    void stepsInTheLastSecondsFollowThePace()
    {
        // 10 steps a second: 4 s are 40 steps.
        QCOMPARE(TimelineLanes(alternating(200), TimelineAxis::GlobalStep).stepsInLast(4), 40.0);
        // A run shorter than the window: all its recent steps.
        QCOMPARE(TimelineLanes(alternating(20), TimelineAxis::GlobalStep).stepsInLast(4), 19.0);
        QCOMPARE(TimelineLanes(TimelineAxis::GlobalStep).stepsInLast(4), 0.0);
    }
};

QTEST_GUILESS_MAIN(TestTimelineLanes)
#include "tst_timeline_lanes.moc"
