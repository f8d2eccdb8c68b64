// Sparse models with real clusters: parasync-node processes on loopback
// ports train a logistic regression and a factorization machine over a
// synthetic click log (--dataset=clicklog), whose generating model is known,
// so the held-out AUC they reach has a target: within 0.01 of the generating
// model's own, in every mode and across mode switches. The tables' rows live
// on the ps tasks by id; a checkpoint holds them whole and restores into
// another number of ps tasks row for row.
#include "formats/checkpoint.h"
#include "support/cluster_harness.h"

#include <QFile>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

constexpr double kAucMargin = 0.01;
// A --max_message_bytes that holds a step of sparse_lr on the click log in
// batches of 10 (up to 100 rows) but not the rows a ps task holds after a
// thousand such steps (some 1,400 ids, 16 bytes a row with Adagrad's
// accumulator, over at most two ps tasks).
constexpr int kSmallMessages = 8192;
const QStringList kSmallMessageFlags{QStringLiteral("--max_message_bytes=8192"), QStringLiteral("--batch_size=10")};

QStringList clickLogFlags(const QString &model, const QString &mode, int lastStep)
{
    return {QStringLiteral("--model=") + model,        QStringLiteral("--dataset=clicklog"),
            QStringLiteral("--eval_dataset=clicklog"), QStringLiteral("--samples_per_shard=20000"),
            QStringLiteral("--optimizer=adagrad"),     QStringLiteral("--learning_rate=0.2"),
            QStringLiteral("--batch_size=100"),        QStringLiteral("--mode=") + mode,
            QStringLiteral("--display_step=100"),      QStringLiteral("--last_step=%1").arg(lastStep)};
}

// What the chief says the generating model scores on the held-out data.
double bestAuc(const QString &chiefOutput)
{
    const auto match = QRegularExpression(QStringLiteral("the model that generated the held-out data scores AUC "
                                                         "([0-9.]+)"))
                           .match(chiefOutput);
    return match.hasMatch() ? match.captured(1).toDouble() : -1;
}

// The last held-out AUC in metrics.csv, and how many were measured.
double lastAuc(const QString &logdir, int *measured)
{
    const MetricsTable metrics = readMetrics(logdir);
    const int column = metrics.column(QStringLiteral("heldout_auc"));
    double last = -1;
    *measured = 0;
    if (column < 0)
        return last;
    for (const QStringList &row : metrics.rows) {
        if (row.at(column).isEmpty() || row.at(column) == QStringLiteral("nan"))
            continue;
        ++*measured;
        last = row.at(column).toDouble();
    }
    return last;
}

proto::Checkpoint newestCheckpoint(const QString &logdir)
{
    const auto newest = CheckpointStore(logdir.toStdString()).newestValid();
    return newest ? newest->checkpoint : proto::Checkpoint();
}

// "worker:0 state stopped: ... (local steps 812, the last at global step 1700)"
qint64 localSteps(const QString &output)
{
    static const QRegularExpression form(QStringLiteral("state (?:stopped|finished): .*\\(local steps (\\d+)"));
    const auto match = form.match(output);
    return match.hasMatch() ? match.captured(1).toLongLong() : -1;
}

int64_t rowsIn(const proto::Checkpoint &checkpoint)
{
    int64_t rows = 0;
    for (const auto &table : checkpoint.tables())
        rows += table.ids_size();
    return rows;
}

} // namespace

class TestSparseTraining : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void sparseLogisticRegressionReachesTheGeneratingModelsAuc_data()
    {
        QTest::addColumn<QString>("mode");
        QTest::newRow("async") << QStringLiteral("async");
        QTest::newRow("sync") << QStringLiteral("sync");
        QTest::newRow("ssp") << QStringLiteral("ssp");
    }

    void sparseLogisticRegressionReachesTheGeneratingModelsAuc()
    {
        QFETCH(QString, mode);
        QTemporaryDir dir;
        LocalCluster cluster(2, 2, clickLogFlags(QStringLiteral("sparse_lr"), mode, 2000), dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report, 180s), qPrintable(report));
        const QString chief = cluster.worker(0).output();
        const double best = bestAuc(chief);
        QVERIFY2(best > 0.6 && best < 1.0, qPrintable(chief));
        int measured = 0;
        const double auc = lastAuc(dir.path(), &measured);
        QVERIFY2(measured >= 2, qPrintable(chief));
        QVERIFY2(auc >= best - kAucMargin,
                 qPrintable(QStringLiteral("held-out AUC %1 against the generating model's %2").arg(auc).arg(best)));
        // The log line says it too, beside the batch's loss.
        QVERIFY2(chief.contains(QRegularExpression(QStringLiteral("batch loss [0-9.]+ bias -?[0-9.]+ held-out loss "
                                                                  "[0-9.]+ held-out auc 0\\.[0-9]+"))),
                 qPrintable(chief));
        // Both ps tasks hold rows of the table: the ids spread over them.
        const proto::Checkpoint saved = newestCheckpoint(dir.path());
        QCOMPARE(saved.tables_size(), 1);
        QVERIFY(rowsIn(saved) > 1000);
        for (int k = 0; k < 2; ++k)
            QVERIFY2(cluster.ps(k).output().contains(QStringLiteral("variables initialised by the chief")),
                     qPrintable(cluster.ps(k).output()));
    }

    void aFactorizationMachineAcrossModeSwitches()
    {
        QTemporaryDir dir;
        LocalCluster cluster(2, 2, clickLogFlags(QStringLiteral("fm:4"), QStringLiteral("async"), 2400), dir.path());
        cluster.startAll();
        // async, then sync from a third of the way, then ssp from two thirds.
        QVERIFY(
            cluster.waitForStatus([](const proto::ClusterStatusResponse &s) { return s.global_step() >= 800; }, 120s));
        proto::ModeConfig sync;
        sync.set_mode(proto::SYNC);
        QVERIFY(cluster.setMode(sync).ok());
        QVERIFY(
            cluster.waitForStatus([](const proto::ClusterStatusResponse &s) { return s.global_step() >= 1600; }, 120s));
        proto::ModeConfig ssp;
        ssp.set_mode(proto::SSP);
        ssp.set_staleness(4);
        QVERIFY(cluster.setMode(ssp).ok());
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report, 180s), qPrintable(report));
        // Both switches happened mid-run, as the step log records them.
        int modeChanges = 0;
        for (const QJsonObject &line : readStepLog(dir.path()))
            modeChanges += line.value(QStringLiteral("type")).toString() == QStringLiteral("mode_change");
        QCOMPARE(modeChanges, 2);
        const double best = bestAuc(cluster.worker(0).output());
        int measured = 0;
        const double auc = lastAuc(dir.path(), &measured);
        QVERIFY2(auc >= best - kAucMargin,
                 qPrintable(QStringLiteral("held-out AUC %1 against the generating model's %2").arg(auc).arg(best)));
        // Two tables: the weights (rows of 1) and the factors (rows of 4).
        const proto::Checkpoint saved = newestCheckpoint(dir.path());
        QCOMPARE(saved.tables_size(), 2);
        QCOMPARE(saved.tables(1).values_size(), saved.tables(1).ids_size() * 4);
    }

    void killedPrimariesLoseNoRowAndNoAcknowledgedUpdate()
    {
        // Both ps tasks as pairs; each primary SIGKILLed in turn while two
        // workers train: the backups hold every row a pull made and every
        // row update, so the workers' gradients for rows they pulled from
        // the dead primaries find them, and nothing acknowledged is lost.
        QTemporaryDir dir;
        LocalCluster cluster(2, 2,
                             clickLogFlags(QStringLiteral("sparse_lr"), QStringLiteral("async"), 0)
                                 + QStringList{QStringLiteral("--compute_ms=2"), QStringLiteral("--heartbeat_ms=500")},
                             dir.path());
        cluster.addBackups();
        cluster.startAll();
        for (int k = 0; k < 2; ++k) {
            cluster.startBackup(k);
            QVERIFY2(cluster.backup(k).waitForOutput(QStringLiteral("follows its primary at ") + cluster.psAddress(k)),
                     qPrintable(cluster.backup(k).output()));
        }
        int64_t step = 0;
        QVERIFY(cluster.waitForStatus([&](const proto::ClusterStatusResponse &s) {
            step = s.global_step();
            return step > 200;
        }));
        for (const int k : {1, 0}) {
            cluster.ps(k).kill();
            QVERIFY2(cluster.backup(k).waitForOutput(QStringLiteral("takes over as the pair's primary")),
                     qPrintable(cluster.backup(k).output()));
            const int64_t before = step;
            QVERIFY(cluster.waitForStatus([&](const proto::ClusterStatusResponse &s) {
                step = s.global_step();
                return step > before + 200;
            }));
        }
        // Stopped once both train again (one still rejoining after the
        // second kill would have no stream to say its goodbye on), the
        // chief last: each pair is down to one process, so its
        // lease needs the witness's vote, and the chief is the witness. A
        // worker still stopping after the chief went would find its pair
        // acknowledging nothing (two of three voters gone, by design).
        for (int i = 0; i < 2; ++i)
            QVERIFY(cluster.waitForWorkerTraining(i));
        for (const int i : {1, 0}) {
            cluster.worker(i).terminate();
            QCOMPARE(cluster.worker(i).waitForExit(), 0);
            QVERIFY2(!cluster.worker(i).output().contains(QStringLiteral("never pulled")),
                     qPrintable(cluster.worker(i).output()));
        }
        proto::ClusterStatusResponse status;
        QVERIFY(cluster.waitForStatus([](const proto::ClusterStatusResponse &s) {
            return s.workers(0).phase() == proto::STOPPED && s.workers(1).phase() == proto::STOPPED;
        }));
        QVERIFY(cluster.clusterStatus(&status));
        for (int i = 0; i < 2; ++i) {
            // Every gradient the worker saw acknowledged was taken, and at
            // most the ones in flight at the two kills and the stop more.
            const qint64 acknowledged = localSteps(cluster.worker(i).output());
            const auto &w = status.workers(i);
            QVERIFY2(acknowledged > 0 && w.applied() + w.dropped() >= acknowledged
                         && w.applied() + w.dropped() <= acknowledged + 3,
                     qPrintable(QStringLiteral("worker:%1 saw %2 acknowledged, the ps took %3")
                                    .arg(i)
                                    .arg(acknowledged)
                                    .arg(w.applied() + w.dropped())));
        }
        QCOMPARE(status.replica().acknowledged_updates_lost(), 0);
    }

    void aCheckpointRestoresIntoAnotherNumberOfPsTasksRowForRow()
    {
        // Every task with a message limit that holds a step but not a ps
        // task's rows: the chief reads each ps task's shard in pieces
        // (ReadShard), looks its held-out rows up in several pulls, and
        // restores the checkpoint in pieces (InitializeInPieces).
        const QStringList flags
            = clickLogFlags(QStringLiteral("sparse_lr"), QStringLiteral("async"), 1000) + kSmallMessageFlags;
        QTemporaryDir first;
        {
            LocalCluster cluster(2, 1, flags, first.path());
            cluster.startAll();
            QString report;
            QVERIFY2(cluster.waitAllExitCleanly(&report, 120s), qPrintable(report));
            QVERIFY2(cluster.worker(0).output().contains(QStringLiteral("held-out auc")),
                     qPrintable(cluster.worker(0).output()));
        }
        const proto::Checkpoint saved = newestCheckpoint(first.path());
        QCOMPARE(saved.global_step(), int64_t(1000));
        QCOMPARE(saved.tables(0).slot_names_size(), 1); // adagrad's accumulator, per row
        // Id, value and accumulator: 16 bytes a row. Each of the two ps
        // tasks, and the one restored into, holds more than a message.
        QVERIFY2(rowsIn(saved) * 16 / 2 > kSmallMessages,
                 qPrintable(QStringLiteral("%1 rows in all").arg(rowsIn(saved))));

        // Into one ps task at the same last step: nothing left to train, the
        // chief restores and checkpoints what it holds.
        QTemporaryDir second;
        const QString name = QStringLiteral("model.ckpt-1000.pckpt");
        QVERIFY(QFile::copy(first.filePath(name), second.filePath(name)));
        LocalCluster cluster(1, 1, flags, second.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report, 120s), qPrintable(report));
        QVERIFY2(cluster.ps(0).output().contains(QStringLiteral("(restored from model.ckpt-1000.pckpt)")),
                 qPrintable(cluster.ps(0).output()));
        const proto::Checkpoint restored = newestCheckpoint(second.path());
        QCOMPARE(restored.tables_size(), saved.tables_size());
        QCOMPARE(restored.tables(0).ids_size(), saved.tables(0).ids_size());
        QVERIFY(restored.tables(0).SerializeAsString() == saved.tables(0).SerializeAsString());
        QVERIFY(restored.variables(0).SerializeAsString() == saved.variables(0).SerializeAsString());
    }

    void aBackupTakesAShardPastTheMessageLimitInPieces()
    {
        // The primary has trained before its backup attaches: the state it
        // sends first holds more rows than a message may, so the rows follow
        // it in pieces. SIGKILLed, the primary leaves a backup that holds
        // every row, and the run trains on from them.
        QTemporaryDir dir;
        LocalCluster cluster(1, 1,
                             clickLogFlags(QStringLiteral("sparse_lr"), QStringLiteral("async"), 0) + kSmallMessageFlags
                                 + QStringList{QStringLiteral("--compute_ms=1")},
                             dir.path());
        cluster.addBackups();
        cluster.startAll();
        int64_t rowsBefore = 0;
        QVERIFY(cluster.waitForTaskStatus(cluster.psAddress(0), [&](const proto::TaskStatusResponse &ps) {
            rowsBefore = ps.tables_size() > 0 ? ps.tables(0).rows() : 0;
            return rowsBefore * 16 > 2 * kSmallMessages;
        }));
        cluster.startBackup(0);
        QVERIFY2(cluster.backup(0).waitForOutput(QStringLiteral("follows its primary at ") + cluster.psAddress(0)),
                 qPrintable(cluster.backup(0).output()));
        proto::ClusterStatusResponse atKill;
        QVERIFY(cluster.clusterStatus(&atKill));
        cluster.ps(0).kill();
        QVERIFY2(cluster.backup(0).waitForOutput(QStringLiteral("takes over as the pair's primary")),
                 qPrintable(cluster.backup(0).output()));
        QVERIFY2(!cluster.backup(0).output().contains(QStringLiteral("WITHOUT its state")),
                 qPrintable(cluster.backup(0).output()));
        QVERIFY(cluster.waitForStatus(
            [&](const proto::ClusterStatusResponse &s) { return s.global_step() > atKill.global_step() + 200; }));
        QVERIFY(cluster.waitForTaskStatus(cluster.backupAddress(0), [&](const proto::TaskStatusResponse &ps) {
            return ps.tables_size() > 0 && ps.tables(0).rows() >= rowsBefore;
        }));
        cluster.worker(0).terminate();
        QCOMPARE(cluster.worker(0).waitForExit(), 0);
        QVERIFY2(!cluster.worker(0).output().contains(QStringLiteral("never pulled")),
                 qPrintable(cluster.worker(0).output()));
    }
};

QTEST_GUILESS_MAIN(TestSparseTraining)
#include "tst_sparse_training.moc"
