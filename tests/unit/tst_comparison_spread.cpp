// A mode comparison over seeds, summarized: medians and ranges worked out by
// hand, a difference called out only where every seed of one contender beat
// every seed of the other, and the curves' median and band read off runs
// whose values are known at every point.
#include "orchestration/comparison_spread.h"

#include <QTest>

#include <cmath>

using namespace parasync;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ModeRunSummary run(const QString &name, proto::UpdateMode mode, uint64_t seed, std::optional<double> toTarget,
                   double accuracy)
{
    ModeRunSummary r;
    r.name = name;
    r.mode.set_mode(mode);
    r.seed = seed;
    r.secondsToTarget = toTarget;
    r.globalStepAtTarget = toTarget ? int64_t(*toTarget * 100) : -1;
    r.finalLoss = 1.0 / double(seed);
    r.globalSteps = 100;
    r.globalStepsPerSecond = 10.0 * double(seed);
    r.metrics[QStringLiteral("heldout_accuracy")].push_back({5, 100, accuracy});
    r.staleness.counts = {{0, 10}, {int64_t(seed), 10}};
    r.staleness.gradients = 20;
    r.staleness.max = int64_t(seed);
    r.workers.push_back({0, 100, 0, 5.0 * double(seed), 0.1 * double(seed)});
    return r;
}

Spread spreadFrom(double low, double high, int runs = 3)
{
    Spread s;
    s.low = low;
    s.high = high;
    s.median = 0.5 * (low + high);
    s.values = runs;
    s.runs = runs;
    return s;
}

} // namespace

class TestComparisonSpread : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void medianAndRangeLeaveOutMissingValues()
    {
        const Spread odd = spreadOf({3, 1, 2});
        QCOMPARE(odd.median, 2.0);
        QCOMPARE(odd.low, 1.0);
        QCOMPARE(odd.high, 3.0);
        QCOMPARE(odd.values, 3);
        QVERIFY(odd.all());

        const Spread even = spreadOf({4, kNaN, 1, 2, 10});
        QCOMPARE(even.median, 3.0); // (2 + 4) / 2 of 1, 2, 4, 10
        QCOMPARE(even.low, 1.0);
        QCOMPARE(even.high, 10.0);
        QCOMPARE(even.values, 4);
        QCOMPARE(even.runs, 5);
        QVERIFY(even.any() && !even.all());

        const Spread none = spreadOf({kNaN, kNaN});
        QVERIFY(!none.any());
        QVERIFY(std::isnan(none.median));
    }

    void aDifferenceIsCalledOutOnlyBeyondTheSpread()
    {
        // Accuracy, higher is better: 0.96-0.99 against 0.70-0.78 is beyond.
        QVERIFY(beyondSpread(spreadFrom(0.96, 0.99), spreadFrom(0.70, 0.78), true));
        QVERIFY(!beyondSpread(spreadFrom(0.70, 0.78), spreadFrom(0.96, 0.99), true));
        // Overlapping ranges: within the spread, whichever median is better.
        QVERIFY(!beyondSpread(spreadFrom(0.75, 0.95), spreadFrom(0.70, 0.80), true));
        // Time, lower is better.
        QVERIFY(beyondSpread(spreadFrom(1, 2), spreadFrom(3, 9), false));
        QVERIFY(!beyondSpread(spreadFrom(1, 4), spreadFrom(3, 9), false));
        // One run each: no spread known, nothing called out.
        QVERIFY(!beyondSpread(spreadFrom(1, 1, 1), spreadFrom(9, 9, 1), false));
        // A run that never reached the target is the worst only when asked.
        Spread neverReached;
        neverReached.runs = 3;
        QVERIFY(beyondSpread(spreadFrom(1, 2), neverReached, false, true));
        QVERIFY(!beyondSpread(spreadFrom(1, 2), neverReached, false, false));
        Spread reachedOnce = spreadFrom(0.5, 0.5);
        reachedOnce.values = 1;
        // Some of its runs never reached it: not every seed better.
        QVERIFY(!beyondSpread(reachedOnce, spreadFrom(1, 2), false, true));
        // Every seed of `a` reached it sooner than the one that did of `b`.
        QVERIFY(beyondSpread(spreadFrom(0.2, 0.4), reachedOnce, false, true));
    }

    void contendersGatherTheirSeeds()
    {
        ModeComparisonSummary summary;
        // Seed by seed, as ModeComparison runs them.
        for (const uint64_t seed : {1, 2, 3}) {
            summary.runs.push_back(run(QStringLiteral("async"), proto::ASYNC, seed,
                                       seed == 2 ? std::nullopt : std::optional<double>(4.0 + double(seed)),
                                       0.70 + 0.02 * double(seed)));
            summary.runs.push_back(
                run(QStringLiteral("sync"), proto::SYNC, seed, 1.0 + 0.1 * double(seed), 0.95 + 0.01 * double(seed)));
        }
        QVERIFY(repeatedOverSeeds(summary));
        const std::vector<ContenderSpread> contenders = contenderSpreads(summary);
        QCOMPARE(contenders.size(), size_t(2));
        const ContenderSpread &async = contenders[0];
        const ContenderSpread &sync = contenders[1];
        QCOMPARE(async.name, QStringLiteral("async"));
        QCOMPARE(async.runs, (std::vector<size_t>{0, 2, 4}));
        QCOMPARE(async.seeds, (std::vector<uint64_t>{1, 2, 3}));
        // async reached the target with seeds 1 and 3 only: 5 and 7 s.
        QCOMPARE(async.secondsToTarget.values, 2);
        QCOMPARE(async.secondsToTarget.runs, 3);
        QCOMPARE(async.secondsToTarget.median, 6.0);
        QCOMPARE(async.globalStepAtTarget.low, 500.0);
        QCOMPARE(sync.secondsToTarget.median, 1.2);
        QCOMPARE(sync.finalMetrics.at(QStringLiteral("heldout_accuracy")).low, 0.96);
        QCOMPARE(async.finalMetrics.at(QStringLiteral("heldout_accuracy")).high, 0.76);
        QCOMPARE(async.globalStepsPerSecond.median, 20.0);
        // Staleness pooled over the seeds: 30 gradients at 0, 10 each at 1, 2, 3.
        QCOMPARE(async.staleness.gradients, int64_t(60));
        QCOMPARE(async.staleness.counts.at(0), int64_t(30));
        QCOMPARE(async.staleness.max, int64_t(3));
        QCOMPARE(async.staleness.mean, 1.0);
        // Each run's own median: half its gradients at 0.
        QCOMPARE(async.stalenessMedian.median, 0.0);
        QCOMPARE(async.workerStepsPerSecond.at(0).median, 10.0);
        QCOMPARE(async.workerWaitFraction.at(0).high, 0.3);

        // sync is beyond the spread on accuracy and time; nothing else is.
        const auto accuracy = differencesBeyondSpread(
            contenders, [](const ContenderSpread &c) { return c.finalMetrics.at(QStringLiteral("heldout_accuracy")); },
            true);
        QCOMPARE(accuracy, (std::vector<std::pair<size_t, size_t>>{{1, 0}}));
        const auto time = differencesBeyondSpread(
            contenders, [](const ContenderSpread &c) { return c.secondsToTarget; }, false, true);
        QCOMPARE(time, (std::vector<std::pair<size_t, size_t>>{{1, 0}}));

        // One run a contender is not a comparison over seeds.
        ModeComparisonSummary once;
        once.runs = {summary.runs[0], summary.runs[1]};
        QVERIFY(!repeatedOverSeeds(once));
        QVERIFY(differencesBeyondSpread(
                    contenderSpreads(once), [](const ContenderSpread &c) { return c.secondsToTarget; }, false, true)
                    .empty());
    }

    void theCurveIsTheMedianAndRangeOfTheRunsThatGotThatFar()
    {
        // Three step functions: value 10, 20, 30 until x = 5, then 1, 2, 3;
        // the third run ends at x = 6, the others at x = 10.
        const std::vector<std::vector<std::pair<double, double>>> series{
            {{0, 10}, {5, 1}, {10, 1}},
            {{0, 20}, {5, 2}, {10, 2}},
            {{0, 30}, {5, 3}, {6, 3}},
        };
        const SpreadCurve curve = spreadCurve(series, 11); // x = 0, 1, ..., 10
        QCOMPARE(curve.x.size(), size_t(11));
        QCOMPARE(curve.x[4], 4.0);
        QCOMPARE(curve.median[4], 20.0);
        QCOMPARE(curve.low[4], 10.0);
        QCOMPARE(curve.high[4], 30.0);
        QCOMPARE(curve.median[5], 2.0); // the new values hold from x = 5 on
        QCOMPARE(curve.high[6], 3.0);   // the third run's last point
        // Past x = 6 the third run is over: two runs left.
        QCOMPARE(curve.median[7], 1.5);
        QCOMPARE(curve.high[7], 2.0);
        QCOMPARE(curve.low[10], 1.0);

        // A single run keeps every point of its own.
        const SpreadCurve one = spreadCurve({{{0, 5}, {0.5, 4}, {0.7, 3}}}, 11);
        QCOMPARE(one.x, (std::vector<double>{0, 0.5, 0.7}));
        QCOMPARE(one.median, one.low);
        QCOMPARE(one.median, one.high);
        QVERIFY(spreadCurve({{}, {}}).empty());
    }
};

QTEST_GUILESS_MAIN(TestComparisonSpread)
#include "tst_comparison_spread.moc"
