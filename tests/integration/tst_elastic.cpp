// An elastic cluster (--max_workers), with real processes: a worker beyond
// --worker_hosts joins while the cluster trains and another leaves, in
// async, sync and ssp. What a user relies on: the newcomer trains within
// seconds and is named in the status; the step log has every gradient of
// every worker once; each sync step aggregates the live workers' gradients,
// 2, then 3, then 2 again; in ssp the newcomer does not hold the others
// back until it has made up the run; and an index no task allows is refused.
#include "proto/parasync.grpc.pb.h"
#include "support/cluster_harness.h"

#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <set>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

struct StepRow
{
    qint64 globalStep = 0;
    int worker = 0;
    qint64 workerClock = 0;
    QString outcome;
    int contributions = 0;
};

std::vector<StepRow> stepRows(const QString &logdir)
{
    std::vector<StepRow> rows;
    for (const auto &r : readStepLog(logdir))
        if (r.value(QStringLiteral("type")).toString() == QStringLiteral("step"))
            rows.push_back(
                {r.value(QStringLiteral("global_step")).toInteger(), r.value(QStringLiteral("worker")).toInt(),
                 r.value(QStringLiteral("worker_clock")).toInteger(), r.value(QStringLiteral("outcome")).toString(),
                 r.value(QStringLiteral("contributions")).toInt()});
    return rows;
}

const proto::WorkerStatus *workerIn(const proto::ClusterStatusResponse &status, int index)
{
    for (const auto &w : status.workers())
        if (w.worker_index() == index)
            return &w;
    return nullptr;
}

} // namespace

class TestElastic : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void workersJoinBeyondTheListAndLeaveWhileItTrains_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::newRow("async") << QStringLiteral("async");
        QTest::newRow("sync") << QStringLiteral("sync");
        QTest::newRow("ssp") << QStringLiteral("ssp");
    }
    void workersJoinBeyondTheListAndLeaveWhileItTrains()
    {
        QFETCH(QString, mode);
        QTemporaryDir dir;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--mode=") + mode, QStringLiteral("--staleness=3"),
                              QStringLiteral("--max_workers=4"), QStringLiteral("--compute_ms=20"),
                              QStringLiteral("--compute_jitter=0"), QStringLiteral("--last_step=0"),
                              QStringLiteral("--display_step=1000000")},
                             dir.path());
        cluster.startAll();
        for (int i = 0; i < 2; ++i)
            QVERIFY(cluster.waitForWorkerTraining(i));
        // Long enough that a newcomer counted from clock 0 would be far behind.
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() >= 60; }, 60s));
        proto::ClusterStatusResponse before;
        QVERIFY(cluster.clusterStatus(&before));
        QCOMPARE(before.workers_size(), 2); // the unused indexes of --max_workers are not listed

        const auto started = std::chrono::steady_clock::now();
        NodeProcess &newcomer = cluster.startNewcomer();
        proto::ClusterStatusResponse joined;
        QVERIFY2(cluster.waitForStatus(
                     [&](const auto &s) {
                         joined = s;
                         const auto *w = workerIn(s, 2);
                         return w && w->applied() >= 1;
                     },
                     60s),
                 qPrintable(newcomer.output() + cluster.ps(0).output()));
        qInfo("%s: worker:2 had its first gradient applied %.2f s after it was started", qPrintable(mode),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        QCOMPARE(joined.worker_hosts_size(), 3);
        QCOMPARE(QString::fromStdString(joined.worker_hosts(2)), cluster.workerAddress(2));
        QVERIFY2(cluster.ps(0).output().contains(QStringLiteral("worker:2 joined at global step ")),
                 qPrintable(cluster.ps(0).output()));
        QVERIFY2(cluster.ps(0).output().contains(QStringLiteral("beyond --worker_hosts (--max_workers=4)")),
                 qPrintable(cluster.ps(0).output()));
        QVERIFY(
            cluster.waitForStatus([&](const auto &s) { return s.global_step() >= joined.global_step() + 60; }, 60s));

        // worker:1 leaves as Ctrl+C in its terminal makes it: cleanly.
        cluster.worker(1).terminate();
        QCOMPARE(cluster.worker(1).waitForExit(), 0);
        QVERIFY(cluster.waitForWorkerPhase(1, proto::STOPPED));
        proto::ClusterStatusResponse left;
        QVERIFY(cluster.clusterStatus(&left));
        QVERIFY2(cluster.waitForStatus([&](const auto &s) { return s.global_step() >= left.global_step() + 60; }, 60s),
                 qPrintable(cluster.ps(0).output()));
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));

        const std::vector<StepRow> rows = stepRows(dir.path());
        // Every gradient of every worker once: its clocks 1, 2, 3, ... each
        // in one record, none missing.
        std::map<int, std::set<qint64>> clocks;
        for (const StepRow &row : rows)
            QVERIFY2(clocks[row.worker].insert(row.workerClock).second,
                     qPrintable(QStringLiteral("worker:%1's clock %2 twice").arg(row.worker).arg(row.workerClock)));
        QCOMPARE(int(clocks.size()), 3);
        for (const auto &[worker, seen] : clocks)
            QVERIFY2(*seen.begin() == 1 && *seen.rbegin() == qint64(seen.size()),
                     qPrintable(QStringLiteral("worker:%1: %2 records for clocks %3 to %4")
                                    .arg(worker)
                                    .arg(seen.size())
                                    .arg(*seen.begin())
                                    .arg(*seen.rbegin())));

        qint64 newcomerFirst = -1, leaverLast = 0;
        for (const StepRow &row : rows) {
            if (row.worker == 2 && newcomerFirst < 0)
                newcomerFirst = row.globalStep;
            if (row.worker == 1)
                leaverLast = std::max(leaverLast, row.globalStep);
        }
        QVERIFY(newcomerFirst > 0 && leaverLast > newcomerFirst);

        if (mode == QStringLiteral("sync")) {
            // Each sync step aggregated as many gradients as workers were
            // live: 2 before the newcomer, 3 while all three trained, 2 after
            // worker:1 left, and its records agree with its count.
            std::map<qint64, std::pair<int, int>> steps; // global step -> records, contributions
            for (const StepRow &row : rows) {
                if (row.outcome != QStringLiteral("AGGREGATED"))
                    continue;
                auto &[records, contributions] = steps[row.globalStep];
                ++records;
                contributions = row.contributions;
            }
            for (const auto &[step, counts] : steps) {
                const int live = step >= newcomerFirst && step <= leaverLast ? 3 : 2;
                QVERIFY2(counts.first == counts.second && counts.second == live,
                         qPrintable(QStringLiteral("sync step %1: %2 records, %3 contributions, %4 live workers")
                                        .arg(step)
                                        .arg(counts.first)
                                        .arg(counts.second)
                                        .arg(live)));
            }
        }
        if (mode == QStringLiteral("ssp")) {
            // Level with the slowest from its first step: while the newcomer
            // made its first 20 steps, the others kept pace with it rather
            // than wait for it to make up their 30-odd.
            qint64 twentieth = 0;
            for (const StepRow &row : rows)
                if (row.worker == 2 && row.workerClock == 20)
                    twentieth = row.globalStep;
            QVERIFY(twentieth > 0);
            int byWorker0 = 0;
            for (const StepRow &row : rows)
                byWorker0 += row.worker == 0 && row.globalStep > newcomerFirst && row.globalStep < twentieth ? 1 : 0;
            QVERIFY2(byWorker0 >= 10, qPrintable(QStringLiteral("worker:0 made %1 steps while worker:2 made its "
                                                                "first 20")
                                                     .arg(byWorker0)));
        }
    }

    // The identity rules stay: an index beyond what the tasks allow is
    // refused with what to do, and the cluster trains on.
    void anIndexBeyondMaxWorkersIsRefused()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--compute_ms=5"), QStringLiteral("--last_step=0"),
                              QStringLiteral("--display_step=1000000")},
                             dir.path());
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() >= 10; }, 60s));
        // No --max_workers on the running tasks: a third worker has no index.
        NodeProcess &stranger = cluster.startNewcomer({QStringLiteral("--max_workers=3")});
        QVERIFY(stranger.waitForExit() != 0);
        QVERIFY2(stranger.output().contains(QStringLiteral("worker index 2 is not in the cluster (2 workers in "
                                                           "--worker_hosts; a worker beyond them needs --max_workers "
                                                           "on every task)")),
                 qPrintable(stranger.output()));
        proto::ClusterStatusResponse now;
        QVERIFY(cluster.clusterStatus(&now));
        QVERIFY(cluster.waitForStatus([&](const auto &s) { return s.global_step() > now.global_step() + 20; }, 30s));
        QCOMPARE(now.workers_size(), 2);
        for (int i = 0; i < 2; ++i)
            cluster.worker(i).terminate();
        for (int i = 0; i < 2; ++i)
            QCOMPARE(cluster.worker(i).waitForExit(), 0);
        cluster.ps(0).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
    }
};

QTEST_GUILESS_MAIN(TestElastic)
#include "tst_elastic.moc"
