// What staleness costs, measured by real workers (--staleness_probe_every):
// the probes in the step log checked against a direct computation on the
// run's own parameters and the worker's own shard; sync's probes compare a
// gradient with itself; the probes reach the replay and TensorBoard.
#include "engine/dataset.h"
#include "engine/model.h"
#include "engine/staleness_cost.h"
#include "formats/event_file.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"
#include "support/cluster_harness.h"

#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <map>

using namespace parasync;
using namespace parasync::testing;

namespace {

// The step log's probes, with the step record each came in.
std::vector<QJsonObject> probeRecords(const QString &logdir)
{
    std::vector<QJsonObject> probes;
    for (const QJsonObject &o : readStepLog(logdir))
        if (o.value(QStringLiteral("type")).toString() == QStringLiteral("step")
            && o.contains(QStringLiteral("staleness_probe")))
            probes.push_back(o);
    return probes;
}

int64_t integer(const QJsonObject &o, const char *key)
{
    return int64_t(o.value(QLatin1String(key)).toDouble());
}

} // namespace

class TestStalenessProbe : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void inSyncEveryProbeComparesAGradientWithItself()
    {
        // A sync step closes only with every worker's gradient, so the
        // parameters a worker reads back before pushing are the ones it
        // computed at: the probe must say "the same gradient", exactly.
        QTemporaryDir dir;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--mode=sync"), QStringLiteral("--last_step=40"),
                              QStringLiteral("--staleness_probe_every=1")},
                             dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
        const auto probes = probeRecords(dir.path());
        QVERIFY2(probes.size() >= 70,
                 qPrintable(QString::number(probes.size()))); // 2 workers x 40 steps, less the last
        for (const QJsonObject &o : probes) {
            const QJsonObject probe = o.value(QStringLiteral("staleness_probe")).toObject();
            QCOMPARE(integer(probe, "fresh_step"), integer(o, "computed_from_step"));
            QCOMPARE(probe.value(QStringLiteral("cosine")).toDouble(), 1.0);
            QCOMPARE(probe.value(QStringLiteral("relative_error")).toDouble(), 0.0);
        }
    }

    void inAsyncTheProbesAreTheGradientsAtTheRunsOwnParameters()
    {
        // Four workers in async on the linear demo, each batch its whole
        // shard (batch 100 of 100 rows), so that the gradient a probe
        // compares is a function of the parameters alone -- and the step log
        // holds the parameters of every global step some gradient was
        // computed from.
        constexpr int kWorkers = 4;
        QTemporaryDir dir;
        LocalCluster cluster(1, kWorkers,
                             {QStringLiteral("--mode=async"), QStringLiteral("--last_step=400"),
                              QStringLiteral("--batch_size=100"), QStringLiteral("--samples_per_shard=100"),
                              QStringLiteral("--staleness_probe_every=1")},
                             dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));

        std::map<int64_t, Parameters> parametersAt;
        for (const QJsonObject &o : readStepLog(dir.path()))
            if (o.value(QStringLiteral("type")).toString() == QStringLiteral("step") && o.contains(QStringLiteral("w")))
                parametersAt[integer(o, "computed_from_step")]
                    = {Eigen::VectorXf::Constant(1, float(o.value(QStringLiteral("w")).toDouble())),
                       Eigen::VectorXf::Constant(1, float(o.value(QStringLiteral("b")).toDouble()))};
        const auto model = makeModel("linear", 1, 1);
        std::vector<Dataset> shards;
        for (int k = 0; k < kWorkers; ++k) {
            DatasetOptions options;
            options.spec = "linear";
            options.shardIndex = k;
            options.numShards = kWorkers;
            options.samplesPerShard = 100;
            options.seed = 1; // --seed's default
            shards.push_back(loadDataset(options));
        }

        const auto probes = probeRecords(dir.path());
        QVERIFY2(probes.size() >= 300, qPrintable(QString::number(probes.size())));
        int checked = 0, stale = 0;
        for (const QJsonObject &o : probes) {
            const QJsonObject probe = o.value(QStringLiteral("staleness_probe")).toObject();
            const int64_t from = integer(o, "computed_from_step");
            const int64_t fresh = integer(probe, "fresh_step");
            QVERIFY(fresh >= from);
            const auto staleParameters = parametersAt.find(from);
            const auto freshParameters = parametersAt.find(fresh);
            if (staleParameters == parametersAt.end() || freshParameters == parametersAt.end())
                continue; // no gradient of the run was computed at that step
            const Dataset &shard = shards[size_t(o.value(QStringLiteral("worker")).toInt())];
            Parameters staleGradient, freshGradient;
            model->lossAndGradient(staleParameters->second, shard, {}, &staleGradient);
            model->lossAndGradient(freshParameters->second, shard, {}, &freshGradient);
            const auto expected = compareGradients(staleGradient, freshGradient);
            QVERIFY(expected);
            const double cosine = probe.value(QStringLiteral("cosine")).toDouble();
            const double relativeError = probe.value(QStringLiteral("relative_error")).toDouble();
            // Summed in another order than the worker's shuffled batch: a few
            // float roundings apart, no more.
            QVERIFY2(std::abs(cosine - double(expected->cosine)) < 1e-4,
                     qPrintable(QStringLiteral("step %1 from %2: cosine %3, recomputed %4")
                                    .arg(fresh)
                                    .arg(from)
                                    .arg(cosine)
                                    .arg(double(expected->cosine))));
            QVERIFY2(std::abs(relativeError - double(expected->relativeError))
                         < 1e-3 * (1 + double(expected->relativeError)),
                     qPrintable(QStringLiteral("step %1 from %2: relative error %3, recomputed %4")
                                    .arg(fresh)
                                    .arg(from)
                                    .arg(relativeError)
                                    .arg(double(expected->relativeError))));
            ++checked;
            if (fresh > from && relativeError > 1e-3)
                ++stale;
        }
        // Most probes find both parameter sets in the log, and async makes
        // gradients that differ measurably from fresh ones.
        QVERIFY2(checked >= 100, qPrintable(QString::number(checked)));
        QVERIFY2(stale >= 20, qPrintable(QString::number(stale)));

        // The replay gathers them by steps apart; TensorBoard has their means.
        RunState state;
        replayRunDirectory(dir.path().toStdString(), &state);
        const RunSnapshot snapshot = state.snapshot();
        QCOMPARE(snapshot.stalenessProbes, int64_t(probes.size()));
        QVERIFY(snapshot.stalenessCost.size() >= 2);
        QCOMPARE(snapshot.stalenessCost.front().label, std::string("0"));
        const auto files = findEventFiles(dir.path().toStdString());
        QCOMPARE(int(files.size()), 1);
        bool tensorBoardHasIt = false;
        for (const auto &event : readEventFile(files.front()))
            for (const auto &value : event.summary().value())
                tensorBoardHasIt = tensorBoardHasIt || value.tag() == "staleness_cost/cosine";
        QVERIFY(tensorBoardHasIt);
    }

    void probingCanBeTurnedOff()
    {
        QTemporaryDir dir;
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--mode=async"), QStringLiteral("--last_step=300"),
                              QStringLiteral("--staleness_probe_every=0")},
                             dir.path());
        cluster.startAll();
        QString report;
        QVERIFY2(cluster.waitAllExitCleanly(&report), qPrintable(report));
        QCOMPARE(probeRecords(dir.path()).size(), size_t(0));
        QVERIFY(readStepLog(dir.path()).size() > 300);
    }
};

QTEST_GUILESS_MAIN(TestStalenessProbe)
#include "tst_staleness_probe.moc"
