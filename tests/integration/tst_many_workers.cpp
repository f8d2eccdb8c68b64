// 64 worker processes against one ps (issue 13): a sync step closes with
// every one of them, each global step aggregates exactly one gradient from
// each worker, and the run ends with every process exiting cleanly -- on a
// 2-core machine, where the workers wait for cores far longer than for the
// network.
#include "support/cluster_harness.h"

#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <set>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

class TestManyWorkers : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aSyncStepClosesWithSixtyFourReplicas()
    {
        constexpr int kWorkers = 64;
        constexpr int kLastStep = 40;
        QTemporaryDir dir;
        LocalCluster cluster(
            1, kWorkers, {QStringLiteral("--mode=sync"), QStringLiteral("--last_step=%1").arg(kLastStep)}, dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report, 240s), qPrintable(report));

        std::map<qint64, std::vector<int>> workersByStep;
        for (const auto &record : readStepLog(dir.path())) {
            if (record.value(QStringLiteral("type")).toString() != QStringLiteral("step")
                || record.value(QStringLiteral("outcome")).toString() != QStringLiteral("aggregated"))
                continue;
            workersByStep[record.value(QStringLiteral("global_step")).toInteger()].push_back(
                record.value(QStringLiteral("worker")).toInt());
        }
        // Sync waits for the live workers: while they join, a step may
        // close with fewer. From the first step with all 64, every step has
        // each of them exactly once, up to the last.
        auto it = std::find_if(workersByStep.begin(), workersByStep.end(),
                               [](const auto &entry) { return entry.second.size() == size_t(kWorkers); });
        QVERIFY2(it != workersByStep.end(), "no sync step aggregated a gradient from each of the 64 workers");
        int fullSteps = 0;
        for (; it != workersByStep.end(); ++it) {
            const std::set<int> distinct(it->second.begin(), it->second.end());
            QVERIFY2(it->second.size() == size_t(kWorkers) && distinct.size() == size_t(kWorkers),
                     qPrintable(QStringLiteral("step %1: %2 gradients from %3 workers")
                                    .arg(it->first)
                                    .arg(it->second.size())
                                    .arg(distinct.size())));
            QCOMPARE(*distinct.begin(), 0);
            QCOMPARE(*distinct.rbegin(), kWorkers - 1);
            ++fullSteps;
        }
        qInfo("%d of %d sync steps aggregated all %d workers", fullSteps, kLastStep, kWorkers);
        QCOMPARE(workersByStep.rbegin()->first, qint64(kLastStep));
        QVERIFY2(fullSteps >= kLastStep / 2, qPrintable(QStringLiteral("only %1 full steps").arg(fullSteps)));
    }
};

QTEST_GUILESS_MAIN(TestManyWorkers)
#include "tst_many_workers.moc"
