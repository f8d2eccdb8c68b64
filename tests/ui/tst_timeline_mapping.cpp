// The step timeline's axis maths: global step (or seconds) <-> pixel, zoom
// around the cursor, pan by dragging, follow the newest step, round ticks.
#include "ui/models/timeline_mapping.h"

#include <QTest>

#include <cmath>

using parasync::ui::TimelineMapping;

namespace {
TimelineMapping mapping(double start, double end, double left, double width)
{
    TimelineMapping m;
    m.start = start;
    m.end = end;
    m.left = left;
    m.width = width;
    return m;
}
} // namespace

class TestTimelineMapping : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void mapsAxisValueToPixel_data()
    {
        QTest::addColumn<double>("start");
        QTest::addColumn<double>("end");
        QTest::addColumn<double>("left");
        QTest::addColumn<double>("width");
        QTest::addColumn<double>("value");
        QTest::addColumn<double>("x");
        QTest::newRow("left edge") << 0.0 << 100.0 << 50.0 << 1000.0 << 0.0 << 50.0;
        QTest::newRow("right edge") << 0.0 << 100.0 << 50.0 << 1000.0 << 100.0 << 1050.0;
        QTest::newRow("middle") << 0.0 << 100.0 << 50.0 << 1000.0 << 50.0 << 550.0;
        QTest::newRow("left of view") << 100.0 << 200.0 << 0.0 << 500.0 << 50.0 << -250.0;
        QTest::newRow("late steps") << 1000000.0 << 1000400.0 << 130.0 << 800.0 << 1000100.0 << 330.0;
        QTest::newRow("seconds") << 2.5 << 3.0 << 0.0 << 1000.0 << 2.75 << 500.0;
    }

    void mapsAxisValueToPixel()
    {
        QFETCH(double, start);
        QFETCH(double, end);
        QFETCH(double, left);
        QFETCH(double, width);
        QFETCH(double, value);
        QFETCH(double, x);
        const TimelineMapping m = mapping(start, end, left, width);
        QCOMPARE(m.mapToX(value), x);
        // And back: the pixel under the cursor names the same step.
        QCOMPARE(m.mapFromX(x), value);
    }

    void emptyRangeDoesNotDivideByZero()
    {
        const TimelineMapping m = mapping(10, 10, 5, 0);
        QCOMPARE(m.mapToX(10), 5.0);
        QCOMPARE(m.mapFromX(100), 10.0);
    }

    void wheelZoomKeepsTheStepUnderTheCursor_data()
    {
        QTest::addColumn<double>("x");
        QTest::addColumn<double>("factor");
        QTest::newRow("zoom in at left") << 100.0 << 2.0;
        QTest::newRow("zoom in at centre") << 600.0 << 1.25;
        QTest::newRow("zoom out at right") << 1099.0 << 0.5;
        QTest::newRow("strong zoom in") << 350.0 << 8.0;
    }

    void wheelZoomKeepsTheStepUnderTheCursor()
    {
        QFETCH(double, x);
        QFETCH(double, factor);
        const TimelineMapping before = mapping(1000, 2000, 100, 1000);
        const TimelineMapping after = before.zoomedAt(x, factor, 10);
        QVERIFY(qFuzzyCompare(after.mapFromX(x), before.mapFromX(x)));
        QVERIFY(qFuzzyCompare(after.span(), before.span() / factor));
    }

    void zoomStopsAtTheMinimumSpan()
    {
        const TimelineMapping before = mapping(0, 100, 0, 1000);
        const TimelineMapping after = before.zoomedAt(500, 1000, 10);
        QCOMPARE(after.span(), 10.0);
        QVERIFY(qFuzzyCompare(after.mapFromX(500), 50.0));
    }

    void dragMovesTheContentsWithTheMouse_data()
    {
        QTest::addColumn<double>("pixels");
        QTest::newRow("drag right: look at earlier steps") << 250.0;
        QTest::newRow("drag left: look at later steps") << -100.0;
    }

    void dragMovesTheContentsWithTheMouse()
    {
        QFETCH(double, pixels);
        const TimelineMapping before = mapping(1000, 2000, 100, 1000);
        const TimelineMapping after = before.pannedBy(pixels);
        // The step that was under x is now under x + pixels.
        QVERIFY(qFuzzyCompare(after.mapToX(1500), before.mapToX(1500) + pixels));
        QCOMPARE(after.span(), before.span());
    }

    void followingTheHeadKeepsTheZoom()
    {
        const TimelineMapping before = mapping(0, 200, 0, 800);
        const TimelineMapping after = before.endingAt(12345);
        QCOMPARE(after.end, 12345.0);
        QCOMPARE(after.span(), 200.0);
        QCOMPARE(after.mapToX(12345), 800.0);
    }

    void fitShowsEverythingWithAMargin()
    {
        const TimelineMapping fitted = mapping(0, 1, 0, 1000).fitted(100, 1100);
        QVERIFY(fitted.start < 100 && fitted.start > 50);
        QVERIFY(fitted.end > 1100 && fitted.end < 1150);
        const TimelineMapping single = mapping(0, 1, 0, 1000).fitted(7, 7);
        QVERIFY(single.isVisible(7));
        QVERIFY(single.span() > 0);
    }

    void ticksAreRoundAndInside_data()
    {
        QTest::addColumn<double>("start");
        QTest::addColumn<double>("end");
        QTest::addColumn<int>("maxTicks");
        QTest::addColumn<double>("step");
        QTest::newRow("thousands") << 0.0 << 10000.0 << 5 << 2000.0;
        QTest::newRow("odd range") << 13.0 << 97.0 << 8 << 20.0;
        QTest::newRow("sub-second") << 2.01 << 2.09 << 4 << 0.02;
        QTest::newRow("millions") << 1234567.0 << 1334567.0 << 10 << 10000.0;
    }

    void ticksAreRoundAndInside()
    {
        QFETCH(double, start);
        QFETCH(double, end);
        QFETCH(int, maxTicks);
        QFETCH(double, step);
        const auto ticks = mapping(start, end, 0, 1000).ticks(maxTicks);
        QVERIFY(!ticks.empty());
        QVERIFY(int(ticks.size()) <= maxTicks + 1);
        for (size_t i = 0; i < ticks.size(); ++i) {
            QVERIFY2(ticks[i] >= start - 1e-9 && ticks[i] <= end + 1e-9, qPrintable(QString::number(ticks[i])));
            const double multiple = ticks[i] / step;
            QVERIFY2(std::abs(multiple - std::round(multiple)) < 1e-6, qPrintable(QString::number(ticks[i])));
            if (i > 0)
                QVERIFY(qFuzzyCompare(ticks[i] - ticks[i - 1], step));
        }
    }
};

QTEST_GUILESS_MAIN(TestTimelineMapping)
#include "tst_timeline_mapping.moc"
