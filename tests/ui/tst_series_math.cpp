// What the charts compute from a run's snapshot: TensorBoard's debiased EMA,
// min/max envelopes, the linear demo's loss surface, the distance to the
// true (w, b), wall time by global step, figures per mode period, and the
// throughput of runs compared.
#include "ui/models/compared_metrics.h"
#include "ui/models/series_math.h"

#include <QTest>

#include <algorithm>
#include <cmath>

using namespace parasync;
using namespace parasync::ui;

namespace {
DecimatedSeries::Bucket bucket(double x, double mean, int64_t count = 1)
{
    DecimatedSeries::Bucket b;
    b.x = x;
    b.last = mean;
    b.min = mean;
    b.max = mean;
    b.sum = mean * double(count);
    b.count = count;
    return b;
}

StepRecord step(int64_t globalStep, int worker, double wallTime, int64_t staleness = 0,
                proto::PushOutcome outcome = proto::APPLIED)
{
    StepRecord s;
    s.globalStep = globalStep;
    s.computedFromStep = globalStep - 1 - staleness;
    s.worker = worker;
    s.wallTime = wallTime;
    s.staleness = staleness;
    s.outcome = outcome;
    s.computeUs = 900;
    s.pushUs = 100;
    s.parameters = {float(2 - 2.0 / double(globalStep)), float(10 - 10.0 / double(globalStep))};
    return s;
}
} // namespace

class TestSeriesMath : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void emaOfAConstantIsTheConstant_data()
    {
        QTest::addColumn<double>("smoothing");
        QTest::newRow("none") << 0.0;
        QTest::newRow("tensorboard default") << 0.6;
        QTest::newRow("heavy") << 0.99;
    }

    void emaOfAConstantIsTheConstant()
    {
        QFETCH(double, smoothing);
        // Debiasing is what keeps the first points at the value instead of
        // pulling them towards zero.
        std::vector<DecimatedSeries::Bucket> buckets;
        for (int i = 0; i < 50; ++i)
            buckets.push_back(bucket(i, 5.0, 1 + i % 3));
        for (const double v : debiasedEma(buckets, smoothing))
            QVERIFY2(std::abs(v - 5.0) < 1e-9, qPrintable(QString::number(v)));
    }

    void emaFollowsAStepSlowerWithMoreSmoothing()
    {
        std::vector<DecimatedSeries::Bucket> buckets;
        for (int i = 0; i < 20; ++i)
            buckets.push_back(bucket(i, i < 10 ? 10.0 : 0.0));
        const auto none = debiasedEma(buckets, 0);
        const auto light = debiasedEma(buckets, 0.3);
        const auto heavy = debiasedEma(buckets, 0.9);
        QCOMPARE(none[10], 0.0); // no smoothing: the raw value
        QVERIFY(light[10] > 0 && light[10] < heavy[10]);
        QVERIFY(heavy[10] < 10);
        // A bucket of n values counts as n values: it moves the average more.
        std::vector<DecimatedSeries::Bucket> weighted = {bucket(0, 10.0, 1), bucket(1, 0.0, 10)};
        std::vector<DecimatedSeries::Bucket> single = {bucket(0, 10.0, 1), bucket(1, 0.0, 1)};
        QVERIFY(debiasedEma(weighted, 0.6)[1] < debiasedEma(single, 0.6)[1]);
    }

    void envelopeKeepsSpikes()
    {
        DecimatedSeries series(4);
        for (int i = 0; i < 100; ++i)
            series.append(i, i == 37 ? 1000.0 : 1.0);
        const QList<QPointF> points = envelopePoints(series);
        QVERIFY(points.size() <= 2 * qsizetype(series.buckets().size()));
        bool spike = false;
        for (const QPointF &p : points)
            spike = spike || p.y() == 1000.0;
        QVERIFY2(spike, "the min/max envelope must show the spike a mean would hide");
    }

    void contoursLieOnTheirLevel_data()
    {
        QTest::addColumn<double>("level");
        QTest::newRow("near the minimum") << 0.12;
        QTest::newRow("middle") << 4.0;
        QTest::newRow("far") << 100.0;
    }

    void contoursLieOnTheirLevel()
    {
        QFETCH(double, level);
        const QList<QPointF> contour = linearDemoContour(level);
        QVERIFY(contour.size() > 10);
        for (const QPointF &p : contour)
            QVERIFY(std::abs(linearDemoMse(p.x(), p.y()) - level) < 1e-9);
        // Wider along w: (w - 2)^2 is divided by 3 (E[x^2] for x ~ U[-1, 1]).
        double wSpan = 0, bSpan = 0;
        for (const QPointF &p : contour) {
            wSpan = std::max(wSpan, std::abs(p.x() - kTrueW));
            bSpan = std::max(bSpan, std::abs(p.y() - kTrueB));
        }
        QVERIFY(std::abs(wSpan / bSpan - std::sqrt(3.0)) < 1e-3);
    }

    void noContourBelowTheNoiseFloor()
    {
        QVERIFY(linearDemoContour(0.05).isEmpty()); // 0.33^2 = 0.1089 is the minimum
        QCOMPARE(linearDemoMse(2, 10), 0.33 * 0.33);
        const auto levels = contourLevels(50, 6);
        QCOMPARE(levels.size(), size_t(6));
        for (size_t i = 1; i < levels.size(); ++i)
            QVERIFY(levels[i] > levels[i - 1]);
        QVERIFY(levels.front() > 0.33 * 0.33);
        QVERIFY(levels.back() <= 50 + 1e-9);
    }

    void distanceToTheTruth()
    {
        QCOMPARE(distanceToTruth(2, 10), 0.0);
        QCOMPARE(distanceToTruth(5, 14), 5.0);
    }

    void wallTimeByGlobalStepInterpolates()
    {
        RunSnapshot snapshot;
        snapshot.startWallTime = 1000;
        snapshot.recentSteps = {step(1, 0, 1000.0), step(101, 1, 1001.0), step(201, 0, 1003.0)};
        const StepClock clock(snapshot);
        QVERIFY(!clock.isEmpty());
        QCOMPARE(clock.secondsAt(51), 0.5);
        QCOMPARE(clock.secondsAt(151), 2.0);
        QCOMPARE(clock.stepAt(2.0), 151.0);
        QCOMPARE(clock.secondsAt(5000), 3.0); // clamped at the ends
    }

    void figuresAreSplitAtModeChanges()
    {
        RunSnapshot snapshot;
        snapshot.startWallTime = 0;
        snapshot.mode.set_mode(proto::SYNC);
        // async for steps 1-100 (one worker twice as fast), sync after.
        for (int s = 1; s <= 100; ++s)
            snapshot.recentSteps.push_back(step(s, s % 3 == 0 ? 1 : 0, s * 0.01, s % 4));
        for (int s = 100; s <= 150; ++s) {
            snapshot.recentSteps.push_back(step(s, 0, 1 + s * 0.02));
            snapshot.recentSteps.push_back(step(s, 1, 1 + s * 0.02));
        }
        auto dropped = step(120, 1, 1 + 120 * 0.02, 1, proto::DROPPED_STALE);
        dropped.waitUs = 5000;
        snapshot.recentSteps.push_back(dropped);
        ModeMarker change;
        change.globalStep = 100;
        change.previous.set_mode(proto::ASYNC);
        change.current.set_mode(proto::SYNC);
        snapshot.modeChanges.push_back(change);

        const auto periods = modePeriods(snapshot, 11);
        QCOMPARE(periods.size(), size_t(2));
        QCOMPARE(periods[0].mode.mode(), proto::ASYNC);
        QCOMPARE(periods[1].mode.mode(), proto::SYNC);
        QCOMPARE(periods[0].firstStep, int64_t(1));
        QCOMPARE(periods[0].lastStep, int64_t(99));
        QVERIFY(!periods[0].partial);
        QCOMPARE(periods[1].firstStep, int64_t(100));
        QVERIFY(periods[0].workers.at(0).steps > periods[0].workers.at(1).steps);
        QCOMPARE(periods[1].workers.at(1).dropped, int64_t(1));
        QCOMPARE(periods[0].workers.at(0).dropped, int64_t(0));
        QVERIFY(periods[1].label().startsWith(QStringLiteral("sync")));
        int64_t stale = 0;
        for (const auto &[worker, figures] : periods[0].workers)
            for (size_t i = 1; i < figures.staleness.size(); ++i)
                stale += figures.staleness[i];
        QVERIFY(stale > 0);
    }

    void syncThroughputCountsEachUpdateOnce()
    {
        // Sync: both workers' records of an update carry its global step;
        // one update every 0.1 s is 10 steps a second in every window, even
        // a window of two records of the same update.
        RunSnapshot snapshot;
        for (int64_t s = 1; s <= 300; ++s) {
            snapshot.recentSteps.push_back(step(s, 0, 0.1 * double(s), 0, proto::AGGREGATED));
            snapshot.recentSteps.push_back(step(s, 1, 0.1 * double(s) + 0.001, 0, proto::AGGREGATED));
        }
        for (const int windows : {600, 100, 7}) {
            const QList<QPointF> points = comparedMetricPoints(snapshot, ComparedMetric::Throughput, windows);
            QVERIFY(points.size() >= std::min(windows, 290) / 2);
            for (const QPointF &p : points)
                QVERIFY2(
                    std::abs(p.y() - 10.0) < 1e-6,
                    qPrintable(QStringLiteral("%1 windows: %2 steps/s at step %3").arg(windows).arg(p.y()).arg(p.x())));
        }
    }

    void pathStartsAtTheFirstParametersRead()
    {
        RunSnapshot snapshot;
        snapshot.parameterNames = {"w", "b"};
        for (int s = 1; s <= 5000; ++s)
            snapshot.recentSteps.push_back(step(s, s % 2, s * 0.001));
        const ParameterPath path = parameterPath(snapshot, 500);
        QVERIFY(path.steps.size() <= 502);
        QCOMPARE(path.w.front(), double(snapshot.recentSteps.front().parameters[0]));
        QCOMPARE(path.b.back(), double(snapshot.recentSteps.back().parameters[1]));
        snapshot.parameterNames = {"softmax/W"};
        QVERIFY(parameterPath(snapshot).isEmpty()); // only the linear model has a (w, b) plane
    }

    // The parameters tab draws w and b for the demo, and how the variables
    // move for a model with more parameters.
    void theParametersTabFollowsTheModel()
    {
        RunSnapshot demo;
        QVERIFY(drawsParameterValues(demo)); // nothing known yet: the demo's tab
        demo.parameterNames = {"w", "b"};
        demo.variableNames = {"w", "b"};
        QVERIFY(drawsParameterValues(demo));
        RunSnapshot mlp;
        mlp.variableNames = {"0.weight", "0.bias", "2.weight", "2.bias"};
        QVERIFY(!drawsParameterValues(mlp));
        // A small softmax has named values too, but no w and b to draw.
        RunSnapshot softmax;
        softmax.parameterNames = {"W[0]", "W[1]", "b[0]", "b[1]"};
        softmax.variableNames = {"W", "b"};
        QVERIFY(!drawsParameterValues(softmax));
        // Its metrics.csv alone names no variables: the values are all there is.
        softmax.variableNames.clear();
        QVERIFY(drawsParameterValues(softmax));
    }
};

QTEST_GUILESS_MAIN(TestSeriesMath)
#include "tst_series_math.moc"
