// The run's records with real parasync-node processes: a run directory on a
// file system that fills up (a tmpfs the test mounts), and a long run held to
// a small --logdir_max_mb. What the user must be able to trust: a failure is
// said in words, by ps:0's log and --status, at the step it happens; what is
// written stays readable; a bounded log replays as one.

#include "formats/step_log_reader.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/mode_comparison.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"
#include "support/cluster_harness.h"
#include "wire/cluster_control.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>

#include <set>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

// A tmpfs of `size` mounted on `where`; false when this process may not
// mount (not root).
bool mountSmallFileSystem(const QString &where, const QString &size)
{
    return QProcess::execute(QStringLiteral("mount"),
                             {QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"),
                              QStringLiteral("size=") + size, QStringLiteral("tmpfs"), where})
           == 0;
}

// Every line of the run's step log, read as one; fails the test on a line
// that does not parse.
int64_t lastGlobalStepOf(const QString &logdir, int64_t *lines)
{
    StepLogReader log(logdir);
    QByteArray line;
    int64_t last = 0;
    *lines = 0;
    while (log.next(&line)) {
        const QJsonDocument json = QJsonDocument::fromJson(line);
        if (!json.isObject()) {
            qWarning("a line of the step log does not parse: %s", line.left(200).constData());
            return -1;
        }
        ++*lines;
        if (json.object().value(QStringLiteral("type")).toString() == QLatin1String("step"))
            last = std::max(last, int64_t(json.object().value(QStringLiteral("global_step")).toDouble()));
    }
    return last;
}

struct StepLine
{
    int64_t globalStep;
    double wallTime;
    int worker;
    QString outcome;
};

std::vector<StepLine> stepLines(const QString &logdir)
{
    std::vector<StepLine> steps;
    for (const QJsonObject &o : readStepLog(logdir)) {
        if (o.value(QStringLiteral("type")).toString() != QLatin1String("step"))
            continue;
        steps.push_back({int64_t(o.value(QStringLiteral("global_step")).toDouble()),
                         o.value(QStringLiteral("wall_time")).toDouble(), o.value(QStringLiteral("worker")).toInt(),
                         o.value(QStringLiteral("outcome")).toString()});
    }
    return steps;
}

bool counted(const StepLine &step)
{
    return step.outcome == QLatin1String("applied") || step.outcome == QLatin1String("aggregated");
}

// What the headless line and the process table said at one moment.
struct Shown
{
    double clock;
    double globalStepsPerSecond;
    double gradientsPerSecond;
    std::vector<double> workerStepsPerSecond;
    std::vector<bool> workerGone; // dead, stopped or finished: shown at 0 steps/s
};

// The same figures recomputed from the step log alone, over the two seconds
// of the run's clock before `clock`: global steps applied, gradients pushed
// (applied, aggregated or dropped), and each worker's gradients.
Shown recomputed(const std::vector<StepLine> &steps, double clock, int numWorkers)
{
    constexpr double kWindow = 2.0;
    std::set<int64_t> globalSteps;
    int64_t gradients = 0;
    std::vector<int64_t> perWorker(size_t(numWorkers), 0);
    for (const StepLine &step : steps) {
        if (step.wallTime <= clock - kWindow || step.wallTime > clock)
            continue;
        ++gradients;
        if (step.worker >= 0 && step.worker < numWorkers)
            ++perWorker[size_t(step.worker)];
        if (counted(step))
            globalSteps.insert(step.globalStep);
    }
    Shown out{clock, double(globalSteps.size()) / kWindow, double(gradients) / kWindow, {}, {}};
    for (const int64_t n : perWorker)
        out.workerStepsPerSecond.push_back(double(n) / kWindow);
    return out;
}

// Agree "within the window's noise": a rate over two seconds taken from
// samples 50 ms apart moves by a few steps at its edges.
bool agree(double shown, double recomputed)
{
    return std::abs(shown - recomputed) <= std::max(3.0, 0.1 * recomputed);
}

} // namespace

class RunRecordsTest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // Every figure the user is shown -- the headless line's global steps/s
    // and gradients/s, each worker's steps/s, --status's counts -- is
    // recomputed from the run directory's step log after the run, and must
    // agree. In sync a global step takes both workers' gradients: the two
    // rates differ by that factor (the headless line once called gradients
    // "steps"). The last row switches modes and loses a worker on the way.
    void theFiguresShownAreTheRecordsFigures_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<int>("workers");
        QTest::addColumn<bool>("switchAndKill");
        QTest::newRow("async") << QStringLiteral("async") << 2 << false;
        QTest::newRow("sync") << QStringLiteral("sync") << 2 << false;
        QTest::newRow("ssp") << QStringLiteral("ssp") << 2 << false;
        QTest::newRow("async to sync, worker:2 killed") << QStringLiteral("async") << 3 << true;
    }

    void theFiguresShownAreTheRecordsFigures()
    {
        QFETCH(QString, mode);
        QFETCH(int, workers);
        QFETCH(bool, switchAndKill);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        LocalCluster cluster(1, workers,
                             {QStringLiteral("--mode=") + mode, QStringLiteral("--staleness=2"),
                              QStringLiteral("--compute_ms=5"), QStringLiteral("--last_step=0")},
                             dir.path());
        cluster.startAll();
        ClusterWatcher watcher;
        watcher.setSnapshotInterval(200);
        std::vector<Shown> shown;
        RunSnapshot latest;
        QObject::connect(&watcher, &ClusterWatcher::snapshotReady, &watcher, [&](const RunSnapshot &snapshot) {
            latest = snapshot;
            if (snapshot.globalStep < 200 || snapshot.finished)
                return; // the start: workers still joining
            Shown s{snapshot.rateClock, snapshot.globalStepsPerSecond, snapshot.gradientsPerSecond, {}, {}};
            for (const WorkerFigures &worker : snapshot.workers) {
                s.workerStepsPerSecond.push_back(worker.stepsPerSecond);
                s.workerGone.push_back(worker.phase == proto::DEAD || worker.phase == proto::STOPPED
                                       || worker.phase == proto::FINISHED);
            }
            shown.push_back(s);
        });
        watcher.connectTo(cluster.psAddress(0));
        QTRY_VERIFY_WITH_TIMEOUT(shown.size() >= 30, 60000);
        if (switchAndKill) {
            proto::ModeConfig sync;
            sync.set_mode(proto::SYNC);
            QVERIFY(cluster.setMode(sync).ok());
            cluster.worker(2).kill();
            const size_t before = shown.size();
            QTRY_VERIFY_WITH_TIMEOUT(shown.size() >= before + 20, 60000);
        }
        // The counts --status gives, once no gradient is in flight.
        for (int i = 0; i < workers; ++i)
            if (!switchAndKill || i != 2)
                cluster.worker(i).terminate();
        proto::ClusterStatusResponse status;
        QVERIFY(cluster.waitForStatus([&](const proto::ClusterStatusResponse &s) {
            for (const auto &w : s.workers())
                if (w.phase() == proto::TRAINING || w.phase() == proto::BLOCKED_BY_SYNC
                    || w.phase() == proto::BLOCKED_BY_STALENESS)
                    return false;
            status = s;
            return true;
        }));
        watcher.disconnectFromCluster();
        cluster.ps(0).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);

        const std::vector<StepLine> steps = stepLines(dir.path());
        QVERIFY(!steps.empty());
        // --status against the step log: global step, per-worker applied and dropped.
        int64_t lastGlobalStep = 0;
        std::vector<int64_t> applied(size_t(workers), 0), dropped(size_t(workers), 0);
        for (const StepLine &step : steps) {
            if (counted(step)) {
                ++applied[size_t(step.worker)];
                lastGlobalStep = std::max(lastGlobalStep, step.globalStep);
            } else if (step.outcome == QLatin1String("dropped_stale")) {
                ++dropped[size_t(step.worker)];
            }
        }
        QCOMPARE(status.global_step(), lastGlobalStep);
        int64_t droppedTotal = 0;
        for (int i = 0; i < workers; ++i) {
            QCOMPARE(status.workers(i).applied(), applied[size_t(i)]);
            QCOMPARE(status.workers(i).dropped(), dropped[size_t(i)]);
            droppedTotal += dropped[size_t(i)];
        }
        QCOMPARE(status.dropped_total(), droppedTotal);

        // The rates, at every moment they were shown.
        int checked = 0;
        for (const Shown &s : shown) {
            // A rate over the last two seconds needs two seconds of run.
            if (s.clock < steps.front().wallTime + 2.2)
                continue;
            const Shown records = recomputed(steps, s.clock, workers);
            const QString at = QStringLiteral(" at wall time %1 (the records span %2 to %3)")
                                   .arg(s.clock, 0, 'f', 3)
                                   .arg(steps.front().wallTime, 0, 'f', 3)
                                   .arg(steps.back().wallTime, 0, 'f', 3);
            QVERIFY2(agree(s.globalStepsPerSecond, records.globalStepsPerSecond),
                     qPrintable(QStringLiteral("global steps/s shown %1, in the records %2")
                                    .arg(s.globalStepsPerSecond)
                                    .arg(records.globalStepsPerSecond)
                                + at));
            QVERIFY2(agree(s.gradientsPerSecond, records.gradientsPerSecond),
                     qPrintable(QStringLiteral("gradients/s shown %1, in the records %2")
                                    .arg(s.gradientsPerSecond)
                                    .arg(records.gradientsPerSecond)
                                + at));
            for (size_t i = 0; i < s.workerStepsPerSecond.size() && i < records.workerStepsPerSecond.size(); ++i)
                QVERIFY2(s.workerGone[i] ? s.workerStepsPerSecond[i] == 0
                                         : agree(s.workerStepsPerSecond[i], records.workerStepsPerSecond[i]),
                         qPrintable(QStringLiteral("worker:%1 steps/s shown %2, in the records %3")
                                        .arg(i)
                                        .arg(s.workerStepsPerSecond[i])
                                        .arg(records.workerStepsPerSecond[i])
                                    + at));
            ++checked;
        }
        QVERIFY(checked >= 10);
        // In sync each global step took every live worker's gradient.
        if (mode == QLatin1String("sync")) {
            const Shown &last = shown.back();
            QVERIFY2(std::abs(last.gradientsPerSecond - 2 * last.globalStepsPerSecond)
                         <= std::max(3.0, 0.1 * last.gradientsPerSecond),
                     qPrintable(QStringLiteral("%1 gradients/s, %2 global steps/s")
                                    .arg(last.gradientsPerSecond)
                                    .arg(last.globalStepsPerSecond)));
        }
    }

    // --logdir on a file system that fills while the seeds' cluster trains
    // at full speed: ps:0 says at once, in words, that its records stop and
    // where; --status says it too; training goes on to the last step; what
    // was written replays without a torn line.
    void aLogdirThatFillsUpIsSaidAndLeavesReadableRecords()
    {
        QTemporaryDir mountPoint;
        QVERIFY(mountPoint.isValid());
        if (!mountSmallFileSystem(mountPoint.path(), QStringLiteral("256k")))
            QSKIP("mounting a small tmpfs needs root (CI runs as root)");
        const auto unmount = qScopeGuard([&] {
            QProcess::execute(QStringLiteral("umount"), {QStringLiteral("-l"), mountPoint.path()});
        });
        const QString logdir = mountPoint.path() + QStringLiteral("/run");

        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=6000"), QStringLiteral("--save_checkpoint_secs=0")},
                             logdir);
        cluster.startAll();
        QVERIFY2(cluster.ps(0).waitForOutput(QStringLiteral("No space left on device"), 60s),
                 qPrintable(cluster.ps(0).output().right(3000)));
        const QString said = cluster.ps(0).output();
        QVERIFY2(said.contains(QStringLiteral("ps:0: cannot write ") + logdir), qPrintable(said.right(3000)));
        const auto match = QRegularExpression(QStringLiteral("stop at global step (\\d+), every line up to it "
                                                             "complete"))
                               .match(said);
        QVERIFY2(match.hasMatch(), qPrintable(said.right(3000)));
        const int64_t keptThrough = match.captured(1).toLongLong();

        // --status says it while it lasts (the run may end first: then ps:0 is gone).
        proto::ClusterStatusResponse status;
        if (cluster.clusterStatus(&status) && status.global_step() < 6000) {
            QVERIFY2(!status.records_problem().empty(), status.DebugString().c_str());
            QVERIFY2(formatClusterStatus(status).find("run records: cannot write") != std::string::npos,
                     formatClusterStatus(status).c_str());
        }
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));

        // What is there is whole, and ends where ps:0 said.
        int64_t lines = 0;
        QCOMPARE(lastGlobalStepOf(logdir, &lines), keptThrough);
        QVERIFY(lines > 0);
        RunState state;
        const RunDirectoryInfo info = replayRunDirectory(logdir.toStdString(), &state);
        QCOMPARE(info.skippedLines, int64_t(0));
        QCOMPARE(state.snapshot().globalStep, keptThrough);
        QFile metrics(logdir + QStringLiteral("/metrics.csv"));
        QVERIFY(metrics.open(QIODevice::ReadOnly));
        QVERIFY(metrics.readAll().endsWith('\n'));
    }

    // A long run held to --logdir_max_mb=1: the step log is rotated and
    // compressed, the oldest segments go, records.json says so, the run
    // directory stays within the budget, and the replay and the mode
    // comparison read the rotated log as one.
    void aLongRunStaysWithinItsBudgetAndReplaysAsOne()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        // ~4 MB of step lines and ~0.7 MB of metrics.csv: more than the budget.
        constexpr int64_t kLastStep = 12000;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--last_step=%1").arg(kLastStep), QStringLiteral("--logdir_max_mb=1"),
                              QStringLiteral("--save_checkpoint_secs=0")},
                             dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report, 300s), qPrintable(report));
        QVERIFY2(cluster.ps(0).output().contains(QStringLiteral("reached their budget of 1 MiB (--logdir_max_mb)")),
                 qPrintable(cluster.ps(0).output().right(3000)));

        QVERIFY(!StepLogReader::segmentIndices(dir.path()).isEmpty());
        QFile records(dir.filePath(QStringLiteral("records.json")));
        QVERIFY(records.open(QIODevice::ReadOnly));
        const int64_t removedThrough = int64_t(QJsonDocument::fromJson(records.readAll())
                                                   .object()
                                                   .value(QStringLiteral("removed_through_global_step"))
                                                   .toDouble());
        QVERIFY(removedThrough > 0);

        // ps:0's records (the step log's files and metrics.csv) within the
        // budget, give or take the segment being written.
        qint64 total = 0;
        for (const QFileInfo &file :
             QDir(dir.path())
                 .entryInfoList({QStringLiteral("steps.jsonl*"), QStringLiteral("metrics.csv")}, QDir::Files))
            total += file.size();
        QVERIFY2(total <= (1 << 20) + (1 << 17), qPrintable(QStringLiteral("%1 bytes").arg(total)));

        // Read as one: the replay ends at the last step, from just after the
        // steps removed; the comparison's reader sees the same run.
        int64_t lines = 0;
        QCOMPARE(lastGlobalStepOf(dir.path(), &lines), kLastStep);
        RunState state;
        const RunDirectoryInfo info = replayRunDirectory(dir.path().toStdString(), &state);
        QCOMPARE(info.skippedLines, int64_t(0));
        QVERIFY2(info.recordsNote.find("--logdir_max_mb") != std::string::npos, info.recordsNote.c_str());
        const RunSnapshot replayed = state.snapshot();
        QCOMPARE(replayed.globalStep, kLastStep);
        QVERIFY(replayed.stepEvents >= kLastStep - removedThrough);
        const ModeRunSummary summary = summarizeModeRun(dir.path(), 1.0);
        QVERIFY2(summary.failure.isEmpty(), qPrintable(summary.failure));
    }
};

QTEST_GUILESS_MAIN(RunRecordsTest)
#include "tst_run_records.moc"
