#include "base/error.h"
#include "engine/dataset.h"
#include "engine/low_rank.h"
#include "engine/model.h"
#include "engine/variable_trajectory.h"

#include <QTest>

#include <cmath>
#include <random>

using namespace parasync;

namespace {

Parameters valuesOf(const std::vector<Variable> &variables)
{
    Parameters params;
    for (const Variable &variable : variables)
        params.push_back(variable.value);
    return params;
}

Parameters randomParameters(const Model &model, uint64_t seed, float scale)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-scale, scale);
    Parameters params = valuesOf(model.initialVariables(seed));
    for (Eigen::VectorXf &p : params)
        p = p.unaryExpr([&](float) { return uniform(rng); });
    return params;
}

Dataset regressionData(uint64_t seed, int64_t samples, int64_t features)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Dataset data;
    data.features = Eigen::MatrixXf(samples, features).unaryExpr([&](float) { return normal(rng); });
    Eigen::VectorXf trueW = Eigen::VectorXf::LinSpaced(features, -1.5f, 3.0f);
    data.targets = (data.features * trueW).array() + 4.0f;
    data.description = "test regression data";
    return data;
}

Dataset tinyData(std::initializer_list<std::initializer_list<float>> features, std::initializer_list<float> targets,
                 int64_t numClasses = 0)
{
    Dataset data;
    data.features.resize(Eigen::Index(features.size()), Eigen::Index(features.begin()->size()));
    Eigen::Index row = 0;
    for (const auto &r : features) {
        Eigen::Index col = 0;
        for (const float x : r)
            data.features(row, col++) = x;
        ++row;
    }
    data.targets.resize(Eigen::Index(targets.size()), 1);
    row = 0;
    for (const float t : targets)
        data.targets(row++, 0) = t;
    data.numClasses = numClasses;
    data.description = "tiny test data";
    return data;
}

void verifyClose(float actual, double expected, double tolerance, const char *what)
{
    QVERIFY2(std::abs(double(actual) - expected) <= tolerance,
             qPrintable(QStringLiteral("%1: got %2, expected %3 (tolerance %4)")
                            .arg(QLatin1String(what))
                            .arg(double(actual), 0, 'g', 9)
                            .arg(expected, 0, 'g', 9)
                            .arg(tolerance)));
}

// Plain gradient descent over the whole dataset, as the seeds' GradientDescentOptimizer.
Parameters gradientDescent(const Model &model, Parameters params, const Dataset &data, float learningRate, int steps)
{
    Parameters gradient;
    for (int step = 0; step < steps; ++step) {
        model.lossAndGradient(params, data, {}, &gradient);
        for (size_t i = 0; i < params.size(); ++i)
            params[i] -= learningRate * gradient[i];
    }
    return params;
}

} // namespace

class TestModels : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void gradientMatchesFiniteDifferences_data();
    void gradientMatchesFiniteDifferences();
    void linearLossMatchesHandComputedCase();
    void softmaxLossMatchesHandComputedCase();
    void softmaxLossStaysFiniteForHugeLogits();
    void rowsSelectTheBatch();
    void initialVariablesHaveTheSeedsShapesAndScale();
    void linearGradientDescentRecoversSlopeAndIntercept();
    void softmaxGradientDescentClassifiesBlobs();
    void mlpLearnsWhatNoLinearClassifierCan();
    void factorizationFallsToTheNoiseFloorOnEntriesItNeverSaw();
    void linearAccuracyIsNotANumber();
    void makeModelRejectsBadInput_data();
    void makeModelRejectsBadInput();
    void dataOfTheWrongShapeIsRejected();
    void variableTrajectoryMeasuresNormDistanceAndUpdatePerStep();
};

void TestModels::gradientMatchesFiniteDifferences_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("features");
    QTest::addColumn<int>("classes");
    QTest::addColumn<bool>("subset");

    QTest::newRow("linear, 1 feature") << QStringLiteral("linear") << 1 << 1 << false;
    QTest::newRow("linear, 4 features") << QStringLiteral("linear") << 4 << 1 << false;
    QTest::newRow("linear, 4 features, mini-batch") << QStringLiteral("linear") << 4 << 1 << true;
    QTest::newRow("softmax, 2 features, 3 classes") << QStringLiteral("softmax") << 2 << 3 << false;
    QTest::newRow("softmax, 5 features, 4 classes, mini-batch") << QStringLiteral("softmax") << 5 << 4 << true;
    QTest::newRow("mlp:5, 3 features, 4 classes") << QStringLiteral("mlp:5") << 3 << 4 << false;
    QTest::newRow("mlp:5, 3 features, 4 classes, mini-batch") << QStringLiteral("mlp:5") << 3 << 4 << true;
    // A 6 x 5 matrix of rank 2 (its row and column indices are the features).
    QTest::newRow("mf:2 on a 6 x 5 matrix") << QStringLiteral("mf:2") << 2 << 1 << false;
    QTest::newRow("mf:3 on a 6 x 5 matrix, mini-batch") << QStringLiteral("mf:3") << 2 << 1 << true;
}

void TestModels::gradientMatchesFiniteDifferences()
{
    QFETCH(QString, model);
    QFETCH(int, features);
    QFETCH(int, classes);
    QFETCH(bool, subset);

    const bool factorization = model.startsWith(QLatin1String("mf"));
    const bool softmax = !factorization && model != QLatin1String("linear"); // a classifier
    const Dataset data = factorization ? makeLowRankShard(7, 0, 40, LowRankSpec{6, 5, 2, 0.1})
                         : softmax     ? makeBlobs(7, 40, classes, features)
                                       : regressionData(7, 40, features);
    const auto m = makeModel(model.toStdString(), features, softmax ? classes : 1, data.indexSizes);
    const Parameters params = randomParameters(*m, 3, softmax ? 0.5f : 2.0f);
    const std::vector<int64_t> rows = subset ? std::vector<int64_t>{3, 17, 17, 0, 39, 25} : std::vector<int64_t>{};

    Parameters gradient;
    m->lossAndGradient(params, data, rows, &gradient);
    QCOMPARE(gradient.size(), params.size());

    // Central differences are exact for the quadratic MSE and O(h^2) for the
    // cross-entropy; with float32 losses of order 10, a step of 1e-2 keeps the
    // rounding error (~1e-6 * loss / h) near 1e-3, so 1% (absolute 5e-3 near 0) is a real check.
    constexpr float h = 1e-2f;
    for (size_t v = 0; v < params.size(); ++v) {
        QCOMPARE(gradient[v].size(), params[v].size());
        for (Eigen::Index i = 0; i < params[v].size(); ++i) {
            Parameters plus = params;
            Parameters minus = params;
            plus[v][i] += h;
            minus[v][i] -= h;
            const double numeric = (double(m->lossAndGradient(plus, data, rows, nullptr))
                                    - double(m->lossAndGradient(minus, data, rows, nullptr)))
                                   / (2.0 * h);
            const double analytic = gradient[v][i];
            QVERIFY2(std::abs(numeric - analytic) <= 5e-3 + 1e-2 * std::abs(analytic),
                     qPrintable(QStringLiteral("variable %1 element %2: analytic %3, numeric %4")
                                    .arg(v)
                                    .arg(i)
                                    .arg(analytic)
                                    .arg(numeric)));
        }
    }
}

void TestModels::linearLossMatchesHandComputedCase()
{
    // x = (1, 2), y = (3, 5), w = 1, b = 0.5:
    //   pred = (1.5, 2.5), y - pred = (1.5, 2.5), loss = (2.25 + 6.25) / 2 = 4.25
    //   dL/dpred = 2 (pred - y) / 2 = (-1.5, -2.5)
    //   dL/dw = 1 * -1.5 + 2 * -2.5 = -6.5, dL/db = -1.5 - 2.5 = -4
    const Dataset data = tinyData({{1.0f}, {2.0f}}, {3.0f, 5.0f});
    const auto m = makeModel("linear", 1, 1);
    const Parameters params{Eigen::VectorXf::Constant(1, 1.0f), Eigen::VectorXf::Constant(1, 0.5f)};
    Parameters gradient;
    verifyClose(m->lossAndGradient(params, data, {}, &gradient), 4.25, 1e-6, "loss");
    verifyClose(gradient[0][0], -6.5, 1e-6, "dL/dw");
    verifyClose(gradient[1][0], -4.0, 1e-6, "dL/db");
    verifyClose(m->loss(params, data), 4.25, 1e-6, "loss()");

    // Two features: x = (1, 2), w = (1, -1), b = 0, y = 0: pred = 1 - 2 = -1, loss = 1,
    //   dL/dpred = 2 (pred - y) = -2, dL/dw = -2 x = (-2, -4), dL/db = -2
    const Dataset two = tinyData({{1.0f, 2.0f}}, {0.0f});
    const auto m2 = makeModel("linear", 2, 1);
    Eigen::VectorXf w(2);
    w << 1.0f, -1.0f;
    verifyClose(m2->lossAndGradient({w, Eigen::VectorXf::Zero(1)}, two, {}, &gradient), 1.0, 1e-6, "loss");
    verifyClose(gradient[0][0], -2.0, 1e-6, "dL/dw0");
    verifyClose(gradient[0][1], -4.0, 1e-6, "dL/dw1");
    verifyClose(gradient[1][0], -2.0, 1e-6, "dL/db");
}

void TestModels::softmaxLossMatchesHandComputedCase()
{
    // x = 1 for both rows, W = (0, ln 3), b = 0: logits (0, ln 3), p = (1/4, 3/4).
    //   row 0 (class 0): -ln(1/4) = ln 4;  row 1 (class 1): -ln(3/4)
    //   loss = (ln 4 + ln 4/3) / 2 = 0.8369882
    //   p - onehot: row 0 (-3/4, 3/4), row 1 (1/4, -1/4); mean (-1/4, 1/4)
    //   dL/dW = x * mean = (-0.25, 0.25), dL/db = (-0.25, 0.25)
    const Dataset data = tinyData({{1.0f}, {1.0f}}, {0.0f, 1.0f}, 2);
    const auto m = makeModel("softmax", 1, 2);
    Eigen::VectorXf w(2);
    w << 0.0f, std::log(3.0f);
    Parameters gradient;
    const double expected = (std::log(4.0) + std::log(4.0 / 3.0)) / 2.0;
    verifyClose(m->lossAndGradient({w, Eigen::VectorXf::Zero(2)}, data, {}, &gradient), expected, 1e-6, "loss");
    verifyClose(gradient[0][0], -0.25, 1e-6, "dL/dW00");
    verifyClose(gradient[0][1], 0.25, 1e-6, "dL/dW01");
    verifyClose(gradient[1][0], -0.25, 1e-6, "dL/db0");
    verifyClose(gradient[1][1], 0.25, 1e-6, "dL/db1");

    // All-zero parameters give every class 1/K, so the loss is ln K whatever the labels.
    const auto three = makeModel("softmax", 2, 3);
    const Dataset blobs = makeBlobs(1, 30, 3, 2);
    verifyClose(three->loss({Eigen::VectorXf::Zero(6), Eigen::VectorXf::Zero(3)}, blobs), std::log(3.0), 1e-6,
                "uniform loss");

    // Row-major W: W[i][j] at i * classes + j. Only feature 1 (x = 2) pushes class 2 (W[1][2] = 1).
    const Dataset one = tinyData({{0.0f, 2.0f}}, {2.0f}, 3);
    Eigen::VectorXf rowMajor = Eigen::VectorXf::Zero(6);
    rowMajor[1 * 3 + 2] = 1.0f;
    // logits (0, 0, 2): loss = ln(2 + e^2) - 2
    verifyClose(three->loss({rowMajor, Eigen::VectorXf::Zero(3)}, one), std::log(2.0 + std::exp(2.0)) - 2.0, 1e-6,
                "row-major loss");
}

void TestModels::softmaxLossStaysFiniteForHugeLogits()
{
    // logits (1000, 0), class 1: loss = 1000 exactly; a naive exp() would overflow.
    const Dataset data = tinyData({{1.0f}}, {1.0f}, 2);
    const auto m = makeModel("softmax", 1, 2);
    Eigen::VectorXf w(2);
    w << 1000.0f, 0.0f;
    Parameters gradient;
    verifyClose(m->lossAndGradient({w, Eigen::VectorXf::Zero(2)}, data, {}, &gradient), 1000.0, 1e-3, "loss");
    QVERIFY(gradient[0].allFinite());
    verifyClose(gradient[0][0], 1.0, 1e-6, "dL/dW00");
    verifyClose(gradient[0][1], -1.0, 1e-6, "dL/dW01");
}

void TestModels::rowsSelectTheBatch()
{
    const Dataset data = regressionData(5, 10, 3);
    const std::vector<int64_t> rows{8, 2, 2, 5};
    Dataset picked;
    picked.features = data.features(rows, Eigen::all);
    picked.targets = data.targets(rows, Eigen::all);

    const auto m = makeModel("linear", 3, 1);
    const Parameters params = randomParameters(*m, 11, 1.0f);
    Parameters fromRows;
    Parameters fromPicked;
    const float lossRows = m->lossAndGradient(params, data, rows, &fromRows);
    const float lossPicked = m->lossAndGradient(params, picked, {}, &fromPicked);
    QCOMPARE(lossRows, lossPicked);
    QVERIFY(fromRows[0].isApprox(fromPicked[0]));
    QVERIFY(fromRows[1].isApprox(fromPicked[1]));
    QVERIFY(lossRows != m->loss(params, data));

    QVERIFY_THROWS_EXCEPTION(std::out_of_range, m->lossAndGradient(params, data, {10}, nullptr));
}

void TestModels::initialVariablesHaveTheSeedsShapesAndScale()
{
    const auto linear = makeModel("linear", 3, 1);
    const std::vector<Variable> lv = linear->initialVariables(42);
    QCOMPARE(lv.size(), size_t(2));
    QCOMPARE(lv[0].name, std::string("w"));
    QCOMPARE(lv[0].shape, std::vector<int64_t>{3});
    QCOMPARE(lv[1].name, std::string("b"));
    QCOMPARE(lv[1].shape, std::vector<int64_t>{1});
    QCOMPARE(lv[0].value, linear->initialVariables(42)[0].value);
    QVERIFY(lv[0].value != linear->initialVariables(43)[0].value);

    // Truncated normal: never beyond two standard deviations, but not all tiny either.
    const auto wide = makeModel("linear", 2000, 1);
    const Eigen::VectorXf w = wide->initialVariables(1)[0].value;
    QVERIFY(w.cwiseAbs().maxCoeff() <= 2.0f);
    QVERIFY(w.cwiseAbs().maxCoeff() > 1.5f);
    verifyClose(w.mean(), 0.0, 0.1, "mean");
    // The standard deviation of a normal truncated at 2 sigma is 0.880.
    verifyClose(std::sqrt(w.squaredNorm() / float(w.size())), 0.880, 0.05, "stddev");

    const auto softmax = makeModel("softmax", 4, 3);
    const std::vector<Variable> sv = softmax->initialVariables(42);
    QCOMPARE(sv.size(), size_t(2));
    QCOMPARE(sv[0].name, std::string("W"));
    QCOMPARE(sv[0].shape, (std::vector<int64_t>{4, 3}));
    QCOMPARE(sv[0].value.size(), 12);
    QVERIFY(sv[0].value.cwiseAbs().maxCoeff() <= 0.02f);
    QVERIFY(!sv[0].value.isZero());
    QCOMPARE(sv[1].name, std::string("b"));
    QCOMPARE(sv[1].shape, std::vector<int64_t>{3});
    QVERIFY(sv[1].value.isZero());
}

void TestModels::linearGradientDescentRecoversSlopeAndIntercept()
{
    const Dataset data = makeLinearData(2024, 1000);
    const auto m = makeModel("linear", 1, 1);
    const Parameters initial = valuesOf(m->initialVariables(2024));
    const float before = m->loss(initial, data);
    const Parameters trained = gradientDescent(*m, initial, data, 0.1f, 500);
    verifyClose(trained[0][0], 2.0, 0.1, "w");
    verifyClose(trained[1][0], 10.0, 0.1, "b");
    // What is left is the noise: 0.33^2 = 0.109.
    verifyClose(m->loss(trained, data), 0.109, 0.02, "final loss");
    QVERIFY(before > 10.0f);
}

void TestModels::softmaxGradientDescentClassifiesBlobs()
{
    const Dataset train = makeBlobsShard(9, 0, 1000, 10, 2);
    const Dataset test = makeBlobsShard(9, 1, 1000, 10, 2);
    const auto m = makeModel("softmax", 2, 10);
    const Parameters initial = valuesOf(m->initialVariables(9));
    const Parameters trained = gradientDescent(*m, initial, train, 0.05f, 3000);
    const float accuracy = m->accuracy(trained, test);
    QVERIFY2(accuracy > 0.9f, qPrintable(QStringLiteral("held-out accuracy %1").arg(accuracy)));
    QVERIFY(m->loss(trained, test) < m->loss(initial, test));
    QVERIFY(m->accuracy(initial, test) < 0.5f);
}

// XOR: four clusters whose classes alternate around the square. No line
// separates them, so softmax regression stays near chance; one hidden layer
// does not.
void TestModels::mlpLearnsWhatNoLinearClassifierCan()
{
    std::mt19937_64 rng(5);
    std::normal_distribution<float> noise(0.0f, 0.2f);
    Dataset data;
    constexpr int kSamples = 400;
    data.features.resize(kSamples, 2);
    data.targets.resize(kSamples, 1);
    for (int i = 0; i < kSamples; ++i) {
        const float x = (i % 2 == 0) ? 1.0f : -1.0f;
        const float y = ((i / 2) % 2 == 0) ? 1.0f : -1.0f;
        data.features(i, 0) = x + noise(rng);
        data.features(i, 1) = y + noise(rng);
        data.targets(i, 0) = x * y > 0 ? 1.0f : 0.0f;
    }
    data.numClasses = 2;
    data.description = "xor";
    const auto mlp = makeModel("mlp:8", 2, 2);
    QCOMPARE(mlp->name(), std::string("mlp"));
    const std::vector<Variable> variables = mlp->initialVariables(5);
    QCOMPARE(variables.size(), size_t(4));
    QCOMPARE(variables[0].name, std::string("hidden/W"));
    QCOMPARE(variables[0].shape, (std::vector<int64_t>{2, 8}));
    QCOMPARE(variables[2].shape, (std::vector<int64_t>{8, 2}));
    const Parameters trained = gradientDescent(*mlp, valuesOf(variables), data, 0.5f, 2000);
    const float mlpAccuracy = mlp->accuracy(trained, data);
    const auto softmax = makeModel("softmax", 2, 2);
    const float softmaxAccuracy
        = softmax->accuracy(gradientDescent(*softmax, valuesOf(softmax->initialVariables(5)), data, 0.5f, 2000), data);
    QVERIFY2(mlpAccuracy > 0.95f, qPrintable(QStringLiteral("mlp accuracy %1").arg(mlpAccuracy)));
    QVERIFY2(softmaxAccuracy < 0.8f, qPrintable(QStringLiteral("softmax accuracy %1").arg(softmaxAccuracy)));
}

// The known answer: a 20 x 20 matrix of rank 2 seen in 1,600 entries with
// noise of standard deviation 0.1. Fitted from a small random start (the
// problem is not convex), the loss on 400 entries drawn apart falls from
// about 1 (the entries' variance) to the noise's 0.01, and no lower.
void TestModels::factorizationFallsToTheNoiseFloorOnEntriesItNeverSaw()
{
    const LowRankSpec spec{20, 20, 2, 0.1};
    const Dataset train = makeLowRankShard(11, 0, 1600, spec);
    const Dataset heldOut = makeLowRankShard(11, 1, 400, spec);
    QCOMPARE(train.indexSizes, (std::vector<int64_t>{20, 20}));
    const auto mf = makeModel("mf:2", 2, 1, train.indexSizes);
    QCOMPARE(mf->name(), std::string("mf"));
    QVERIFY(!mf->classifies());
    const std::vector<Variable> variables = mf->initialVariables(11);
    QCOMPARE(variables[0].name, std::string("mf/U"));
    QCOMPARE(variables[0].shape, (std::vector<int64_t>{20, 2}));
    QCOMPARE(variables[1].shape, (std::vector<int64_t>{20, 2}));
    const float before = mf->loss(valuesOf(variables), heldOut);
    const Parameters trained = gradientDescent(*mf, valuesOf(variables), train, 2.0f, 3000);
    const float after = mf->loss(trained, heldOut);
    QVERIFY2(before > 0.5f, qPrintable(QString::number(before)));
    QVERIFY2(after < 2 * spec.floor() && after > 0.5 * spec.floor(),
             qPrintable(QStringLiteral("held-out loss %1, floor %2").arg(after).arg(spec.floor())));
    // A rank too small for the matrix stays far above the floor.
    const auto tooSmall = makeModel("mf:1", 2, 1, train.indexSizes);
    const float rankOne = tooSmall->loss(
        gradientDescent(*tooSmall, valuesOf(tooSmall->initialVariables(11)), train, 2.0f, 3000), heldOut);
    QVERIFY2(rankOne > 5 * spec.floor(), qPrintable(QString::number(rankOne)));
}

void TestModels::linearAccuracyIsNotANumber()
{
    const auto m = makeModel("linear", 1, 1);
    const Dataset data = makeLinearData(1, 10);
    QVERIFY(std::isnan(m->accuracy(valuesOf(m->initialVariables(1)), data)));
}

void TestModels::makeModelRejectsBadInput_data()
{
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("featureDim");
    QTest::addColumn<int>("outputDim");
    QTest::addColumn<QString>("messagePart");

    QTest::newRow("unknown name lists known models")
        << QStringLiteral("perceptron") << 2 << 10 << QStringLiteral("linear, softmax, mlp");
    QTest::newRow("mlp without hidden units") << QStringLiteral("mlp:0") << 2 << 3 << QStringLiteral("e.g. mlp:64");
    QTest::newRow("mlp with words for units") << QStringLiteral("mlp:wide") << 2 << 3 << QStringLiteral("hidden units");
    QTest::newRow("mlp with one class") << QStringLiteral("mlp") << 2 << 1 << QStringLiteral("2 classes");
    QTest::newRow("linear without features") << QStringLiteral("linear") << 0 << 1 << QStringLiteral("feature");
    QTest::newRow("softmax without features") << QStringLiteral("softmax") << 0 << 3 << QStringLiteral("feature");
    QTest::newRow("softmax with one class") << QStringLiteral("softmax") << 2 << 1 << QStringLiteral("2 classes");
    QTest::newRow("mf of rank 0") << QStringLiteral("mf:0") << 2 << 1 << QStringLiteral("rank from 1");
    QTest::newRow("mf without a matrix") << QStringLiteral("mf") << 2 << 1 << QStringLiteral("--dataset=lowrank");
}

void TestModels::makeModelRejectsBadInput()
{
    QFETCH(QString, name);
    QFETCH(int, featureDim);
    QFETCH(int, outputDim);
    QFETCH(QString, messagePart);
    try {
        makeModel(name.toStdString(), featureDim, outputDim);
        QFAIL("makeModel accepted bad input");
    } catch (const InputError &error) {
        QVERIFY2(QString::fromUtf8(error.what()).contains(messagePart), error.what());
    }
}

void TestModels::dataOfTheWrongShapeIsRejected()
{
    const auto m = makeModel("softmax", 2, 3);
    const Parameters params = valuesOf(m->initialVariables(1));
    QVERIFY_THROWS_EXCEPTION(InputError, m->loss(params, makeBlobs(1, 10, 3, 4)));
    // Class 4 with a 3-class model.
    QVERIFY_THROWS_EXCEPTION(InputError, m->loss(params, makeBlobs(1, 10, 5, 2)));
}

void TestModels::variableTrajectoryMeasuresNormDistanceAndUpdatePerStep()
{
    VariableTrajectory trajectory;
    QVERIFY(!trajectory.started());
    Parameters params{Eigen::VectorXf::Constant(4, 1.f), Eigen::VectorXf::Constant(1, 3.f)};

    // The first measurement is the start: no distance yet, no update to size.
    auto first = trajectory.measure(params, 100);
    QVERIFY(trajectory.started());
    QCOMPARE(first.size(), size_t(2));
    QCOMPARE(first[0].norm, 2.f); // sqrt(4 * 1^2)
    QCOMPARE(first[1].norm, 3.f);
    QCOMPARE(first[0].distanceFromStart, 0.f);
    QVERIFY(std::isnan(first[0].updatePerStep));

    // Ten global steps later W moved by 0.5 in each of its 4 values.
    params[0].array() += 0.5f;
    auto second = trajectory.measure(params, 110);
    QCOMPARE(second[0].norm, 3.f);              // sqrt(4 * 1.5^2)
    QCOMPARE(second[0].distanceFromStart, 1.f); // sqrt(4 * 0.5^2)
    QCOMPARE(second[0].updatePerStep, 0.1f);    // 1.0 over 10 steps
    QCOMPARE(second[1].distanceFromStart, 0.f);
    QCOMPARE(second[1].updatePerStep, 0.f);

    // Measured again at the same global step (a sync chief whose gradient
    // was only aggregated): the change counts over one step, never 1/0.
    params[1][0] = 5.f;
    auto third = trajectory.measure(params, 110);
    QCOMPARE(third[1].updatePerStep, 2.f);
    QCOMPARE(third[0].distanceFromStart, 1.f); // still from the first values

    // Another model's parameters start a new trajectory.
    auto other = trajectory.measure({Eigen::VectorXf::Constant(2, 1.f)}, 200);
    QCOMPARE(other.size(), size_t(1));
    QCOMPARE(other[0].distanceFromStart, 0.f);
    QVERIFY(std::isnan(other[0].updatePerStep));
}

QTEST_GUILESS_MAIN(TestModels)
#include "tst_models.moc"
