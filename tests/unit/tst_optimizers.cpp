#include "base/error.h"
#include "engine/optimizer.h"

#include <QTest>

#include <cmath>
#include <limits>

using namespace parasync;

namespace {

OptimizerOptions optionsFor(const QString &name, float learningRate = 0.1f)
{
    OptimizerOptions options;
    options.name = name.toStdString();
    options.learningRate = learningRate;
    return options;
}

} // namespace

class TestOptimizers : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void updatesMatchHandComputedValues_data();
    void updatesMatchHandComputedValues();
    void aScaledGradientMovesTheVariableLess_data();
    void aScaledGradientMovesTheVariableLess();
    void updatesAreElementwise_data();
    void updatesAreElementwise();
    void slotsStartAsTensorFlowStartsThem();
    void ftrlL1SetsSmallWeightsExactlyToZero();
    void badFtrlRegularisationIsRejected_data();
    void badFtrlRegularisationIsRejected();
    void unknownNameIsRejectedListingKnownNames();
    void badLearningRateIsRejected_data();
    void badLearningRateIsRejected();
};

void TestOptimizers::updatesMatchHandComputedValues_data()
{
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<QList<double>>("expected");

    // Every row: lr = 0.1, the variable starts at 1.0, gradients 0.5, -1.0, 2.0;
    // `expected` is the variable after each of the three updates.

    // v -= 0.1 g:  1 - 0.05 = 0.95;  0.95 + 0.1 = 1.05;  1.05 - 0.2 = 0.85
    QTest::newRow("sgd") << QStringLiteral("sgd") << QList<double>{0.95, 1.05, 0.85};

    // a = 0.9 a + g;  v -= 0.1 a
    //   a = 0.5                 v = 1 - 0.05      = 0.95
    //   a = 0.45 - 1 = -0.55    v = 0.95 + 0.055  = 1.005
    //   a = -0.495 + 2 = 1.505  v = 1.005 - 0.1505 = 0.8545
    QTest::newRow("momentum") << QStringLiteral("momentum") << QList<double>{0.95, 1.005, 0.8545};

    // a starts at 0.1;  a += g^2;  v -= 0.1 g / sqrt(a)
    //   a = 0.35   v = 1 - 0.05 / 0.5916080         = 0.9154846
    //   a = 1.35   v = 0.9154846 + 0.1 / 1.1618950  = 1.0015509
    //   a = 5.35   v = 1.0015509 - 0.2 / 2.3130067  = 0.9150833
    QTest::newRow("adagrad") << QStringLiteral("adagrad") << QList<double>{0.9154846, 1.0015509, 0.9150833};

    // b1 = 0.9, b2 = 0.999, eps = 1e-8;  lr_t = 0.1 sqrt(1 - b2^t) / (1 - b1^t)
    //   t=1: lr_t = 0.1 * 0.0316228 / 0.1   = 0.0316228
    //        m = 0.05,  s = 0.001 * 0.25 = 0.00025
    //        v = 1 - 0.0316228 * 0.05 / 0.0158114            = 0.9000001
    //   t=2: lr_t = 0.1 * 0.0447102 / 0.19  = 0.0235317
    //        m = 0.045 - 0.1 = -0.055,  s = 0.00024975 + 0.001 = 0.00124975
    //        v = 0.9000001 + 0.0235317 * 0.055 / 0.0353518    = 0.9366104
    //   t=3: lr_t = 0.1 * 0.0547449 / 0.271 = 0.0202011
    //        m = -0.0495 + 0.2 = 0.1505,  s = 0.00124850 + 0.004 = 0.0052485
    //        v = 0.9366104 - 0.0202011 * 0.1505 / 0.0724465   = 0.8946448
    QTest::newRow("adam") << QStringLiteral("adam") << QList<double>{0.9000001, 0.9366104, 0.8946448};

    // tf.train.FtrlOptimizer, learning_rate_power -0.5, l1 = l2 = 0:
    //   n' = n + g^2;  s = (sqrt(n') - sqrt(n)) / 0.1;  z += g - s v;  v = -z / (sqrt(n') / 0.1)
    //   n = 0.35  s = (0.5916080 - 0.3162278) / 0.1 = 2.7538021
    //             z = 0.5 - 2.7538021 = -2.2538021       v = 2.2538021 / 5.9160798  = 0.3809621
    //   n = 1.35  s = (1.1618950 - 0.5916080) / 0.1 = 5.7028703
    //             z = -2.2538021 - 1 - 2.1725823 = -5.4263795   v = 5.4263795 / 11.618950 = 0.4670284
    //   n = 5.35  s = (2.3130067 - 1.1618950) / 0.1 = 11.511117
    //             z = -5.4263795 + 2 - 5.3760184 = -8.8023979   v = 8.8023979 / 23.130067 = 0.3805608
    QTest::newRow("ftrl") << QStringLiteral("ftrl") << QList<double>{0.3809621, 0.4670284, 0.3805608};
}

void TestOptimizers::updatesMatchHandComputedValues()
{
    QFETCH(QString, optimizer);
    QFETCH(QList<double>, expected);

    const auto opt = makeOptimizer(optionsFor(optimizer));
    QCOMPARE(QString::fromStdString(opt->name()), optimizer);
    Eigen::VectorXf value = Eigen::VectorXf::Constant(1, 1.0f);
    SlotState state = opt->makeSlots(1);
    const float gradients[] = {0.5f, -1.0f, 2.0f};
    for (int step = 0; step < 3; ++step) {
        opt->apply(value, Eigen::VectorXf::Constant(1, gradients[step]), state, 1.0f);
        QVERIFY2(std::abs(value[0] - expected[step]) < 5e-6, qPrintable(QStringLiteral("step %1: got %2, expected %3")
                                                                            .arg(step + 1)
                                                                            .arg(double(value[0]), 0, 'g', 9)
                                                                            .arg(expected[step], 0, 'g', 9)));
    }
    QCOMPARE(state.updateCount, int64_t(3));
}

void TestOptimizers::aScaledGradientMovesTheVariableLess_data()
{
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<QList<double>>("expected");

    // The staleness-aware rule's factor (ModeConfig.learning_rate_by_staleness):
    // lr = 0.1, the variable starts at 1.0; gradient 0.5 at scale 0.25 (four
    // updates stale), then -1.0 at scale 1 (fresh). Only the scaled
    // gradient's own share of the step shrinks.

    // v -= 0.1 * 0.25 * 0.5 = 0.9875;  v += 0.1 = 1.0875
    QTest::newRow("sgd") << QStringLiteral("sgd") << QList<double>{0.9875, 1.0875};
    // a = 0.25 * 0.5 = 0.125, v = 0.9875;  a = 0.1125 - 1 = -0.8875, v = 1.07625
    QTest::newRow("momentum") << QStringLiteral("momentum") << QList<double>{0.9875, 1.07625};
    // a = 0.1 + 0.25 (the gradient's size, unscaled) = 0.35,
    //   v = 1 - 0.1 * 0.25 * 0.5 / sqrt(0.35) = 0.9788711;  a = 1.35, v = 1.0649374
    QTest::newRow("adagrad") << QStringLiteral("adagrad") << QList<double>{0.9788711, 1.0649374};
    // m = 0.1 * 0.25 * 0.5 = 0.0125, s = 0.001 * 0.25 (unscaled),
    //   v = 1 - 0.0316228 * 0.0125 / 0.0158114 = 0.975;
    //   m = 0.01125 - 0.1 = -0.08875, s = 0.00124975, v = 0.975 + 0.0235317 * 0.08875 / 0.0353518 = 1.0340758
    QTest::newRow("adam") << QStringLiteral("adam") << QList<double>{0.975, 1.0340758};
    // z = 0.25 * 0.5 - 2.7538021 = -2.6288021, n = 0.35 (unscaled), v = 2.6288021 / 5.9160798 = 0.4443487;
    //   z = -2.6288021 - 1 - 5.7028703 * 0.4443487 = -6.1628649, v = 6.1628649 / 11.618950 = 0.5304150
    QTest::newRow("ftrl") << QStringLiteral("ftrl") << QList<double>{0.4443487, 0.5304150};
}

void TestOptimizers::aScaledGradientMovesTheVariableLess()
{
    QFETCH(QString, optimizer);
    QFETCH(QList<double>, expected);

    const auto opt = makeOptimizer(optionsFor(optimizer));
    Eigen::VectorXf value = Eigen::VectorXf::Constant(1, 1.0f);
    SlotState state = opt->makeSlots(1);
    const float gradients[] = {0.5f, -1.0f};
    const float scales[] = {0.25f, 1.0f};
    for (int step = 0; step < 2; ++step) {
        opt->apply(value, Eigen::VectorXf::Constant(1, gradients[step]), state, scales[step]);
        QVERIFY2(std::abs(value[0] - expected[step]) < 5e-6, qPrintable(QStringLiteral("step %1: got %2, expected %3")
                                                                            .arg(step + 1)
                                                                            .arg(double(value[0]), 0, 'g', 9)
                                                                            .arg(expected[step], 0, 'g', 9)));
    }
}

void TestOptimizers::updatesAreElementwise_data()
{
    QTest::addColumn<QString>("optimizer");
    for (const std::string &name : optimizerNames())
        QTest::newRow(name.c_str()) << QString::fromStdString(name);
}

void TestOptimizers::updatesAreElementwise()
{
    QFETCH(QString, optimizer);
    const auto opt = makeOptimizer(optionsFor(optimizer));

    Eigen::VectorXf pair(2);
    pair << 1.0f, -3.0f;
    Eigen::VectorXf first = pair.head(1);
    Eigen::VectorXf second = pair.tail(1);
    SlotState pairState = opt->makeSlots(2);
    SlotState firstState = opt->makeSlots(1);
    SlotState secondState = opt->makeSlots(1);
    for (int step = 0; step < 4; ++step) {
        Eigen::VectorXf gradient(2);
        gradient << 0.3f * float(step + 1), -2.0f + float(step);
        opt->apply(pair, gradient, pairState, 1.0f);
        opt->apply(first, gradient.head(1), firstState, 1.0f);
        opt->apply(second, gradient.tail(1), secondState, 1.0f);
    }
    QCOMPARE(pair[0], first[0]);
    QCOMPARE(pair[1], second[0]);
}

void TestOptimizers::slotsStartAsTensorFlowStartsThem()
{
    OptimizerOptions options = optionsFor(QStringLiteral("adagrad"));
    const SlotState adagrad = makeOptimizer(options)->makeSlots(3);
    QVERIFY(adagrad.slots.at("accumulator").isApprox(Eigen::VectorXf::Constant(3, 0.1f)));

    options.name = "momentum";
    const SlotState momentum = makeOptimizer(options)->makeSlots(3);
    QVERIFY(momentum.slots.at("momentum").isZero());

    options.name = "adam";
    const SlotState adam = makeOptimizer(options)->makeSlots(3);
    QVERIFY(adam.slots.at("m").isZero());
    QVERIFY(adam.slots.at("v").isZero());
    QCOMPARE(adam.updateCount, int64_t(0));

    options.name = "sgd";
    QVERIFY(makeOptimizer(options)->makeSlots(3).slots.empty());

    options.name = "ftrl";
    const SlotState ftrl = makeOptimizer(options)->makeSlots(3);
    QVERIFY(ftrl.slots.at("accumulator").isApprox(Eigen::VectorXf::Constant(3, 0.1f)));
    QVERIFY(ftrl.slots.at("linear").isZero());
}

void TestOptimizers::ftrlL1SetsSmallWeightsExactlyToZero()
{
    // lr = 0.1, l1 = 3, l2 = 0.5, the variable starts at 1.0; gradients 0.5, -1.0, 2.0:
    //   v = |z| <= l1 ? 0 : -(z - sign(z) l1) / (sqrt(n) / lr + 2 l2)
    //   n = 0.35  z = 0.5 - 2.7538021 * 1 = -2.2538021         |z| <= 3: v = 0
    //   n = 1.35  z = -2.2538021 - 1 - 5.7028703 * 0 = -3.2538021
    //             v = 0.2538021 / (11.618950 + 1) = 0.0201128
    //   n = 5.35  z = -3.2538021 + 2 - 11.511117 * 0.0201128 = -1.4853227   |z| <= 3: v = 0
    OptimizerOptions options = optionsFor(QStringLiteral("ftrl"));
    options.l1 = 3.0f;
    options.l2 = 0.5f;
    const auto opt = makeOptimizer(options);
    Eigen::VectorXf value = Eigen::VectorXf::Constant(1, 1.0f);
    SlotState state = opt->makeSlots(1);
    const float gradients[] = {0.5f, -1.0f, 2.0f};
    const double expectedLinear[] = {-2.2538021, -3.2538021, -1.4853227};

    opt->apply(value, Eigen::VectorXf::Constant(1, gradients[0]), state, 1.0f);
    QCOMPARE(value[0], 0.0f);
    QVERIFY(std::abs(state.slots.at("linear")[0] - expectedLinear[0]) < 5e-6);
    QVERIFY(std::abs(state.slots.at("accumulator")[0] - 0.35) < 1e-6);

    opt->apply(value, Eigen::VectorXf::Constant(1, gradients[1]), state, 1.0f);
    QVERIFY2(std::abs(value[0] - 0.0201128) < 5e-7, qPrintable(QString::number(double(value[0]), 'g', 9)));
    QVERIFY(std::abs(state.slots.at("linear")[0] - expectedLinear[1]) < 5e-6);

    opt->apply(value, Eigen::VectorXf::Constant(1, gradients[2]), state, 1.0f);
    QCOMPARE(value[0], 0.0f);
    QVERIFY(std::abs(state.slots.at("linear")[0] - expectedLinear[2]) < 5e-6);
    QVERIFY(std::abs(state.slots.at("accumulator")[0] - 5.35) < 1e-5);
    QCOMPARE(state.updateCount, int64_t(3));
}

void TestOptimizers::badFtrlRegularisationIsRejected_data()
{
    QTest::addColumn<float>("l1");
    QTest::addColumn<float>("l2");
    QTest::addColumn<QString>("named");
    QTest::newRow("negative l1") << -0.1f << 0.0f << QStringLiteral("l1");
    QTest::newRow("nan l1") << std::numeric_limits<float>::quiet_NaN() << 0.0f << QStringLiteral("l1");
    QTest::newRow("negative l2") << 0.0f << -1.0f << QStringLiteral("l2");
    QTest::newRow("infinite l2") << 0.0f << std::numeric_limits<float>::infinity() << QStringLiteral("l2");
}

void TestOptimizers::badFtrlRegularisationIsRejected()
{
    QFETCH(float, l1);
    QFETCH(float, l2);
    QFETCH(QString, named);
    OptimizerOptions options = optionsFor(QStringLiteral("ftrl"));
    options.l1 = l1;
    options.l2 = l2;
    try {
        makeOptimizer(options);
        QFAIL("bad regularisation was accepted");
    } catch (const InputError &error) {
        QVERIFY2(QString::fromUtf8(error.what()).contains(named), error.what());
    }
}

void TestOptimizers::unknownNameIsRejectedListingKnownNames()
{
    try {
        makeOptimizer(optionsFor(QStringLiteral("rmsprop")));
        QFAIL("an unknown optimizer was accepted");
    } catch (const InputError &error) {
        const QString message = QString::fromUtf8(error.what());
        QVERIFY2(message.contains(QLatin1String("rmsprop")), qPrintable(message));
        for (const std::string &name : optimizerNames())
            QVERIFY2(message.contains(QString::fromStdString(name)), qPrintable(message));
    }
}

void TestOptimizers::badLearningRateIsRejected_data()
{
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<float>("learningRate");
    QTest::newRow("zero") << QStringLiteral("sgd") << 0.0f;
    QTest::newRow("negative") << QStringLiteral("adam") << -0.01f;
    QTest::newRow("nan") << QStringLiteral("momentum") << std::numeric_limits<float>::quiet_NaN();
    QTest::newRow("infinite") << QStringLiteral("adagrad") << std::numeric_limits<float>::infinity();
}

void TestOptimizers::badLearningRateIsRejected()
{
    QFETCH(QString, optimizer);
    QFETCH(float, learningRate);
    try {
        makeOptimizer(optionsFor(optimizer, learningRate));
        QFAIL("a bad learning rate was accepted");
    } catch (const InputError &error) {
        QVERIFY2(QString::fromUtf8(error.what()).contains(QLatin1String("learning rate")), error.what());
    }
}

QTEST_GUILESS_MAIN(TestOptimizers)
#include "tst_optimizers.moc"
