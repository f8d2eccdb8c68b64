// The launch sequence the window and `parasync --headless` share, driven as
// they drive it, with real parasync-node processes on free loopback ports:
// to a watched, training cluster; to a taken port reported with its holder,
// then on past it to a free one; through the pre-flight check, which waits
// for its driver; and to a launch the launcher refuses.
#include "orchestration/launch_sequence.h"

#include "base/port_holder.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/preflight_check.h"
#include "support/cluster_harness.h"
#include "support/demo_plan.h"

#include <QSignalSpy>
#include <QTest>

#include <algorithm>

#include <unistd.h>

using namespace parasync;
using parasync::testing::demoOnFreePorts;

namespace {

constexpr int kTimeoutMs = 60000;

// The demo cluster on free ports, paced so that a run without a last step
// trains gently on a shared machine.
ClusterPlan pacedDemoOnFreePorts(int64_t lastStep, int computeMs = 10)
{
    ClusterPlan plan = demoOnFreePorts(lastStep);
    plan.training.pace.computeMs = computeMs;
    return plan;
}

QString ps0Of(const ClusterPlan &plan)
{
    return QString::fromStdString(plan.cluster.ps.front().toString());
}

// What the sequence told its driver, in order, as a driver sees it.
class Trail : public QObject
{
public:
    explicit Trail(LaunchSequence &sequence)
    {
        connect(&sequence, &LaunchSequence::preflightStarted, this,
                [this] { m_stages << QStringLiteral("preflightStarted"); });
        connect(&sequence, &LaunchSequence::preflightFinished, this, [this](bool passed, const QString &report) {
            m_stages << (passed ? QStringLiteral("preflightPassed") : QStringLiteral("preflightFailed"));
            m_report = report;
        });
        connect(&sequence, &LaunchSequence::portsTaken, this, [this](const std::vector<PortConflict> &conflicts) {
            m_stages << QStringLiteral("portsTaken");
            m_conflicts = conflicts;
        });
        connect(&sequence, &LaunchSequence::launched, this, [this](const ClusterPlan &plan) {
            m_stages << QStringLiteral("launched");
            m_launched = plan;
        });
        connect(&sequence, &LaunchSequence::watching, this, [this](const QString &address) {
            m_stages << QStringLiteral("watching");
            m_watched = address;
        });
        connect(&sequence, &LaunchSequence::failed, this, [this](const QString &message) {
            m_stages << QStringLiteral("failed");
            m_failure = message;
        });
    }

    const QStringList &stages() const { return m_stages; }
    const QString &report() const { return m_report; }
    const std::vector<PortConflict> &conflicts() const { return m_conflicts; }
    const ClusterPlan &launched() const { return m_launched; }
    const QString &watched() const { return m_watched; }
    const QString &failure() const { return m_failure; }

private:
    QStringList m_stages;
    QString m_report;
    std::vector<PortConflict> m_conflicts;
    ClusterPlan m_launched;
    QString m_watched;
    QString m_failure;
};

} // namespace

class TestLaunchSequence : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        qRegisterMetaType<parasync::RunSnapshot>();
        qRegisterMetaType<parasync::proto::ModeConfig>();
    }

    void aLocalPlanIsLaunchedAtOnceThenWatchedOncePs0ListensAndTrains()
    {
        const ClusterPlan plan = pacedDemoOnFreePorts(0);
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        LaunchSequence sequence(&launcher, &watcher);
        Trail trail(sequence);
        RunSnapshot latest;
        connect(&watcher, &ClusterWatcher::snapshotReady, this, [&latest](const RunSnapshot &s) { latest = s; });

        sequence.start(plan);
        // No remote host, free ports: nothing to ask, launched before start() returns.
        QCOMPARE(trail.stages(), QStringList{QStringLiteral("launched")});
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::Launched);
        QCOMPARE(trail.launched().cluster.ps, plan.cluster.ps);
        QVERIFY(launcher.anyRunning());
        // ps:0 is only starting: the watcher waits for it rather than back off.
        QVERIFY(!watcher.isWatching());

        QTRY_COMPARE_WITH_TIMEOUT(trail.stages(), (QStringList{QStringLiteral("launched"), QStringLiteral("watching")}),
                                  kTimeoutMs);
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::Watching);
        QCOMPARE(trail.watched(), ps0Of(plan));
        QCOMPARE(watcher.address(), ps0Of(plan));
        // Both workers train: each has updates applied. Waited for, not read
        // at step 20: on data links one worker can take the first 20 steps
        // while the other still starts (ThreadSanitizer, a loaded machine).
        const auto bothApplied = [&latest] {
            return latest.globalStep > 20 && latest.workers.size() == 2
                   && std::all_of(latest.workers.begin(), latest.workers.end(),
                                  [](const WorkerFigures &w) { return w.applied > 0; });
        };
        QTRY_VERIFY_WITH_TIMEOUT(bothApplied(), kTimeoutMs);

        watcher.disconnectFromCluster();
        launcher.stopAll();
        QVERIFY(!launcher.anyRunning());
    }

    void aTakenPortIsReportedWithItsHolderAndTheFreePortIsUsedWhenChosen()
    {
        ClusterPlan plan = pacedDemoOnFreePorts(0);
        testing::HeldPort stale(plan.cluster.ps.front().port);
        QVERIFY(stale.ok());
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        LaunchSequence sequence(&launcher, &watcher);
        Trail trail(sequence);

        sequence.start(plan);
        QCOMPARE(trail.stages(), QStringList{QStringLiteral("portsTaken")});
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::PortsTaken);
        QCOMPARE(trail.conflicts().size(), size_t(1));
        const PortConflict &conflict = trail.conflicts().front();
        QCOMPARE(conflict.task, (TaskId{JobName::Ps, 0}));
        QCOMPARE(conflict.address, plan.cluster.ps.front());
        // /proc names the holder: this test.
        QVERIFY2(conflict.holder.contains(QStringLiteral("pid %1").arg(::getpid())), qPrintable(conflict.holder));
        QVERIFY(conflict.suggestedPort != 0 && conflict.suggestedPort != plan.cluster.ps.front().port);
        // The driver has not answered yet: nothing runs.
        QVERIFY(launcher.tasks().empty());
        QVERIFY(!launcher.anyRunning());

        sequence.useSuggestedPorts();
        QCOMPARE(trail.stages(), (QStringList{QStringLiteral("portsTaken"), QStringLiteral("launched")}));
        QCOMPARE(trail.launched().cluster.ps.front().port, conflict.suggestedPort);
        QCOMPARE(trail.launched().cluster.workers, plan.cluster.workers);
        QCOMPARE(launcher.plan().cluster.ps.front().port, conflict.suggestedPort);
        QTRY_COMPARE_WITH_TIMEOUT(sequence.stage(), LaunchSequence::Stage::Watching, kTimeoutMs);
        QCOMPARE(trail.watched(), ps0Of(trail.launched()));
        launcher.stopAll();
    }

    void cancelledAtATakenPortNothingStarts()
    {
        ClusterPlan plan = pacedDemoOnFreePorts(0);
        testing::HeldPort stale(plan.cluster.workers.back().port);
        QVERIFY(stale.ok());
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        LaunchSequence sequence(&launcher, &watcher);
        Trail trail(sequence);

        sequence.start(plan);
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::PortsTaken);
        QCOMPARE(trail.conflicts().front().task, (TaskId{JobName::Worker, 1}));
        sequence.cancel();
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::Idle);
        // An answer that comes after the cancel is no answer.
        sequence.useSuggestedPorts();
        QCOMPARE(trail.stages(), QStringList{QStringLiteral("portsTaken")});
        QVERIFY(launcher.tasks().empty());
        QVERIFY(!watcher.isWatching());
    }

    void theCheckWaitsForItsDriverThenThePortsAndTheLaunchFollow()
    {
        ClusterPlan plan = pacedDemoOnFreePorts(0);
        testing::HeldPort stale(plan.cluster.workers.back().port);
        QVERIFY(stale.ok());
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        LaunchSequence sequence(&launcher, &watcher);
        // A local plan is checked only when asked (the headless --preflight).
        QVERIFY(!sequence.checksFirst(plan));
        sequence.setPreflight(LaunchSequence::Preflight::Always);
        QVERIFY(sequence.checksFirst(plan));
        Trail trail(sequence);

        sequence.start(plan);
        QCOMPARE(trail.stages(), QStringList{QStringLiteral("preflightStarted")});
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::Checking);
        QVERIFY(sequence.preflight());
        QVERIFY(sequence.preflight()->isRunning());
        QTRY_COMPARE_WITH_TIMEOUT(trail.stages().size(), 2, kTimeoutMs);
        QCOMPARE(trail.stages().back(), QStringLiteral("preflightFailed"));
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::Checked);
        QVERIFY2(trail.report().contains(QStringLiteral("worker:1 port %1").arg(plan.cluster.workers.back().port))
                     && trail.report().contains(QLatin1String("taken")),
                 qPrintable(trail.report()));
        // Failed: the driver decides; until then nothing is launched.
        QVERIFY(launcher.tasks().empty());

        // "Launch anyway": the ports are looked at again, and still taken.
        sequence.proceed(plan);
        QCOMPARE(trail.stages().back(), QStringLiteral("portsTaken"));
        QCOMPARE(trail.conflicts().front().task, (TaskId{JobName::Worker, 1}));
        sequence.useSuggestedPorts();
        QCOMPARE(trail.stages().back(), QStringLiteral("launched"));
        QCOMPARE(trail.launched().cluster.workers.back().port, trail.conflicts().front().suggestedPort);
        QTRY_COMPARE_WITH_TIMEOUT(trail.stages().back(), QStringLiteral("watching"), kTimeoutMs);
        QCOMPARE(trail.stages(),
                 (QStringList{QStringLiteral("preflightStarted"), QStringLiteral("preflightFailed"),
                              QStringLiteral("portsTaken"), QStringLiteral("launched"), QStringLiteral("watching")}));
        launcher.stopAll();
    }

    void aPlanTheLauncherRefusesFailsWithItsReason()
    {
        ClusterLauncher launcher;
        launcher.setNodeBinary(QStringLiteral("/nonexistent/parasync-node"));
        ClusterWatcher watcher;
        LaunchSequence sequence(&launcher, &watcher);
        Trail trail(sequence);

        sequence.start(pacedDemoOnFreePorts(100));
        QCOMPARE(trail.stages(), QStringList{QStringLiteral("failed")});
        QCOMPARE(sequence.stage(), LaunchSequence::Stage::Failed);
        QVERIFY2(trail.failure().contains(QLatin1String("cannot find the parasync-node program")),
                 qPrintable(trail.failure()));
        QVERIFY(!launcher.anyRunning());
        QVERIFY(!watcher.isWatching());
    }

    void withWorkersHeldAShortRunIsWatchedFromItsFirstStep()
    {
        // 200 steps at full speed take milliseconds: only workers held until
        // the watcher follows ps:0 let it see the first.
        const ClusterPlan plan = pacedDemoOnFreePorts(200, 0);
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        LaunchSequence sequence(&launcher, &watcher);
        sequence.setHoldWorkersUntilWatched(true);
        Trail trail(sequence);
        RunSnapshot latest;
        connect(&watcher, &ClusterWatcher::snapshotReady, this, [&latest](const RunSnapshot &s) { latest = s; });
        QSignalSpy finished(&watcher, &ClusterWatcher::clusterFinished);
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);

        sequence.start(plan);
        QCOMPARE(trail.stages(), QStringList{QStringLiteral("launched")});
        // Held: the watcher is pointed at ps:0 at once, and the workers wait for it.
        QVERIFY(watcher.isWatching());
        QCOMPARE(launcher.tasks()[1].state, TaskState::NotStarted);

        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1 && allExited.count() == 1, kTimeoutMs);
        QCOMPARE(trail.stages(), (QStringList{QStringLiteral("launched"), QStringLiteral("watching")}));
        QCOMPARE(latest.globalStep, int64_t(200));
        QCOMPARE(latest.lostEvents, int64_t(0));
        QCOMPARE(latest.recentSteps.front().globalStep, int64_t(1));
    }
};

QTEST_GUILESS_MAIN(TestLaunchSequence)
#include "tst_launch_sequence.moc"
