// The workers' pace (--compute_ms, --compute_jitter, --straggler_ms, a
// cluster file's "per_worker", TaskControl.SetPace): what a person watching
// the demo relies on -- steps take about the time asked, a speed change
// lands while the cluster trains, a straggler is the worker it was given to
// -- with real processes and their step log.
#include "base/error.h"
#include "formats/event_file.h"
#include "proto/parasync.grpc.pb.h"
#include "support/cluster_harness.h"

#include <QFile>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

// compute_us of the worker's applied steps above global step `after`.
std::vector<double> computeMs(const QString &logdir, int worker, qint64 after)
{
    std::vector<double> out;
    for (const auto &r : readStepLog(logdir)) {
        if (r.value(QStringLiteral("type")).toString() != QStringLiteral("step")
            || r.value(QStringLiteral("worker")).toInt() != worker
            || r.value(QStringLiteral("global_step")).toInteger() <= after)
            continue;
        out.push_back(r.value(QStringLiteral("compute_us")).toDouble() / 1000.0);
    }
    return out;
}

double median(std::vector<double> values)
{
    if (values.empty())
        return std::nan("");
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

grpc::Status setPace(const QString &worker, int computeMs, std::optional<float> jitter = {},
                     proto::SetPaceResponse *response = nullptr)
{
    auto stub = proto::TaskControl::NewStub(makeChannel(worker.toStdString(), {}));
    proto::SetPaceRequest request;
    request.set_compute_ms(computeMs);
    if (jitter)
        request.set_compute_jitter(*jitter);
    proto::SetPaceResponse ignored;
    // Setting a pace twice sets it once: safe to send again over a dropped connection.
    return callRidingOutDrops({}, 10s, [&](grpc::ClientContext *context) {
        return stub->SetPace(context, request, response ? response : &ignored);
    });
}

grpc::Status setStraggler(const QString &worker, int delayMs)
{
    auto stub = proto::TaskControl::NewStub(makeChannel(worker.toStdString(), {}));
    proto::SetStragglerRequest request;
    request.set_delay_ms(delayMs);
    proto::SetStragglerResponse response;
    return callRidingOutDrops(
        {}, 10s, [&](grpc::ClientContext *context) { return stub->SetStraggler(context, request, &response); });
}

proto::TaskStatusResponse taskStatus(const QString &address)
{
    auto stub = proto::TaskControl::NewStub(makeChannel(address.toStdString(), {}));
    proto::TaskStatusResponse status;
    const grpc::Status result = callRidingOutDrops(
        {}, 10s, [&](grpc::ClientContext *context) { return stub->GetTaskStatus(context, {}, &status); });
    if (!result.ok())
        qWarning("GetTaskStatus(%s): %s", qPrintable(address), result.error_message().c_str());
    return status;
}

void stopCluster(LocalCluster &cluster, int workers)
{
    for (int i = 0; i < workers; ++i)
        cluster.worker(i).terminate();
    for (int i = 0; i < workers; ++i)
        cluster.worker(i).waitForExit();
    cluster.ps(0).terminate();
    cluster.ps(0).waitForExit();
}

} // namespace

class TestPace : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void stepsTakeTheComputeTimeAskedAndASpeedChangeLandsWhileTraining()
    {
        QTemporaryDir dir;
        // 500 ms a step, every step the same: 2 workers make 4 steps a
        // second between them, so the 600 steps below would take 2.5 minutes.
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--compute_ms=500"), QStringLiteral("--compute_jitter=0"),
                              QStringLiteral("--last_step=0"), QStringLiteral("--display_step=1000000")},
                             dir.path());
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() >= 10; }, 60s));
        for (int i = 0; i < 2; ++i)
            QVERIFY(cluster.waitForWorkerTraining(i)); // both are asked below
        QCOMPARE(taskStatus(cluster.workerAddress(1)).compute_ms(), 500);

        // Every step before this one was taken at 500 ms. Read before the
        // first SetPace: worker:0 goes at full speed as soon as it has its
        // answer, and under ThreadSanitizer it took dozens of steps while
        // worker:1's SetPace was still on its way.
        proto::ClusterStatusResponse now;
        QVERIFY(cluster.clusterStatus(&now));
        const qint64 changedAt = now.global_step();

        // Full speed, while it trains: the next 600 steps come in seconds
        // (at least ~50 a second even under ThreadSanitizer on a busy machine).
        for (int i = 0; i < 2; ++i) {
            proto::SetPaceResponse response;
            const grpc::Status status = setPace(cluster.workerAddress(i), 0, std::nullopt, &response);
            QVERIFY2(status.ok(), status.error_message().c_str());
            QCOMPARE(response.compute_ms(), 0);
            QCOMPARE(response.compute_jitter(), 0.0f); // kept, as asked
        }
        // Both workers, not only the first to change pace: at full speed
        // worker:0 alone makes the 600 steps while worker:1 still finishes
        // the 500 ms step it was in (and, on a loaded machine, before its
        // SetPace has landed); its fast steps are needed below.
        const int64_t worker1Clock = now.workers(1).worker_clock();
        QVERIFY2(cluster.waitForStatus(
                     [&](const auto &s) {
                         return s.global_step() >= changedAt + 600 && s.workers(1).worker_clock() >= worker1Clock + 30;
                     },
                     60s),
                 "the workers kept their slow pace after SetPace(0)");
        QCOMPARE(taskStatus(cluster.workerAddress(0)).compute_ms(), 0);
        stopCluster(cluster, 2);

        // The step log agrees: ~500 ms of compute a step before the change,
        // next to nothing after it (a step that was under way when the
        // change came still took its 500 ms).
        for (int worker = 0; worker < 2; ++worker) {
            std::vector<double> before;
            for (const auto &r : readStepLog(dir.path()))
                if (r.value(QStringLiteral("type")).toString() == QStringLiteral("step")
                    && r.value(QStringLiteral("worker")).toInt() == worker
                    && r.value(QStringLiteral("global_step")).toInteger() < changedAt - 2)
                    before.push_back(r.value(QStringLiteral("compute_us")).toDouble() / 1000.0);
            const double slow = median(before);
            const double fast = median(computeMs(dir.path(), worker, changedAt + 10));
            QVERIFY2(
                slow >= 500 && slow < 1500,
                qPrintable(QStringLiteral("worker:%1 median compute %2 ms at 500 ms a step").arg(worker).arg(slow)));
            QVERIFY2(fast < 20,
                     qPrintable(QStringLiteral("worker:%1 median compute %2 ms at full speed").arg(worker).arg(fast)));
        }
    }

    void jitterSpreadsTheStepTimesAroundTheMean()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 1,
                             {QStringLiteral("--compute_ms=20"), QStringLiteral("--compute_jitter=0.5"),
                              QStringLiteral("--last_step=150"), QStringLiteral("--display_step=1000000")},
                             dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
        std::vector<double> times = computeMs(dir.path(), 0, 0);
        QVERIFY(times.size() >= 140);
        std::sort(times.begin(), times.end());
        // Log-normal, mean 20 ms, coefficient of variation 0.5: a tenth of
        // the steps under ~10 ms, a tenth over ~33 ms. Checked loosely (the
        // sleep never ends early, and a loaded machine ends it late).
        const double p10 = times[times.size() / 10];
        const double p90 = times[times.size() * 9 / 10];
        QVERIFY2(p10 < 18, qPrintable(QStringLiteral("10th percentile %1 ms").arg(p10)));
        QVERIFY2(p90 > 26, qPrintable(QStringLiteral("90th percentile %1 ms").arg(p90)));
        QVERIFY2(p90 / p10 > 2, qPrintable(QStringLiteral("p90/p10 %1").arg(p90 / p10)));
    }

    void aClusterFilesPerWorkerPaceReachesOnlyThatWorker()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 2, {}, dir.filePath(QStringLiteral("run")));
        // The same file for every task, as a user hands it out.
        const QString path = dir.filePath(QStringLiteral("cluster.json"));
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(QStringLiteral(R"({"cluster": {"ps": ["%1"], "worker": ["%2", "%3"]},
                                     "training": {"compute_ms": 5, "last_step": 0},
                                     "per_worker": {"1": {"straggler_ms": 60, "compute_ms": 7}}})")
                       .arg(cluster.psAddress(0), cluster.workerAddress(0), cluster.workerAddress(1))
                       .toUtf8());
        file.close();
        NodeProcess ps(QStringLiteral("ps:0"),
                       {QStringLiteral("--cluster_file=") + path, QStringLiteral("--job_name=ps")});
        NodeProcess w0(QStringLiteral("worker:0"),
                       {QStringLiteral("--cluster_file=") + path, QStringLiteral("--job_name=worker"),
                        QStringLiteral("--task_index=0")});
        NodeProcess w1(QStringLiteral("worker:1"),
                       {QStringLiteral("--cluster_file=") + path, QStringLiteral("--job_name=worker"),
                        QStringLiteral("--task_index=1")});
        ps.start();
        w1.start();
        w0.start();
        QVERIFY2(w1.waitForOutput(QStringLiteral("joined the cluster")), qPrintable(w1.output()));
        QVERIFY2(w0.waitForOutput(QStringLiteral("joined the cluster")), qPrintable(w0.output()));
        const auto first = taskStatus(cluster.workerAddress(0));
        const auto second = taskStatus(cluster.workerAddress(1));
        QCOMPARE(first.straggler_delay_ms(), 0);
        QCOMPARE(first.compute_ms(), 5);
        QCOMPARE(second.straggler_delay_ms(), 60);
        QCOMPARE(second.compute_ms(), 7);
        // A flag on the command line still wins over the file.
        w1.terminate();
        QCOMPARE(w1.waitForExit(), 0);
        NodeProcess again(QStringLiteral("worker:1"),
                          {QStringLiteral("--cluster_file=") + path, QStringLiteral("--job_name=worker"),
                           QStringLiteral("--task_index=1"), QStringLiteral("--straggler_ms=0")});
        again.start();
        QVERIFY2(again.waitForOutput(QStringLiteral("joined the cluster")), qPrintable(again.output()));
        QCOMPARE(taskStatus(cluster.workerAddress(1)).straggler_delay_ms(), 0);
        for (NodeProcess *task : {&again, &w0, &ps}) {
            task->terminate();
            task->waitForExit();
        }
    }

    // ps:0's straggler watch as a user meets it: a worker slowed with
    // --straggler_ms is flagged (the log, ClusterStatus as --status shows it,
    // the step log) while the others are not, and unflagged once
    // SetStraggler(0) lets it recover. In sync the fast workers wait at the
    // barrier as long as the slow one computes: only the time ps:0 held them
    // tells them apart, and the log says how many backup workers would hide it.
    void aSlowWorkerIsFlaggedAndUnflaggedWhenItRecovers_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::newRow("async") << QStringLiteral("async");
        QTest::newRow("sync") << QStringLiteral("sync");
        QTest::newRow("ssp") << QStringLiteral("ssp");
    }
    void aSlowWorkerIsFlaggedAndUnflaggedWhenItRecovers()
    {
        QFETCH(QString, mode);
        QTemporaryDir dir;
        LocalCluster cluster(1, 3,
                             {QStringLiteral("--mode=") + mode, QStringLiteral("--compute_ms=10"),
                              QStringLiteral("--compute_jitter=0"), QStringLiteral("--last_step=0"),
                              QStringLiteral("--display_step=20")},
                             dir.path());
        cluster.startPs(0);
        cluster.startWorker(0);
        cluster.startWorker(1);
        cluster.startWorker(2, {QStringLiteral("--straggler_ms=100")});
        // Every worker's gradients applied: in sync and ssp the fast ones are
        // held most of the time, so a poll would seldom see them training.
        QVERIFY2(cluster.waitForStatus(
                     [](const auto &s) {
                         return s.workers_size() == 3 && s.workers(0).applied() > 0 && s.workers(1).applied() > 0
                                && s.workers(2).applied() > 0;
                     },
                     60s),
                 qPrintable(cluster.ps(0).output()));
        // ps:0 judges a worker after 5 s of its history and flags it at the
        // third slow look in a row, a look a second: about 8 s.
        const auto training = std::chrono::steady_clock::now();
        proto::ClusterStatusResponse flagged;
        QVERIFY2(cluster.waitForStatus(
                     [&](const auto &s) {
                         flagged = s;
                         return s.workers_size() == 3 && s.workers(2).straggler();
                     },
                     60s),
                 qPrintable(cluster.ps(0).output()));
        qInfo("%s: worker:2 flagged %.1f s after all three trained", qPrintable(mode),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - training).count());
        QVERIFY(!flagged.workers(0).straggler());
        QVERIFY(!flagged.workers(1).straggler());
        // Its pace is its 110 ms a step, the others' 10 ms, whatever the
        // barrier made them wait.
        QVERIFY2(flagged.workers(2).seconds_per_step() > 0.09,
                 qPrintable(QString::number(flagged.workers(2).seconds_per_step())));
        QVERIFY2(flagged.workers(0).seconds_per_step() < 0.06,
                 qPrintable(QString::number(flagged.workers(0).seconds_per_step())));
        QVERIFY2(cluster.ps(0).waitForOutput(QStringLiteral("worker:2 is a straggler: ")),
                 qPrintable(cluster.ps(0).output()));
        if (mode == QStringLiteral("sync"))
            QVERIFY2(cluster.ps(0).output().contains(QStringLiteral(
                         "every sync step waits for it. With --replicas_to_aggregate=2 (1 backup worker among the 3 "
                         "live) the steps would not wait for it")),
                     qPrintable(cluster.ps(0).output()));

        QVERIFY(setStraggler(cluster.workerAddress(2), 0).ok());
        QVERIFY2(cluster.waitForStatus([](const auto &s) { return s.workers_size() == 3 && !s.workers(2).straggler(); },
                                       60s),
                 qPrintable(cluster.ps(0).output()));
        // The chief writes a summary every 20 global steps: wait until one
        // after the change has reached its event file, as TensorBoard would
        // read it (under ThreadSanitizer its telemetry stream lags the steps).
        const auto flagsInEventFile = [&dir] {
            std::vector<float> changes;
            try {
                for (const std::string &path : findEventFiles(dir.path().toStdString()))
                    for (const auto &event : readEventFile(path))
                        for (const auto &value : event.summary().value())
                            if (value.tag() == "straggler/worker_2"
                                && (changes.empty() || changes.back() != value.simple_value()))
                                changes.push_back(value.simple_value());
            } catch (const InputError &) {
                return std::vector<float>{}; // a record the chief is writing: look again
            }
            return changes;
        };
        QTRY_VERIFY_WITH_TIMEOUT(flagsInEventFile().size() >= 2 && flagsInEventFile().back() == 0.0f, 60000);
        QVERIFY2(cluster.ps(0).waitForOutput(QStringLiteral("worker:2 is no longer a straggler: ")),
                 qPrintable(cluster.ps(0).output()));
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));

        // The step log keeps both changes, in order, for worker:2 only.
        std::vector<bool> changes;
        for (const auto &r : readStepLog(dir.path())) {
            if (r.value(QStringLiteral("type")).toString() != QStringLiteral("worker_state"))
                continue;
            const bool straggler = r.value(QStringLiteral("straggler")).toBool();
            if (r.value(QStringLiteral("worker")).toInt() != 2) {
                QVERIFY2(!straggler, QJsonDocument(r).toJson().constData());
                continue;
            }
            if (changes.empty() ? straggler : changes.back() != straggler)
                changes.push_back(straggler);
        }
        QCOMPARE(changes, (std::vector<bool>{true, false}));

        // The chief's TensorBoard scalar straggler/worker_2 goes 0, 1, 0 with
        // the flag; the others' stay 0.
        std::vector<float> worker2;
        for (const std::string &path : findEventFiles(dir.path().toStdString()))
            for (const auto &event : readEventFile(path))
                for (const auto &value : event.summary().value()) {
                    if (value.tag() == "straggler/worker_0" || value.tag() == "straggler/worker_1")
                        QCOMPARE(value.simple_value(), 0.0f);
                    if (value.tag() == "straggler/worker_2"
                        && (worker2.empty() || worker2.back() != value.simple_value()))
                        worker2.push_back(value.simple_value());
                }
        // (The leading 0 is there when the chief's telemetry stream opened
        // before worker:2 joined.)
        QVERIFY2(worker2 == (std::vector<float>{0.0f, 1.0f, 0.0f}) || worker2 == (std::vector<float>{1.0f, 0.0f}),
                 qPrintable(QStringLiteral("straggler/worker_2 went %1 values, the first %2, the last %3")
                                .arg(worker2.size())
                                .arg(worker2.empty() ? -1.0f : worker2.front())
                                .arg(worker2.empty() ? -1.0f : worker2.back())));
    }

    void setPaceRefusesWhatNoWorkerCanDo()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 1, {QStringLiteral("--compute_ms=5"), QStringLiteral("--last_step=0")}, dir.path());
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() >= 5; }, 60s));
        const QString worker = cluster.workerAddress(0);
        struct Case
        {
            int computeMs;
            std::optional<float> jitter;
            const char *says;
        };
        for (const Case &c :
             {Case{-1, std::nullopt, "compute_ms must be 0-60000 ms"},
              Case{60001, std::nullopt, "compute_ms must be 0-60000 ms"},
              Case{10, std::nanf(""), "compute_jitter must be 0-4"}, Case{10, -0.5f, "compute_jitter must be 0-4"},
              Case{10, 1e9f, "compute_jitter must be 0-4"}}) {
            const grpc::Status status = setPace(worker, c.computeMs, c.jitter);
            QCOMPARE(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
            QVERIFY2(status.error_message().find(c.says) != std::string::npos, status.error_message().c_str());
        }
        // Nothing changed, and the worker trains on.
        QCOMPARE(taskStatus(worker).compute_ms(), 5);
        const grpc::Status toPs = setPace(cluster.psAddress(0), 10);
        QCOMPARE(toPs.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
        QVERIFY2(toPs.error_message().find("set the pace of the workers instead") != std::string::npos,
                 toPs.error_message().c_str());
        proto::ClusterStatusResponse before;
        QVERIFY(cluster.clusterStatus(&before));
        QVERIFY(cluster.waitForStatus([&](const auto &s) { return s.global_step() > before.global_step() + 20; }, 30s));
        stopCluster(cluster, 1);
    }
};

QTEST_GUILESS_MAIN(TestPace)
#include "tst_pace.moc"
