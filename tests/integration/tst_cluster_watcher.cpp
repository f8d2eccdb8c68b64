// The watcher against real clusters: parasync-node processes on free
// loopback ports, watched and steered through ps:0 as the app does.
#include "base/port_holder.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "support/cluster_harness.h"
#include "wire/cluster_token.h"

#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <set>

using namespace parasync;
using namespace parasync::testing;

namespace {

constexpr int kTimeoutMs = 60000;

// Keeps what the watcher said, as a window would.
struct WatchLog
{
    explicit WatchLog(ClusterWatcher *watcher)
    {
        QObject::connect(watcher, &ClusterWatcher::snapshotReady, watcher, [this](const RunSnapshot &snapshot) {
            latest = snapshot;
            ++snapshots;
        });
        QObject::connect(watcher, &ClusterWatcher::connectionStateChanged, watcher,
                         [this](bool isConnected, const QString &message) {
                             connected = isConnected;
                             messages << message;
                         });
    }
    bool said(const QString &text) const
    {
        for (const auto &message : messages)
            if (message.contains(text))
                return true;
        return false;
    }
    QString all() const { return messages.join(QLatin1Char('\n')); }

    RunSnapshot latest;
    int snapshots = 0;
    bool connected = false;
    QStringList messages;
};

// Keeps the ps tasks' tables the watcher hands on, as the Tables tab would.
struct TablesLog
{
    explicit TablesLog(ClusterWatcher *watcher)
    {
        QObject::connect(watcher, &ClusterWatcher::tablesReady, watcher, [this](const EmbeddingTablesSnapshot &tables) {
            latest = tables;
            ++snapshots;
        });
    }
    // What the figures say so far, for a failure's message.
    QString describe() const
    {
        QStringList lines{QStringLiteral("%1 snapshots, %2 polls").arg(snapshots).arg(latest.polls)};
        for (size_t i = 0; i < latest.ps.size(); ++i)
            lines << QStringLiteral("ps:%1 %2 %3")
                         .arg(i)
                         .arg(latest.ps[i].answering ? QStringLiteral("answering") : QStringLiteral("silent"),
                              QString::fromStdString(latest.ps[i].problem));
        for (const TableSummary &table : latest.tables) {
            lines << QStringLiteral("%1: %2 rows, %3 hot ids, %4 norms sampled")
                         .arg(QString::fromStdString(table.name))
                         .arg(table.rows)
                         .arg(table.hottest.size())
                         .arg(table.norms.samples);
            for (size_t i = 0; i < table.byPs.size(); ++i)
                if (table.byPs[i])
                    lines << QStringLiteral("  ps:%1 rows %2 bytes/step %3")
                                 .arg(i)
                                 .arg(table.byPs[i]->rows)
                                 .arg(table.byPs[i]->bytesPerStep.value_or(-1));
        }
        return lines.join(QLatin1Char('\n'));
    }

    EmbeddingTablesSnapshot latest;
    int snapshots = 0;
};

std::set<int> workersIn(const RunSnapshot &snapshot)
{
    std::set<int> workers;
    for (const auto &step : snapshot.recentSteps)
        workers.insert(step.worker);
    return workers;
}

proto::ModeConfig modeConfig(proto::UpdateMode mode, int staleness = 10, int replicas = 0)
{
    proto::ModeConfig config;
    config.set_mode(mode);
    config.set_staleness(staleness);
    config.set_replicas_to_aggregate(replicas);
    return config;
}

} // namespace

class TestClusterWatcher : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void connectsOncePs0StartsAndWatchesToTheEnd()
    {
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=3000")});
        ClusterWatcher watcher;
        WatchLog log(&watcher);
        QSignalSpy finished(&watcher, &ClusterWatcher::clusterFinished);
        const QString address = cluster.psAddress(0);

        // Nothing listens there yet: the watcher says so and keeps trying.
        watcher.connectTo(address);
        QCOMPARE(watcher.address(), address);
        QTRY_VERIFY2_WITH_TIMEOUT(
            log.said(QStringLiteral("cannot reach ps:0 at ") + address + QStringLiteral(": connection refused")),
            qPrintable(log.all()), kTimeoutMs);
        QVERIFY(log.said(QStringLiteral("retrying in")));
        QVERIFY(!log.connected);

        cluster.startPs(0);
        QTRY_VERIFY2_WITH_TIMEOUT(log.connected, qPrintable(log.all()), kTimeoutMs);
        QVERIFY(log.said(QStringLiteral("connected to ps:0 at ") + address));
        cluster.startWorker(1);
        cluster.startWorker(0);

        QTRY_VERIFY2_WITH_TIMEOUT(finished.count() == 1, qPrintable(log.all()), kTimeoutMs);
        const RunSnapshot &s = log.latest;
        QVERIFY(s.finished);
        QCOMPARE(s.globalStep, int64_t(3000));
        QCOMPARE(s.lastStep, int64_t(3000));
        QCOMPARE(s.lostEvents, int64_t(0));
        QCOMPARE(s.batchLossByWorker.size(), size_t(2));
        QCOMPARE(s.parameterNames, (std::vector<std::string>{"w", "b"}));
        // Every update of the run reached the watcher, and w, b converged.
        QCOMPARE(s.workers.at(0).applied + s.workers.at(1).applied, int64_t(3000));
        const double w = s.parameterSeries[0].buckets().back().last;
        const double b = s.parameterSeries[1].buckets().back().last;
        QVERIFY2(std::abs(w - 2) < 0.2 && std::abs(b - 10) < 0.2,
                 qPrintable(QStringLiteral("w=%1 b=%2").arg(w).arg(b)));
        QVERIFY(!s.fullLoss.isEmpty());
        QCOMPARE(s.workers.at(0).phase, proto::FINISHED);
        QVERIFY(log.messages.last().contains(QLatin1String("the cluster finished at global step 3000")));
        QVERIFY(!log.connected);

        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
    }

    void liveSnapshotsAndControlRoundTrips()
    {
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=1000000000")});
        cluster.startAll();
        auto watcher = std::make_unique<ClusterWatcher>();
        WatchLog log(watcher.get());
        QSignalSpy controlFinished(watcher.get(), &ClusterWatcher::controlFinished);
        QSignalSpy modeChanged(watcher.get(), &ClusterWatcher::modeChanged);
        QSignalSpy stragglerChanged(watcher.get(), &ClusterWatcher::stragglerChanged);
        watcher->connectTo(cluster.psAddress(0));

        // Steps of both workers, and w and b, arrive in snapshots.
        QTRY_VERIFY2_WITH_TIMEOUT(
            workersIn(log.latest) == (std::set<int>{0, 1}) && log.latest.parameterSeries.size() == 2
                && log.latest.parameterSeries[0].totalCount() > 0 && log.latest.batchLossByWorker.size() == 2,
            qPrintable(log.all()), kTimeoutMs);
        QCOMPARE(log.latest.parameterNames, (std::vector<std::string>{"w", "b"}));
        QCOMPARE(log.latest.mode.mode(), proto::ASYNC);
        QCOMPARE(log.latest.workerHosts.size(), size_t(2));
        QCOMPARE(QString::fromStdString(log.latest.workerHosts[1]), cluster.workerAddress(1));
        QTRY_VERIFY_WITH_TIMEOUT(log.latest.workers.size() == 2 && log.latest.workers[0].stepsPerSecond > 0
                                     && log.latest.workers[1].stepsPerSecond > 0,
                                 kTimeoutMs);
        QVERIFY(log.latest.workers[0].pid > 0);

        // Snapshots are throttled to one per 50 ms interval, never one per
        // batch: at most ~20 a second, however fast the cluster runs. (How
        // many come on a loaded machine is not the test's business: a TSan
        // run beside other tests saw 2 a second.)
        const int before = log.snapshots;
        QElapsedTimer timer;
        timer.start();
        QTRY_VERIFY_WITH_TIMEOUT(timer.elapsed() >= 1000, 5000);
        const int perSecond = int((log.snapshots - before) * 1000 / timer.elapsed());
        qInfo("%d snapshots a second", perSecond);
        QVERIFY2(perSecond <= 21, qPrintable(QString::number(perSecond)));
        QTRY_VERIFY_WITH_TIMEOUT(log.snapshots > before, kTimeoutMs);

        // sync: ps:0's reply, then its reported mode and a marker in the snapshot.
        watcher->setMode(modeConfig(proto::SYNC));
        QTRY_COMPARE_WITH_TIMEOUT(controlFinished.count(), 1, kTimeoutMs);
        QVERIFY2(controlFinished.at(0).at(0).toBool(), qPrintable(controlFinished.at(0).at(1).toString()));
        QCOMPARE(modeChanged.count(), 1);
        QCOMPARE(modeChanged.at(0).at(0).value<proto::ModeConfig>().mode(), proto::SYNC);
        const qint64 changedAt = modeChanged.at(0).at(1).toLongLong();
        QVERIFY(changedAt > 0);
        QTRY_VERIFY_WITH_TIMEOUT(log.latest.mode.mode() == proto::SYNC && !log.latest.modeChanges.empty(), kTimeoutMs);
        QCOMPARE(log.latest.modeChanges.back().current.mode(), proto::SYNC);
        QCOMPARE(log.latest.modeChanges.back().previous.mode(), proto::ASYNC);
        QCOMPARE(log.latest.modeChanges.back().globalStep, int64_t(changedAt));
        QCOMPARE(log.latest.modeChanges.back().requestedBy, std::string("parasync app"));
        // In sync mode updates are aggregated.
        QTRY_VERIFY_WITH_TIMEOUT(
            !log.latest.recentSteps.empty() && log.latest.recentSteps.back().outcome != proto::APPLIED, kTimeoutMs);

        watcher->setMode(modeConfig(proto::SSP, 2));
        QTRY_COMPARE_WITH_TIMEOUT(controlFinished.count(), 2, kTimeoutMs);
        QVERIFY(controlFinished.at(1).at(0).toBool());
        QTRY_VERIFY_WITH_TIMEOUT(log.latest.mode.mode() == proto::SSP && log.latest.mode.staleness() == 2
                                     && log.latest.modeChanges.size() == 2,
                                 kTimeoutMs);

        // A mode ps:0 refuses comes back as an error a user can read.
        watcher->setMode(modeConfig(proto::SYNC, 10, 5));
        QTRY_COMPARE_WITH_TIMEOUT(controlFinished.count(), 3, kTimeoutMs);
        QVERIFY(!controlFinished.at(2).at(0).toBool());
        QVERIFY2(controlFinished.at(2).at(1).toString().contains(cluster.psAddress(0)),
                 qPrintable(controlFinished.at(2).at(1).toString()));
        QCOMPARE(modeChanged.count(), 2);

        // A straggler, on the worker's own address.
        watcher->setStraggler(cluster.workerAddress(1), 20);
        QTRY_COMPARE_WITH_TIMEOUT(controlFinished.count(), 4, kTimeoutMs);
        QVERIFY2(controlFinished.at(3).at(0).toBool(), qPrintable(controlFinished.at(3).at(1).toString()));
        QCOMPARE(stragglerChanged.count(), 1);
        QCOMPARE(stragglerChanged.at(0).at(0).toString(), cluster.workerAddress(1));
        QCOMPARE(stragglerChanged.at(0).at(1).toInt(), 20);
        QVERIFY(cluster.worker(1).waitForOutput(QStringLiteral("straggler delay now 20 ms")));

        // ps:0's status on request.
        QSignalSpy status(watcher.get(), &ClusterWatcher::statusReceived);
        watcher->requestStatus();
        QTRY_COMPARE_WITH_TIMEOUT(status.count(), 1, kTimeoutMs);
        QCOMPARE(status.at(0).at(0).value<proto::ClusterStatusResponse>().mode().mode(), proto::SSP);

        // Destroying a watcher in the middle of a stream does not wait for it.
        QElapsedTimer destroying;
        destroying.start();
        watcher.reset();
        QVERIFY2(destroying.elapsed() < 1000, qPrintable(QString::number(destroying.elapsed())));
    }

    void stoppingPs0EndsTheWatch()
    {
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=1000000000")});
        cluster.startAll();
        ClusterWatcher watcher;
        WatchLog log(&watcher);
        QSignalSpy finished(&watcher, &ClusterWatcher::clusterFinished);
        QSignalSpy controlFinished(&watcher, &ClusterWatcher::controlFinished);
        watcher.connectTo(cluster.psAddress(0));
        QTRY_VERIFY_WITH_TIMEOUT(log.latest.globalStep > 0, kTimeoutMs);

        watcher.stopTask(cluster.psAddress(0));
        QTRY_COMPARE_WITH_TIMEOUT(controlFinished.count(), 1, kTimeoutMs);
        QVERIFY(controlFinished.at(0).at(0).toBool());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kTimeoutMs);
        QVERIFY(log.latest.finished);
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
    }

    void aClusterStartedElsewhereIsDrawnFromItsHistoryThenLive()
    {
        // The first global step the loss chart shows, over all workers.
        const auto firstStep = [](const RunSnapshot &snapshot) {
            double first = -1;
            for (const auto &[worker, series] : snapshot.batchLossByWorker)
                if (!series.isEmpty() && (first < 0 || series.buckets().front().x < first))
                    first = series.buckets().front().x;
            return first;
        };
        QTemporaryDir dir;
        const QString logdir = dir.filePath(QStringLiteral("run"));
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=1000000000")}, logdir);
        cluster.startAll();
        // Thresholds in hundreds of steps: under ThreadSanitizer, beside
        // another test on 2 cores, this cluster makes ~50 steps/s.
        constexpr int64_t kBeforeWatch = 500;
        QVERIFY(cluster.waitForStatus([](const auto &status) { return status.global_step() > kBeforeWatch; }));

        // Telemetry alone starts where the watch starts.
        ClusterWatcher liveOnly;
        WatchLog live(&liveOnly);
        liveOnly.connectTo(cluster.psAddress(0));
        QTRY_VERIFY2_WITH_TIMEOUT(firstStep(live.latest) >= 0, qPrintable(live.all()), kTimeoutMs);
        QVERIFY(firstStep(live.latest) > kBeforeWatch);
        liveOnly.disconnectFromCluster();

        // With the run directory reachable (here: ps:0's own --logdir, found
        // from its status), the charts start at step 1 and go on live.
        ClusterWatcher watcher;
        WatchLog log(&watcher);
        watcher.setHistory({}, true);
        watcher.connectTo(cluster.psAddress(0));
        QTRY_VERIFY2_WITH_TIMEOUT(log.said(QStringLiteral("read the run's history from ") + logdir),
                                  qPrintable(log.all()), kTimeoutMs);
        QTRY_VERIFY_WITH_TIMEOUT(log.latest.globalStep > kBeforeWatch, kTimeoutMs);
        QVERIFY(firstStep(log.latest) >= 0 && firstStep(log.latest) < 50);
        const int64_t first = log.latest.globalStep;
        QTRY_VERIFY_WITH_TIMEOUT(log.latest.globalStep > first + 300, kTimeoutMs);
        // Each applied update counted once: history and live do not overlap.
        const RunSnapshot &s = log.latest;
        QVERIFY2(std::abs(s.stepEvents + s.lostEvents - s.globalStep) <= 20,
                 qPrintable(QStringLiteral("%1 step events + %2 lost for global step %3")
                                .arg(s.stepEvents)
                                .arg(s.lostEvents)
                                .arg(s.globalStep)));
        QVERIFY(log.connected);
    }

    void aWorkerAddressIsNotPs0()
    {
        LocalCluster cluster(1, 1, {QStringLiteral("--last_step=1000000000")});
        cluster.startAll();
        QVERIFY(cluster.worker(0).waitForOutput(QStringLiteral("listening on")));
        ClusterWatcher watcher;
        WatchLog log(&watcher);
        watcher.connectTo(cluster.workerAddress(0));
        QTRY_VERIFY2_WITH_TIMEOUT(log.said(QStringLiteral("is it ps:0's address")), qPrintable(log.all()), kTimeoutMs);
        QVERIFY(!log.connected);
    }

    void aClusterWithATokenNeedsIt()
    {
        qunsetenv(kTokenEnvironmentVariable);
        const std::string token = generateClusterToken();
        ClusterPlan plan = ClusterPlan::demo();
        for (auto *list : {&plan.cluster.ps, &plan.cluster.workers})
            for (auto &address : *list)
                address.port = pickFreePort();
        plan.training.lastStep = 1'000'000'000;
        ClusterLauncher launcher;
        launcher.setClusterToken(token);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        const QString ps0 = QString::fromStdString(plan.cluster.ps[0].toString());

        ClusterWatcher without;
        WatchLog refused(&without);
        without.connectTo(ps0);
        QTRY_VERIFY2_WITH_TIMEOUT(refused.said(QStringLiteral("wrong or missing cluster token")),
                                  qPrintable(refused.all()), kTimeoutMs);
        QVERIFY(!refused.connected);

        ClusterWatcher with;
        WatchLog log(&with);
        RpcSettings settings;
        settings.clusterToken = token;
        with.connectTo(ps0, settings);
        QTRY_VERIFY2_WITH_TIMEOUT(log.latest.globalStep > 0, qPrintable(log.all()), kTimeoutMs);

        // The token travels in the environment, never on a command line.
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(launcher.tasks()[0].pid));
        QVERIFY(cmdline.open(QIODevice::ReadOnly));
        QVERIFY(!cmdline.readAll().contains(QByteArray::fromStdString(token)));
    }

    void aSparseModelsTablesAreShownPerPsTaskAndASilentOneIsSaid()
    {
        LocalCluster cluster(2, 2,
                             {QStringLiteral("--model=sparse_lr"), QStringLiteral("--dataset=clicklog"),
                              QStringLiteral("--samples_per_shard=20000"), QStringLiteral("--optimizer=adagrad"),
                              QStringLiteral("--learning_rate=0.2"), QStringLiteral("--batch_size=100"),
                              QStringLiteral("--last_step=1000000000")});
        cluster.startAll();
        ClusterWatcher watcher;
        WatchLog log(&watcher);
        TablesLog tables(&watcher);
        watcher.connectTo(cluster.psAddress(0));

        // Both ps tasks hold rows of the table, a step's bytes are known (two
        // polls apart), the hottest ids and the rows' norms are there.
        const auto everythingShown = [&tables] {
            const EmbeddingTablesSnapshot &t = tables.latest;
            if (t.tables.size() != 1 || t.ps.size() != 2 || !t.ps[0].answering || !t.ps[1].answering)
                return false;
            const TableSummary &weights = t.tables[0];
            for (const auto &figures : weights.byPs)
                if (!figures || figures->rows <= 0 || !figures->bytesPerStep || *figures->bytesPerStep <= 0)
                    return false;
            return !weights.hottest.empty() && weights.norms.samples > 0 && weights.rowImbalance.known;
        };
        QTRY_VERIFY2_WITH_TIMEOUT(everythingShown(), qPrintable(tables.describe() + QLatin1Char('\n') + log.all()),
                                  kTimeoutMs);
        const TableSummary &weights = tables.latest.tables[0];
        QCOMPARE(weights.name, std::string("weights"));
        QCOMPARE(weights.rows, weights.byPs[0]->rows + weights.byPs[1]->rows);
        // Ids hash evenly over the ps tasks: neither holds far more than the mean.
        QVERIFY2(weights.rowImbalance.ratio < 1.3, qPrintable(tables.describe()));
        QVERIFY(weights.hottest.front().share > 0 && weights.hottest.front().share < 1);
        QVERIFY(weights.byPs[0]->memoryPerRow && *weights.byPs[0]->memoryPerRow > 0);
        int binned = 0;
        for (const int count : weights.norms.counts)
            binned += count;
        QCOMPARE(binned, weights.norms.samples);

        // ps:1 dies: it is said not to answer, with its last figures, while
        // ps:0's keep coming.
        const int64_t rowsOfPs1 = weights.byPs[1]->rows;
        cluster.ps(1).kill();
        QTRY_VERIFY2_WITH_TIMEOUT(!tables.latest.ps.at(1).answering, qPrintable(tables.describe()), kTimeoutMs);
        const int polls = tables.latest.polls;
        QTRY_VERIFY2_WITH_TIMEOUT(tables.latest.polls >= polls + 2, qPrintable(tables.describe()), kTimeoutMs);
        const EmbeddingTablesSnapshot &after = tables.latest;
        QVERIFY(after.ps[0].answering);
        QVERIFY(!after.ps[1].answering);
        QVERIFY2(
            QString::fromStdString(after.ps[1].problem).startsWith(QStringLiteral("ps:1 at ") + cluster.psAddress(1)),
            qPrintable(tables.describe()));
        QVERIFY(after.ps[1].secondsSinceAnswer >= 1);
        QVERIFY(after.tables[0].byPs[1]->rows >= rowsOfPs1);
        QVERIFY(after.tables[0].byPs[0]->rows > 0);

        // Disconnecting ends the polling at once.
        QElapsedTimer disconnecting;
        disconnecting.start();
        watcher.disconnectFromCluster();
        QVERIFY2(disconnecting.elapsed() < 1000, qPrintable(QString::number(disconnecting.elapsed())));
    }

    void disconnectingAndDestroyingNeverHang()
    {
        const QString nowhere = QStringLiteral("127.0.0.1:%1").arg(pickFreePort());
        auto watcher = std::make_unique<ClusterWatcher>();
        WatchLog log(watcher.get());
        watcher->connectTo(nowhere);
        QTRY_VERIFY_WITH_TIMEOUT(log.said(QStringLiteral("cannot reach")), kTimeoutMs);
        QElapsedTimer timer;
        timer.start();
        watcher->disconnectFromCluster();
        QVERIFY(timer.elapsed() < 1000);
        QVERIFY(log.messages.last().startsWith(QLatin1String("disconnected from ps:0 at ") + nowhere));
        // Messages of the old connection still queued are not delivered.
        const int count = int(log.messages.size());
        QTest::qWait(200);
        QCOMPARE(int(log.messages.size()), count);

        watcher->connectTo(nowhere);
        QTRY_VERIFY_WITH_TIMEOUT(log.messages.size() > count, kTimeoutMs);
        timer.restart();
        watcher.reset();
        QVERIFY(timer.elapsed() < 1000);

        // Control calls without a cluster answer with an error, not a hang.
        ClusterWatcher idle;
        QSignalSpy controlFinished(&idle, &ClusterWatcher::controlFinished);
        idle.setMode(modeConfig(proto::SYNC));
        QTRY_COMPARE(controlFinished.count(), 1);
        QVERIFY(!controlFinished.at(0).at(0).toBool());
    }
};

QTEST_GUILESS_MAIN(TestClusterWatcher)
#include "tst_cluster_watcher.moc"
