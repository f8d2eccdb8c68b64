// The update policies, driven step by step: every decision is checked
// without threads, sockets or clocks.
#include "base/error.h"
#include "engine/update_policy.h"

#include <QTest>

using namespace parasync;

namespace {

proto::ModeConfig mode(proto::UpdateMode m, int staleness = 10, int replicas = 0, int total = 0)
{
    proto::ModeConfig config;
    config.set_mode(m);
    config.set_staleness(staleness);
    config.set_replicas_to_aggregate(replicas);
    config.set_total_num_replicas(total);
    return config;
}

// A one-value gradient whose storage lives until the end of the push that
// reads it, as a parsed request's does.
struct OneValueGradient
{
    Parameters values;
    operator GradientView() const { return viewOf(values); }
};

OneValueGradient gradient(float value)
{
    return {{Eigen::VectorXf::Constant(1, value)}};
}

// Records what the policy applied and decided, as the ps would.
struct Recorder
{
    std::vector<std::pair<float, int>> applied; // averaged gradient, contributions
    std::vector<float> learningRateScales;      // one per applied gradient
    std::vector<std::pair<int, PushDecision>> decisions;

    UpdatePolicy make(int workers, const proto::ModeConfig &config)
    {
        UpdatePolicy policy(
            workers, config,
            [this](const GradientView &g, const RowGradientView &, int n, float scale) {
                applied.emplace_back(g[0][0], n);
                learningRateScales.push_back(scale);
            },
            [this](int worker, int64_t, const PushDecision &d) { decisions.emplace_back(worker, d); });
        for (int i = 0; i < workers; ++i)
            policy.join(i);
        return policy;
    }
};

} // namespace

class TestUpdatePolicy : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void asyncAppliesEveryGradientOnArrival()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::ASYNC));
        const auto first = policy.push(0, 0, gradient(1));
        const auto second = policy.push(1, 0, gradient(3));
        QCOMPARE(first.outcome, proto::APPLIED);
        QCOMPARE(first.update, 1);
        QCOMPARE(second.update, 2);
        QCOMPARE(second.staleness, 1); // computed from step 0, applied at step 1
        QCOMPARE(policy.globalStep(), 2);
        QCOMPARE(r.applied.size(), size_t(2));
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        QCOMPARE(policy.hold(1).reason, HoldReason::None);
    }

    void aStaleGradientGetsTheLearningRateOverItsStalenessWhenAsked()
    {
        // Zhang et al.'s rule: four workers all compute from step 0; their
        // gradients arrive 0, 1, 2 and 3 updates stale.
        for (const proto::UpdateMode m : {proto::ASYNC, proto::SSP}) {
            Recorder r;
            auto config = mode(m, 10);
            config.set_learning_rate_by_staleness(true);
            auto policy = r.make(4, config);
            std::vector<PushDecision> decisions;
            for (int worker = 0; worker < 4; ++worker)
                decisions.push_back(policy.push(worker, 0, gradient(1)));
            const std::vector<float> expected{1.0f, 1.0f, 0.5f, 1.0f / 3.0f};
            QCOMPARE(r.learningRateScales, expected);
            for (int worker = 0; worker < 4; ++worker) {
                QCOMPARE(decisions[size_t(worker)].staleness, int64_t(worker));
                QCOMPARE(decisions[size_t(worker)].learningRateScale, expected[size_t(worker)]);
                QCOMPARE(r.decisions[size_t(worker)].second.learningRateScale, expected[size_t(worker)]);
            }
        }
    }

    void withoutTheRuleEveryGradientGetsTheWholeLearningRate()
    {
        Recorder r;
        auto policy = r.make(4, mode(proto::ASYNC));
        for (int worker = 0; worker < 4; ++worker)
            QCOMPARE(policy.push(worker, 0, gradient(1)).learningRateScale, 1.0f);
        QCOMPARE(r.learningRateScales, std::vector<float>(4, 1.0f));
    }

    void syncStepsAreFreshSoTheRuleChangesNothing()
    {
        Recorder r;
        auto config = mode(proto::SYNC);
        config.set_learning_rate_by_staleness(true);
        auto policy = r.make(2, config);
        policy.push(0, 0, gradient(1));
        policy.push(1, 0, gradient(3));
        policy.push(0, 1, gradient(1));
        policy.push(1, 0, gradient(5)); // two steps behind: dropped, never applied
        policy.push(1, 1, gradient(3));
        QCOMPARE(r.learningRateScales, std::vector<float>(2, 1.0f));
        QCOMPARE(policy.result(1).learningRateScale, 1.0f);
    }

    void theRuleSwitchesOnLiveAndABackupKeepsIt()
    {
        Recorder r;
        auto policy = r.make(3, mode(proto::ASYNC));
        policy.push(0, 0, gradient(1));
        policy.push(1, 0, gradient(1)); // staleness 1
        auto config = mode(proto::ASYNC);
        config.set_learning_rate_by_staleness(true);
        policy.setMode(config);
        policy.push(2, 0, gradient(1)); // staleness 2, under the rule now
        QCOMPARE(r.learningRateScales, (std::vector<float>{1.0f, 1.0f, 0.5f}));

        // ps:0's backup imports the state and decides as the primary would.
        Recorder backupRecorder;
        auto backup = backupRecorder.make(3, mode(proto::ASYNC));
        backup.importState(policy.exportState());
        QVERIFY(backup.mode().learning_rate_by_staleness());
        QCOMPARE(backup.push(0, 0, gradient(1)).learningRateScale, 1.0f / 3.0f);
        QCOMPARE(policy.push(0, 0, gradient(1)).learningRateScale, 1.0f / 3.0f);
    }

    void syncAggregatesOneGradientPerWorker()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::SYNC));
        policy.push(0, 0, gradient(1));
        QCOMPARE(policy.globalStep(), 0);
        QCOMPARE(policy.hold(0).reason, HoldReason::SyncBarrier);
        QVERIFY(QString::fromStdString(policy.hold(0).waitingFor).contains(QStringLiteral("worker:1")));
        QVERIFY(r.applied.empty());

        policy.push(1, 0, gradient(3));
        QCOMPARE(policy.globalStep(), 1);
        QCOMPARE(r.applied.size(), size_t(1));
        QCOMPARE(r.applied[0].first, 2.0f); // the average of 1 and 3
        QCOMPARE(r.applied[0].second, 2);
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        QCOMPARE(policy.result(0).update, 1);
        QCOMPARE(policy.result(1).contributions, 2);
        QCOMPARE(r.decisions.size(), size_t(2));
    }

    void syncKeepsItsGradientsWhenTheRequestIsReused()
    {
        // The ps parses every message of a stream into the same request and
        // hands the policy views of it: an open sync step must hold its own
        // copy, or the next message would change a gradient already counted.
        Recorder r;
        auto policy = r.make(2, mode(proto::SYNC));
        Parameters request{Eigen::VectorXf::Constant(1, 1.0f)};
        policy.push(0, 0, viewOf(request));
        request[0][0] = 101.0f;
        QVERIFY(r.applied.empty());
        policy.push(1, 0, viewOf(request));
        QCOMPARE(r.applied.size(), size_t(1));
        QCOMPARE(r.applied[0].first, 51.0f); // (1 + 101) / 2, not (101 + 101) / 2
    }

    void syncDropsAndCountsStaleGradients()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::SYNC));
        policy.push(0, 0, gradient(1));
        policy.push(1, 0, gradient(1));
        QCOMPARE(policy.globalStep(), 1);
        const auto stale = policy.push(0, 0, gradient(5)); // computed against step 0, now 1
        QCOMPARE(stale.outcome, proto::DROPPED_STALE);
        QCOMPARE(policy.dropped(0), 1);
        QCOMPARE(policy.droppedTotal(), 1);
        QCOMPARE(policy.hold(0).reason, HoldReason::None); // a dropped worker goes on at once
        QCOMPARE(r.applied.size(), size_t(1));
    }

    void syncWithBackupWorkersClosesOnTheFastestReplicas()
    {
        Recorder r;
        auto policy = r.make(3, mode(proto::SYNC, 10, /*replicas*/ 2, /*total*/ 3));
        policy.push(2, 0, gradient(2));
        policy.push(0, 0, gradient(4));
        QCOMPARE(policy.globalStep(), 1);
        QCOMPARE(r.applied[0].first, 3.0f);
        // The slowest replica's gradient arrives for a step that has closed.
        QCOMPARE(policy.push(1, 0, gradient(100)).outcome, proto::DROPPED_STALE);
        QCOMPARE(r.applied.size(), size_t(1));
    }

    // A worker whose answer was lost (its stream broke, its ps failed over)
    // pushes again from the same step: its new gradient takes the place of
    // the unanswered one, so a step never counts one worker twice.
    void syncCountsAWorkerOncePerStepWhenItPushesAgain()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::SYNC));
        policy.push(0, 0, gradient(1));
        policy.push(0, 0, gradient(5)); // the answer to the first was lost
        QCOMPARE(policy.globalStep(), 0);
        QCOMPARE(policy.pendingContributions(), 1);
        QCOMPARE(policy.hold(0).reason, HoldReason::SyncBarrier);
        policy.push(1, 0, gradient(3));
        QCOMPARE(policy.globalStep(), 1);
        QCOMPARE(r.applied.size(), size_t(1));
        QCOMPARE(r.applied[0].first, 4.0f); // the average of 5 and 3: the lost one is gone
        QCOMPARE(r.applied[0].second, 2);
        QCOMPARE(r.decisions.size(), size_t(2)); // one decision per worker
        QCOMPARE(policy.applied(0), 1);
    }

    // The whole state exported and imported: the copy decides as the original.
    void anImportedStateDecidesAsTheOriginal()
    {
        Recorder original;
        auto policy = original.make(3, mode(proto::SYNC));
        policy.push(0, 0, gradient(1));
        policy.push(1, 0, gradient(3));
        policy.push(2, 0, gradient(5));
        policy.push(0, 1, gradient(2)); // in the open step 2
        Recorder copyRecorder;
        auto copy = copyRecorder.make(3, mode(proto::ASYNC));
        copy.importState(policy.exportState());
        QCOMPARE(copy.globalStep(), 1);
        QCOMPARE(copy.mode().mode(), proto::SYNC);
        QCOMPARE(copy.pendingContributions(), 1);
        QCOMPARE(copy.workerClock(0), 2);
        QCOMPARE(copy.hold(0).reason, HoldReason::SyncBarrier);
        for (UpdatePolicy *p : {&policy, &copy}) {
            p->push(1, 1, gradient(4));
            p->push(2, 1, gradient(6));
        }
        QCOMPARE(copy.globalStep(), policy.globalStep());
        QCOMPARE(copyRecorder.applied.back(), original.applied.back()); // (2 + 4 + 6) / 3 from both
        QCOMPARE(copy.result(0).update, 2);

        proto::PolicyState wrong = policy.exportState();
        wrong.mutable_workers()->RemoveLast();
        QVERIFY(QString::fromStdString([&] {
                    try {
                        copy.importState(wrong);
                    } catch (const InputError &e) {
                        return std::string(e.what());
                    }
                    return std::string();
                }())
                    .contains(QStringLiteral("the policy state has 2 workers, this cluster 3")));
    }

    void syncStopsWaitingForADeadWorker()
    {
        Recorder r;
        auto policy = r.make(3, mode(proto::SYNC));
        policy.push(0, 0, gradient(1));
        policy.push(1, 0, gradient(3));
        QCOMPARE(policy.hold(0).reason, HoldReason::SyncBarrier);
        policy.setAlive(2, false);
        QCOMPARE(policy.globalStep(), 1);
        QCOMPARE(r.applied[0].second, 2);
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        QCOMPARE(policy.replicasToAggregate(), 2);
    }

    void sspNeverLetsAWorkerRunMoreThanStalenessAhead_data()
    {
        QTest::addColumn<int>("staleness");
        QTest::newRow("lock-step") << 0;
        QTest::newRow("staleness 1") << 1;
        QTest::newRow("seeds' staleness 10") << 10;
    }

    void sspNeverLetsAWorkerRunMoreThanStalenessAhead()
    {
        QFETCH(int, staleness);
        Recorder r;
        auto policy = r.make(2, mode(proto::SSP, staleness));
        // worker:0 runs as fast as it may; worker:1 never steps.
        int pushed = 0;
        while (policy.hold(0).reason == HoldReason::None && pushed < 1000) {
            policy.push(0, policy.globalStep(), gradient(1));
            ++pushed;
        }
        QCOMPARE(pushed, staleness + 1);
        QCOMPARE(policy.hold(0).reason, HoldReason::StalenessBound);
        QVERIFY(policy.workerClock(0) <= policy.workerClock(1) + staleness + 1);
        // The slow worker steps once: the fast one may go on.
        policy.push(1, policy.globalStep(), gradient(1));
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        QCOMPARE(policy.hold(1).reason, HoldReason::None);
        // Every gradient was applied as it arrived.
        QCOMPARE(int(r.applied.size()), staleness + 2);
    }

    // A newcomer to an elastic cluster (an index beyond the list, that never
    // pushed) starts level with the slowest live worker in ssp: counted from
    // 0 it would hold every other worker until it had made up the whole run.
    void sspStartsANewcomerLevelWithTheSlowest()
    {
        Recorder r;
        auto policy = r.make(3, mode(proto::SSP, 2));
        policy.setAlive(2, false); // an index of --max_workers nobody has used yet
        for (int step = 0; step < 10; ++step)
            for (int worker : {0, 1})
                policy.push(worker, policy.globalStep(), gradient(1));
        policy.push(1, policy.globalStep(), gradient(1)); // worker:1 one ahead of worker:0
        policy.join(2, UpdatePolicy::JoinClock::LevelWithSlowest);
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        QCOMPARE(policy.hold(1).reason, HoldReason::None);
        QCOMPARE(policy.hold(2).reason, HoldReason::None);
        // Level with worker:0, the slowest (10): the bound holds worker:1
        // once it is more than 2 ahead of the newcomer's 10 as well.
        policy.push(1, policy.globalStep(), gradient(1));
        policy.push(1, policy.globalStep(), gradient(1));
        QCOMPARE(policy.hold(1).reason, HoldReason::StalenessBound);
        QVERIFY2(policy.hold(1).waitingFor.find("clock 10") != std::string::npos, policy.hold(1).waitingFor.c_str());
        policy.push(0, policy.globalStep(), gradient(1));
        policy.push(2, policy.globalStep(), gradient(1));
        QCOMPARE(policy.hold(1).reason, HoldReason::None);
        // A worker that pushed before and comes back keeps its clock: its
        // steps so far count.
        policy.setAlive(0, false);
        policy.join(0, UpdatePolicy::JoinClock::LevelWithSlowest);
        QCOMPARE(policy.workerClock(0), 11);
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        // A worker of the initial list that joins late counts from 0, as the
        // bound has always counted: the others wait for it to catch up.
        Recorder late;
        auto listed = late.make(2, mode(proto::SSP, 2));
        listed.setAlive(1, false);
        for (int step = 0; step < 5; ++step)
            listed.push(0, listed.globalStep(), gradient(1));
        listed.join(1);
        QCOMPARE(listed.hold(0).reason, HoldReason::StalenessBound);
    }

    void sspStopsWaitingForADeadClock()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::SSP, 0));
        policy.push(0, 0, gradient(1));
        QCOMPARE(policy.hold(0).reason, HoldReason::StalenessBound);
        policy.setAlive(1, false);
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
    }

    // ps:0 wakes the workers an ssp bound holds only after a push by a worker
    // at the slowest clock (atSlowestClock); no other push may release one,
    // or a held worker would sleep through its release.
    void onlyAPushAtTheSlowestClockReleasesAnSspHold()
    {
        Recorder r;
        const int workers = 4;
        auto policy = r.make(workers, mode(proto::ASYNC));
        for (int i = 0; i < 5; ++i)
            policy.push(2, policy.globalStep(), gradient(1)); // worker:2 enters ssp with a head start
        policy.setMode(mode(proto::SSP, 1));
        uint32_t state = 12345; // a fixed walk, the same on every run
        int releasingPushes = 0;
        for (int step = 0; step < 2000; ++step) {
            std::vector<int> free;
            for (int i = 0; i < workers; ++i)
                if (policy.hold(i).reason == HoldReason::None)
                    free.push_back(i);
            QVERIFY(!free.empty()); // the slowest worker is never held
            state = state * 1103515245u + 12345u;
            const int pusher = free[(state >> 16) % free.size()];
            std::vector<HoldReason> before;
            for (int i = 0; i < workers; ++i)
                before.push_back(policy.hold(i).reason);
            const bool atSlowest = policy.atSlowestClock(pusher);
            policy.push(pusher, policy.globalStep(), gradient(1));
            for (int i = 0; i < workers; ++i) {
                if (i == pusher || before[size_t(i)] != HoldReason::StalenessBound
                    || policy.hold(i).reason != HoldReason::None)
                    continue;
                QVERIFY2(atSlowest, qPrintable(QStringLiteral("step %1: worker:%2's push released worker:%3 "
                                                              "but was not at the slowest clock")
                                                   .arg(step)
                                                   .arg(pusher)
                                                   .arg(i)));
                ++releasingPushes;
            }
        }
        QVERIFY(releasingPushes > 100); // the walk did exercise releases
    }

    void switchingFromSyncMidStepAppliesThePendingGradients()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::SYNC));
        policy.push(0, 0, gradient(6));
        QCOMPARE(policy.hold(0).reason, HoldReason::SyncBarrier);
        const auto change = policy.setMode(mode(proto::ASYNC));
        // The open step closed with what it had: nothing lost, nobody stranded.
        QCOMPARE(change.globalStep, 1);
        QCOMPARE(change.previous.mode(), proto::SYNC);
        QCOMPARE(change.current.mode(), proto::ASYNC);
        QCOMPARE(r.applied.size(), size_t(1));
        QCOMPARE(r.applied[0].first, 6.0f);
        QCOMPARE(r.applied[0].second, 1);
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        QCOMPARE(policy.push(1, 1, gradient(1)).outcome, proto::APPLIED);
    }

    void switchingToSspReleasesOrHoldsByTheNewBound()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::SSP, 0));
        policy.push(0, 0, gradient(1));
        QCOMPARE(policy.hold(0).reason, HoldReason::StalenessBound);
        policy.setMode(mode(proto::SSP, 5));
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        policy.setMode(mode(proto::ASYNC));
        for (int i = 0; i < 10; ++i)
            policy.push(0, policy.globalStep(), gradient(1));
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        // worker:0 ran 11 steps ahead under async. Into ssp, both start
        // level: it is bounded from here on, not frozen until worker:1 has
        // made up the async phase.
        policy.setMode(mode(proto::SSP, 3));
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
        for (int i = 0; i < 3; ++i) {
            policy.push(0, policy.globalStep(), gradient(1));
            QCOMPARE(policy.hold(0).reason, HoldReason::None);
        }
        policy.push(0, policy.globalStep(), gradient(1));
        const Hold held = policy.hold(0);
        QCOMPARE(held.reason, HoldReason::StalenessBound);
        QVERIFY2(held.waitingFor.find("clock 4 > slowest worker:1 clock 0 + staleness 3 (steps since ssp began)")
                     != std::string::npos,
                 held.waitingFor.c_str());
        // worker:1 steps: worker:0 may go on.
        policy.push(1, policy.globalStep(), gradient(1));
        QCOMPARE(policy.hold(0).reason, HoldReason::None);
    }

    void switchingToSyncStartsAggregatingAtTheCurrentStep()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::ASYNC));
        policy.push(0, 0, gradient(1));
        policy.push(1, 0, gradient(1));
        const auto change = policy.setMode(mode(proto::SYNC));
        QCOMPARE(change.globalStep, 2);
        QCOMPARE(policy.push(0, 2, gradient(2)).outcome, proto::AGGREGATED);
        QCOMPARE(policy.push(1, 2, gradient(4)).outcome, proto::AGGREGATED);
        QCOMPARE(policy.globalStep(), 3);
        QCOMPARE(r.applied.back().first, 3.0f);
    }

    void badModeNumbersAreRefusedWithAReason_data()
    {
        QTest::addColumn<int>("modeValue");
        QTest::addColumn<int>("staleness");
        QTest::addColumn<int>("replicas");
        QTest::addColumn<int>("total");
        QTest::addColumn<QString>("expected");
        QTest::newRow("unset mode") << 0 << 10 << 0 << 0 << QStringLiteral("async, sync or ssp");
        QTest::newRow("negative staleness") << int(proto::SSP) << -1 << 0 << 0 << QStringLiteral("negative");
        QTest::newRow("more replicas than workers") << int(proto::SYNC) << 0 << 3 << 0 << QStringLiteral("never close");
        QTest::newRow("replicas above total")
            << int(proto::SYNC) << 0 << 2 << 1 << QStringLiteral("total_num_replicas");
    }

    void badModeNumbersAreRefusedWithAReason()
    {
        QFETCH(int, modeValue);
        QFETCH(int, staleness);
        QFETCH(int, replicas);
        QFETCH(int, total);
        QFETCH(QString, expected);
        Recorder r;
        auto policy = r.make(2, mode(proto::ASYNC));
        try {
            policy.setMode(mode(proto::UpdateMode(modeValue), staleness, replicas, total));
            QFAIL("an invalid mode was accepted");
        } catch (const InputError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(expected), e.what());
        }
        QCOMPARE(policy.mode().mode(), proto::ASYNC); // unchanged
    }

    void decisionsArriveInGlobalStepOrder()
    {
        Recorder r;
        auto policy = r.make(2, mode(proto::SYNC));
        for (int step = 0; step < 5; ++step) {
            policy.push(1, step, gradient(1));
            policy.push(0, step, gradient(1));
        }
        int64_t previous = 0;
        for (const auto &[worker, decision] : r.decisions) {
            QVERIFY(decision.update >= previous);
            previous = decision.update;
        }
        QCOMPARE(r.decisions.size(), size_t(10));
        QCOMPARE(policy.applied(0), 5);
        QCOMPARE(policy.applied(1), 5);
    }
};

QTEST_GUILESS_MAIN(TestUpdatePolicy)
#include "tst_update_policy.moc"
