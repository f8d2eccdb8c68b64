#include "base/error.h"
#include "engine/click_log.h"
#include "engine/dataset.h"

#include <QTest>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace parasync;

namespace {

std::vector<float> labelsOf(const Dataset &data)
{
    return {data.targets.data(), data.targets.data() + data.targets.rows()};
}

// The AUC by definition: over every (positive, negative) pair, 1 when the
// positive scores higher, half when they tie.
double pairCountAuc(const std::vector<float> &scores, const std::vector<float> &labels)
{
    double wins = 0, pairs = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
        for (size_t j = 0; j < scores.size(); ++j) {
            if (labels[i] != 1.0f || labels[j] != 0.0f)
                continue;
            pairs += 1;
            wins += scores[i] > scores[j] ? 1.0 : scores[i] == scores[j] ? 0.5 : 0.0;
        }
    }
    return wins / pairs;
}

double zipfShare(int64_t rank, int64_t values, double exponent)
{
    double sum = 0;
    for (int64_t r = 1; r <= values; ++r)
        sum += std::pow(double(r), -exponent);
    return std::pow(double(rank), -exponent) / sum;
}

void expectMessage(const std::string &spec, const std::string &part)
{
    try {
        parseClickLogSpec(spec);
        QFAIL(("'" + spec + "' was accepted").c_str());
    } catch (const InputError &e) {
        if (std::string(e.what()).find(part) == std::string::npos)
            QFAIL(("'" + spec + "': " + e.what() + " -- lacks '" + part + "'").c_str());
    }
}

} // namespace

class TestClickLog : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void specGivesTheShapeOrItsDefaults();
    void badSpecsSayTheFormAndRanges();
    void aSeedAndShardDrawTheSameLogEveryTime();
    void shardsDrawDifferentSamplesOfOneHiddenModel();
    void idsAreDistinctPerFieldAndValue();
    void valuesFollowTheZipfLaw();
    void areaUnderRocOfHandMadeCases();
    void areaUnderRocMatchesThePairCount();
    void logLossIsClampedAwayFromZeroAndOne();
    void generatingModelScoresWellAboveChance();
    void loadDatasetDrawsShardsAndHoldsOutRows();
    void sparseModelsDefaultToTheClickLog();
};

void TestClickLog::specGivesTheShapeOrItsDefaults()
{
    const ClickLogShape defaults = parseClickLogSpec("clicklog");
    QCOMPARE(defaults.fields, 10);
    QCOMPARE(defaults.valuesPerField, 100000);
    QCOMPARE(defaults.zipf, 2.0);
    const ClickLogShape two = parseClickLogSpec("clicklog:4:500");
    QCOMPARE(two.fields, 4);
    QCOMPARE(two.valuesPerField, 500);
    QCOMPARE(two.zipf, 2.0);
    const ClickLogShape three = parseClickLogSpec("clicklog:1000:100000000:0.5");
    QCOMPARE(three.fields, 1000);
    QCOMPARE(three.valuesPerField, 100000000);
    QCOMPARE(three.zipf, 0.5);
    QCOMPARE(parseClickLogSpec("clicklog:1:2:5").zipf, 5.0);
}

void TestClickLog::badSpecsSayTheFormAndRanges()
{
    for (const char *form : {"clicklog:", "clicklog:10", "clicklog:10:x", "clicklog:10:100:1.1:3", "clicklog:a:100",
                             "clicklog:10:100:", "clicklogs", "clicklog:10:100:fast"})
        expectMessage(form, "clicklog:FIELDS:VALUES:ZIPF");
    expectMessage("clicklog:0:100", "fields must be from 1 to 1000, got 0");
    expectMessage("clicklog:1001:100", "fields must be from 1 to 1000, got 1001");
    expectMessage("clicklog:10:1", "values per field must be from 2 to 100000000, got 1");
    expectMessage("clicklog:10:100000001", "values per field must be from 2 to 100000000");
    expectMessage("clicklog:10:100:0", "more than 0 and at most 5, got 0");
    expectMessage("clicklog:10:100:-1", "more than 0 and at most 5");
    expectMessage("clicklog:10:100:5.5", "more than 0 and at most 5, got 5.5");
    expectMessage("clicklog:10:100:nan", "more than 0 and at most 5");
    QVERIFY_THROWS_EXCEPTION(InputError, makeClickLog({10, 1, 1.1}, 1, 0, 10));
    QVERIFY_THROWS_EXCEPTION(InputError, makeClickLog({10, 100, 1.1}, 1, 0, 0));
}

void TestClickLog::aSeedAndShardDrawTheSameLogEveryTime()
{
    const ClickLogShape shape{6, 5000, 1.1};
    const Dataset a = makeClickLog(shape, 42, 1, 3000);
    const Dataset b = makeClickLog(shape, 42, 1, 3000);
    QCOMPARE(a.size(), 3000);
    QCOMPARE(a.features.cols(), 0);
    QCOMPARE(a.fields, 6);
    QVERIFY(a.categorical());
    QCOMPARE(a.featureDim(), 6);
    QCOMPARE(a.numClasses, 2);
    QCOMPARE(a.ids.size(), size_t(3000 * 6));
    QCOMPARE(a.trueProbability.size(), size_t(3000));
    QCOMPARE(a.description, std::string("click log: 6 fields x 5000 values, Zipf 1.1"));
    QVERIFY(a.ids == b.ids);
    QVERIFY(a.targets == b.targets);
    QVERIFY(a.trueProbability == b.trueProbability);
    // Sample i does not depend on how many come after it.
    const Dataset shorter = makeClickLog(shape, 42, 1, 100);
    QVERIFY(std::equal(shorter.ids.begin(), shorter.ids.end(), a.ids.begin()));
    QVERIFY(std::equal(shorter.trueProbability.begin(), shorter.trueProbability.end(), a.trueProbability.begin()));
    for (int64_t i = 0; i < a.size(); ++i)
        QVERIFY(a.targets(i, 0) == 0.0f || a.targets(i, 0) == 1.0f);
    // Labels are Bernoulli draws of the probabilities.
    double meanLabel = 0, meanProbability = 0;
    for (int64_t i = 0; i < a.size(); ++i) {
        meanLabel += a.targets(i, 0) / 3000.0;
        meanProbability += a.trueProbability[size_t(i)] / 3000.0;
    }
    QVERIFY2(std::abs(meanLabel - meanProbability) < 0.03,
             qPrintable(QStringLiteral("click rate %1, mean probability %2").arg(meanLabel).arg(meanProbability)));
}

void TestClickLog::shardsDrawDifferentSamplesOfOneHiddenModel()
{
    // Two fields of three values: the same pair of ids recurs often, in
    // every shard, and must have one probability wherever it is drawn.
    const ClickLogShape shape{2, 3, 1.0};
    const Dataset shard0 = makeClickLog(shape, 5, 0, 400);
    const Dataset shard1 = makeClickLog(shape, 5, 1, 400);
    const Dataset otherSeed = makeClickLog(shape, 6, 0, 400);
    QVERIFY(shard0.ids != shard1.ids);
    std::map<std::pair<uint64_t, uint64_t>, float> probabilityOf;
    for (int64_t i = 0; i < shard0.size(); ++i)
        probabilityOf[{shard0.idsOf(i)[0], shard0.idsOf(i)[1]}] = shard0.trueProbability[size_t(i)];
    QCOMPARE(probabilityOf.size(), size_t(9));
    int matched = 0, differentUnderOtherSeed = 0;
    for (int64_t i = 0; i < shard1.size(); ++i) {
        QCOMPARE(shard1.trueProbability[size_t(i)], probabilityOf.at({shard1.idsOf(i)[0], shard1.idsOf(i)[1]}));
        ++matched;
    }
    for (int64_t i = 0; i < otherSeed.size(); ++i)
        if (otherSeed.trueProbability[size_t(i)] != probabilityOf.at({otherSeed.idsOf(i)[0], otherSeed.idsOf(i)[1]}))
            ++differentUnderOtherSeed;
    QCOMPARE(matched, 400);
    // Another seed is another hidden model over the same ids.
    QCOMPARE(differentUnderOtherSeed, 400);
}

void TestClickLog::idsAreDistinctPerFieldAndValue()
{
    std::set<uint64_t> ids;
    for (int64_t field = 0; field < 100; ++field)
        for (int64_t value = 0; value < 1000; ++value)
            ids.insert(clickLogId(field, value));
    QCOMPARE(ids.size(), size_t(100 * 1000));
    QCOMPARE(clickLogId(3, 7), clickLogId(3, 7));
    // Neighbouring values are far apart: hashed, not counted.
    QVERIFY(clickLogId(0, 1) - clickLogId(0, 0) > (uint64_t(1) << 32));
}

void TestClickLog::valuesFollowTheZipfLaw()
{
    struct Case
    {
        int64_t values;
        double zipf;
    };
    for (const Case c : {Case{1000, 1.1}, Case{100000, 2.0}, Case{50, 0.5}}) {
        constexpr int64_t samples = 200000;
        const Dataset data = makeClickLog({1, c.values, c.zipf}, 3, 0, samples);
        std::map<uint64_t, int64_t> counts;
        for (const uint64_t id : data.ids)
            ++counts[id];
        std::vector<int64_t> sorted;
        for (const auto &[id, count] : counts)
            sorted.push_back(count);
        std::sort(sorted.rbegin(), sorted.rend());
        QVERIFY(int64_t(counts.size()) <= c.values);
        for (const int64_t rank : {1, 2, 10}) {
            const double share = double(sorted[size_t(rank - 1)]) / double(samples);
            const double expected = zipfShare(rank, c.values, c.zipf);
            qInfo("%lld values, Zipf %.1f: rank %lld has %.4f of the samples, expected %.4f",
                  static_cast<long long>(c.values), c.zipf, static_cast<long long>(rank), share, expected);
            // Five binomial standard deviations.
            QVERIFY(std::abs(share - expected) < 5 * std::sqrt(expected * (1 - expected) / double(samples)) + 1e-4);
        }
    }
}

void TestClickLog::areaUnderRocOfHandMadeCases()
{
    const std::vector<float> labels{0, 0, 1, 1};
    QCOMPARE(areaUnderRoc(std::vector<float>{0.1f, 0.2f, 0.8f, 0.9f}, labels), 1.0f);
    QCOMPARE(areaUnderRoc(std::vector<float>{0.9f, 0.8f, 0.2f, 0.1f}, labels), 0.0f);
    QCOMPARE(areaUnderRoc(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}, labels), 0.5f);
    // One tie between a positive and a negative of four pairs: 3.5 / 4.
    QCOMPARE(areaUnderRoc(std::vector<float>{0.1f, 0.6f, 0.6f, 0.9f}, labels), 0.875f);
    QVERIFY(std::isnan(areaUnderRoc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 1})));
    QVERIFY(std::isnan(areaUnderRoc(std::vector<float>{}, std::vector<float>{})));
}

void TestClickLog::areaUnderRocMatchesThePairCount()
{
    // Scores of few distinct values, so that many pairs tie.
    std::vector<float> scores, labels;
    uint64_t x = 12345;
    for (int i = 0; i < 300; ++i) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        scores.push_back(float((x >> 33) % 17) / 16.0f);
        labels.push_back((x >> 20) % 3 == 0 ? 1.0f : 0.0f);
    }
    QCOMPARE(double(areaUnderRoc(scores, labels)), double(float(pairCountAuc(scores, labels))));
}

void TestClickLog::logLossIsClampedAwayFromZeroAndOne()
{
    const std::vector<float> labels{1, 0};
    QCOMPARE(logLoss(std::vector<float>{0.5f, 0.5f}, labels), float(std::log(2.0)));
    QCOMPARE(logLoss(std::vector<float>{0.8f, 0.4f}, labels), float(-(std::log(0.8) + std::log(0.6)) / 2));
    // Certain and wrong: large but finite, -log(1e-7).
    QCOMPARE(logLoss(std::vector<float>{0.0f}, std::vector<float>{1}), float(-std::log(1e-7)));
    QCOMPARE(logLoss(std::vector<float>{1.0f}, std::vector<float>{0}), float(-std::log(1e-7)));
    QVERIFY(logLoss(std::vector<float>{1.0f}, std::vector<float>{1}) < 1e-6f);
}

void TestClickLog::generatingModelScoresWellAboveChance()
{
    const Dataset data = makeClickLog(ClickLogShape{}, 1, 0, 20000);
    const std::vector<float> labels = labelsOf(data);
    const float auc = areaUnderRoc(data.trueProbability, labels);
    const float loss = logLoss(data.trueProbability, labels);
    double clicks = 0;
    for (const float y : labels)
        clicks += y;
    qInfo("default click log, 20000 samples: click rate %.3f, generating model's AUC %.4f, log loss %.4f",
          clicks / 20000.0, double(auc), double(loss));
    QVERIFY(auc > 0.75f);
    QVERIFY(auc < 0.95f);
}

void TestClickLog::loadDatasetDrawsShardsAndHoldsOutRows()
{
    DatasetOptions options;
    options.spec = "clicklog:4:50:1.2";
    options.numShards = 2;
    options.samplesPerShard = 500;
    options.seed = 9;
    options.shardIndex = 1;
    const Dataset shard = loadDataset(options);
    const Dataset drawn = makeClickLog({4, 50, 1.2}, 9, 1, 500);
    QVERIFY(shard.ids == drawn.ids);
    QVERIFY(shard.targets == drawn.targets);
    QCOMPARE(shard.description, std::string("click log: 4 fields x 50 values, Zipf 1.2, shard 1 of 2"));

    // --eval_dataset: a draw from the shard index no worker has.
    const Dataset heldOutDraw = loadHeldOutData(options, "clicklog:4:50:1.2");
    QVERIFY(heldOutDraw.ids == makeClickLog({4, 50, 1.2}, 9, 2, 500).ids);

    // --eval_fraction: the held-out rows leave each shard with their ids and
    // probabilities, and are the held-out data, in order.
    options.evalFraction = 0.2;
    const HeldOutRows heldOut(0.2, 9, 1000);
    std::vector<Dataset> kept;
    for (int k = 0; k < 2; ++k) {
        options.shardIndex = k;
        kept.push_back(loadDataset(options));
    }
    const Dataset heldOutRows = loadHeldOutData(options, "");
    QCOMPARE(kept[0].size() + kept[1].size() + heldOutRows.size(), 1000);
    QCOMPARE(heldOutRows.size(), heldOut.count());
    std::vector<int64_t> at(2, 0);
    int64_t h = 0;
    for (int k = 0; k < 2; ++k) {
        const Dataset all = makeClickLog({4, 50, 1.2}, 9, k, 500);
        for (int64_t i = 0; i < 500; ++i) {
            const bool out = heldOut.contains(k * 500 + i);
            const Dataset &into = out ? heldOutRows : kept[size_t(k)];
            const int64_t row = out ? h++ : at[size_t(k)]++;
            QVERIFY(std::equal(all.idsOf(i).begin(), all.idsOf(i).end(), into.idsOf(row).begin()));
            QCOMPARE(into.trueProbability[size_t(row)], all.trueProbability[size_t(i)]);
            QCOMPARE(into.targets(row, 0), all.targets(i, 0));
        }
    }
    QCOMPARE(h, heldOutRows.size());
    QCOMPARE(heldOutRows.ids.size(), size_t(heldOutRows.size() * 4));
    QCOMPARE(heldOutRows.trueProbability.size(), size_t(heldOutRows.size()));
    QCOMPARE(heldOutRows.fields, 4);

    options.spec = "clicklog:0:50";
    QVERIFY_THROWS_EXCEPTION(InputError, loadDataset(options));
}

void TestClickLog::sparseModelsDefaultToTheClickLog()
{
    QCOMPARE(defaultDatasetFor("sparse_lr"), std::string("clicklog"));
    QCOMPARE(defaultDatasetFor("fm"), std::string("clicklog"));
    QCOMPARE(defaultDatasetFor("fm:4"), std::string("clicklog"));
    QVERIFY_THROWS_EXCEPTION(InputError, defaultDatasetFor("fm:0"));
}

QTEST_GUILESS_MAIN(TestClickLog)
#include "tst_click_log.moc"
