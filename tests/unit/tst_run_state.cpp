// The live state of a run: decimated series, what telemetry events turn
// into, and replaying a run directory. No processes, no sockets.
#include "base/error.h"
#include "formats/run_log.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <limits>

using namespace parasync;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

proto::TelemetryEvent stepEvent(int64_t globalStep, double wallTime, int worker, int64_t clock, float batchLoss,
                                float fullLoss = kNaN, proto::PushOutcome outcome = proto::APPLIED,
                                int64_t staleness = 0, std::vector<float> parameters = {})
{
    proto::TelemetryEvent event;
    auto *s = event.mutable_step();
    s->set_global_step(globalStep);
    s->set_wall_time(wallTime);
    s->set_worker(worker);
    s->set_worker_clock(clock);
    s->set_batch_loss(batchLoss);
    s->set_full_loss(fullLoss);
    s->set_outcome(outcome);
    s->set_staleness(staleness);
    s->set_computed_from_step(globalStep - 1 - staleness);
    s->set_contributions(1);
    s->set_compute_us(300);
    s->set_push_us(100);
    s->set_wait_us(100);
    for (float p : parameters)
        s->add_parameters(p);
    return event;
}

proto::TelemetryEvent modeChangeEvent(int64_t globalStep, double wallTime, proto::UpdateMode from, proto::UpdateMode to)
{
    proto::TelemetryEvent event;
    auto *m = event.mutable_mode_change();
    m->set_global_step(globalStep);
    m->set_wall_time(wallTime);
    m->mutable_previous()->set_mode(from);
    m->mutable_current()->set_mode(to);
    m->mutable_current()->set_staleness(3);
    m->set_requested_by("test");
    return event;
}

proto::TelemetryEvent workerStateEvent(int worker, proto::WorkerPhase phase, const std::string &waitingFor,
                                       double wallTime)
{
    proto::TelemetryEvent event;
    auto *w = event.mutable_worker_state();
    w->set_wall_time(wallTime);
    w->mutable_status()->set_worker_index(worker);
    w->mutable_status()->set_phase(phase);
    w->mutable_status()->set_waiting_for(waitingFor);
    return event;
}

proto::ModelSignature linearSignature()
{
    proto::ModelSignature signature;
    signature.set_model("linear");
    auto *w = signature.add_variables();
    w->set_name("w");
    w->add_shape(1);
    auto *b = signature.add_variables();
    b->set_name("b");
    b->add_shape(1);
    return signature;
}

void writeText(const QString &path, const QByteArray &text)
{
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(text);
}

} // namespace

class TestRunState : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void everyOutcomeAndPhaseNameReadsBackAsWritten()
    {
        // One vocabulary for the step log's writer, its replay, the trace
        // and the timeline's CSV: every value the protocol has survives it.
        for (int value = proto::PushOutcome_MIN + 1; value <= proto::PushOutcome_MAX; ++value) {
            const auto outcome = proto::PushOutcome(value);
            QCOMPARE(outcomeFromName(outcomeName(outcome)), outcome);
        }
        for (int value = proto::WorkerPhase_MIN + 1; value <= proto::WorkerPhase_MAX; ++value) {
            const auto phase = proto::WorkerPhase(value);
            QCOMPARE(phaseFromName(phaseName(phase)), phase);
        }
        QCOMPARE(outcomeFromName("applied, honestly"), proto::PUSH_OUTCOME_UNSPECIFIED);
    }

    void decimationKeepsMinMaxAndStaysBounded()
    {
        DecimatedSeries series(1024);
        constexpr int64_t n = 10'000'000;
        for (int64_t i = 0; i < n; ++i) {
            double y = std::sin(double(i) * 1e-4);
            if (i == 7'654'321)
                y = 50; // one spike in ten million must survive
            if (i == 1'234'567)
                y = -50;
            series.append(double(i), y);
        }
        QVERIFY(series.buckets().size() <= 1024);
        QVERIFY(series.buckets().size() >= 512);
        QCOMPARE(series.totalCount(), n);
        double minimum = 1e9, maximum = -1e9;
        int64_t counted = 0;
        double previousX = -1;
        for (const auto &bucket : series.buckets()) {
            minimum = std::min(minimum, bucket.min);
            maximum = std::max(maximum, bucket.max);
            counted += bucket.count;
            QVERIFY(bucket.x > previousX);
            QVERIFY(bucket.min <= bucket.mean() && bucket.mean() <= bucket.max);
            previousX = bucket.x;
        }
        QCOMPARE(maximum, 50.0);
        QCOMPARE(minimum, -50.0);
        QCOMPARE(counted, n);
        QCOMPARE(series.buckets().front().x, 0.0);
        QCOMPARE(series.buckets().back().last, std::sin(double(n - 1) * 1e-4));
    }

    void decimationIgnoresNonFiniteAndMergesOlderX()
    {
        DecimatedSeries series(8);
        series.append(1, std::nan(""));
        series.append(2, std::numeric_limits<double>::infinity());
        QVERIFY(series.isEmpty());
        series.append(10, 1);
        series.append(11, 2);
        series.append(5, 7); // older: joins the last bucket
        QCOMPARE(series.buckets().size(), size_t(2));
        QCOMPARE(series.buckets().back().x, 11.0);
        QCOMPARE(series.buckets().back().max, 7.0);
        QCOMPARE(series.buckets().back().count, int64_t(2));
        series.clear();
        QVERIFY(series.isEmpty());
        QCOMPARE(series.totalCount(), int64_t(0));
    }

    void seriesFedAlikeHaveAlignedBuckets()
    {
        // fullLoss (by step) and fullLossByTime get one value per evaluation:
        // bucket i of both must cover the same evaluations.
        DecimatedSeries byStep(16), byTime(16);
        for (int i = 0; i < 1000; ++i) {
            byStep.append(i * 100, 1.0 / (i + 1));
            byTime.append(std::sqrt(double(i)) * 0.37, 1.0 / (i + 1));
        }
        QCOMPARE(byStep.buckets().size(), byTime.buckets().size());
        for (size_t i = 0; i < byStep.buckets().size(); ++i)
            QCOMPARE(byStep.buckets()[i].count, byTime.buckets()[i].count);
    }

    void snapshotFromHandMadeEvents()
    {
        RunState state;
        proto::TelemetryBatch first;
        auto *status = first.mutable_status();
        status->set_global_step(0);
        status->mutable_mode()->set_mode(proto::ASYNC);
        status->set_last_step(1000);
        status->set_initialized(true);
        status->add_ps_hosts("127.0.0.1:2222");
        status->add_worker_hosts("127.0.0.1:2223");
        status->add_worker_hosts("127.0.0.1:2224");
        *status->mutable_signature() = linearSignature();
        for (int i = 0; i < 2; ++i) {
            auto *w = status->add_workers();
            w->set_worker_index(i);
            w->set_phase(proto::TRAINING);
            w->set_pid(1000 + i);
        }
        state.apply(first);

        proto::TelemetryBatch batch;
        *batch.add_events() = stepEvent(1, 100.0, 0, 1, 80.f, 81.f, proto::APPLIED, 0, {0.1f, 0.5f});
        *batch.add_events() = stepEvent(2, 100.1, 1, 1, 70.f, kNaN, proto::APPLIED, 1, {0.2f, 0.6f});
        *batch.add_events() = stepEvent(2, 100.2, 0, 2, 999.f, kNaN, proto::DROPPED_STALE, 20, {0.f, 0.f});
        *batch.add_events() = modeChangeEvent(2, 100.3, proto::ASYNC, proto::SSP);
        *batch.add_events() = stepEvent(3, 100.4, 1, 2, 60.f, kNaN, proto::APPLIED, 0, {0.3f, 0.7f});
        *batch.add_events() = stepEvent(3, 100.45, 1, 3, kNaN, kNaN, proto::REJECTED_NONFINITE, 0, {0.3f, 0.7f});
        *batch.add_events() = workerStateEvent(1, proto::BLOCKED_BY_STALENESS, "worker:0 (clock 2)", 100.5);
        proto::TelemetryEvent checkpoint;
        checkpoint.mutable_checkpoint()->set_global_step(3);
        checkpoint.mutable_checkpoint()->set_wall_time(100.6);
        *batch.add_events() = checkpoint;
        batch.set_lost_events(5);
        state.apply(batch);
        proto::TelemetryBatch more;
        more.set_lost_events(2);
        more.set_cluster_finished(true);
        state.apply(more);

        const RunSnapshot s = state.snapshot();
        QCOMPARE(s.globalStep, int64_t(3));
        QCOMPARE(s.lastStep, int64_t(1000));
        QCOMPARE(s.mode.mode(), proto::SSP);
        QCOMPARE(s.mode.staleness(), 3);
        QVERIFY(s.finished);
        QCOMPARE(s.lostEvents, int64_t(7));
        QCOMPARE(s.startWallTime, 100.0);
        QCOMPARE(s.parameterNames, (std::vector<std::string>{"w", "b"}));
        QCOMPARE(s.workerHosts.size(), size_t(2));
        QCOMPARE(s.workerHosts[1], std::string("127.0.0.1:2224"));

        // Loss series: applied steps only; the dropped gradient's 999 is not a point.
        QCOMPARE(s.batchLossByWorker.size(), size_t(2));
        QCOMPARE(s.batchLossByWorker.at(0).totalCount(), int64_t(1));
        QCOMPARE(s.batchLossByWorker.at(0).buckets().front().max, 80.0);
        QCOMPARE(s.batchLossByWorker.at(1).totalCount(), int64_t(2));
        QCOMPARE(s.fullLoss.totalCount(), int64_t(1)); // NaN full losses are not points
        QCOMPARE(s.fullLoss.buckets().front().last, 81.0);
        QCOMPARE(s.fullLossByTime.buckets().front().x, 0.0);
        QCOMPARE(s.parameterSeries.size(), size_t(2));
        QCOMPARE(s.parameterSeries[0].totalCount(), int64_t(3)); // not the rejected one's
        QCOMPARE(s.parameterSeries[1].buckets().back().last, double(0.7f));
        // Values belong to the step they were computed from.
        QCOMPARE(s.parameterSeries[0].buckets().front().x, 0.0);

        // Every step, dropped too, in the recent records and the counts.
        QCOMPARE(s.recentSteps.size(), size_t(5));
        QCOMPARE(s.recentSteps[4].outcome, proto::REJECTED_NONFINITE);
        QCOMPARE(s.workers[1].nonfinite, int64_t(1));
        QCOMPARE(s.workers[1].applied, int64_t(2)); // a rejected gradient is not applied
        QCOMPARE(s.recentSteps[2].outcome, proto::DROPPED_STALE);
        QCOMPARE(s.workers.size(), size_t(2));
        QCOMPARE(s.workers[0].applied, int64_t(1));
        QCOMPARE(s.workers[0].dropped, int64_t(1));
        QCOMPARE(s.workers[0].pid, int64_t(1000));
        QCOMPARE(s.workers[0].stalenessHistogram.size(), size_t(16));
        QCOMPARE(s.workers[0].stalenessHistogram[0], int64_t(1));
        QCOMPARE(s.workers[0].stalenessHistogram[15], int64_t(1)); // staleness 20 is ">= 15"
        QCOMPARE(s.workers[1].stalenessHistogram[1], int64_t(1));
        QCOMPARE(s.workers[1].phase, proto::BLOCKED_BY_STALENESS);
        QCOMPARE(s.workers[1].waitingFor, std::string("worker:0 (clock 2)"));
        QCOMPARE(s.workers[1].clock, int64_t(3));
        QVERIFY(std::abs(s.workers[0].waitFraction - 0.2) < 1e-9);

        QCOMPARE(s.modeChanges.size(), size_t(1));
        QCOMPARE(s.modeChanges[0].globalStep, int64_t(2));
        QCOMPARE(s.modeChanges[0].previous.mode(), proto::ASYNC);
        QCOMPARE(s.modeChanges[0].requestedBy, std::string("test"));
        QCOMPARE(s.checkpoints.size(), size_t(1));
        QCOMPARE(s.checkpoints[0].first, int64_t(3));
    }

    void countsAreTheLargerOfSeenAndReported()
    {
        // A late subscriber never saw the first steps: ps:0's counts win;
        // a status that already counts events still on their way must not
        // make them count twice.
        RunState state;
        state.apply(stepEvent(501, 10.0, 0, 250, 1.f));
        proto::ClusterStatusResponse status;
        status.set_global_step(501);
        auto *w = status.add_workers();
        w->set_worker_index(0);
        w->set_phase(proto::TRAINING);
        w->set_worker_clock(250);
        w->set_applied(248);
        w->set_dropped(2);
        state.applyStatus(status);
        const auto s = state.snapshot();
        QCOMPARE(s.workers[0].applied, int64_t(248));
        QCOMPARE(s.workers[0].dropped, int64_t(2));

        RunState early;
        for (int i = 1; i <= 5; ++i)
            early.apply(stepEvent(i, 10.0 + i, 0, i, 1.f));
        w->set_applied(6); // step 6 is counted by ps:0 before its event arrives
        w->set_dropped(0);
        early.applyStatus(status);
        QCOMPARE(early.snapshot().workers[0].applied, int64_t(6));
        early.apply(stepEvent(6, 16.0, 0, 6, 1.f));
        QCOMPARE(early.snapshot().workers[0].applied, int64_t(6));
        early.apply(stepEvent(7, 17.0, 0, 7, 1.f));
        QCOMPARE(early.snapshot().workers[0].applied, int64_t(7));
    }

    // ps:0's straggler flags: marked where they change (the timeline draws
    // them in the worker's lane) and told in words for the banner, with what
    // the mode in force makes of them.
    void stragglerFlagsAreMarkedAndToldInTheModesWords()
    {
        RunState state;
        proto::ClusterStatusResponse status;
        status.set_global_step(300);
        status.mutable_mode()->set_mode(proto::SYNC);
        for (int i = 0; i < 3; ++i) {
            auto *w = status.add_workers();
            w->set_worker_index(i);
            w->set_phase(i == 2 ? proto::TRAINING : proto::BLOCKED_BY_SYNC);
            w->set_seconds_per_step(i == 2 ? 0.15 : 0.02);
        }
        state.applyStatus(status);
        QVERIFY(describeStragglers(state.snapshot()).empty());
        QVERIFY(state.snapshot().stragglerChanges.empty());

        state.apply(stepEvent(301, 30.0, 0, 100, 1.f));
        proto::TelemetryEvent flagged = workerStateEvent(2, proto::TRAINING, "", 31.0);
        flagged.mutable_worker_state()->mutable_status()->set_straggler(true);
        flagged.mutable_worker_state()->mutable_status()->set_seconds_per_step(0.15);
        state.apply(flagged);
        auto snapshot = state.snapshot();
        QCOMPARE(snapshot.stragglerChanges.size(), size_t(1));
        QCOMPARE(snapshot.stragglerChanges[0].worker, 2);
        QCOMPARE(snapshot.stragglerChanges[0].globalStep, int64_t(301));
        QVERIFY(snapshot.stragglerChanges[0].flagged);
        QVERIFY(snapshot.workers[2].straggler);
        QCOMPARE(describeStragglers(snapshot),
                 std::string("worker:2 (0.150 s a step) is a straggler: the others take 0.020 s a step, not counting "
                             "the time ps:0 holds them. Every sync step waits for it; with "
                             "--replicas_to_aggregate=2 (1 backup worker) the steps would not."));
        // A status that says the same adds no marker; backup workers in
        // force change the advice, another mode changes the words.
        status.mutable_workers(2)->set_straggler(true);
        status.mutable_mode()->set_replicas_to_aggregate(2);
        state.applyStatus(status);
        snapshot = state.snapshot();
        QCOMPARE(snapshot.stragglerChanges.size(), size_t(1));
        QVERIFY2(describeStragglers(snapshot).find("aggregates 2 of the 3 live workers' gradients")
                     != std::string::npos,
                 describeStragglers(snapshot).c_str());
        status.mutable_mode()->set_mode(proto::ASYNC);
        state.applyStatus(status);
        QVERIFY2(describeStragglers(state.snapshot()).find("In async nobody waits for it") != std::string::npos,
                 describeStragglers(state.snapshot()).c_str());

        // Unflagged: a second marker; nothing left to tell. Nor once the run is over.
        proto::TelemetryEvent recovered = workerStateEvent(2, proto::TRAINING, "", 40.0);
        state.apply(recovered);
        snapshot = state.snapshot();
        QCOMPARE(snapshot.stragglerChanges.size(), size_t(2));
        QVERIFY(!snapshot.stragglerChanges[1].flagged);
        QVERIFY(describeStragglers(snapshot).empty());
        state.apply(flagged);
        state.setFinished(true);
        QVERIFY(describeStragglers(state.snapshot()).empty());
    }

    void parameterNamesFromSignature_data()
    {
        QTest::addColumn<QList<int>>("shapes");
        QTest::addColumn<QStringList>("names");
        QTest::newRow("linear") << QList<int>{1, 1} << QStringList{QStringLiteral("v0"), QStringLiteral("v1")};
        QTest::newRow("vector") << QList<int>{3, 1}
                                << QStringList{QStringLiteral("v0[0]"), QStringLiteral("v0[1]"),
                                               QStringLiteral("v0[2]"), QStringLiteral("v1")};
        QTest::newRow("too many") << QList<int>{16, 1} << QStringList{};
    }

    void parameterNamesFromSignature()
    {
        QFETCH(QList<int>, shapes);
        QFETCH(QStringList, names);
        proto::ClusterStatusResponse status;
        for (int i = 0; i < shapes.size(); ++i) {
            auto *v = status.mutable_signature()->add_variables();
            v->set_name("v" + std::to_string(i));
            v->add_shape(shapes[i]);
        }
        RunState state;
        state.applyStatus(status);
        QStringList got;
        for (const auto &name : state.snapshot().parameterNames)
            got << QString::fromStdString(name);
        QCOMPARE(got, names);
    }

    void valuesBeforeTheSignatureAreKept()
    {
        // A short run can end before ps:0's status names the parameters.
        RunState state;
        state.apply(stepEvent(1, 10.0, 0, 1, 5.f, kNaN, proto::APPLIED, 0, {0.5f, 1.5f}));
        state.apply(stepEvent(2, 10.1, 1, 1, 4.f, kNaN, proto::APPLIED, 0, {0.6f, 1.6f}));
        QVERIFY(state.wantsSignature());
        QCOMPARE(state.snapshot().parameterNames, (std::vector<std::string>{"param[0]", "param[1]"}));
        proto::ClusterStatusResponse status;
        *status.mutable_signature() = linearSignature();
        state.applyStatus(status);
        QVERIFY(!state.wantsSignature());
        const auto s = state.snapshot();
        QCOMPARE(s.parameterNames, (std::vector<std::string>{"w", "b"}));
        QCOMPARE(s.parameterSeries[0].totalCount(), int64_t(2));
        QCOMPARE(s.parameterSeries[1].buckets().back().last, double(1.6f));
    }

    void stepsPerSecondOverTheLastTwoSeconds()
    {
        RunState state;
        // worker 0: 100 steps/s for 5 s; worker 1: 10 steps/s, stops after 2 s.
        for (int i = 1; i <= 500; ++i)
            state.apply(stepEvent(i, 1000.0 + i * 0.01, 0, i, 1.f));
        for (int i = 1; i <= 20; ++i)
            state.apply(stepEvent(i, 1000.0 + i * 0.1, 1, i, 1.f));
        const auto s = state.snapshot();
        QVERIFY2(std::abs(s.workers[0].stepsPerSecond - 100) < 5,
                 qPrintable(QString::number(s.workers[0].stepsPerSecond)));
        QCOMPARE(s.workers[1].stepsPerSecond, 0.0); // its last step is 3 s old

        // Then the whole cluster stands still (a sync step waiting for a
        // frozen worker): ps:0's batches keep coming with its clock, and
        // the speed shown falls to 0 instead of staying at 100 steps/s.
        proto::TelemetryBatch quiet;
        quiet.set_wall_time(1005.0 + 0.5);
        state.apply(quiet);
        QVERIFY2(state.snapshot().workers[0].stepsPerSecond > 20, "half a second without steps already shows 0");
        quiet.set_wall_time(1005.0 + 2.5);
        state.apply(quiet);
        QCOMPARE(state.snapshot().workers[0].stepsPerSecond, 0.0);
        // A replay (no batches) still shows the speeds the run had.
        QCOMPARE(state.snapshot().lastWallTime, 1005.0);

        // One more step, 4 s after the burst of 100 steps/s: one step in the
        // window, not the burst's tail counted again.
        state.apply(stepEvent(501, 1009.0, 0, 501, 1.f));
        quiet.set_wall_time(1009.5);
        state.apply(quiet);
        const double slow = state.snapshot().workers[0].stepsPerSecond;
        QVERIFY2(slow > 0 && slow <= 0.5, qPrintable(QString::number(slow)));
    }

    // In sync a global step takes one gradient from each worker: the run's
    // global steps per second are half its gradients per second with two
    // workers, and each worker's steps/s is its own gradients. The headless
    // line once summed the workers' rates and called them "steps/s".
    void syncGlobalStepsPerSecondAreGradientsPerSecondOverTheAggregated()
    {
        RunState state;
        // 3 s of sync at 20 global steps/s, each step aggregating both workers.
        for (int64_t step = 1; step <= 60; ++step) {
            const double t = 1000.0 + double(step) * 0.05;
            for (int worker = 0; worker < 2; ++worker)
                state.apply(stepEvent(step, t, worker, step, 1.f, kNaN, proto::AGGREGATED));
        }
        // A stale gradient dropped: a gradient, but no global step.
        state.apply(stepEvent(60, 1003.0, 1, 61, 1.f, kNaN, proto::DROPPED_STALE));
        const auto s = state.snapshot();
        QVERIFY2(std::abs(s.globalStepsPerSecond - 20) < 1, qPrintable(QString::number(s.globalStepsPerSecond)));
        QVERIFY2(std::abs(s.gradientsPerSecond - 40) < 2, qPrintable(QString::number(s.gradientsPerSecond)));
        QVERIFY2(std::abs(s.workers[0].stepsPerSecond - 20) < 1,
                 qPrintable(QString::number(s.workers[0].stepsPerSecond)));
        QCOMPARE(s.gradientsPerSecond, s.workers[0].stepsPerSecond + s.workers[1].stepsPerSecond);

        // In async every applied gradient is a global step: the two agree.
        RunState async;
        for (int64_t step = 1; step <= 120; ++step)
            async.apply(stepEvent(step, 1000.0 + double(step) * 0.025, int(step % 2), (step + 1) / 2, 1.f));
        const auto a = async.snapshot();
        QVERIFY2(std::abs(a.globalStepsPerSecond - a.gradientsPerSecond) < 1.5,
                 qPrintable(QStringLiteral("%1 against %2").arg(a.globalStepsPerSecond).arg(a.gradientsPerSecond)));
        QVERIFY2(std::abs(a.globalStepsPerSecond - 40) < 2, qPrintable(QString::number(a.globalStepsPerSecond)));
    }

    void memoryStaysBoundedAfterMillionsOfSteps()
    {
        RunState state(1000, 256);
        state.setParameterNames({"w", "b"});
        for (int64_t i = 1; i <= 3'000'000; ++i)
            state.addStep(StepRecord{i,
                                     1e6 + double(i) * 1e-4,
                                     int(i % 2),
                                     i / 2,
                                     0,
                                     i - 1,
                                     1.f / float(i),
                                     i % 100 == 0 ? 2.f : kNaN,
                                     proto::APPLIED,
                                     1,
                                     10,
                                     10,
                                     0,
                                     proto::WORKER_PHASE_UNSPECIFIED,
                                     {2.f, 10.f},
                                     {},
                                     {},
                                     1.0f,
                                     std::nullopt});
        const auto s = state.snapshot();
        QCOMPARE(s.recentSteps.size(), size_t(1000));
        QCOMPARE(s.recentSteps.back().globalStep, int64_t(3'000'000));
        for (const auto &[worker, series] : s.batchLossByWorker)
            QVERIFY(series.buckets().size() <= 256);
        QVERIFY(s.fullLoss.buckets().size() <= 256);
        QVERIFY(s.parameterSeries[0].buckets().size() <= 256);
        QCOMPARE(s.parameterSeries[0].totalCount(), int64_t(3'000'000));
        QCOMPARE(s.stepEvents, int64_t(3'000'000));
    }

    void replaysAStepLogWithATornLastLine()
    {
        QTemporaryDir dir;
        const std::vector<std::string> names{"w", "b"};
        QByteArray log;
        const auto line = [&](const proto::TelemetryEvent &event) {
            log += QByteArray::fromStdString(RunLog::formatStepLogLine(event, names)) + '\n';
        };
        line(workerStateEvent(0, proto::TRAINING, "", 99.0));
        line(workerStateEvent(1, proto::TRAINING, "", 99.0));
        for (int i = 1; i <= 40; ++i)
            line(stepEvent(i, 100.0 + i * 0.01, i % 2, (i + 1) / 2, 50.f / float(i), i % 10 == 0 ? 1.f : kNaN,
                           i == 17 ? proto::DROPPED_STALE : proto::APPLIED, i % 3, {2.f - 1.f / float(i), 10.f}));
        line(modeChangeEvent(40, 100.5, proto::ASYNC, proto::SYNC));
        proto::TelemetryEvent checkpoint;
        checkpoint.mutable_checkpoint()->set_global_step(40);
        checkpoint.mutable_checkpoint()->set_wall_time(100.6);
        checkpoint.mutable_checkpoint()->set_path("model.ckpt-40.pckpt");
        line(checkpoint);
        line(workerStateEvent(0, proto::FINISHED, "", 100.7));
        // The process was killed while writing the next record.
        const QByteArray torn = QByteArray::fromStdString(
            RunLog::formatStepLogLine(stepEvent(41, 100.8, 0, 21, 1.f, kNaN, proto::APPLIED, 0, {2.f, 10.f}), names));
        log += torn.left(torn.size() / 2);
        writeText(dir.filePath(QStringLiteral("steps.jsonl")), log);
        writeText(dir.filePath(QStringLiteral("cluster.json")),
                  R"({"cluster": {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
                      "training": {"mode": "async", "staleness": 10, "last_step": 40}})");

        RunState state;
        const RunDirectoryInfo info = replayRunDirectory(dir.path().toStdString(), &state);
        QCOMPARE(info.directory, dir.path().toStdString());
        QCOMPARE(info.records, int64_t(2 + 40 + 3));
        QCOMPARE(info.skippedLines, int64_t(1));
        QVERIFY(info.clusterJson.find("127.0.0.1:2224") != std::string::npos);

        const auto s = state.snapshot();
        QCOMPARE(s.parameterNames, names); // in the line's order, not sorted
        QCOMPARE(s.globalStep, int64_t(40));
        QCOMPARE(s.lastStep, int64_t(40));
        QCOMPARE(s.mode.mode(), proto::SYNC);
        QCOMPARE(s.modeChanges.size(), size_t(1));
        QCOMPARE(s.modeChanges[0].current.mode(), proto::SYNC);
        QCOMPARE(s.checkpoints.size(), size_t(1));
        QCOMPARE(s.recentSteps.size(), size_t(40));
        QCOMPARE(s.workers[1].dropped, int64_t(1));
        QCOMPARE(s.workers[0].applied + s.workers[1].applied, int64_t(39));
        QCOMPARE(s.batchLossByWorker.at(0).totalCount() + s.batchLossByWorker.at(1).totalCount(), int64_t(39));
        QCOMPARE(s.fullLoss.totalCount(), int64_t(4));
        QCOMPARE(s.parameterSeries[1].buckets().back().last, 10.0);
        QCOMPARE(s.workers[0].phase, proto::FINISHED);
        QVERIFY(!s.finished); // worker 1 never said it finished
        QCOMPARE(s.workerHosts.size(), size_t(2));
        QCOMPARE(s.recentSteps[1].staleness, int64_t(2));
        QVERIFY(std::isnan(s.recentSteps[1].fullLoss));
    }

    void fallsBackToMetricsCsv()
    {
        QTemporaryDir dir;
        QByteArray csv = "global_step,wall_time,worker,loss,full_loss,w,b\n";
        for (int i = 1; i <= 30; ++i)
            csv += QByteArray::number(i) + ',' + QByteArray::number(100.0 + i * 0.01, 'f', 6) + ','
                   + QByteArray::number(i % 2) + ',' + QByteArray::number(30.0 / i) + ','
                   + (i % 10 == 0 ? QByteArray("0.5") : QByteArray()) + ',' + QByteArray::number(2.0 - 1.0 / i)
                   + ",10\n";
        csv += "31,100.31,1,0.9"; // torn
        writeText(dir.filePath(QStringLiteral("metrics.csv")), csv);

        RunState state;
        const auto info = replayRunDirectory(dir.path().toStdString(), &state);
        QCOMPARE(info.records, int64_t(30));
        QCOMPARE(info.skippedLines, int64_t(1));
        const auto s = state.snapshot();
        QCOMPARE(s.parameterNames, (std::vector<std::string>{"w", "b"}));
        QCOMPARE(s.globalStep, int64_t(30));
        QCOMPARE(s.fullLoss.totalCount(), int64_t(3));
        QCOMPARE(s.batchLossByWorker.at(1).totalCount(), int64_t(15));
        QVERIFY(std::abs(s.parameterSeries[0].buckets().back().last - (2.0 - 1.0 / 30)) < 1e-5);
        // metrics.csv does not know staleness: no histogram rather than a wrong one.
        int64_t histogram = 0;
        for (const auto &w : s.workers)
            for (auto count : w.stalenessHistogram)
                histogram += count;
        QCOMPARE(histogram, int64_t(0));
    }

    void metricsGetColumnsAfterTheOldOnesAndReplayFromEitherFile()
    {
        QTemporaryDir dir;
        const std::vector<std::string> metricNames{"heldout_loss", "heldout_accuracy"};
        {
            RunLog log(dir.path().toStdString(), {"w", "b"}, metricNames);
            for (int i = 1; i <= 30; ++i) {
                proto::TelemetryEvent event = stepEvent(i, 100.0 + i * 0.01, i % 2, (i + 1) / 2, 30.f / float(i), kNaN,
                                                        proto::APPLIED, 0, {2.f, 10.f});
                if (i % 10 == 1) { // the chief measured these steps
                    event.mutable_step()->add_metrics(1.f / float(i));
                    event.mutable_step()->add_metrics(0.5f + float(i) / 100.f);
                }
                log.record(event);
            }
            log.flush();
        }
        QFile csv(dir.filePath(QStringLiteral("metrics.csv")));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = csv.readAll().split('\n');
        // The old columns first, in their order: old readers keep working.
        QCOMPARE(lines[0], QByteArray("global_step,wall_time,worker,loss,full_loss,w,b,heldout_loss,heldout_accuracy"));
        QVERIFY2(lines[1].endsWith(",2,10,1,0.50999999"), lines[1].constData());
        QVERIFY2(lines[2].endsWith(",2,10,,"), lines[2].constData()); // not measured: empty cells

        const auto check = [&](const char *source) {
            RunState state;
            replayRunDirectory(dir.path().toStdString(), &state);
            const auto s = state.snapshot();
            QVERIFY2(s.parameterNames == (std::vector<std::string>{"w", "b"}), source);
            QVERIFY2(s.metricNames == metricNames, source);
            QCOMPARE(s.metricSeries.size(), size_t(2));
            QCOMPARE(s.metricSeries[0].totalCount(), int64_t(3));
            QVERIFY2(std::abs(s.metricSeries[1].buckets().back().last - 0.71) < 1e-5, source);
            QCOMPARE(s.parameterSeries[1].totalCount(), int64_t(30));
        };
        check("steps.jsonl");
        QVERIFY(QFile::remove(dir.filePath(QStringLiteral("steps.jsonl"))));
        check("metrics.csv");
    }

    // A model a worker declared (a Python worker's MLP) is nowhere in
    // cluster.json: ps:0 writes model.json, and a replay names the model,
    // its variables and its metrics from it; damaged or absent, the replay
    // goes on without.
    void aReplayLearnsTheDeclaredModelFromModelJson()
    {
        QTemporaryDir dir;
        proto::ModelSignature signature;
        signature.set_model("digits-mlp-32");
        signature.set_optimizer("adam");
        auto *w = signature.add_variables();
        w->set_name("0.weight");
        w->add_shape(32);
        w->add_shape(64);
        signature.add_metric_names("heldout_loss");
        signature.add_metric_names("heldout_accuracy");
        writeRunModelJson(dir.path().toStdString(), signature);
        QByteArray log;
        for (int i = 1; i <= 3; ++i)
            log += QByteArray::fromStdString(RunLog::formatStepLogLine(
                       stepEvent(i, 100.0 + i, 0, i, 2.f / float(i), kNaN, proto::APPLIED, 0, {}), {}))
                   + '\n';
        writeText(dir.filePath(QStringLiteral("steps.jsonl")), log);

        RunState state;
        replayRunDirectory(dir.path().toStdString(), &state);
        auto s = state.snapshot();
        QCOMPARE(s.signature.model(), std::string("digits-mlp-32"));
        QCOMPARE(s.signature.variables(0).shape_size(), 2);
        QCOMPARE(s.metricNames, (std::vector<std::string>{"heldout_loss", "heldout_accuracy"}));
        QCOMPARE(s.globalStep, int64_t(3));

        writeText(dir.filePath(QStringLiteral("model.json")), "{\"model\": ");
        replayRunDirectory(dir.path().toStdString(), &state);
        s = state.snapshot();
        QVERIFY(s.signature.model().empty());
        QCOMPARE(s.globalStep, int64_t(3));
    }

    void oldFilesReplayWithoutMetrics()
    {
        // A step log and a metrics.csv from before metrics: no metric series.
        QTemporaryDir dir;
        writeText(dir.filePath(QStringLiteral("steps.jsonl")),
                  QByteArray::fromStdString(
                      RunLog::formatStepLogLine(stepEvent(1, 100.0, 0, 1, 3.f, kNaN, proto::APPLIED, 0, {2.f, 10.f}),
                                                {"w", "b"})
                      + "\n"));
        RunState fromLog;
        replayRunDirectory(dir.path().toStdString(), &fromLog);
        QVERIFY(fromLog.snapshot().metricNames.empty());
        QCOMPARE(fromLog.snapshot().globalStep, int64_t(1));
    }

    void metricsFollowTheSignaturesNames()
    {
        RunState state;
        proto::TelemetryEvent event = stepEvent(5, 100.0, 0, 5, 1.f);
        event.mutable_step()->add_metrics(0.4f);
        state.apply(event); // before the status that names it: kept
        QCOMPARE(state.snapshot().metricNames, (std::vector<std::string>{"metric[0]"}));
        QVERIFY(state.wantsSignature());
        proto::ClusterStatusResponse status;
        *status.mutable_signature() = linearSignature();
        status.mutable_signature()->add_metric_names("heldout_loss");
        state.applyStatus(status);
        const auto s = state.snapshot();
        QCOMPARE(s.metricNames, (std::vector<std::string>{"heldout_loss"}));
        QCOMPARE(s.metricSeries[0].totalCount(), int64_t(1));
        QCOMPARE(s.metricSeries[0].buckets().back().x, 4.0); // the step the parameters belong to
    }

    // A model too large for w and b: the chief's variable summaries become
    // one series set per variable, named by the signature (kept under
    // provisional names until it arrives), and survive the step log.
    void variableSummariesFollowTheSignatureAndReplayFromTheStepLog()
    {
        const auto measured = [](int64_t step, float norm, float distance, float update) {
            proto::TelemetryEvent event = stepEvent(step, 100.0 + double(step), 0, step, 1.f);
            for (int v = 0; v < 2; ++v) {
                auto *summary = event.mutable_step()->add_variable_summaries();
                summary->set_norm(norm * float(v + 1));
                summary->set_distance_from_start(distance * float(v + 1));
                summary->set_update_per_step(update);
            }
            return event;
        };
        std::vector<proto::TelemetryEvent> events{measured(1, 1.f, 0.f, kNaN), stepEvent(2, 101.5, 1, 1, 1.f),
                                                  measured(11, 2.f, 0.5f, 0.05f), measured(21, 3.f, 1.f, 0.01f)};
        RunState state;
        state.apply(events[0]);
        QCOMPARE(state.snapshot().variableNames, (std::vector<std::string>{"variable[0]", "variable[1]"}));
        QVERIFY(state.wantsSignature());
        proto::ModelSignature signature;
        signature.set_model("digits-mlp-32");
        for (const char *name : {"hidden/w:0", "0.bias"}) {
            auto *variable = signature.add_variables();
            variable->set_name(name);
            variable->add_shape(32);
        }
        state.setSignature(signature);
        for (size_t i = 1; i < events.size(); ++i)
            state.apply(events[i]);
        RunSnapshot s = state.snapshot();
        const std::vector<std::string> names{"hidden/w:0", "0.bias"};
        QCOMPARE(s.variableNames, names);
        QVERIFY(!state.wantsSignature());
        // Three measurements, the one before the signature included; the
        // first update is NaN (nothing before it) and not a point.
        QCOMPARE(s.variableSeries[1].norm.totalCount(), int64_t(3));
        QCOMPARE(s.variableSeries[1].norm.buckets().back().last, 6.0);
        QCOMPARE(s.variableSeries[1].distanceFromStart.buckets().back().x, 20.0); // the step measured on
        QCOMPARE(s.variableSeries[0].updatePerStep.totalCount(), int64_t(2));

        QTemporaryDir dir;
        QByteArray log;
        for (const auto &event : events)
            log += QByteArray::fromStdString(RunLog::formatStepLogLine(event, {}, {}, names)) + '\n';
        QVERIFY(log.contains("\"variables\":{\"hidden/w:0\":{\"norm\":3,\"distance_from_start\":1,"
                             "\"update_per_step\":0.00999999978}"));
        writeText(dir.filePath(QStringLiteral("steps.jsonl")), log);
        RunState replayed;
        replayRunDirectory(dir.path().toStdString(), &replayed);
        s = replayed.snapshot();
        QCOMPARE(s.variableNames, names);
        QCOMPARE(s.variableSeries[1].norm.totalCount(), int64_t(3));
        QCOMPARE(s.variableSeries[1].norm.buckets().back().last, 6.0);
        QCOMPARE(s.variableSeries[0].updatePerStep.totalCount(), int64_t(2));
    }

    void emptyDirectoryIsAnErrorNamingIt()
    {
        QTemporaryDir dir;
        RunState state;
        try {
            replayRunDirectory(dir.path().toStdString(), &state);
            QFAIL("no error for an empty directory");
        } catch (const InputError &e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.contains(dir.path()), qPrintable(message));
            QVERIFY2(message.contains(QStringLiteral("steps.jsonl")), qPrintable(message));
        }
        const QString missing = dir.filePath(QStringLiteral("no-such-run"));
        QVERIFY_THROWS_EXCEPTION(InputError, replayRunDirectory(missing.toStdString(), &state));
    }
};

QTEST_GUILESS_MAIN(TestRunState)
#include "tst_run_state.moc"
