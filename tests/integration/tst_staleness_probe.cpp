// What staleness costs, measured by real workers (--staleness_probe_every):
// every probe in the step log checked against a direct computation on the
// run's own parameters and the worker's own shard, in sync (always one
// update apart) and async; the probes reach the replay and TensorBoard.
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

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

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

// Runs the linear demo with every step probed, each batch the worker's
// whole shard (batch 100 of 100 rows), so that a probe's two gradients are
// functions of the parameters alone -- and checks every probe against the
// gradients recomputed here from the step log's parameters (each record
// carries those its gradient was computed from) and the worker's shard.
// Returns the probes' steps apart, or nothing when the run failed.
std::optional<std::vector<int64_t>> checkProbesOfARun(const QString &mode, int workers, const QString &logdir)
{
    LocalCluster cluster(1, workers,
                         {QStringLiteral("--mode=") + mode, QStringLiteral("--last_step=400"),
                          QStringLiteral("--batch_size=100"), QStringLiteral("--samples_per_shard=100"),
                          QStringLiteral("--staleness_probe_every=1")},
                         logdir);
    cluster.startAll();
    QString report;
    if (!cluster.waitAllExitCleanly(&report)) {
        qWarning("%s", qPrintable(report));
        return std::nullopt;
    }
    std::map<int64_t, Parameters> parametersAt;
    for (const QJsonObject &o : readStepLog(logdir))
        if (o.value(QStringLiteral("type")).toString() == QStringLiteral("step") && o.contains(QStringLiteral("w")))
            parametersAt[integer(o, "computed_from_step")]
                = {Eigen::VectorXf::Constant(1, float(o.value(QStringLiteral("w")).toDouble())),
                   Eigen::VectorXf::Constant(1, float(o.value(QStringLiteral("b")).toDouble()))};
    const auto model = makeModel("linear", 1, 1);
    std::vector<Dataset> shards;
    for (int k = 0; k < workers; ++k) {
        DatasetOptions options;
        options.spec = "linear";
        options.shardIndex = k;
        options.numShards = workers;
        options.samplesPerShard = 100;
        options.seed = 1; // --seed's default
        shards.push_back(loadDataset(options));
    }
    const auto probes = probeRecords(logdir);
    // Every push but each worker's first carries one (the last steps' may
    // come after --last_step and not be recorded).
    if (probes.size() < 300) {
        qWarning("only %zu probes in the step log", probes.size());
        return std::nullopt;
    }
    std::vector<int64_t> stepsApart;
    for (const QJsonObject &o : probes) {
        const QJsonObject probe = o.value(QStringLiteral("staleness_probe")).toObject();
        const int64_t stale = integer(probe, "stale_step");
        const int64_t fresh = integer(probe, "fresh_step");
        // The fresh parameters are the ones this push's gradient was computed at.
        if (fresh != integer(o, "computed_from_step") || stale > fresh || !parametersAt.contains(stale)) {
            qWarning("a probe of steps %lld to %lld in a record computed from %lld", (long long)stale, (long long)fresh,
                     (long long)integer(o, "computed_from_step"));
            return std::nullopt;
        }
        const Dataset &shard = shards[size_t(o.value(QStringLiteral("worker")).toInt())];
        Parameters staleGradient, freshGradient;
        model->lossAndGradient(parametersAt.at(stale), shard, {}, &staleGradient);
        model->lossAndGradient(parametersAt.at(fresh), shard, {}, &freshGradient);
        const auto expected = compareGradients(staleGradient, freshGradient);
        const double cosine = probe.value(QStringLiteral("cosine")).toDouble();
        const double relativeError = probe.value(QStringLiteral("relative_error")).toDouble();
        // Summed in another order than the worker's shuffled batch: a few
        // float roundings apart, no more.
        if (!expected || std::abs(cosine - double(expected->cosine)) > 1e-4
            || std::abs(relativeError - double(expected->relativeError))
                   > 1e-3 * (1 + double(expected->relativeError))) {
            qWarning("steps %lld to %lld: cosine %g and relative error %g, recomputed %g and %g", (long long)stale,
                     (long long)fresh, cosine, relativeError, expected ? double(expected->cosine) : -9.0,
                     expected ? double(expected->relativeError) : -9.0);
            return std::nullopt;
        }
        stepsApart.push_back(fresh - stale);
    }
    return stepsApart;
}

} // namespace

class TestStalenessProbe : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void inSyncEveryProbeIsOneStepApart()
    {
        // A sync step closes with every worker's gradient: the parameters a
        // worker's next answer brings are exactly one update on.
        QTemporaryDir dir;
        const auto stepsApart = checkProbesOfARun(QStringLiteral("sync"), 2, dir.path());
        QVERIFY(stepsApart);
        QVERIFY(std::all_of(stepsApart->begin(), stepsApart->end(), [](int64_t apart) { return apart == 1; }));
    }

    void inAsyncTheProbesAreTheGradientsAtTheRunsOwnParameters()
    {
        QTemporaryDir dir;
        const auto stepsApart = checkProbesOfARun(QStringLiteral("async"), 4, dir.path());
        QVERIFY(stepsApart);
        // Four workers in async: the others' updates come between a worker's
        // read and its next one.
        const auto further
            = std::count_if(stepsApart->begin(), stepsApart->end(), [](int64_t apart) { return apart > 1; });
        QVERIFY2(further >= 50, qPrintable(QString::number(further)));

        // The replay gathers them by steps apart; TensorBoard has their means.
        RunState state;
        replayRunDirectory(dir.path().toStdString(), &state);
        const RunSnapshot snapshot = state.snapshot();
        QCOMPARE(snapshot.stalenessProbes, int64_t(stepsApart->size()));
        QVERIFY(snapshot.stalenessCost.size() >= 2);
        QCOMPARE(snapshot.stalenessCost.front().label, std::string("1"));
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
