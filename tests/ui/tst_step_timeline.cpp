// The followed step timeline at both paces a user sees: at a human pace
// (tens of steps a second) it shows its 200 steps, every tick readable; at
// full speed (thousands a second) it shows seconds of the run instead of
// scrolling past dozens of screens a second; a user's zoom overrides both.
#include "ui/charts/step_timeline_view.h"

#include <QScrollBar>
#include <QTest>
#include <QWheelEvent>

#include <memory>

using namespace parasync;
using namespace parasync::ui;

namespace {

// `count` applied steps round-robin over the workers (two unless told), `perSecond` of
// them a second of wall time.
std::shared_ptr<const RunSnapshot> run(int count, double perSecond, int workers = 2)
{
    auto snapshot = std::make_shared<RunSnapshot>();
    snapshot->startWallTime = 1000;
    for (int w = 0; w < workers; ++w) {
        WorkerFigures figures;
        figures.index = w;
        snapshot->workers.push_back(figures);
    }
    for (int i = 1; i <= count; ++i) {
        StepRecord step;
        step.globalStep = i;
        step.wallTime = 1000 + i / perSecond;
        step.worker = i % workers;
        step.workerClock = i / workers;
        snapshot->recentSteps.push_back(step);
    }
    snapshot->globalStep = count;
    return snapshot;
}

} // namespace

class TestStepTimeline : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void atAHumanPaceTheFollowedViewShowsItsStepsOneByOne()
    {
        StepTimelineView view;
        view.resize(1000, 300);
        view.setSnapshot(run(2000, 40));
        QCOMPARE(view.mapping().span(), 200.0);
        QVERIFY(view.mapping().isVisible(2000));
    }

    void atFullSpeedTheFollowedViewShowsSecondsOfTheRun()
    {
        StepTimelineView view;
        view.resize(1000, 300);
        // 8,000 steps a second: 200 steps would be 25 ms of the run.
        view.setSnapshot(run(20000, 8000));
        // At least ~2 s of it (the recent window holds 2.5 s), the head at the right.
        QVERIFY2(view.mapping().span() >= 15000, qPrintable(QString::number(view.mapping().span())));
        QVERIFY(view.mapping().isVisible(20000));
        // When the pace drops again, so does the span.
        view.setSnapshot(run(2000, 40));
        QCOMPARE(view.mapping().span(), 200.0);
    }

    void aUsersZoomHoldsAtAnyPace()
    {
        StepTimelineView view;
        view.resize(1000, 300);
        view.setSnapshot(run(20000, 8000));
        const double automatic = view.mapping().span();
        QWheelEvent zoomIn(QPointF(500, 150), view.mapToGlobal(QPointF(500, 150)), QPoint(), QPoint(0, 120 * 4),
                           Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QCoreApplication::sendEvent(&view, &zoomIn);
        const double zoomed = view.mapping().span();
        QVERIFY2(zoomed < automatic / 2, qPrintable(QStringLiteral("%1 -> %2").arg(automatic).arg(zoomed)));
        view.setSnapshot(run(24000, 8000));
        QCOMPARE(view.mapping().span(), zoomed);
        QVERIFY(view.mapping().isVisible(24000));
    }

    void sixtyFourWorkersScrollWhenTheyDoNotFit()
    {
        StepTimelineChart chart;
        chart.resize(1000, 320);
        chart.setSnapshot(run(2000, 40, 64));
        chart.show();
        QVERIFY(QTest::qWaitForWindowExposed(&chart));
        StepTimelineView *view = chart.view();
        auto *scroll = chart.findChild<QScrollBar *>(QStringLiteral("timelineLaneScroll"));
        QVERIFY(scroll);
        // Not every lane fits at a height a tick can be seen in: a scroll bar over the rest.
        QTRY_VERIFY(view->lastFirstLane() > 0);
        QVERIFY(view->visibleLanes() < 64);
        QVERIFY(scroll->isVisible());
        QCOMPARE(scroll->maximum(), view->lastFirstLane());
        QCOMPARE(scroll->pageStep(), view->visibleLanes());
        // The bar scrolls the lanes; Shift+wheel does too, three lanes a notch.
        scroll->setValue(10);
        QCOMPARE(view->firstLane(), 10);
        QWheelEvent down(QPointF(500, 150), view->mapToGlobal(QPointF(500, 150)), QPoint(), QPoint(0, -120),
                         Qt::NoButton, Qt::ShiftModifier, Qt::NoScrollPhase, false);
        const double span = view->mapping().span();
        QCoreApplication::sendEvent(view, &down);
        QCOMPARE(view->firstLane(), 13);
        QCOMPARE(scroll->value(), 13);
        QCOMPARE(view->mapping().span(), span); // it scrolled rather than zoomed
        // Scrolled to the end, then more workers join: the view keeps its place.
        scroll->setValue(scroll->maximum());
        const int last = view->firstLane();
        chart.setSnapshot(run(2000, 40, 80));
        QTRY_COMPARE(scroll->maximum(), view->lastFirstLane());
        QCOMPARE(view->firstLane(), last);
        // A window tall enough for every lane: no scroll bar, from the first lane.
        chart.resize(1000, 1400);
        QTRY_VERIFY(!scroll->isVisible());
        QCOMPARE(view->firstLane(), 0);
    }
};

QTEST_MAIN(TestStepTimeline)
#include "tst_step_timeline.moc"
