// The chief worker dies: the others carry on, checkpoints resume when it
// returns, or (--chief_handover=1) another worker takes its duties. And kill
// -9 at any moment, during checkpoint writes included, never leaves a run
// directory that cannot be read. Real processes, real signals.
#include "formats/checkpoint.h"
#include "support/cluster_harness.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

const proto::WorkerStatus &worker(const proto::ClusterStatusResponse &status, int index)
{
    return status.workers(index);
}

// The global steps of the checkpoints a task's output says it saved.
std::vector<qint64> savedSteps(const QString &output)
{
    std::vector<qint64> steps;
    static const QRegularExpression saved(QStringLiteral("saved checkpoint \\S+ at global step (\\d+)"));
    for (auto it = saved.globalMatch(output); it.hasNext();)
        steps.push_back(it.next().captured(1).toLongLong());
    return steps;
}

bool savedAfter(NodeProcess &task, qint64 step)
{
    const auto steps = savedSteps(task.output());
    return std::any_of(steps.begin(), steps.end(), [step](qint64 s) { return s > step; });
}

// Waits (polling the directory every millisecond) until a checkpoint is
// being written: its temporary file exists.
bool waitForCheckpointWrite(const QString &logdir, std::chrono::milliseconds timeout)
{
    QElapsedTimer timer;
    timer.start();
    const QDir dir(logdir);
    while (timer.elapsed() < timeout.count()) {
        const QStringList temporaries
            = dir.entryList({QStringLiteral(".model.ckpt-*.tmp-*")}, QDir::Files | QDir::Hidden);
        if (!temporaries.isEmpty())
            return true;
        QTest::qWait(1);
    }
    return false;
}

} // namespace

class TestChief : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void theOthersTrainOnWhenTheChiefDiesAndCheckpointsResumeWhenItReturns()
    {
        QTemporaryDir dir;
        LocalCluster cluster(
            1, 3, {QStringLiteral("--last_step=100000000"), QStringLiteral("--save_checkpoint_secs=1")}, dir.path());
        cluster.startAll();
        QVERIFY(cluster.worker(0).waitForOutput(QStringLiteral("saved checkpoint"), 30s));

        cluster.worker(0).kill();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return worker(s, 0).phase() == proto::DEAD; }, 10s));
        proto::ClusterStatusResponse atDeath;
        QVERIFY(cluster.clusterStatus(&atDeath));
        QCOMPARE(atDeath.acting_chief(), 0); // no handover unless asked for
        QVERIFY2(
            cluster.waitForStatus([&](const auto &s) { return s.global_step() > atDeath.global_step() + 500; }, 20s),
            "the other workers stopped when the chief died");

        // Back with the same index: it finds ps:0 holding the variables,
        // carries on from its global step and saves checkpoints again.
        cluster.startWorker(0);
        QVERIFY(cluster.worker(0).waitForOutput(QStringLiteral("already holds the variables"), 30s));
        QVERIFY2(QTest::qWaitFor([&] { return savedAfter(cluster.worker(0), atDeath.global_step()); }, 30000),
                 qPrintable(cluster.worker(0).output()));
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    void withHandoverTheNextLiveWorkerTakesTheChiefsDutiesAndGivesThemBack()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 3,
                             {QStringLiteral("--last_step=100000000"), QStringLiteral("--save_checkpoint_secs=1"),
                              QStringLiteral("--chief_handover=1")},
                             dir.path());
        cluster.startAll();
        QVERIFY(cluster.worker(0).waitForOutput(QStringLiteral("saved checkpoint"), 30s));
        QVERIFY(savedSteps(cluster.worker(1).output()).empty());

        QElapsedTimer sinceKill;
        cluster.worker(0).kill();
        sinceKill.start();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.acting_chief() == 1; }, 10s));
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("worker:1 takes over its duties")));
        QVERIFY(cluster.worker(1).waitForOutput(QStringLiteral("taking over its duties"), 10s));
        proto::ClusterStatusResponse atDeath;
        QVERIFY(cluster.clusterStatus(&atDeath));
        QVERIFY2(QTest::qWaitFor([&] { return savedAfter(cluster.worker(1), atDeath.global_step()); }, 20000),
                 qPrintable(cluster.worker(1).output()));
        qInfo("worker:1 saved its first checkpoint for the dead chief %lld ms after the kill", sinceKill.elapsed());

        // The chief returns: the duties go back, worker:1 stops saving.
        cluster.startWorker(0);
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.acting_chief() == 0; }, 20s));
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("takes its duties back from worker:1")));
        QVERIFY(cluster.worker(1).waitForOutput(QStringLiteral("the chief is back"), 10s));
        proto::ClusterStatusResponse back;
        QVERIFY(cluster.clusterStatus(&back));
        QVERIFY(QTest::qWaitFor([&] { return savedAfter(cluster.worker(0), back.global_step()); }, 20000));
        const auto deputySaved = savedSteps(cluster.worker(1).output()).size();
        QVERIFY(QTest::qWaitFor([&] { return savedSteps(cluster.worker(0).output()).size() >= 3; }, 20000));
        QCOMPARE(savedSteps(cluster.worker(1).output()).size(), deputySaved);
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    void killingTasksDuringCheckpointWritesNeverLeavesAnUnreadableRun()
    {
#if defined(__SANITIZE_THREAD__)
        // About races, TSan has nothing to add here that the other cases do
        // not cover, and its instrumented protobuf parser takes ~10 s per
        // step of this 500,000-parameter model. The unsanitized and ASan
        // runs keep it.
        QSKIP("too slow under ThreadSanitizer (~10 s per step of the 500,000-parameter model)");
#endif
        QTemporaryDir dir;
        // 500,000 parameters: a 2 MB checkpoint, long enough to be caught
        // while it is written.
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--model=softmax"), QStringLiteral("--dataset=blobs:10:50000"),
                              QStringLiteral("--samples_per_shard=50"), QStringLiteral("--last_step=100000000"),
                              QStringLiteral("--save_checkpoint_secs=1"), QStringLiteral("--max_to_keep=0")},
                             dir.path());
        cluster.startAll();
        QVERIFY(cluster.worker(0).waitForOutput(QStringLiteral("saved checkpoint"), 60s));

        int killedMidWrite = 0;
        constexpr int kRounds = 6;
        for (int round = 0; round < kRounds; ++round) {
            // The chief, while a checkpoint is being written.
            if (waitForCheckpointWrite(dir.path(), 10s)) {
                cluster.worker(0).kill();
                const QStringList left
                    = QDir(dir.path()).entryList({QStringLiteral(".model.ckpt-*.tmp-*")}, QDir::Files | QDir::Hidden);
                killedMidWrite += !left.isEmpty();
            } else {
                cluster.worker(0).kill();
            }
            // ps:0, which writes the step log and metrics.csv, every other round.
            if (round % 2 == 1) {
                cluster.ps(0).kill();
                cluster.startPs(0);
                QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("listening on")));
            }
            cluster.startWorker(0);
            QVERIFY2(cluster.worker(0).waitForOutput(QStringLiteral("saved checkpoint"), 60s),
                     qPrintable(cluster.worker(0).output()));
        }
        qInfo("%d of %d kills of the chief landed while a checkpoint was being written", killedMidWrite, kRounds);
        QVERIFY2(killedMidWrite > 0, "no kill landed during a checkpoint write");
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));

        // Every checkpoint left loads, and its checksum holds.
        CheckpointStore store(dir.path().toStdString(), 0);
        const auto files = store.list();
        QVERIFY(files.size() >= size_t(kRounds));
        for (const auto &path : files) {
            try {
                const auto checkpoint = readCheckpointFile(path);
                QCOMPARE(checkpoint.signature().model(), std::string("softmax"));
                QCOMPARE(checkpoint.variables_size(), 2); // W and b, whole
            } catch (const std::exception &e) {
                QFAIL(qPrintable(
                    QStringLiteral("%1: %2").arg(QString::fromStdString(path), QString::fromUtf8(e.what()))));
            }
        }
        std::vector<std::string> skipped;
        QVERIFY(store.newestValid(&skipped).has_value());
        QVERIFY(skipped.empty());

        // The step log and metrics.csv parse line by line: no record torn
        // by a kill was glued to the next run's first one.
        QFile steps(dir.filePath(QStringLiteral("steps.jsonl")));
        QVERIFY(steps.open(QIODevice::ReadOnly));
        int stepLines = 0;
        while (!steps.atEnd()) {
            const QByteArray line = steps.readLine();
            QJsonParseError error{};
            QVERIFY2(QJsonDocument::fromJson(line, &error).isObject() && line.endsWith('\n'),
                     qPrintable(QStringLiteral("steps.jsonl line %1: %2")
                                    .arg(stepLines + 1)
                                    .arg(QString::fromUtf8(line.left(200)))));
            ++stepLines;
        }
        QFile metrics(dir.filePath(QStringLiteral("metrics.csv")));
        QVERIFY(metrics.open(QIODevice::ReadOnly));
        const int columns = int(metrics.readLine().count(',')) + 1;
        int metricLines = 0;
        while (!metrics.atEnd()) {
            const QByteArray line = metrics.readLine();
            ++metricLines;
            bool ok = false;
            line.left(line.indexOf(',')).toLongLong(&ok);
            QVERIFY2(ok && line.count(',') + 1 == columns && line.endsWith('\n'),
                     qPrintable(QStringLiteral("metrics.csv line %1: %2")
                                    .arg(metricLines + 1)
                                    .arg(QString::fromUtf8(line.left(200)))));
        }
        qInfo("%zu checkpoints load; %d step-log records and %d metrics rows parse", files.size(), stepLines,
              metricLines);
        // Few steps under the sanitizers' Debug builds (a 500,000-parameter
        // model), thousands otherwise: enough that the files were written to.
        QVERIFY(stepLines > 10 && metricLines > 10);
    }
};

QTEST_GUILESS_MAIN(TestChief)
#include "tst_chief.moc"
