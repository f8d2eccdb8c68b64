#include "engine/click_log.h"

#include "base/error.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace parasync {

namespace {

constexpr int64_t kMaxFields = 1000;
constexpr int64_t kMaxValuesPerField = 100000000;
constexpr double kMaxZipf = 5.0;

// The hidden model: logit = bias + the sum of one N(0, stddev) weight per
// id. A bias of 0 keeps the click rate near one half (it moves with the
// hot values' weights), where a label says the most about the weights; a
// stddev of 0.7 puts the generating model's AUC near 0.85 on the default
// shape: signal to learn, not a problem the bias alone solves.
constexpr double kHiddenBias = 0.0;
constexpr double kHiddenWeightStddev = 0.7;

std::string clickLogUsage()
{
    return "write clicklog, clicklog:FIELDS:VALUES or clicklog:FIELDS:VALUES:ZIPF (e.g. clicklog:10:1000:1.1: "
           "10 fields of 1000 values each, drawn with Zipf exponent 1.1), with FIELDS from 1 to "
           + std::to_string(kMaxFields) + ", VALUES from 2 to " + std::to_string(kMaxValuesPerField)
           + " and ZIPF more than 0 and at most 5";
}

// splitmix64's finalizer: a bijection of 64-bit words that spreads every
// input bit over the output, the same on every host.
uint64_t mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15u;

uint64_t hashPair(uint64_t a, uint64_t b)
{
    return mix(mix(a + kGolden) ^ (b + 0x2545f4914f6cdd1du));
}

// Doubles in [0, 1) and (0, 1] from a 64-bit word: its top 53 bits.
double unitFrom(uint64_t bits)
{
    return double(bits >> 11) * 0x1.0p-53;
}
double openUnitFrom(uint64_t bits)
{
    return (double(bits >> 11) + 1.0) * 0x1.0p-53;
}

// A counter-based stream (splitmix64): word i is mix(key + (i + 1) golden).
// Our own rather than a std:: distribution, whose output differs between
// standard libraries, so a seed draws the same log everywhere.
class CounterStream
{
public:
    explicit CounterStream(uint64_t key) : m_state(key) {}
    uint64_t next() { return mix(m_state += kGolden); }
    double uniform() { return unitFrom(next()); }

private:
    uint64_t m_state;
};

// A standard normal from two hashed words (Box-Muller).
double normalFrom(uint64_t key)
{
    const double u1 = openUnitFrom(mix(key));
    const double u2 = unitFrom(mix(key ^ kGolden));
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Zipf(s) over ranks 1..n by rejection-inversion (Hörmann and Derflinger,
// 1996, as Apache Commons RNG's RejectionInversionZipfSampler): exact, O(1)
// memory and about one uniform a draw. A table of the CDF would need 8 bytes
// per value, 800 MB at the 10^8 values a field may have.
class ZipfSampler
{
public:
    ZipfSampler(int64_t n, double exponent)
        : m_n(double(n))
        , m_exponent(exponent)
        , m_hIntegralX1(hIntegral(1.5) - 1.0)
        , m_hIntegralN(hIntegral(m_n + 0.5))
        , m_s(2.0 - hIntegralInverse(hIntegral(2.5) - h(2.0)))
    {
    }

    int64_t operator()(CounterStream &stream) const
    {
        while (true) {
            const double u = m_hIntegralN + stream.uniform() * (m_hIntegralX1 - m_hIntegralN);
            const double x = hIntegralInverse(u);
            const double k = std::clamp(std::floor(x + 0.5), 1.0, m_n);
            if (k - x <= m_s || u >= hIntegral(k + 0.5) - h(k))
                return int64_t(k);
        }
    }

private:
    // h(x) = x^-s and its integral H(x) = (x^(1-s) - 1) / (1 - s), written
    // so that s = 1 (log x) needs no case of its own.
    double h(double x) const { return std::exp(-m_exponent * std::log(x)); }
    double hIntegral(double x) const
    {
        const double logX = std::log(x);
        return expm1OverX((1.0 - m_exponent) * logX) * logX;
    }
    double hIntegralInverse(double x) const
    {
        const double t = std::max(x * (1.0 - m_exponent), -1.0);
        return std::exp(log1pOverX(t) * x);
    }
    static double log1pOverX(double x)
    {
        return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
    }
    static double expm1OverX(double x)
    {
        return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
    }

    double m_n;
    double m_exponent;
    double m_hIntegralX1;
    double m_hIntegralN;
    double m_s;
};

// Which value of a field has popularity rank r: an affine bijection of
// 0..V-1 per field, (a r + c) mod V with a coprime to V, so that the hot
// values of a field are scattered over its values rather than 0, 1, 2...
// and no permutation of V values needs storing.
struct RankToValue
{
    uint64_t multiplier = 1;
    uint64_t offset = 0;
    uint64_t values = 1;

    RankToValue(int64_t field, int64_t valuesPerField) : values(uint64_t(valuesPerField))
    {
        const uint64_t key = hashPair(0x636c69636b6c6f67u, uint64_t(field));
        offset = mix(key) % values;
        multiplier = 1 + mix(key ^ kGolden) % (values - 1);
        while (std::gcd(multiplier, values) != 1)
            multiplier = multiplier % (values - 1) + 1;
    }
    // V is at most 10^8 < 2^27, so a r + c stays below 2^54.
    int64_t operator()(int64_t rank) const { return int64_t((multiplier * uint64_t(rank - 1) + offset) % values); }
};

double sigmoid(double x)
{
    return 1.0 / (1.0 + std::exp(-x));
}

std::string number(double x)
{
    std::ostringstream out;
    out << x;
    return out.str();
}

} // namespace

ClickLogShape parseClickLogSpec(const std::string &spec)
{
    ClickLogShape shape;
    if (spec == "clicklog")
        return shape;
    if (spec.rfind("clicklog:", 0) != 0)
        throw InputError("dataset '" + spec + "' is not a click log: " + clickLogUsage());
    const std::vector<std::string_view> parts = specArguments(spec, "clicklog");
    bool ok = (parts.size() == 2 || parts.size() == 3) && parseWhole(parts[0], &shape.fields)
              && parseWhole(parts[1], &shape.valuesPerField);
    if (ok && parts.size() == 3)
        ok = parseReal(parts[2], &shape.zipf);
    if (!ok)
        throw InputError("dataset '" + spec + "': " + clickLogUsage());
    if (shape.fields < 1 || shape.fields > kMaxFields)
        throw InputError("dataset '" + spec + "': the number of fields must be from 1 to " + std::to_string(kMaxFields)
                         + ", got " + std::to_string(shape.fields));
    if (shape.valuesPerField < 2 || shape.valuesPerField > kMaxValuesPerField)
        throw InputError("dataset '" + spec + "': the values per field must be from 2 to "
                         + std::to_string(kMaxValuesPerField) + ", got " + std::to_string(shape.valuesPerField));
    if (!(shape.zipf > 0 && shape.zipf <= kMaxZipf))
        throw InputError("dataset '" + spec + "': the Zipf exponent must be more than 0 and at most " + number(kMaxZipf)
                         + ", got " + number(shape.zipf) + " (a long tail of values is about 1.1, the default 2)");
    return shape;
}

uint64_t clickLogId(int64_t field, int64_t value)
{
    // mix() is a bijection, so within a field distinct values have distinct
    // ids; across fields two ids meet with probability 2^-64 a pair.
    return mix(mix(uint64_t(field) * kGolden + 0x1d8e4e27c47d124fu) ^ uint64_t(value));
}

Dataset makeClickLog(const ClickLogShape &shape, uint64_t seed, int shardIndex, int64_t samples)
{
    if (samples < 1)
        throw InputError("the number of samples must be at least 1, got " + std::to_string(samples));
    if (shape.fields < 1 || shape.fields > kMaxFields || shape.valuesPerField < 2
        || shape.valuesPerField > kMaxValuesPerField || !(shape.zipf > 0 && shape.zipf <= kMaxZipf))
        throw InputError("a click log of " + std::to_string(shape.fields) + " fields x "
                         + std::to_string(shape.valuesPerField) + " values, Zipf " + number(shape.zipf)
                         + " is out of range: " + clickLogUsage());

    const ZipfSampler zipf(shape.valuesPerField, shape.zipf);
    std::vector<RankToValue> valueOfRank;
    valueOfRank.reserve(size_t(shape.fields));
    for (int64_t f = 0; f < shape.fields; ++f)
        valueOfRank.emplace_back(f, shape.valuesPerField);
    // The hidden weights depend on the seed alone: every shard and the
    // held-out draw sample one problem.
    const uint64_t weightKey = hashPair(seed, 0x776569676874u);
    const auto hiddenWeight
        = [weightKey](uint64_t id) { return kHiddenWeightStddev * normalFrom(hashPair(weightKey, id)); };
    const uint64_t shardKey = hashPair(hashPair(seed, 0x73616d706c65u), uint64_t(int64_t(shardIndex)));

    Dataset data;
    data.features = Eigen::MatrixXf(samples, 0);
    data.targets.resize(samples, 1);
    data.numClasses = 2;
    data.fields = shape.fields;
    data.ids.resize(size_t(samples * shape.fields));
    data.trueProbability.resize(size_t(samples));
    for (int64_t s = 0; s < samples; ++s) {
        // A stream per sample: sample s is the same whatever came before it.
        CounterStream stream(hashPair(shardKey, uint64_t(s)));
        double logit = kHiddenBias;
        for (int64_t f = 0; f < shape.fields; ++f) {
            const uint64_t id = clickLogId(f, valueOfRank[size_t(f)](zipf(stream)));
            data.ids[size_t(s * shape.fields + f)] = id;
            logit += hiddenWeight(id);
        }
        const double p = sigmoid(logit);
        data.trueProbability[size_t(s)] = float(p);
        data.targets(s, 0) = stream.uniform() < p ? 1.0f : 0.0f;
    }
    data.description = "click log: " + std::to_string(shape.fields) + " fields x "
                       + std::to_string(shape.valuesPerField) + " values, Zipf " + number(shape.zipf);
    return data;
}

float areaUnderRoc(std::span<const float> scores, std::span<const float> labels)
{
    if (scores.size() != labels.size())
        throw std::invalid_argument("areaUnderRoc: " + std::to_string(scores.size()) + " scores for "
                                    + std::to_string(labels.size()) + " labels");
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&scores](size_t a, size_t b) { return scores[a] < scores[b]; });
    // Mann-Whitney: the positives' rank sum, tied scores sharing their
    // average rank (a tie counts half a pair).
    double positiveRankSum = 0;
    double positives = 0;
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j < order.size() && scores[order[j]] == scores[order[i]])
            ++j;
        const double averageRank = 0.5 * double(i + 1 + j);
        for (size_t k = i; k < j; ++k) {
            if (labels[order[k]] > 0.5f) {
                positiveRankSum += averageRank;
                positives += 1;
            }
        }
        i = j;
    }
    const double negatives = double(scores.size()) - positives;
    if (positives == 0 || negatives == 0)
        return std::numeric_limits<float>::quiet_NaN();
    return float((positiveRankSum - positives * (positives + 1) / 2) / (positives * negatives));
}

float logLoss(std::span<const float> probabilities, std::span<const float> labels)
{
    if (probabilities.size() != labels.size())
        throw std::invalid_argument("logLoss: " + std::to_string(probabilities.size()) + " probabilities for "
                                    + std::to_string(labels.size()) + " labels");
    if (probabilities.empty())
        return std::numeric_limits<float>::quiet_NaN();
    constexpr double kClamp = 1e-7;
    double sum = 0;
    for (size_t i = 0; i < probabilities.size(); ++i) {
        const double p = std::clamp(double(probabilities[i]), kClamp, 1.0 - kClamp);
        sum -= labels[i] > 0.5f ? std::log(p) : std::log(1.0 - p);
    }
    return float(sum / double(probabilities.size()));
}

} // namespace parasync
