// Dead processes, real signals: a cluster must notice, carry on with who is
// left, and take the dead back when they return. No task waits silently.
#include "proto/parasync.grpc.pb.h"
#include "support/cluster_harness.h"

#include <grpcpp/server_builder.h>

#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <csignal>
#include <map>
#include <memory>
#include <set>
#include <thread>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

const proto::WorkerStatus *worker(const proto::ClusterStatusResponse &status, int index)
{
    for (const auto &w : status.workers())
        if (w.worker_index() == index)
            return &w;
    return nullptr;
}

// Aggregated records per global step, from the step log, after `fromStep`.
// Contributions of each sync step after `fromStep`, from the step log.
std::map<qint64, int> contributionsByStep(const QString &logdir, qint64 fromStep)
{
    std::map<qint64, int> contributions;
    for (const auto &r : readStepLog(logdir)) {
        if (r.value(QStringLiteral("type")).toString() != QStringLiteral("step")
            || r.value(QStringLiteral("outcome")).toString() != QStringLiteral("aggregated"))
            continue;
        const qint64 step = r.value(QStringLiteral("global_step")).toInteger();
        if (step > fromStep)
            contributions[step] = r.value(QStringLiteral("contributions")).toInt();
    }
    return contributions;
}

// Contributions of each sync step ps:0 closed after it logged worker
// `dead` as dead -- but for the first such step, which was in flight when
// the worker died and may close with what it had. Taken from the step log's
// own order, not from a status read at some moment after the death: under
// ThreadSanitizer the ps notices the death steps before a poll sees it.
std::map<qint64, int> contributionsAfterDeath(const QString &logdir, int dead)
{
    std::map<qint64, int> contributions;
    bool died = false;
    bool inFlightSkipped = false;
    for (const auto &r : readStepLog(logdir)) {
        const QString type = r.value(QStringLiteral("type")).toString();
        if (type == QStringLiteral("worker_state") && r.value(QStringLiteral("worker")).toInt() == dead
            && r.value(QStringLiteral("phase")).toString() == QStringLiteral("dead"))
            died = true;
        if (!died || type != QStringLiteral("step")
            || r.value(QStringLiteral("outcome")).toString() != QStringLiteral("aggregated"))
            continue;
        const qint64 step = r.value(QStringLiteral("global_step")).toInteger();
        if (!inFlightSkipped) {
            inFlightSkipped = true;
            contributions[step] = -1; // marks the step to leave out, with every record of it
            continue;
        }
        if (contributions[step] != -1)
            contributions[step] = r.value(QStringLiteral("contributions")).toInt();
    }
    std::erase_if(contributions, [](const auto &entry) { return entry.second == -1; });
    return contributions;
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

// A ps:0 that answers "are you there?" but never gets round to taking the
// chief's variables: what a real ps looks like while it is overloaded,
// swapping or run under a profiler (seen: heaptrack made Initialize take over
// the chief's 10 s deadline, and the chief aborted).
class UnresponsivePs final : public proto::TaskControl::Service, public proto::ParameterService::Service
{
public:
    explicit UnresponsivePs(const QString &address)
    {
        grpc::ServerBuilder builder;
        builder.AddListeningPort(address.toStdString(), grpc::InsecureServerCredentials());
        builder.RegisterService(static_cast<proto::TaskControl::Service *>(this));
        builder.RegisterService(static_cast<proto::ParameterService::Service *>(this));
        m_server = builder.BuildAndStart();
    }
    ~UnresponsivePs() { shutDown(); }
    bool listening() const { return m_server != nullptr; }
    int initializeCalls() const { return m_initializeCalls; }
    void shutDown()
    {
        if (m_server)
            m_server->Shutdown(std::chrono::system_clock::now() + 1s);
        m_server.reset();
    }

    grpc::Status GetTaskStatus(grpc::ServerContext *, const proto::TaskStatusRequest *,
                               proto::TaskStatusResponse *response) override
    {
        response->set_job_name("ps");
        response->set_state("serving");
        return grpc::Status::OK;
    }
    grpc::Status Initialize(grpc::ServerContext *context, const proto::InitializeRequest *,
                            proto::InitializeResponse *) override
    {
        ++m_initializeCalls;
        while (!context->IsCancelled())
            std::this_thread::sleep_for(10ms);
        return grpc::Status::CANCELLED;
    }

private:
    std::unique_ptr<grpc::Server> m_server;
    std::atomic<int> m_initializeCalls{0};
};

} // namespace

class TestFaults : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aKilledWorkerIsNoticedAndTheOthersCarryOn_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::newRow("async") << QStringLiteral("async");
        QTest::newRow("sync") << QStringLiteral("sync");
        QTest::newRow("ssp") << QStringLiteral("ssp");
    }

    void aKilledWorkerIsNoticedAndTheOthersCarryOn()
    {
        QFETCH(QString, mode);
        QTemporaryDir dir;
        LocalCluster cluster(1, 3,
                             {QStringLiteral("--mode=") + mode, QStringLiteral("--staleness=2"),
                              QStringLiteral("--last_step=100000000")},
                             dir.path());
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 200; }));

        QElapsedTimer sinceKill;
        cluster.worker(2).kill(); // SIGKILL: no goodbye
        sinceKill.start();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return worker(s, 2)->phase() == proto::DEAD; }, 10s));
        const qint64 noticedMs = sinceKill.elapsed();
        qInfo("%s: ps:0 noticed the dead worker after %lld ms", qPrintable(mode), noticedMs);
        proto::ClusterStatusResponse afterDeath;
        QVERIFY(cluster.clusterStatus(&afterDeath));
        QVERIFY(!worker(afterDeath, 2)->reason().empty());
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("worker:2 is dead")));

        // The live workers go on without it, in every mode.
        const qint64 deadAt = afterDeath.global_step();
        QVERIFY2(cluster.waitForStatus([&](const auto &s) { return s.global_step() > deadAt + 300; }, 60s),
                 "the cluster stopped stepping after a worker died");
        if (mode == QStringLiteral("sync")) {
            const auto steps = contributionsAfterDeath(dir.path(), 2);
            QVERIFY(!steps.empty());
            for (const auto &[step, n] : steps)
                QVERIFY2(n == 2,
                         qPrintable(
                             QStringLiteral("step %1 aggregated %2 gradients with one worker dead").arg(step).arg(n)));
        }

        // Restarted with the same index, it rejoins; sync aggregates all three again.
        cluster.startWorker(2);
        QVERIFY(cluster.waitForStatus([](const auto &s) {
            const auto *w = worker(s, 2);
            return w->phase() != proto::DEAD && w->worker_clock() > 50;
        }));
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("worker:2 rejoined")));
        proto::ClusterStatusResponse rejoined;
        QVERIFY(cluster.clusterStatus(&rejoined));
        QVERIFY(cluster.waitForStatus([&](const auto &s) { return s.global_step() > rejoined.global_step() + 200; }));
        if (mode == QStringLiteral("sync")) {
            const auto steps = contributionsByStep(dir.path(), rejoined.global_step());
            int full = 0;
            for (const auto &[step, n] : steps)
                full += n == 3;
            QVERIFY2(full > 100, qPrintable(QStringLiteral("%1 steps with all three workers").arg(full)));
        }
        stopCluster(cluster, 3);
    }

    void workersRetryAndSayWhomTheyWaitForWhenThePsIsGone()
    {
        QTemporaryDir dir;
        LocalCluster cluster(
            1, 2, {QStringLiteral("--last_step=100000000"), QStringLiteral("--save_checkpoint_secs=1")}, dir.path());
        cluster.startAll();
        QVERIFY(cluster.worker(0).waitForOutput(QStringLiteral("saved checkpoint"), 30s));
        cluster.ps(0).kill();
        // Never a silent wait: each worker says whom it cannot reach, and why.
        const QString expected = QStringLiteral("cannot reach ps:0 at ") + cluster.psAddress(0);
        QVERIFY2(cluster.worker(1).waitForOutput(expected, 15s), qPrintable(cluster.worker(1).output()));
        QVERIFY(cluster.worker(0).waitForOutput(expected, 15s));
        // The state line says it first; the back-off's own line follows.
        QVERIFY2(cluster.worker(1).waitForOutput(QStringLiteral("retrying in"), 10s),
                 qPrintable(cluster.worker(1).output()));

        // The ps comes back empty: the chief restores the newest checkpoint
        // and both workers carry on from its global step.
        cluster.startPs(0);
        QVERIFY(
            cluster.worker(0).waitForOutput(QStringLiteral("variables initialised (restored from model.ckpt-"), 30s));
        const auto match
            = QRegularExpression(QStringLiteral("restored from model\\.ckpt-(\\d+)")).match(cluster.worker(0).output());
        QVERIFY(match.hasMatch());
        const qint64 restored = match.captured(1).toLongLong();
        QVERIFY(cluster.waitForStatus([&](const auto &s) {
            return s.global_step() > restored + 200 && worker(s, 0)->phase() == proto::TRAINING
                   && worker(s, 1)->worker_clock() > 0;
        }));
        stopCluster(cluster, 2);
    }

    // The chief keeps waiting for a ps that does not answer its
    // initialisation in time, says so, and trains once a ps answers.
    void theChiefWaitsForAPsTooSlowToTakeItsVariables()
    {
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=3000")});
        auto slow = std::make_unique<UnresponsivePs>(cluster.psAddress(0));
        QVERIFY(slow->listening());
        NodeProcess &chief = cluster.startWorker(0);
        const QString expected
            = QStringLiteral("cannot initialise ps:0 at ") + cluster.psAddress(0) + QStringLiteral(": timed out");
        QVERIFY2(chief.waitForOutput(expected, 40s), qPrintable(chief.output()));
        QVERIFY2(chief.waitForOutput(QStringLiteral("retrying in"), 10s), qPrintable(chief.output()));
        QVERIFY2(chief.isRunning(), qPrintable(chief.output()));
        QVERIFY(slow->initializeCalls() >= 1);

        // A real ps:0 takes the port: the chief initialises it and the run ends.
        slow->shutDown();
        cluster.startPs(0);
        QVERIFY2(chief.waitForOutput(QStringLiteral("chief: variables initialised"), 40s), qPrintable(chief.output()));
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
    }

    // A ps stopped with SIGSTOP holds its port and accepts connections but
    // answers nothing: the worker says so, rather than "cannot connect".
    void aFrozenPsIsToldApartFromAnAbsentOne()
    {
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=3000")});
        NodeProcess &ps = cluster.startPs(0);
        QVERIFY(ps.waitForOutput(QStringLiteral("listening on")));
        QCOMPARE(::kill(pid_t(ps.pid()), SIGSTOP), 0);
        NodeProcess &chief = cluster.startWorker(0);
        const bool told = chief.waitForOutput(QStringLiteral("accepted the connection but does not answer"), 40s);
        ::kill(pid_t(ps.pid()), SIGCONT);
        QVERIFY2(told, qPrintable(chief.output()));
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
    }
};

QTEST_GUILESS_MAIN(TestFaults)
#include "tst_faults.moc"
