#include "base/error.h"
#include "engine/optimizer.h"
#include "engine/sparse_table.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

using namespace parasync;

namespace {

// splitmix64: the tests' own deterministic numbers, the same everywhere.
struct SplitMix
{
    uint64_t state;
    uint64_t next()
    {
        uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double uniform() { return double(next() >> 11) * 0x1.0p-53; }
    float between(float lo, float hi) { return lo + float(uniform()) * (hi - lo); }
};

std::shared_ptr<const Optimizer> optimizer(const std::string &name, float l1 = 0.0f, float l2 = 0.0f)
{
    OptimizerOptions options;
    options.name = name;
    options.learningRate = 0.1f;
    options.l1 = l1;
    options.l2 = l2;
    return makeOptimizer(options);
}

TableDeclaration declaration(int64_t rowWidth, float initStddev = 0.1f, uint64_t seed = 7)
{
    TableDeclaration table;
    table.name = "factors";
    table.rowWidth = rowWidth;
    table.initStddev = initStddev;
    table.seed = seed;
    return table;
}

bool sameBits(std::span<const float> a, std::span<const float> b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::span<const float> asSpan(const Eigen::VectorXf &v)
{
    return {v.data(), size_t(v.size())};
}

// Ids drawn from a Zipf distribution over `universe` ranks (rank k with
// weight 1 / k^s), each rank a scattered 64-bit id.
class ZipfIds
{
public:
    ZipfIds(size_t universe, double s, uint64_t seed) : m_random{seed}
    {
        m_cdf.reserve(universe);
        double sum = 0.0;
        for (size_t k = 1; k <= universe; ++k) {
            sum += 1.0 / std::pow(double(k), s);
            m_cdf.push_back(sum);
        }
        for (double &c : m_cdf)
            c /= sum;
    }
    static uint64_t idOfRank(size_t rank) { return SplitMix{rank * 1000003ULL}.next(); }
    uint64_t next()
    {
        const double u = m_random.uniform();
        const size_t rank = size_t(std::lower_bound(m_cdf.begin(), m_cdf.end(), u) - m_cdf.begin());
        return idOfRank(std::min(rank, m_cdf.size() - 1));
    }

private:
    SplitMix m_random;
    std::vector<double> m_cdf;
};

} // namespace

class TestSparseTable : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void placementSpreadsConsecutiveAndStridedIds_data();
    void placementSpreadsConsecutiveAndStridedIds();
    void initialRowIsDrawnFromSeedAndIdAlone();
    void initialRowsHaveTheTruncatedNormalsSpread();
    void gatherKeepsRowsOnlyWhenCreating();
    void rowRuleMatchesTheDenseRuleBitForBit_data();
    void rowRuleMatchesTheDenseRuleBitForBit();
    void anOptimizerWithoutARowRuleIsRefused();
    void aGradientForARowNotHeldMakesItFirst();
    void aPushOfThePulledRowsUpdatesWhatTheIndexWould();
    void aClearedTableForgetsWhereItsPullsRowsLay();
    void declarationOutOfRangeIsRefused_data();
    void declarationOutOfRangeIsRefused();
    void saveAndLoadRoundTripBitForBit();
    void loadStartsAnotherOptimizersSlotsFresh();
    void loadRefusesContentsOfTheWrongSize();
    void aMillionRowsCostLittleBeyondTheirPayload();
    void aSmallTableTakesLittleMemory();
    void clearLetsGoOfEverything();
    void rowNormsSampleTheWholeTable();
    void hotIdsFindTheHeavyHittersOfAZipfStream();
    void hotIdsCountExactlyWhileTheyFit();
    void hotIdsKeepSpaceSavingsGuarantees();
};

void TestSparseTable::placementSpreadsConsecutiveAndStridedIds_data()
{
    QTest::addColumn<quint64>("stride");
    QTest::newRow("consecutive") << quint64(1);
    QTest::newRow("multiples of 4") << quint64(4);
    QTest::newRow("multiples of 2^20") << (quint64(1) << 20);
}

void TestSparseTable::placementSpreadsConsecutiveAndStridedIds()
{
    QFETCH(quint64, stride);
    constexpr int numPs = 4;
    constexpr int n = 400'000;
    int counts[numPs] = {};
    for (int i = 0; i < n; ++i) {
        const int ps = psOfRow(uint64_t(i) * stride, numPs);
        QVERIFY(ps >= 0 && ps < numPs);
        ++counts[ps];
    }
    // A fair coin's spread at 400,000 ids is 0.07 % of them; 2 % is far beyond it.
    for (int ps = 0; ps < numPs; ++ps) {
        const double share = double(counts[ps]) / n;
        QVERIFY2(std::abs(share - 0.25) < 0.25 * 0.02,
                 qPrintable(QStringLiteral("ps %1 holds %2 of the rows").arg(ps).arg(share)));
    }
    QCOMPARE(psOfRow(12345, 1), 0);
}

void TestSparseTable::initialRowIsDrawnFromSeedAndIdAlone()
{
    const TableDeclaration table = declaration(8, 0.5f, 42);
    std::vector<float> a(8), b(8), other(8), narrow(4);
    initialRow(table, 1234, a);
    initialRow(table, 1234, b);
    QVERIFY(sameBits(a, b));
    // Not all the same value, and another id or seed draws another row.
    QVERIFY(std::set<float>(a.begin(), a.end()).size() == a.size());
    initialRow(table, 1235, other);
    QVERIFY(!sameBits(a, other));
    initialRow(declaration(8, 0.5f, 43), 1234, other);
    QVERIFY(!sameBits(a, other));
    // Column by column: a narrower table's row is the start of a wider one's.
    initialRow(declaration(4, 0.5f, 42), 1234, narrow);
    QVERIFY(sameBits(narrow, std::span<const float>(a).first(4)));
    // A stddev of 0 starts every row at zeros.
    initialRow(declaration(8, 0.0f, 42), 1234, other);
    QVERIFY(std::all_of(other.begin(), other.end(), [](float v) { return v == 0.0f; }));
}

void TestSparseTable::initialRowsHaveTheTruncatedNormalsSpread()
{
    const float stddev = 0.1f;
    const TableDeclaration table = declaration(16, stddev, 3);
    std::vector<float> row(16);
    double sum = 0.0, sumSquares = 0.0, largest = 0.0;
    size_t count = 0;
    for (uint64_t id = 0; id < 20'000; ++id) {
        initialRow(table, id * 7919, row);
        for (const float v : row) {
            sum += v;
            sumSquares += double(v) * v;
            largest = std::max(largest, double(std::abs(v)));
            ++count;
        }
    }
    const double mean = sum / double(count);
    const double sd = std::sqrt(sumSquares / double(count) - mean * mean);
    // N(0, 1) truncated at +-2 has standard deviation
    // sqrt(1 - 4 phi(2) / (Phi(2) - Phi(-2))) = 0.879626.
    const double expectedSd = 0.879626 * stddev;
    qInfo("%zu values: mean %.6f, stddev %.6f (truncated normal: %.6f), largest |v| %.6f", count, mean, sd, expectedSd,
          largest);
    QVERIFY(std::abs(mean) < 0.002 * stddev * 2);
    QVERIFY(std::abs(sd - expectedSd) < 0.01 * expectedSd);
    QVERIFY(largest <= 2.0 * stddev);
    QVERIFY(largest > 1.95 * stddev); // the tails are there, cut at 2
}

void TestSparseTable::gatherKeepsRowsOnlyWhenCreating()
{
    SparseTable table(declaration(3), optimizer("sgd"));
    const std::vector<uint64_t> ids = {5, 900'000'000'000ULL};
    std::vector<float> out(6), expected(3);

    table.gather(ids, out, false);
    QCOMPARE(table.rows(), int64_t(0));
    QVERIFY(!table.holds(5));
    for (size_t i = 0; i < ids.size(); ++i) {
        initialRow(table.declaration(), ids[i], expected);
        QVERIFY(sameBits(std::span<const float>(out).subspan(i * 3, 3), expected));
    }

    table.gather(ids, out, true);
    QCOMPARE(table.rows(), int64_t(2));
    QVERIFY(table.holds(5) && table.holds(900'000'000'000ULL) && !table.holds(6));
    initialRow(table.declaration(), 5, expected);
    QVERIFY(sameBits(std::span<const float>(out).first(3), expected));

    // A lookup without create sees a held row as it is now, not as it began.
    const std::vector<float> gradient = {1.0f, 2.0f, 3.0f};
    table.apply(std::span<const uint64_t>(ids).first(1), gradient, 1.0f);
    std::vector<float> now(3);
    table.gather(std::span<const uint64_t>(ids).first(1), now, false);
    for (size_t c = 0; c < 3; ++c)
        QCOMPARE(now[c], expected[c] - 0.1f * gradient[c]);
    QCOMPARE(table.rows(), int64_t(2));
}

void TestSparseTable::rowRuleMatchesTheDenseRuleBitForBit_data()
{
    QTest::addColumn<QString>("rule");
    QTest::addColumn<float>("l1");
    QTest::newRow("sgd") << QStringLiteral("sgd") << 0.0f;
    QTest::newRow("momentum") << QStringLiteral("momentum") << 0.0f;
    QTest::newRow("adagrad") << QStringLiteral("adagrad") << 0.0f;
    QTest::newRow("ftrl") << QStringLiteral("ftrl") << 0.0f;
    // l1 large enough that some values are exactly 0 after a step.
    QTest::newRow("ftrl with l1") << QStringLiteral("ftrl") << 0.3f;
}

void TestSparseTable::rowRuleMatchesTheDenseRuleBitForBit()
{
    QFETCH(QString, rule);
    QFETCH(float, l1);
    const auto opt = optimizer(rule.toStdString(), l1, 0.01f);
    // An odd width: rows begin at every alignment in the arena, so the row
    // rule runs on SIMD bodies and scalar tails of every length.
    constexpr size_t width = 7;
    constexpr size_t rows = 40;
    SparseTable table(declaration(int64_t(width), 0.2f), opt);
    std::vector<uint64_t> ids(rows);
    for (size_t i = 0; i < rows; ++i)
        ids[i] = i * 1'000'003 + 11;
    std::vector<float> pulled(rows * width);
    table.gather(ids, pulled, true);

    // The dense rule on the same values: all rows as one variable.
    Eigen::VectorXf dense = Eigen::Map<const Eigen::VectorXf>(pulled.data(), Eigen::Index(pulled.size()));
    SlotState state = opt->makeSlots(dense.size());

    SplitMix random{99};
    int zeros = 0;
    for (int step = 0; step < 6; ++step) {
        std::vector<float> gradient(rows * width);
        for (float &g : gradient)
            g = random.between(-1.0f, 1.0f);
        const float scale = step % 2 == 0 ? 1.0f : 0.37f;
        table.apply(ids, gradient, scale);
        opt->apply(dense, Eigen::Map<const Eigen::VectorXf>(gradient.data(), Eigen::Index(gradient.size())), state,
                   scale);

        table.gather(ids, pulled, false);
        QVERIFY2(sameBits(pulled, asSpan(dense)), qPrintable(QStringLiteral("values differ after step %1").arg(step)));
        zeros = int(std::count(pulled.begin(), pulled.end(), 0.0f));
    }
    if (l1 > 0.0f)
        QVERIFY2(zeros > 0, "l1 set no value to 0: the case is not exercised");

    // The state beside each row is the dense rule's, slot by slot.
    const TableContents contents = table.save();
    QCOMPARE(contents.slotNames, opt->rowSlotNames());
    QCOMPARE(contents.slots.size(), rows * width * contents.slotNames.size());
    for (size_t k = 0; k < contents.slotNames.size(); ++k) {
        const Eigen::VectorXf &slot = state.slots.at(contents.slotNames[k]);
        for (size_t i = 0; i < rows; ++i) {
            // save() orders by id; the ids were made ascending.
            const std::span<const float> saved
                = std::span<const float>(contents.slots).subspan((i * contents.slotNames.size() + k) * width, width);
            QVERIFY(sameBits(saved, asSpan(slot).subspan(i * width, width)));
        }
    }
}

// A backup replaying its primary's update may lack a row the primary made;
// the row starts where a pull would have started it, then takes the step.
void TestSparseTable::aGradientForARowNotHeldMakesItFirst()
{
    SparseTable made(declaration(2, 0.5f), optimizer("sgd"));
    SparseTable pulled(declaration(2, 0.5f), optimizer("sgd"));
    std::vector<float> out(4);
    pulled.gather(std::vector<uint64_t>{3, 4}, out, true);
    made.gather(std::vector<uint64_t>{3}, std::span(out).first(2), true);
    QVERIFY(!made.holds(4));
    const std::vector<float> gradient{1, 2, 3, 4};
    made.apply(std::vector<uint64_t>{3, 4}, gradient, 1.0f);
    pulled.apply(std::vector<uint64_t>{3, 4}, gradient, 1.0f);
    QCOMPARE(made.rows(), int64_t(2));
    std::vector<float> fromMade(4), fromPulled(4);
    made.gather(std::vector<uint64_t>{3, 4}, fromMade, false);
    pulled.gather(std::vector<uint64_t>{3, 4}, fromPulled, false);
    QCOMPARE(fromMade, fromPulled);
    // And the step was taken: row 4 is not at its initial values.
    std::vector<float> initial(2);
    initialRow(made.declaration(), 4, initial);
    QVERIFY(fromMade[2] != initial[0] && fromMade[3] != initial[1]);
}

void TestSparseTable::aPushOfThePulledRowsUpdatesWhatTheIndexWould()
{
    // A ps task's step: the batch's rows pulled, then their gradients
    // pushed. `remembered` finds the rows where its pull left them; in
    // `lookedUp` so many pulls came between that they are looked up again.
    constexpr size_t width = 4;
    SparseTable remembered(declaration(int64_t(width)), optimizer("adagrad"));
    SparseTable lookedUp(declaration(int64_t(width)), optimizer("adagrad"));
    SplitMix random{3};
    std::vector<uint64_t> batch(50);
    for (uint64_t &id : batch)
        id = random.next() % 1000;
    std::sort(batch.begin(), batch.end());
    batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
    std::vector<float> out(batch.size() * width);
    remembered.gather(batch, out, true);
    lookedUp.gather(batch, out, true);
    for (size_t k = 0; k <= SparseTable::kRememberedGathers; ++k) {
        const std::vector<uint64_t> other{1000 + k};
        lookedUp.gather(other, std::span(out).first(width), true);
        remembered.gather(other, std::span(out).first(width), true);
    }
    // Pulled again in `remembered` only: its rows are where the pull of the
    // batch left them, the same rows by another way.
    remembered.gather(batch, out, true);
    std::vector<float> gradient(batch.size() * width);
    for (float &g : gradient)
        g = random.between(-1.0f, 1.0f);
    QVERIFY(remembered.notHeld(batch).empty() && lookedUp.notHeld(batch).empty());
    remembered.apply(batch, gradient, 0.5f);
    lookedUp.apply(batch, gradient, 0.5f);
    const TableContents a = remembered.save(), b = lookedUp.save();
    QCOMPARE(a.ids, b.ids);
    QVERIFY(sameBits(a.values, b.values));
    QVERIFY(sameBits(a.slots, b.slots));
    // And the update was made: no row of the batch is at its initial values.
    std::vector<float> initial(width), now(width);
    for (const uint64_t id : batch) {
        initialRow(remembered.declaration(), id, initial);
        remembered.gather(std::vector<uint64_t>{id}, now, false);
        QVERIFY(!sameBits(now, initial));
    }
}

void TestSparseTable::aClearedTableForgetsWhereItsPullsRowsLay()
{
    // After clear() (a restore) the row numbers of an earlier pull name the
    // rows of other ids: a push of that pull's ids must not land on them.
    SparseTable table(declaration(2, 0.5f), optimizer("sgd"));
    const std::vector<uint64_t> before{10, 20, 30}, after{40, 50, 60};
    std::vector<float> out(6);
    table.gather(before, out, true);
    table.clear();
    table.gather(after, out, true);
    QCOMPARE(table.notHeld(before), before);
    const std::vector<float> gradient{1, 2, 3, 4, 5, 6};
    table.apply(before, gradient, 1.0f);
    QCOMPARE(table.rows(), int64_t(6));
    std::vector<float> initial(2), now(6);
    table.gather(after, now, false);
    for (size_t i = 0; i < after.size(); ++i) {
        initialRow(table.declaration(), after[i], initial);
        QVERIFY2(sameBits(std::span<const float>(now).subspan(i * 2, 2), initial),
                 qPrintable(QStringLiteral("row %1 changed by a push of other ids").arg(after[i])));
    }
}

void TestSparseTable::anOptimizerWithoutARowRuleIsRefused()
{
    const auto adam = optimizer("adam");
    QCOMPARE(adam->rowSlots(), -1);
    QVERIFY(adam->rowSlotNames().empty());
    std::vector<float> value(2), slots(4), gradient(2);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, adam->applyRow(value, slots, gradient, 1.0f));
    try {
        SparseTable table(declaration(4), adam);
        QFAIL("a table took adam");
    } catch (const InputError &error) {
        const QString message = QString::fromUtf8(error.what());
        QVERIFY2(message.contains(QLatin1String("adam")) && message.contains(QLatin1String("adagrad")), error.what());
    }
    QCOMPARE(optimizer("sgd")->rowSlots(), 0);
    QCOMPARE(optimizer("momentum")->rowSlotNames(), std::vector<std::string>{"momentum"});
    QCOMPARE(optimizer("adagrad")->rowSlotNames(), std::vector<std::string>{"accumulator"});
    QCOMPARE(optimizer("ftrl")->rowSlotNames(), (std::vector<std::string>{"accumulator", "linear"}));
}

void TestSparseTable::declarationOutOfRangeIsRefused_data()
{
    QTest::addColumn<qint64>("rowWidth");
    QTest::addColumn<float>("initStddev");
    QTest::addColumn<QString>("says");
    QTest::newRow("no columns") << qint64(0) << 0.1f << QStringLiteral("row width from 1 to 4096");
    QTest::newRow("negative width") << qint64(-3) << 0.1f << QStringLiteral("row width from 1 to 4096");
    QTest::newRow("too wide") << qint64(4097) << 0.1f << QStringLiteral("row width from 1 to 4096");
    QTest::newRow("negative stddev") << qint64(8) << -0.1f << QStringLiteral(">= 0");
    QTest::newRow("nan stddev") << qint64(8) << std::numeric_limits<float>::quiet_NaN() << QStringLiteral(">= 0");
    QTest::newRow("infinite stddev") << qint64(8) << std::numeric_limits<float>::infinity() << QStringLiteral(">= 0");
}

void TestSparseTable::declarationOutOfRangeIsRefused()
{
    QFETCH(qint64, rowWidth);
    QFETCH(float, initStddev);
    QFETCH(QString, says);
    try {
        SparseTable table(declaration(rowWidth, initStddev), optimizer("sgd"));
        QFAIL("an out-of-range declaration was accepted");
    } catch (const InputError &error) {
        const QString message = QString::fromUtf8(error.what());
        QVERIFY2(message.contains(says) && message.contains(QLatin1String("factors")), error.what());
    }
    // The edges themselves are fine.
    SparseTable widest(declaration(TableDeclaration::kMaxRowWidth, 0.0f), optimizer("sgd"));
    SparseTable narrowest(declaration(1, 0.0f), optimizer("sgd"));
    QCOMPARE(widest.rowWidth(), TableDeclaration::kMaxRowWidth);
}

void TestSparseTable::saveAndLoadRoundTripBitForBit()
{
    constexpr size_t width = 5;
    const auto opt = optimizer("adagrad");
    SparseTable source(declaration(int64_t(width), 0.3f), opt);
    SplitMix random{5};
    std::vector<uint64_t> ids(1000);
    for (uint64_t &id : ids)
        id = random.next();
    std::sort(ids.begin(), ids.end());
    std::vector<float> pulled(ids.size() * width), gradient(ids.size() * width);
    source.gather(ids, pulled, true);
    for (float &g : gradient)
        g = random.between(-2.0f, 2.0f);
    source.apply(ids, gradient, 1.0f);

    const TableContents saved = source.save();
    QVERIFY(std::is_sorted(saved.ids.begin(), saved.ids.end()));
    QCOMPARE(saved.ids, ids);
    QCOMPARE(saved.updateCounts, std::vector<int64_t>(ids.size(), 0));

    // Into a table that holds rows of its own: two of the saved ids, and others.
    SparseTable target(declaration(int64_t(width), 0.3f), opt);
    const std::vector<uint64_t> own = {ids[3], 17, ids[500], 18};
    std::vector<float> ownPulled(own.size() * width);
    target.gather(own, ownPulled, true);
    const std::vector<float> ownGradient(own.size() * width, 0.5f);
    target.apply(own, ownGradient, 1.0f);
    std::vector<float> untouched(2 * width);
    target.gather(std::vector<uint64_t>{17, 18}, untouched, false);

    target.load(saved);
    QCOMPARE(target.rows(), int64_t(ids.size() + 2));
    const TableContents reloaded = target.save();
    TableContents withoutOwn;
    for (size_t i = 0; i < reloaded.ids.size(); ++i) {
        if (reloaded.ids[i] == 17 || reloaded.ids[i] == 18)
            continue;
        withoutOwn.ids.push_back(reloaded.ids[i]);
        const auto values = std::span<const float>(reloaded.values).subspan(i * width, width);
        withoutOwn.values.insert(withoutOwn.values.end(), values.begin(), values.end());
        const auto slots = std::span<const float>(reloaded.slots).subspan(i * width, width);
        withoutOwn.slots.insert(withoutOwn.slots.end(), slots.begin(), slots.end());
    }
    QCOMPARE(withoutOwn.ids, saved.ids);
    QVERIFY(sameBits(withoutOwn.values, saved.values));
    QVERIFY(sameBits(withoutOwn.slots, saved.slots));
    // The rows the checkpoint did not hold are as they were.
    std::vector<float> after(2 * width);
    target.gather(std::vector<uint64_t>{17, 18}, after, false);
    QVERIFY(sameBits(after, untouched));
    // And training goes on from the restored state as it would have.
    source.apply(ids, gradient, 1.0f);
    target.apply(ids, gradient, 1.0f);
    std::vector<float> a(ids.size() * width), b(ids.size() * width);
    source.gather(ids, a, false);
    target.gather(ids, b, false);
    QVERIFY(sameBits(a, b));
}

void TestSparseTable::loadStartsAnotherOptimizersSlotsFresh()
{
    constexpr size_t width = 3;
    SparseTable momentum(declaration(int64_t(width)), optimizer("momentum"));
    const std::vector<uint64_t> ids = {1, 2};
    std::vector<float> pulled(ids.size() * width);
    momentum.gather(ids, pulled, true);
    const std::vector<float> gradient = {1, 2, 3, 4, 5, 6};
    momentum.apply(ids, gradient, 1.0f);
    const TableContents saved = momentum.save();
    QCOMPARE(saved.slotNames, std::vector<std::string>{"momentum"});

    SparseTable ftrl(declaration(int64_t(width)), optimizer("ftrl"));
    ftrl.load(saved);
    const TableContents loaded = ftrl.save();
    QVERIFY(sameBits(loaded.values, saved.values));
    QCOMPARE(loaded.slotNames, (std::vector<std::string>{"accumulator", "linear"}));
    for (size_t i = 0; i < ids.size(); ++i) {
        for (size_t c = 0; c < width; ++c) {
            QCOMPARE(loaded.slots[i * 2 * width + c], 0.1f);         // n starts at 0.1
            QCOMPARE(loaded.slots[i * 2 * width + width + c], 0.0f); // z at 0
        }
    }

    // A slot of the same name and meaning carries over: FTRL's n and
    // Adagrad's accumulator are both 0.1 plus the sum of squared gradients.
    ftrl.apply(ids, gradient, 1.0f);
    const TableContents trained = ftrl.save();
    SparseTable adagrad(declaration(int64_t(width)), optimizer("adagrad"));
    adagrad.load(trained);
    const TableContents carried = adagrad.save();
    for (size_t i = 0; i < ids.size(); ++i) {
        QVERIFY(sameBits(std::span<const float>(carried.slots).subspan(i * width, width),
                         std::span<const float>(trained.slots).subspan(i * 2 * width, width)));
    }
}

void TestSparseTable::loadRefusesContentsOfTheWrongSize()
{
    SparseTable table(declaration(4), optimizer("adagrad"));
    TableContents contents;
    contents.ids = {1, 2};
    contents.values.assign(7, 0.0f);
    QVERIFY_THROWS_EXCEPTION(InputError, table.load(contents));
    contents.values.assign(8, 0.0f);
    contents.slotNames = {"accumulator"};
    contents.slots.assign(5, 0.0f);
    QVERIFY_THROWS_EXCEPTION(InputError, table.load(contents));
    contents.slots.assign(8, 0.5f);
    contents.updateCounts = {0};
    QVERIFY_THROWS_EXCEPTION(InputError, table.load(contents));
    QCOMPARE(table.rows(), int64_t(0));
    contents.updateCounts = {};
    table.load(contents);
    QCOMPARE(table.rows(), int64_t(2));
}

void TestSparseTable::aMillionRowsCostLittleBeyondTheirPayload()
{
    constexpr size_t width = 16;
    SparseTable table(declaration(int64_t(width), 0.0f), optimizer("adagrad"));
    constexpr size_t batch = 10'000;
    std::vector<uint64_t> ids(batch);
    std::vector<float> out(batch * width);
    SplitMix random{1};
    for (size_t done = 0; done < 1'000'000; done += batch) {
        for (uint64_t &id : ids)
            id = random.next();
        table.gather(ids, out, true);
    }
    QCOMPARE(table.rows(), int64_t(1'000'000));
    // A row: 16 values and 16 accumulators.
    QCOMPARE(table.payloadBytes(), size_t(1'000'000) * 32 * sizeof(float));
    const double payload = double(table.payloadBytes());
    const double memory = double(table.memoryBytes());
    qInfo("1M rows x 16, adagrad: payload %.1f MB, memory %.1f MB, %.1f bytes a row beyond the payload (%.1f %%)",
          payload / 1e6, memory / 1e6, (memory - payload) / 1e6, (memory / payload - 1.0) * 100.0);
    // The index holds each id with its row's place, 16 bytes an entry at a
    // load of 7/16 to 7/8: at 1M rows it has just doubled (2M entries), the
    // most a table pays, 38 bytes a row; at 2.5M rows a ps (10M over 4 ps
    // tasks, bench_sparse_table) it is 23 %.
    QVERIFY(memory >= payload + 16.0 * 1e6);
    QVERIFY(memory <= payload * 1.30);
}

void TestSparseTable::aSmallTableTakesLittleMemory()
{
    SparseTable table(declaration(16, 0.0f), optimizer("ftrl"));
    QVERIFY2(table.memoryBytes() < 1024, qPrintable(QString::number(table.memoryBytes())));
    std::vector<float> out(3 * 16);
    table.gather(std::vector<uint64_t>{1, 2, 3}, out, true);
    QCOMPARE(table.payloadBytes(), size_t(3 * 16 * 3 * sizeof(float)));
    QVERIFY2(table.memoryBytes() < 64 * 1024, qPrintable(QString::number(table.memoryBytes())));
}

void TestSparseTable::clearLetsGoOfEverything()
{
    SparseTable table(declaration(8, 0.0f), optimizer("sgd"));
    const size_t empty = table.memoryBytes();
    std::vector<uint64_t> ids(100'000);
    for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = i;
    std::vector<float> out(ids.size() * 8);
    table.gather(ids, out, true);
    QVERIFY(table.memoryBytes() > table.payloadBytes());
    table.clear();
    QCOMPARE(table.rows(), int64_t(0));
    QVERIFY(!table.holds(5));
    QCOMPARE(table.memoryBytes(), empty);
    table.gather(std::span<const uint64_t>(ids).first(2), std::span<float>(out).first(16), true);
    QCOMPARE(table.rows(), int64_t(2));
}

void TestSparseTable::rowNormsSampleTheWholeTable()
{
    SparseTable table(declaration(2, 0.0f), optimizer("sgd"));
    TableContents contents;
    for (uint64_t i = 0; i < 100; ++i) {
        contents.ids.push_back(i);
        // Row i's norm is i: (0.6 i, 0.8 i).
        contents.values.push_back(0.6f * float(i));
        contents.values.push_back(0.8f * float(i));
    }
    table.load(contents);
    const std::vector<float> all = table.rowNorms(1000);
    QCOMPARE(all.size(), size_t(100));
    for (size_t i = 0; i < all.size(); ++i)
        QVERIFY(std::abs(all[i] - float(i)) < 1e-4f);
    const std::vector<float> some = table.rowNorms(10);
    QCOMPARE(some.size(), size_t(10));
    // Spread over the table, not its first rows.
    for (size_t k = 0; k < some.size(); ++k)
        QVERIFY(std::abs(some[k] - float(10 * k)) < 1e-4f);
    QVERIFY(table.rowNorms(0).empty());
}

void TestSparseTable::hotIdsFindTheHeavyHittersOfAZipfStream()
{
    ZipfIds stream(100'000, 1.1, 8);
    HotIds hot(64);
    std::map<uint64_t, int64_t> truth;
    std::vector<uint64_t> batch(1000);
    for (int b = 0; b < 300; ++b) {
        for (uint64_t &id : batch) {
            id = stream.next();
            ++truth[id];
        }
        hot.add(batch);
    }
    QCOMPARE(hot.total(), int64_t(300'000));
    std::vector<std::pair<int64_t, uint64_t>> byCount;
    for (const auto &[id, count] : truth)
        byCount.emplace_back(count, id);
    std::sort(byCount.rbegin(), byCount.rend());

    const std::vector<HotIds::Entry> top = hot.top(5);
    QCOMPARE(top.size(), size_t(5));
    for (size_t i = 0; i < top.size(); ++i) {
        qInfo("#%zu: id %llu counted %lld (error <= %lld), true %lld", i + 1, (unsigned long long)top[i].id,
              (long long)top[i].count, (long long)top[i].error, (long long)byCount[i].first);
        QCOMPARE(top[i].id, byCount[i].second);
        QVERIFY(top[i].id == ZipfIds::idOfRank(i));
        // Counted from their first appearance, among the first 64 distinct
        // ids, and never evicted: exact.
        QCOMPARE(top[i].error, int64_t(0));
        QCOMPARE(top[i].count, byCount[i].first);
    }
    QCOMPARE(hot.top(1000).size(), size_t(64));
}

void TestSparseTable::hotIdsCountExactlyWhileTheyFit()
{
    HotIds hot(4);
    hot.add(std::vector<uint64_t>{7, 7, 7, 9, 9, 11});
    const std::vector<HotIds::Entry> top = hot.top(10);
    QCOMPARE(top.size(), size_t(3));
    QCOMPARE(top[0].id, uint64_t(7));
    QCOMPARE(top[0].count, int64_t(3));
    QCOMPARE(top[1].id, uint64_t(9));
    QCOMPARE(top[1].count, int64_t(2));
    QCOMPARE(top[2].id, uint64_t(11));
    QCOMPARE(top[2].error, int64_t(0));
    // 12 takes the last free counter; 13 then takes over the smallest (11's),
    // inheriting its count as its error.
    hot.add(std::vector<uint64_t>{12, 13});
    const std::vector<HotIds::Entry> after = hot.top(4);
    QCOMPARE(after[2].id, uint64_t(13));
    QCOMPARE(after[2].count, int64_t(2));
    QCOMPARE(after[2].error, int64_t(1));
    QCOMPARE(after[3].id, uint64_t(12));
    QCOMPARE(after[3].count, int64_t(1));
    QCOMPARE(after[3].error, int64_t(0));
    QCOMPARE(hot.total(), int64_t(8));
}

void TestSparseTable::hotIdsKeepSpaceSavingsGuarantees()
{
    // Many takeovers among few counters: every id held once, the counts
    // adding up to the ids seen, each count within its error of the truth,
    // and every id seen more than total / capacity times held.
    constexpr size_t capacity = 16;
    HotIds hot(capacity);
    ZipfIds stream(300, 0.8, 21);
    std::map<uint64_t, int64_t> truth;
    std::vector<uint64_t> batch(97);
    for (int b = 0; b < 200; ++b) {
        for (uint64_t &id : batch) {
            id = stream.next();
            ++truth[id];
        }
        hot.add(batch);
        const std::vector<HotIds::Entry> entries = hot.top(capacity);
        QCOMPARE(entries.size(), capacity);
        std::set<uint64_t> held;
        int64_t sum = 0;
        for (const HotIds::Entry &e : entries) {
            QVERIFY(held.insert(e.id).second);
            sum += e.count;
            const int64_t real = truth.count(e.id) ? truth.at(e.id) : 0;
            QVERIFY2(e.count >= real && e.count - e.error <= real,
                     qPrintable(QStringLiteral("batch %1: count %2, error %3, true %4")
                                    .arg(b)
                                    .arg(e.count)
                                    .arg(e.error)
                                    .arg(real)));
        }
        QCOMPARE(sum, hot.total());
        for (const auto &[id, count] : truth) {
            if (count > hot.total() / int64_t(capacity))
                QVERIFY(held.count(id));
        }
    }
}

QTEST_GUILESS_MAIN(TestSparseTable)
#include "tst_sparse_table.moc"
