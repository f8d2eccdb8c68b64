// Straggler detection on the figures ps:0 has of its workers (finished
// steps, time held), fed at a look a second as ps:0 looks: who is flagged,
// when, and when the flag goes again.
#include "engine/straggler_detector.h"

#include <QTest>

#include <algorithm>
#include <map>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

// Workers that each take `stepMs` a step and are held `heldMs` of every
// step, looked at once a second.
class Cluster
{
public:
    Cluster() = default;

    void setPace(int worker, double stepMs, double heldMs = 0)
    {
        m_pace[worker] = {stepMs, heldMs};
        m_counts.try_emplace(worker);
    }
    void remove(int worker)
    {
        m_pace.erase(worker);
        m_counts.erase(worker);
    }

    // One second on: returns the flags that changed at the look.
    std::vector<StragglerDetector::Change> second()
    {
        m_now += 1s;
        std::vector<StragglerDetector::Sample> live;
        for (auto &[worker, pace] : m_pace) {
            Counts &counts = m_counts[worker];
            const double stepsThisSecond = 1000.0 / (pace.stepMs + pace.heldMs);
            counts.steps += stepsThisSecond;
            counts.heldUs += stepsThisSecond * pace.heldMs * 1000.0;
            live.push_back({worker, int64_t(counts.steps), std::chrono::microseconds(int64_t(counts.heldUs))});
        }
        return m_detector.look(m_now, live);
    }
    // Seconds until a look changes `worker`'s flag to `flagged` (at most `limit`).
    int secondsUntil(int worker, bool flagged, int limit = 60)
    {
        for (int s = 1; s <= limit; ++s) {
            const auto changes = second();
            const bool changed = std::any_of(changes.begin(), changes.end(), [&](const auto &change) {
                return change.worker == worker && change.straggler == flagged;
            });
            if (changed)
                return s;
        }
        return -1;
    }
    const StragglerDetector &detector() const { return m_detector; }

private:
    struct Pace
    {
        double stepMs = 0;
        double heldMs = 0;
    };
    struct Counts
    {
        double steps = 0;
        double heldUs = 0;
    };
    StragglerDetector m_detector;
    StragglerDetector::Clock::time_point m_now{};
    std::map<int, Pace> m_pace;
    std::map<int, Counts> m_counts;
};

} // namespace

class TestStragglerDetector : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // Async: worker:2 takes 120 ms a step, the others 40 ms. It is judged
    // once half the window (5 s) is seen, at the sixth look, and flagged at
    // the third slow look.
    void aWorkerThreeTimesSlowerIsFlaggedAfterThreeLooks()
    {
        Cluster cluster;
        for (int w = 0; w < 3; ++w)
            cluster.setPace(w, w == 2 ? 120 : 40);
        QCOMPARE(cluster.secondsUntil(2, true), 8);
        QVERIFY(cluster.detector().flagged(2));
        QCOMPARE(cluster.detector().stragglers(), std::vector<int>{2});
        QVERIFY(std::abs(cluster.detector().secondsPerStep(2) - 0.120) < 0.01);
        QVERIFY(std::abs(cluster.detector().secondsPerStep(0) - 0.040) < 0.005);
        // Nothing changes while it stays slow.
        for (int s = 0; s < 20; ++s)
            QVERIFY(cluster.second().empty());
    }

    // The flag goes once the pace over the window is the others' again, three
    // looks in a row: not at the first fast step.
    void aStragglerThatRecoversIsUnflagged()
    {
        Cluster cluster;
        for (int w = 0; w < 3; ++w)
            cluster.setPace(w, w == 1 ? 200 : 40);
        QVERIFY(cluster.secondsUntil(1, true) > 0);
        cluster.setPace(1, 40);
        const int seconds = cluster.secondsUntil(1, false);
        QVERIFY2(seconds > 3 && seconds <= 13, qPrintable(QString::number(seconds)));
        QVERIFY(cluster.detector().stragglers().empty());
    }

    // Sync: every worker finishes a step a global step, so their rates are
    // one. The fast ones wait at the barrier (held); the slow one never
    // does, and only it is flagged.
    void inSyncTheWorkerTheBarrierWaitsForIsFlagged()
    {
        Cluster cluster;
        cluster.setPace(0, 40, 110);
        cluster.setPace(1, 40, 110);
        cluster.setPace(2, 150, 0);
        QCOMPARE(cluster.secondsUntil(2, true), 8);
        QCOMPARE(cluster.detector().stragglers(), std::vector<int>{2});
    }

    // A worker at the threshold's edge is flagged once, not over and over:
    // the flag goes only below 1.5 times the others' pace.
    void aWorkerAtTheEdgeIsNotFlaggedOverAndOver()
    {
        Cluster cluster;
        cluster.setPace(0, 40);
        cluster.setPace(1, 40);
        cluster.setPace(2, 85);
        QVERIFY(cluster.secondsUntil(2, true) > 0);
        int changes = 0;
        for (int s = 0; s < 60; ++s) {
            cluster.setPace(2, s % 2 == 0 ? 78 : 86); // about 2.05 times, now under, now over
            changes += int(cluster.second().size());
        }
        QCOMPARE(changes, 0);
        cluster.setPace(2, 55); // 1.4 times: within half the margin
        QVERIFY(cluster.secondsUntil(2, false) > 0);
    }

    // Less than the threshold slower, or a slow second now and then: nobody.
    void aSlightlySlowerOrOnceSlowWorkerIsNotFlagged()
    {
        Cluster cluster;
        for (int w = 0; w < 4; ++w)
            cluster.setPace(w, w == 3 ? 70 : 40);
        for (int s = 0; s < 30; ++s) {
            if (s == 12 || s == 13)
                cluster.setPace(1, s == 12 ? 400 : 40); // one slow second
            QVERIFY(cluster.second().empty());
        }
        QVERIFY(cluster.detector().stragglers().empty());
    }

    // A frozen worker (SIGSTOP, swapping) finishes no step at all.
    void aWorkerThatStopsSteppingIsFlagged()
    {
        Cluster cluster;
        cluster.setPace(0, 40);
        cluster.setPace(1, 40);
        QVERIFY(cluster.secondsUntil(1, true, 10) < 0);
        cluster.setPace(1, 1e9);
        QVERIFY(cluster.secondsUntil(1, true) > 0);
    }

    // A worker that leaves is forgotten with its flag; one alone is never
    // judged (there is nobody to be slower than).
    void aWorkerThatLeavesTakesItsFlagAndOneAloneIsNeverFlagged()
    {
        Cluster cluster;
        cluster.setPace(0, 40);
        cluster.setPace(1, 300);
        QVERIFY(cluster.secondsUntil(1, true) > 0);
        cluster.remove(0);
        QVERIFY(cluster.second().empty());
        QVERIFY(cluster.detector().flagged(1)); // alone: its flag stays as it was
        cluster.remove(1);
        QVERIFY(cluster.second().empty());
        QVERIFY(cluster.detector().stragglers().empty());
        QCOMPARE(cluster.detector().secondsPerStep(1), 0.0);
    }
};

QTEST_GUILESS_MAIN(TestStragglerDetector)
#include "tst_straggler_detector.moc"
