// What a stale gradient is worth: the probe's comparison checked against a
// direct computation on a small linear model, ps:0's checks of a pushed
// probe, and the run's table of probes by steps apart.
#include "engine/dataset.h"
#include "engine/model.h"
#include "engine/staleness_cost.h"
#include "orchestration/staleness_cost_table.h"

#include <QTest>

#include <cmath>
#include <limits>

using namespace parasync;

namespace {

// y = 2 x0 - x1 + 10 over five rows: enough for gradients that point
// different ways at different parameters.
Dataset smallData()
{
    Dataset data;
    data.features.resize(5, 2);
    data.features << 1, 0, 0, 1, 2, 3, -1, 4, 0.5, -2;
    data.targets.resize(5, 1);
    for (int i = 0; i < 5; ++i)
        data.targets(i, 0) = 2 * data.features(i, 0) - data.features(i, 1) + 10;
    return data;
}

Parameters linearParameters(float w0, float w1, float b)
{
    return {Eigen::Vector2f(w0, w1), Eigen::VectorXf::Constant(1, b)};
}

// The mean squared error's gradient, written out in doubles: d/dw =
// 2/n sum (w.x + b - y) x, d/db = 2/n sum (w.x + b - y).
std::vector<double> handGradient(const Dataset &data, const std::vector<int64_t> &rows, double w0, double w1, double b)
{
    std::vector<double> g(3, 0.0);
    for (const int64_t r : rows) {
        const double x0 = data.features(r, 0), x1 = data.features(r, 1), y = data.targets(r, 0);
        const double residual = w0 * x0 + w1 * x1 + b - y;
        g[0] += 2 * residual * x0 / double(rows.size());
        g[1] += 2 * residual * x1 / double(rows.size());
        g[2] += 2 * residual / double(rows.size());
    }
    return g;
}

proto::PushRequest pushWithProbe(int64_t staleStep, int64_t freshStep, float cosine, float relativeError)
{
    proto::PushRequest push;
    push.set_computed_from_step(freshStep);
    push.mutable_staleness_probe()->set_stale_step(staleStep);
    push.mutable_staleness_probe()->set_fresh_step(freshStep);
    push.mutable_staleness_probe()->set_cosine(cosine);
    push.mutable_staleness_probe()->set_relative_error(relativeError);
    return push;
}

} // namespace

class TestStalenessCost : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void theComparisonIsTheDirectComputations()
    {
        const Dataset data = smallData();
        const auto model = makeModel("linear", 2, 1);
        const std::vector<int64_t> batch{0, 2, 3};
        Parameters stale, fresh;
        model->lossAndGradient(linearParameters(0.5f, -1.0f, 0.2f), data, batch, &stale);
        model->lossAndGradient(linearParameters(2.5f, -1.2f, 9.5f), data, batch, &fresh);

        const std::vector<double> s = handGradient(data, batch, 0.5, -1.0, 0.2);
        const std::vector<double> f = handGradient(data, batch, 2.5, -1.2, 9.5);
        double dot = 0, ss = 0, ff = 0, dd = 0;
        for (int i = 0; i < 3; ++i) {
            dot += s[size_t(i)] * f[size_t(i)];
            ss += s[size_t(i)] * s[size_t(i)];
            ff += f[size_t(i)] * f[size_t(i)];
            dd += (s[size_t(i)] - f[size_t(i)]) * (s[size_t(i)] - f[size_t(i)]);
        }
        const double cosine = dot / std::sqrt(ss * ff);
        const double relativeError = std::sqrt(dd / ff);

        const auto comparison = compareGradients(stale, fresh);
        QVERIFY(comparison);
        QVERIFY2(std::abs(comparison->cosine - cosine) < 1e-5,
                 qPrintable(QStringLiteral("cosine %1, by hand %2").arg(comparison->cosine).arg(cosine)));
        QVERIFY2(
            std::abs(comparison->relativeError - relativeError) < 1e-5 * relativeError,
            qPrintable(
                QStringLiteral("relative error %1, by hand %2").arg(comparison->relativeError).arg(relativeError)));
        // These two parameter sets really disagree: not a comparison that
        // could pass by returning "the same".
        QVERIFY(cosine < 0.99);
        QVERIFY(relativeError > 0.1);
    }

    void theSameParametersGiveTheSameGradient()
    {
        const Dataset data = smallData();
        const auto model = makeModel("linear", 2, 1);
        Parameters a, b;
        model->lossAndGradient(linearParameters(0.5f, -1.0f, 0.2f), data, {1, 4}, &a);
        model->lossAndGradient(linearParameters(0.5f, -1.0f, 0.2f), data, {1, 4}, &b);
        const auto comparison = compareGradients(a, b);
        QVERIFY(comparison);
        QCOMPARE(comparison->cosine, 1.0f);
        QCOMPARE(comparison->relativeError, 0.0f);
    }

    void aZeroGradientGivesNoDirection()
    {
        const Parameters stale{Eigen::Vector2f(1, 2)};
        const Parameters zero{Eigen::Vector2f(0, 0)};
        QVERIFY(!compareGradients(stale, zero));
        QVERIFY(!compareGradients(zero, stale));
        QVERIFY(!compareGradients(zero, zero)); // a saturated softmax: no sign of staleness either way
        const auto opposite = compareGradients(Parameters{Eigen::Vector2f(1, 2)}, Parameters{Eigen::Vector2f(-2, -4)});
        QVERIFY(opposite);
        QCOMPARE(opposite->cosine, -1.0f);
        QVERIFY(std::abs(opposite->relativeError - 1.5f) < 1e-6); // |3 (1,2)| / |2 (1,2)|
    }

    void psZeroRefusesAProbeThatCannotBe_data()
    {
        QTest::addColumn<qint64>("staleStep");
        QTest::addColumn<qint64>("freshStep");
        QTest::addColumn<float>("cosine");
        QTest::addColumn<float>("relativeError");
        QTest::addColumn<QString>("saying");
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const float inf = std::numeric_limits<float>::infinity();
        QTest::newRow("fresh before stale") << qint64(10) << qint64(9) << 0.5f << 0.1f
                                            << QStringLiteral("stale_step 10 and fresh_step 9 are not in order");
        QTest::newRow("fresh from the future")
            << qint64(10) << qint64(31) << 0.5f << 0.1f << QStringLiteral("up to the global step 30");
        QTest::newRow("a step before the first")
            << qint64(-1) << qint64(12) << 0.5f << 0.1f << QStringLiteral("stale_step -1 and");
        QTest::newRow("cosine over 1") << qint64(10) << qint64(12) << 1.5f << 0.1f << QStringLiteral("cosine 1.5");
        QTest::newRow("cosine NaN") << qint64(10) << qint64(12) << nan << 0.1f << QStringLiteral("not in [-1, 1]");
        QTest::newRow("negative error") << qint64(10) << qint64(12) << 0.5f << -1.0f
                                        << QStringLiteral("relative_error -1");
        QTest::newRow("infinite error") << qint64(10) << qint64(12) << 0.5f << inf
                                        << QStringLiteral("leave the probe out");
    }

    void psZeroRefusesAProbeThatCannotBe()
    {
        QFETCH(qint64, staleStep);
        QFETCH(qint64, freshStep);
        QFETCH(float, cosine);
        QFETCH(float, relativeError);
        QFETCH(QString, saying);
        const std::string wrong = checkStalenessProbe(pushWithProbe(staleStep, freshStep, cosine, relativeError), 30);
        QVERIFY2(QString::fromStdString(wrong).contains(saying), wrong.c_str());
        QCOMPARE(checkStalenessProbe(pushWithProbe(10, 10, 1.0f, 0.0f), 30), std::string());
        QCOMPARE(checkStalenessProbe(pushWithProbe(10, 30, -1.0f, 7.0f), 30), std::string());
    }

    void theTableGathersProbesByStepsApart()
    {
        StalenessCostTable table;
        table.add(0, 1.0f, 0.0f);
        table.add(1, 0.95f, 0.2f);
        table.add(2, 0.9f, 0.3f);
        table.add(3, 0.5f, 0.9f);
        table.add(3, 0.7f, 0.5f);
        table.add(200, -0.2f, 3.0f);
        table.add(-1, 0.1f, 0.1f);                                   // no such distance: not counted
        table.add(5, std::numeric_limits<float>::quiet_NaN(), 0.1f); // nor a NaN
        QCOMPARE(table.count(), size_t(6));

        std::vector<std::string> labels;
        for (const auto &bucket : table.buckets())
            labels.push_back(bucket.label());
        QCOMPARE(labels,
                 (std::vector<std::string>{"0", "1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128+"}));
        const auto &twoToThree = table.buckets()[2];
        QCOMPARE(twoToThree.count(), size_t(3));
        QCOMPARE(twoToThree.medianCosine(), 0.7f);
        QCOMPARE(twoToThree.medianRelativeError(), 0.5f);
        QCOMPARE(table.buckets()[8].count(), size_t(1));
        QCOMPARE(table.buckets()[8].medianCosine(), -0.2f);
        QCOMPARE(table.buckets()[3].count(), size_t(0));
        QVERIFY(std::isnan(table.buckets()[3].medianCosine()));
        // An even count: the mean of the middle two.
        QCOMPARE(*table.medianCosineFrom(1), 0.7f); // 0.95 0.9 0.5 0.7 -0.2 -> 0.7
        table.add(150, -0.4f, 3.0f);
        QCOMPARE(*table.medianCosineFrom(1), (0.5f + 0.7f) / 2.0f);
        QVERIFY(!table.medianCosineFrom(1000));
        table.clear();
        QCOMPARE(table.count(), size_t(0));
    }
};

QTEST_APPLESS_MAIN(TestStalenessCost)
#include "tst_staleness_cost.moc"
