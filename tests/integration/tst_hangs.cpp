// The hangs TensorFlow's ps/worker users know -- a sync step that never
// completes, a task that waits without a word -- each provoked for real and
// shown to end, or at least to be explained.
#include "support/cluster_harness.h"

#include <QRegularExpression>
#include <QTcpServer>
#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

grpc::Status setStraggler(const QString &address, int delayMs)
{
    auto stub = proto::TaskControl::NewStub(makeChannel(address.toStdString(), {}));
    proto::SetStragglerRequest request;
    request.set_delay_ms(delayMs);
    proto::SetStragglerResponse response;
    // A loaded task may drop a fresh connection; setting a delay twice is harmless.
    return callRidingOutDrops(
        {}, 10s, [&](grpc::ClientContext *context) { return stub->SetStraggler(context, request, &response); });
}

// One training stream of a hand-driven worker.
struct Stream
{
    std::unique_ptr<proto::ParameterService::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<proto::TrainRequest, proto::TrainResponse>> stream;

    explicit Stream(const QString &address)
        : stub(proto::ParameterService::NewStub(makeChannel(address.toStdString(), {})))
        , stream(stub->Train(&context))
    {
    }
    bool exchange(const proto::TrainRequest &request, proto::TrainResponse *response)
    {
        return stream->Write(request) && stream->Read(response);
    }
};

} // namespace

class TestHangs : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void theWatchdogSaysWhomPs0WaitsForWhenTheStepStops()
    {
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--mode=sync"), QStringLiteral("--hang_timeout_secs=1"),
                              QStringLiteral("--last_step=100000000")});
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 100; }));
        QVERIFY(cluster.waitForWorkerTraining(1));

        // worker:1 now takes 4 s per step; sync waits for it, so the global
        // step stands still while both workers are alive.
        QVERIFY(setStraggler(cluster.workerAddress(1), 4000).ok());
        // Waited for, not read at the first stall: under ThreadSanitizer on a
        // loaded machine the step can stand still for a second before the
        // delay takes effect, while both workers are still computing.
        proto::ClusterStatusResponse stalled;
        QVERIFY2(cluster.waitForStatus(
                     [&](const auto &s) {
                         stalled = s;
                         return s.stall().seconds() >= 1
                                && QString::fromStdString(s.stall().waiting_for())
                                       .contains(QStringLiteral("worker:0 is held in sync step"));
                     },
                     20s),
                 stalled.stall().waiting_for().c_str());
        const QString waitingFor = QString::fromStdString(stalled.stall().waiting_for());
        QVERIFY2(waitingFor.contains(QStringLiteral("worker:1, last heard from")), qPrintable(waitingFor));
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("hang watchdog: the global step has not moved from ")
                                            + QString::number(stalled.stall().global_step())));
        // --status, as a user without the app asks.
        NodeProcess status(QStringLiteral("status"),
                           {QStringLiteral("--ps_hosts=") + cluster.psAddress(0), QStringLiteral("--status")});
        status.start();
        QVERIFY2(status.waitForExit() == 0, qPrintable(status.output()));
        QVERIFY2(status.output().contains(QStringLiteral("hang watchdog: no progress for")),
                 qPrintable(status.output()));

        // The straggler's step ends: the watchdog says so and clears.
        QVERIFY(setStraggler(cluster.workerAddress(1), 0).ok());
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("hang watchdog: the global step moves again"), 15s));
        QVERIFY(cluster.waitForStatus(
            [&](const auto &s) { return s.stall().seconds() == 0 && s.global_step() > stalled.global_step() + 100; }));
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    // A worker whose step takes longer than the heartbeat (here 7 s against
    // 1 s) is in no call while it computes; neither side may take the
    // silence for a dead connection. (A bare gRPC client with no server of
    // its own loses such a connection after about 6 s: see
    // prepareGrpcProcess(). A worker's own TaskControl server keeps its
    // channels polled.)
    void aLongStepDoesNotCostTheWorkerItsConnection()
    {
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=100000000")});
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.workers(1).applied() > 10; }));
        QVERIFY(setStraggler(cluster.workerAddress(1), 7000).ok());
        proto::ClusterStatusResponse slowed;
        QVERIFY(cluster.clusterStatus(&slowed));
        // Two 7 s steps, then back to speed.
        QVERIFY(cluster.waitForStatus(
            [&](const auto &s) { return s.workers(1).applied() >= slowed.workers(1).applied() + 2; }, 40s));
        QVERIFY(setStraggler(cluster.workerAddress(1), 0).ok());
        QVERIFY(cluster.waitForStatus(
            [&](const auto &s) { return s.workers(1).applied() > slowed.workers(1).applied() + 50; }));
        QVERIFY2(!cluster.worker(1).output().contains(QStringLiteral("lost ps:0")),
                 qPrintable(cluster.worker(1).output()));
        QVERIFY2(!cluster.ps(0).output().contains(QStringLiteral("worker:1 is dead")),
                 qPrintable(cluster.ps(0).output()));
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    // Two ps tasks, sync: a worker is released by ps:0 with its step's
    // aggregate and dies before it pushes its share to ps:1. ps:1 must not
    // hold the step's other contributors forever.
    void aSyncStepWhoseContributorDiesBetweenThePsTasksStillCompletes()
    {
        LocalCluster cluster(2, 2, {QStringLiteral("--mode=sync"), QStringLiteral("--last_step=100000000")});
        cluster.startPs(0);
        cluster.startPs(1);
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("listening on")));
        QVERIFY(cluster.ps(1).waitForOutput(QStringLiteral("listening on")));
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }));
        proto::ClusterStatusResponse status;
        QVERIFY(cluster.clusterStatus(&status));

        // worker:1 by hand: join both ps tasks with the cluster's own model.
        proto::TrainRequest join;
        join.mutable_join()->set_worker_index(1);
        *join.mutable_join()->mutable_signature() = status.signature();
        auto ps0 = std::make_unique<Stream>(cluster.psAddress(0));
        auto ps1 = std::make_unique<Stream>(cluster.psAddress(1));
        proto::TrainResponse joined0, joined1;
        QVERIFY(ps0->exchange(join, &joined0) && joined0.join().ready());
        QVERIFY(ps1->exchange(join, &joined1) && joined1.join().ready());

        // Its gradient for ps:0's variable (w; b lives on ps:1) joins a sync step with worker:0's.
        proto::TrainRequest push;
        push.mutable_push()->set_computed_from_step(joined0.join().global_step());
        auto *gradient = push.mutable_push()->add_gradients();
        gradient->add_shape(1);
        gradient->add_values(0.0f);
        proto::TrainResponse decided;
        QVERIFY(ps0->exchange(push, &decided));
        QCOMPARE(decided.push().outcome(), proto::AGGREGATED);
        QCOMPARE(decided.push().contributions(), 2);

        // ... and it dies before pushing to ps:1.
        ps0->context.TryCancel();
        ps1->context.TryCancel();
        ps0.reset();
        ps1.reset();

        QVERIFY2(cluster.ps(1).waitForOutput(
                     QStringLiteral("update %1 applied with 1 of its 2 gradients").arg(decided.push().update()), 20s),
                 qPrintable(cluster.ps(1).output()));
        QVERIFY2(
            cluster.waitForStatus([&](const auto &s) { return s.global_step() > decided.push().update() + 200; }, 20s),
            "the cluster stayed stuck after the contributor died");
        cluster.worker(0).terminate();
        QCOMPARE(cluster.worker(0).waitForExit(), 0);
        cluster.ps(0).terminate();
        cluster.ps(1).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
        QCOMPARE(cluster.ps(1).waitForExit(), 0);
    }

    // The firewall that drops packets, or a port where something else
    // listens and never answers: "timed out", not a silent wait and not
    // "connection refused".
    void aPsThatNeverAnswersIsReportedAsTimedOut()
    {
        QTcpServer silent; // accepts connections (the kernel does) and says nothing
        QVERIFY(silent.listen(QHostAddress::LocalHost));
        const QString address = QStringLiteral("127.0.0.1:%1").arg(silent.serverPort());
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=100")});
        NodeProcess worker(QStringLiteral("worker:0"),
                           {QStringLiteral("--ps_hosts=") + address,
                            QStringLiteral("--worker_hosts=") + cluster.workerAddress(0),
                            QStringLiteral("--job_name=worker"), QStringLiteral("--task_index=0")});
        worker.start();
        QVERIFY2(worker.waitForOutput(QStringLiteral("cannot reach ps:0 at ") + address + QStringLiteral(": timed out"),
                                      20s),
                 qPrintable(worker.output()));
        // The state line says it first; the back-off's own line follows.
        QVERIFY2(worker.waitForOutput(QStringLiteral("retrying in"), 10s), qPrintable(worker.output()));
        worker.terminate();
        QCOMPARE(worker.waitForExit(), 0);
    }
};

QTEST_GUILESS_MAIN(TestHangs)
#include "tst_hangs.moc"
