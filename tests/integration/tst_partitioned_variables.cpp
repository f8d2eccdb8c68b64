// Partitioned variables with real clusters: W of a 64-feature softmax split
// over the ps tasks (--min_slice_bytes), trained by parasync-node processes
// on loopback ports. Partitioning changes where the numbers live, never what
// they are: a deterministic run (one worker, one seed) ends with the same
// values, bit for bit, whole or in slices; a checkpoint restores into another
// number of ps tasks; each ps says which slices it holds.
#include "engine/model.h"
#include "formats/checkpoint.h"
#include "support/cluster_harness.h"

#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

// Adam, so the optimizer slots (m, v) are split and joined too. W is
// [64, 4], 1 KiB: small enough for the ThreadSanitizer pass, split with a
// --min_slice_bytes of 64.
QStringList softmaxFlags(int lastStep, const QString &minSliceBytes)
{
    return {QStringLiteral("--model=softmax"),
            QStringLiteral("--dataset=blobs:4:64"),
            QStringLiteral("--samples_per_shard=100"),
            QStringLiteral("--optimizer=adam"),
            QStringLiteral("--learning_rate=0.01"),
            QStringLiteral("--batch_size=10"),
            QStringLiteral("--mode=async"),
            QStringLiteral("--display_step=50"),
            QStringLiteral("--last_step=%1").arg(lastStep),
            QStringLiteral("--min_slice_bytes=") + minSliceBytes};
}

// Runs a cluster to its last step; returns the final checkpoint (or fails).
proto::Checkpoint train(int numPs, int numWorkers, const QStringList &flags, const QString &logdir,
                        QString *psOutput = nullptr)
{
    LocalCluster cluster(numPs, numWorkers, flags, logdir);
    cluster.startAll();
    QString report;
    if (!cluster.waitAllExitCleanly(&report)) {
        qWarning("%s", qPrintable(report));
        return {};
    }
    if (psOutput)
        for (int k = 0; k < numPs; ++k)
            *psOutput += cluster.ps(k).output();
    const auto newest = CheckpointStore(logdir.toStdString()).newestValid();
    return newest ? newest->checkpoint : proto::Checkpoint();
}

QString q(const std::string &text)
{
    return QString::fromStdString(text);
}

// Where two checkpoints' variables differ (values, slots, update counts), in
// words; empty when they hold the same bytes.
QString differences(const proto::Checkpoint &a, const proto::Checkpoint &b)
{
    if (a.variables_size() != b.variables_size())
        return QStringLiteral("%1 variables against %2").arg(a.variables_size()).arg(b.variables_size());
    for (int i = 0; i < a.variables_size(); ++i) {
        const auto &x = a.variables(i);
        const auto &y = b.variables(i);
        if (x.name() != y.name())
            return QStringLiteral("variable %1 is '%2' against '%3'").arg(i).arg(q(x.name()), q(y.name()));
        if (x.value().SerializeAsString() != y.value().SerializeAsString())
            return QStringLiteral("the values of '%1' differ").arg(q(x.name()));
        for (const auto &[slot, tensor] : x.slots())
            if (!y.slots().contains(slot) || y.slots().at(slot).SerializeAsString() != tensor.SerializeAsString())
                return QStringLiteral("slot '%1' of '%2' differs").arg(q(slot), q(x.name()));
        if (x.slots_size() != y.slots_size() || x.update_count() != y.update_count())
            return QStringLiteral("the slots of '%1' differ").arg(q(x.name()));
    }
    return {};
}

} // namespace

class TestPartitionedVariables : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void slicedOverThreePsTasksTheModelEndsBitForBitAsWhole()
    {
        QTemporaryDir whole, sliced;
        QString psOutput;
        const proto::Checkpoint reference = train(1, 1, softmaxFlags(200, QStringLiteral("64")), whole.path());
        const proto::Checkpoint partitioned
            = train(3, 1, softmaxFlags(200, QStringLiteral("64")), sliced.path(), &psOutput);
        QCOMPARE(reference.global_step(), int64_t(200));
        QCOMPARE(partitioned.global_step(), int64_t(200));
        // One ps: W whole. Three: W [64, 4] in three slices, the first one
        // row longer, placed round-robin, and b after them on ps:0.
        QVERIFY(reference.signature().variables(0).slice_rows().empty());
        QCOMPARE(std::vector<int64_t>(partitioned.signature().variables(0).slice_rows().begin(),
                                      partitioned.signature().variables(0).slice_rows().end()),
                 (std::vector<int64_t>{22, 21, 21}));
        for (const char *holds : {"ps:0: variables initialised by the chief (fresh, seed 1) at global step 0; holds W "
                                  "rows 0-21 of 64 (352 bytes), b (16 bytes)\n",
                                  "ps:1: variables initialised by the chief (fresh, seed 1) at global step 0; holds W "
                                  "rows 22-42 of 64 (336 bytes)\n",
                                  "ps:2: variables initialised by the chief (fresh, seed 1) at global step 0; holds W "
                                  "rows 43-63 of 64 (336 bytes)\n"})
            QVERIFY2(psOutput.contains(QLatin1String(holds)), qPrintable(psOutput));
        // The checkpoint holds W whole, and every value and Adam moment is
        // what the unpartitioned run computed.
        QCOMPARE(partitioned.variables(0).name(), std::string("W"));
        QCOMPARE(partitioned.variables(0).value().values_size(), 256);
        QVERIFY(partitioned.variables(0).slots().contains("m"));
        QCOMPARE(partitioned.shards_size(), 0);
        const QString difference = differences(reference, partitioned);
        QVERIFY2(difference.isEmpty(), qPrintable(difference));
    }

    void aCheckpointRestoresIntoAnotherNumberOfPsTasks()
    {
        QTemporaryDir first;
        const proto::Checkpoint saved = train(3, 1, softmaxFlags(150, QStringLiteral("64")), first.path());
        QCOMPARE(saved.global_step(), int64_t(150));

        // Into two ps tasks, at the same last step: the chief restores,
        // splits W in two, and -- with nothing left to train -- checkpoints
        // what the ps tasks hold: the same numbers, partitioned anew.
        QTemporaryDir second;
        const QString name = QStringLiteral("model.ckpt-150.pckpt");
        QVERIFY(QFile::copy(first.filePath(name), second.filePath(name)));
        QString psOutput;
        const proto::Checkpoint roundTrip
            = train(2, 1, softmaxFlags(150, QStringLiteral("64")), second.path(), &psOutput);
        QVERIFY2(psOutput.contains(QStringLiteral("(restored from model.ckpt-150.pckpt) at global step 150; holds W "
                                                  "rows 0-31 of 64 (512 bytes), b (16 bytes)\n")),
                 qPrintable(psOutput));
        QCOMPARE(std::vector<int64_t>(roundTrip.signature().variables(0).slice_rows().begin(),
                                      roundTrip.signature().variables(0).slice_rows().end()),
                 (std::vector<int64_t>{32, 32}));
        QCOMPARE(roundTrip.global_step(), int64_t(150));
        const QString difference = differences(saved, roundTrip);
        QVERIFY2(difference.isEmpty(), qPrintable(difference));

        // Into one ps, whole, training on: it continues from step 150 to 250
        // and the model still classifies the blobs.
        QString onePs;
        const proto::Checkpoint continued = train(1, 2, softmaxFlags(250, QStringLiteral("64")), second.path(), &onePs);
        QVERIFY2(onePs.contains(QStringLiteral("(restored from model.ckpt-150.pckpt) at global step 150; holds W "
                                               "(1.0 KiB), b (16 bytes)\n")),
                 qPrintable(onePs));
        QCOMPARE(continued.global_step(), int64_t(250));
        QVERIFY(continued.variables(0).update_count() > saved.variables(0).update_count());
    }

    void syncWorkersTrainOneModelSplitOverTwoPsTasks()
    {
        QTemporaryDir dir;
        QStringList flags = softmaxFlags(300, QStringLiteral("64"));
        flags.replaceInStrings(QStringLiteral("--mode=async"), QStringLiteral("--mode=sync"));
        LocalCluster cluster(2, 3, flags, dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
        // Every sync step's gradient went to both halves of W (ps:1 applies
        // what ps:0 aggregated), and the workers print the accuracy.
        const auto matches
            = QRegularExpression(QStringLiteral("accuracy (\\d\\.\\d+)"))
                  .globalMatch(cluster.worker(0).output() + cluster.worker(1).output() + cluster.worker(2).output());
        double last = 0;
        for (auto it = matches; it.hasNext();)
            last = it.next().captured(1).toDouble();
        QVERIFY2(last > 0.9, qPrintable(cluster.worker(0).output()));
        const auto newest = CheckpointStore(dir.path().toStdString()).newestValid();
        QVERIFY(newest);
        QCOMPARE(newest->checkpoint.global_step(), int64_t(300));
        // Both halves of W learnt, not only ps:0's: each moved from the
        // values the chief started from by a comparable distance.
        const auto model = makeModel("softmax", 64, 4);
        const Eigen::VectorXf start = model->initialVariables(1).front().value;
        const auto &values = newest->checkpoint.variables(0).value().values();
        const Eigen::VectorXf end = Eigen::Map<const Eigen::VectorXf>(values.data(), values.size());
        QCOMPARE(end.size(), start.size());
        const Eigen::Index half = end.size() / 2;
        const float first = (end.head(half) - start.head(half)).norm();
        const float second = (end.tail(half) - start.tail(half)).norm();
        QVERIFY2(first > 0.1f && second > 0.5f * first && first > 0.5f * second,
                 qPrintable(QStringLiteral("W rows 0-31 moved %1, rows 32-63 moved %2").arg(first).arg(second)));
    }
};

QTEST_GUILESS_MAIN(TestPartitionedVariables)
#include "tst_partitioned_variables.moc"
