#include "base/error.h"
#include "engine/click_log.h"
#include "engine/dataset.h"
#include "engine/model.h"
#include "engine/sparse_models.h"
#include "engine/sparse_table.h"

#include <QTest>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace parasync;

namespace {

// A few samples of three fields over a handful of ids: ids recur across
// samples, and sample 2 has one id in two fields, so that a row's gradient
// must sum its occurrences.
Dataset tinyLog()
{
    Dataset data;
    data.fields = 3;
    data.ids = {11, 20, 30, 12, 20, 31, 11, 11, 32, 12, 21, 30, 11, 20, 31};
    data.features = Eigen::MatrixXf(5, 0);
    data.targets.resize(5, 1);
    data.targets << 1, 0, 1, 0, 1;
    data.numClasses = 2;
    data.description = "tiny log";
    return data;
}

uint64_t nextWord(uint64_t &state)
{
    state = state * 6364136223846793005u + 1442695040888963407u;
    return state >> 11;
}

// Rows of the ids, values uniform in [-scale, scale], plus an id no sample
// touches.
RowBlock rowsFor(std::vector<uint64_t> ids, int64_t width, float scale, uint64_t seed)
{
    ids.push_back(99);
    RowBlock block{ids, {}};
    for (size_t i = 0; i < ids.size() * size_t(width); ++i)
        block.values.push_back(scale * (float(nextWord(seed) % 2001) / 1000.0f - 1.0f));
    return block;
}

// A sparse table as a map from id to row, trained by adagrad (the rule of
// tf.train.AdagradOptimizer, accumulator from 0.1): what the ps tasks do,
// in-process.
struct TableInTest
{
    TableDeclaration declaration;
    std::map<uint64_t, std::pair<std::vector<float>, std::vector<float>>> rows; // values, accumulators

    // A new row: zeros, or N(0, initStddev) from (seed, id) by Box-Muller.
    std::vector<float> initial(uint64_t id) const
    {
        std::vector<float> row(size_t(declaration.rowWidth), 0.0f);
        uint64_t state = id * 0x9e3779b97f4a7c15u + declaration.seed;
        for (float &x : row) {
            const double u1 = (double(nextWord(state)) + 1.0) * 0x1.0p-53;
            const double u2 = double(nextWord(state)) * 0x1.0p-53;
            x = declaration.initStddev * float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
        }
        return row;
    }

    RowBlock pull(const std::vector<uint64_t> &ids, bool create)
    {
        RowBlock block{ids, {}};
        for (const uint64_t id : ids) {
            auto found = rows.find(id);
            if (found == rows.end() && create)
                found = rows.emplace(id, std::pair{initial(id), std::vector<float>(size_t(declaration.rowWidth), 0.1f)})
                            .first;
            const std::vector<float> row = found == rows.end() ? initial(id) : found->second.first;
            block.values.insert(block.values.end(), row.begin(), row.end());
        }
        return block;
    }

    void apply(const RowBlock &gradients, float learningRate)
    {
        const size_t width = size_t(declaration.rowWidth);
        for (size_t i = 0; i < gradients.ids.size(); ++i) {
            auto &[values, accumulators] = rows.at(gradients.ids[i]);
            for (size_t k = 0; k < width; ++k) {
                const float g = gradients.values[i * width + k];
                accumulators[k] += g * g;
                values[k] -= learningRate * g / std::sqrt(accumulators[k]);
            }
        }
    }
};

struct TrainingResult
{
    int steps = -1; // when the held-out AUC came within 0.01 of the best; -1: never
    float bestAuc = 0;
    float auc = 0;
    float loss = 0;
};

} // namespace

class TestSparseModels : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void namesTablesAndVariables();
    void makeModelDispatchesSparseNames();
    void touchedIdsAreTheBatchsDistinctIdsAscending();
    void gradientsMatchFiniteDifferences_data();
    void gradientsMatchFiniteDifferences();
    void callerMistakesAreRefused();
    void heldOutMetricsAreLogLossAndAuc();
    void trainingReachesTheGeneratingModelsAuc_data();
    void trainingReachesTheGeneratingModelsAuc();

private:
    static TrainingResult train(const std::string &modelName, float learningRate);
};

void TestSparseModels::namesTablesAndVariables()
{
    const auto lr = makeSparseModel("sparse_lr", 10);
    QCOMPARE(lr->name(), std::string("sparse_lr"));
    QCOMPARE(lr->featureDim(), 10);
    QCOMPARE(lr->outputDim(), 1);
    QVERIFY(!lr->classifies());
    QVERIFY(std::isnan(lr->accuracy({Eigen::VectorXf::Zero(1)}, tinyLog())));
    const std::vector<Variable> variables = lr->initialVariables(3);
    QCOMPARE(variables.size(), size_t(1));
    QCOMPARE(variables[0].name, std::string("bias"));
    QCOMPARE(variables[0].shape, std::vector<int64_t>{1});
    QCOMPARE(variables[0].value[0], 0.0f);
    const std::vector<TableDeclaration> lrTables = lr->tables(7);
    QCOMPARE(lrTables.size(), size_t(1));
    QCOMPARE(lrTables[0].name, std::string("weights"));
    QCOMPARE(lrTables[0].rowWidth, 1);
    QCOMPARE(lrTables[0].initStddev, 0.0f);
    QCOMPARE(lrTables[0].idLimit, uint64_t(0));
    QCOMPARE(lrTables[0].seed, uint64_t(7));

    const auto fm = makeSparseModel("fm", 4);
    QCOMPARE(fm->name(), std::string("fm:8"));
    const std::vector<TableDeclaration> fmTables = fm->tables(7);
    QCOMPARE(fmTables.size(), size_t(2));
    QCOMPARE(fmTables[0].name, std::string("weights"));
    QCOMPARE(fmTables[1].name, std::string("factors"));
    QCOMPARE(fmTables[1].rowWidth, kDefaultFactorizationMachineRank);
    QCOMPARE(fmTables[1].initStddev, 0.01f);
    QCOMPARE(fmTables[1].seed, uint64_t(7));
    QCOMPARE(makeSparseModel("fm:3", 4)->name(), std::string("fm:3"));
    QCOMPARE(makeSparseModel("fm:3", 4)->tables(0)[1].rowWidth, 3);
}

void TestSparseModels::makeModelDispatchesSparseNames()
{
    QCOMPARE(makeModel("sparse_lr", 10, 2)->name(), std::string("sparse_lr"));
    QCOMPARE(makeModel("fm", 10, 2)->name(), std::string("fm:8"));
    QCOMPARE(makeModel("fm:16", 10, 2)->name(), std::string("fm:16"));
    QVERIFY(isSparseModelName("sparse_lr"));
    QVERIFY(isSparseModelName("fm:2"));
    QVERIFY(!isSparseModelName("mf"));
    QVERIFY(!isSparseModelName("linear"));
    // Their labels are 0/1 floats, not class indices to check against a count.
    QVERIFY(!isClassifierName("sparse_lr"));
    QVERIFY(!isClassifierName("fm"));
    const std::vector<std::string> names = modelNames();
    QVERIFY(std::find(names.begin(), names.end(), "sparse_lr") != names.end());
    QVERIFY(std::find(names.begin(), names.end(), "fm") != names.end());
    for (const char *bad : {"fm:0", "fm:x", "fm:", "fm:1025"})
        QVERIFY_THROWS_EXCEPTION(InputError, makeModel(bad, 10, 2));
    QVERIFY_THROWS_EXCEPTION(InputError, isSparseModelName("fm:0"));
    QVERIFY_THROWS_EXCEPTION(InputError, makeSparseModel("sparse_lr", 0));
    QVERIFY_THROWS_EXCEPTION(InputError, makeSparseModel("lr", 10));
}

void TestSparseModels::touchedIdsAreTheBatchsDistinctIdsAscending()
{
    const Dataset data = tinyLog();
    const auto lr = makeSparseModel("sparse_lr", 3);
    const auto all = lr->touchedIds(data, {});
    QCOMPARE(all.size(), size_t(1));
    QCOMPARE(all[0], (std::vector<uint64_t>{11, 12, 20, 21, 30, 31, 32}));
    QCOMPARE(lr->touchedIds(data, {2, 2, 4})[0], (std::vector<uint64_t>{11, 20, 31, 32}));
    const auto fm = makeSparseModel("fm:2", 3)->touchedIds(data, {1});
    QCOMPARE(fm.size(), size_t(2));
    QCOMPARE(fm[0], (std::vector<uint64_t>{12, 20, 31}));
    QCOMPARE(fm[1], fm[0]);
}

void TestSparseModels::gradientsMatchFiniteDifferences_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<std::vector<int64_t>>("rows");
    QTest::newRow("sparse_lr, all samples") << QStringLiteral("sparse_lr") << std::vector<int64_t>{};
    QTest::newRow("sparse_lr, a batch with a sample twice")
        << QStringLiteral("sparse_lr") << std::vector<int64_t>{2, 0, 2};
    QTest::newRow("fm:3, all samples") << QStringLiteral("fm:3") << std::vector<int64_t>{};
    QTest::newRow("fm:3, a batch with a sample twice") << QStringLiteral("fm:3") << std::vector<int64_t>{4, 2, 4, 1};
}

void TestSparseModels::gradientsMatchFiniteDifferences()
{
    QFETCH(QString, model);
    QFETCH(std::vector<int64_t>, rows);
    const Dataset data = tinyLog();
    const auto m = makeSparseModel(model.toStdString(), 3);
    const std::vector<std::vector<uint64_t>> ids = m->touchedIds(data, {});
    const std::vector<TableDeclaration> tables = m->tables(0);
    Parameters params{Eigen::VectorXf::Constant(1, 0.3f)};
    RowBlocks tableRows;
    for (size_t t = 0; t < tables.size(); ++t)
        tableRows.push_back(rowsFor(ids[t], tables[t].rowWidth, t == 0 ? 0.8f : 0.5f, 17 + t));

    Parameters gradient;
    RowBlocks rowGradients;
    const float loss = m->lossAndGradient(params, tableRows, data, rows, &gradient, &rowGradients);
    QCOMPARE(m->lossAndGradient(params, tableRows, data, rows, nullptr, nullptr), loss);
    QCOMPARE(gradient.size(), size_t(1));
    QCOMPARE(rowGradients.size(), tables.size());

    const double h = 1e-2;
    const auto lossAt = [&](float *value, double delta) {
        const float saved = *value;
        *value = float(double(saved) + delta);
        const double at = m->lossAndGradient(params, tableRows, data, rows, nullptr, nullptr);
        *value = saved;
        return at;
    };
    const auto numeric = [&](float *value) { return (lossAt(value, h) - lossAt(value, -h)) / (2 * h); };
    QVERIFY(std::abs(numeric(&params[0][0]) - gradient[0][0]) < 1e-3);
    int checked = 0;
    for (size_t t = 0; t < tableRows.size(); ++t) {
        QCOMPARE(rowGradients[t].ids, tableRows[t].ids);
        QCOMPARE(rowGradients[t].values.size(), tableRows[t].values.size());
        for (size_t i = 0; i < tableRows[t].values.size(); ++i) {
            const double expected = numeric(&tableRows[t].values[i]);
            QVERIFY2(std::abs(expected - rowGradients[t].values[i]) < 1e-3,
                     qPrintable(QStringLiteral("table %1 value %2: analytic %3, numeric %4")
                                    .arg(t)
                                    .arg(i)
                                    .arg(rowGradients[t].values[i])
                                    .arg(expected)));
            ++checked;
        }
        // Id 99, which no sample has, gets a zero row.
        const size_t width = size_t(tables[t].rowWidth);
        for (size_t k = 0; k < width; ++k)
            QCOMPARE(rowGradients[t].values[rowGradients[t].values.size() - width + k], 0.0f);
    }
    QVERIFY(checked > 7);

    // The loss is the mean log loss of the predictions (all samples).
    if (rows.empty()) {
        const std::vector<float> p = m->predictions(params, tableRows, data);
        QCOMPARE(p.size(), size_t(5));
        const std::vector<float> labels(data.targets.data(), data.targets.data() + 5);
        QVERIFY(std::abs(logLoss(p, labels) - loss) < 1e-5f);
    }
}

void TestSparseModels::callerMistakesAreRefused()
{
    const Dataset data = tinyLog();
    const auto m = makeSparseModel("fm:2", 3);
    const Parameters params{Eigen::VectorXf::Zero(1)};
    const auto ids = m->touchedIds(data, {});
    RowBlocks tableRows{rowsFor(ids[0], 1, 0.1f, 1), rowsFor(ids[1], 2, 0.1f, 2)};
    Parameters gradient;
    RowBlocks rowGradients;
    QVERIFY(std::isfinite(m->lossAndGradient(params, tableRows, data, {}, &gradient, &rowGradients)));

    // Without rows it cannot compute at all.
    try {
        m->loss(params, data);
        QFAIL("the dense loss was computed");
    } catch (const InputError &e) {
        QVERIFY(std::string(e.what()).find("fm:2 needs its table rows") == 0);
    }
    // A row the batch needs is missing: the caller's bug, said so.
    RowBlocks missing = tableRows;
    missing[1].ids.erase(missing[1].ids.begin() + 2);
    missing[1].values.resize(missing[1].values.size() - 2);
    try {
        m->lossAndGradient(params, missing, data, {}, &gradient, &rowGradients);
        QFAIL("a missing row went unnoticed");
    } catch (const InputError &e) {
        QVERIFY(std::string(e.what()).find("needs row 20 of table 'factors'") != std::string::npos);
        QVERIFY(std::string(e.what()).find("a bug in the caller") != std::string::npos);
    }
    // Rows of a batch that does not touch id 20 need not hold it.
    QVERIFY(std::isfinite(m->lossAndGradient(params, missing, data, {3}, &gradient, &rowGradients)));
    QVERIFY_THROWS_EXCEPTION(InputError, m->lossAndGradient(params, {tableRows[0]}, data, {}, nullptr, nullptr));
    RowBlocks shortRows = tableRows;
    shortRows[1].values.pop_back();
    QVERIFY_THROWS_EXCEPTION(InputError, m->lossAndGradient(params, shortRows, data, {}, nullptr, nullptr));

    // Numeric data, data of another shape, labels that are not 0 or 1.
    Dataset numeric;
    numeric.features = Eigen::MatrixXf::Ones(4, 3);
    numeric.targets = Eigen::MatrixXf::Zero(4, 1);
    QVERIFY_THROWS_EXCEPTION(InputError, m->touchedIds(numeric, {}));
    QVERIFY_THROWS_EXCEPTION(InputError, makeSparseModel("fm:2", 4)->touchedIds(data, {}));
    Dataset badLabel = data;
    badLabel.targets(1, 0) = 2.0f;
    QVERIFY_THROWS_EXCEPTION(InputError, m->lossAndGradient(params, tableRows, badLabel, {}, nullptr, nullptr));

    // And dense models refuse categorical data rather than read its empty features.
    QVERIFY_THROWS_EXCEPTION(
        InputError, makeModel("linear", 3, 1)->loss({Eigen::VectorXf::Zero(3), Eigen::VectorXf::Zero(1)}, data));
}

void TestSparseModels::heldOutMetricsAreLogLossAndAuc()
{
    const Dataset data = tinyLog();
    const auto m = makeSparseModel("sparse_lr", 3);
    QCOMPARE(heldOutMetricNames(*m), (std::vector<std::string>{"heldout_loss", "heldout_auc"}));
    // Weights that rank samples 0, 2, 4 (clicks) above 1 and 3.
    RowBlocks rows{{{11, 12, 20, 21, 30, 31, 32}, {1.0f, -1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f}}};
    const Parameters params{Eigen::VectorXf::Constant(1, -0.2f)};
    const std::vector<float> metrics = heldOutMetrics(*m, params, rows, data);
    QCOMPARE(metrics.size(), size_t(2));
    const std::vector<float> p = m->predictions(params, rows, data);
    const std::vector<float> labels(data.targets.data(), data.targets.data() + 5);
    QCOMPARE(metrics[0], logLoss(p, labels));
    QCOMPARE(metrics[1], 1.0f);
    QVERIFY_THROWS_EXCEPTION(InputError, heldOutMetrics(*m, params, data));

    // A dense model keeps its metrics, with or without rows.
    const auto linear = makeModel("linear", 1, 1);
    QCOMPARE(heldOutMetricNames(*linear), std::vector<std::string>{"heldout_loss"});
    QVERIFY(linear->tables(0).empty());
    QVERIFY(linear->predictions({}, {}, data).empty());
    Dataset line;
    line.features = Eigen::MatrixXf::Ones(2, 1);
    line.targets = Eigen::MatrixXf::Constant(2, 1, 3.0f);
    const Parameters wb{Eigen::VectorXf::Constant(1, 1.0f), Eigen::VectorXf::Constant(1, 1.0f)};
    QCOMPARE(heldOutMetrics(*linear, wb, {}, line), heldOutMetrics(*linear, wb, line));
    RowBlocks cleared{RowBlock{{1}, {1.0f}}};
    Parameters g;
    QCOMPARE(linear->lossAndGradient(wb, {}, line, {}, &g, &cleared), 1.0f);
    QVERIFY(cleared.empty());
}

TrainingResult TestSparseModels::train(const std::string &modelName, float learningRate)
{
    // Two workers' shards of the default click log, and a held-out draw
    // of the shard index no worker has (--eval_dataset=clicklog).
    DatasetOptions options;
    options.spec = "clicklog";
    options.numShards = 2;
    options.samplesPerShard = 20000;
    options.seed = 1;
    std::vector<Dataset> shards;
    for (int k = 0; k < 2; ++k) {
        options.shardIndex = k;
        shards.push_back(loadDataset(options));
    }
    const Dataset heldOut = loadHeldOutData(options, "clicklog");
    const std::vector<float> labels(heldOut.targets.data(), heldOut.targets.data() + heldOut.size());
    TrainingResult result;
    result.bestAuc = areaUnderRoc(heldOut.trueProbability, labels);

    const auto model = makeModel(modelName, shards[0].featureDim(), 2);
    Parameters params{model->initialVariables(1)[0].value};
    float biasAccumulator = 0.1f;
    std::vector<TableInTest> tables;
    for (const TableDeclaration &declaration : model->tables(1))
        tables.push_back({declaration, {}});

    constexpr int batchSize = 100;
    constexpr int maxSteps = 3000;
    constexpr int evaluateEvery = 250;
    uint64_t state = 2024;
    for (int step = 1; step <= maxSteps; ++step) {
        // Alternate workers, as two asynchronous workers at one speed would.
        const Dataset &shard = shards[size_t(step % 2)];
        std::vector<int64_t> batch(batchSize);
        for (int64_t &row : batch)
            row = int64_t(nextWord(state) % uint64_t(shard.size()));
        const std::vector<std::vector<uint64_t>> ids = model->touchedIds(shard, batch);
        RowBlocks tableRows;
        for (size_t t = 0; t < tables.size(); ++t)
            tableRows.push_back(tables[t].pull(ids[t], true));
        Parameters gradient;
        RowBlocks rowGradients;
        model->lossAndGradient(params, tableRows, shard, batch, &gradient, &rowGradients);
        biasAccumulator += gradient[0][0] * gradient[0][0];
        params[0][0] -= learningRate * gradient[0][0] / std::sqrt(biasAccumulator);
        for (size_t t = 0; t < tables.size(); ++t)
            tables[t].apply(rowGradients[t], learningRate);

        if (step % evaluateEvery != 0)
            continue;
        // An evaluation's lookup: rows never trained on are their initial values.
        const std::vector<std::vector<uint64_t>> heldOutIds = model->touchedIds(heldOut, {});
        RowBlocks heldOutRows;
        for (size_t t = 0; t < tables.size(); ++t)
            heldOutRows.push_back(tables[t].pull(heldOutIds[t], false));
        const std::vector<float> metrics = heldOutMetrics(*model, params, heldOutRows, heldOut);
        result.loss = metrics[0];
        result.auc = metrics[1];
        if (result.bestAuc - result.auc <= 0.01f) {
            result.steps = step;
            break;
        }
    }
    qInfo("%s, adagrad lr %.2f, batch %d: held-out AUC %.4f (log loss %.4f) after %d steps; the generating model's "
          "%.4f; %zu rows of %s",
          modelName.c_str(), double(learningRate), batchSize, double(result.auc), double(result.loss), result.steps,
          double(result.bestAuc), tables[0].rows.size(), tables[0].declaration.name.c_str());
    return result;
}

void TestSparseModels::trainingReachesTheGeneratingModelsAuc_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<float>("learningRate");
    QTest::newRow("sparse_lr") << QStringLiteral("sparse_lr") << 0.5f;
    // Factors fit noise at the rate that suits the weights: the data has no
    // interactions to find.
    QTest::newRow("fm") << QStringLiteral("fm") << 0.2f;
}

void TestSparseModels::trainingReachesTheGeneratingModelsAuc()
{
    QFETCH(QString, model);
    QFETCH(float, learningRate);
    const TrainingResult result = train(model.toStdString(), learningRate);
    QVERIFY2(
        result.steps > 0,
        qPrintable(QStringLiteral("held-out AUC %1, the generating model's %2").arg(result.auc).arg(result.bestAuc)));
    QVERIFY(result.auc < result.bestAuc + 0.005f);
}

QTEST_GUILESS_MAIN(TestSparseModels)
#include "tst_sparse_models.moc"
