#include "engine/low_rank.h"

#include "base/error.h"

#include <charconv>
#include <cmath>
#include <random>
#include <sstream>
#include <string_view>
#include <vector>

namespace parasync {

namespace {

constexpr int64_t kMaxSide = 1 << 20;
constexpr int64_t kMaxRank = 1024;

std::string lowRankUsage()
{
    return "write lowrank, or lowrank:ROWS:COLS:RANK[:NOISE] (e.g. lowrank:50:50:3:0.1: a 50 x 50 matrix of rank 3, "
           "each entry seen with noise of standard deviation 0.1)";
}

} // namespace

LowRankSpec parseLowRankSpec(const std::string &spec)
{
    LowRankSpec parsed;
    if (spec == "lowrank")
        return parsed;
    if (spec.rfind("lowrank:", 0) != 0)
        throw InputError("dataset '" + spec + "' is not a low-rank matrix: " + lowRankUsage());
    const std::vector<std::string_view> parts = specArguments(spec, "lowrank");
    bool ok = (parts.size() == 3 || parts.size() == 4) && parseWhole(parts[0], &parsed.rows)
              && parseWhole(parts[1], &parsed.cols) && parseWhole(parts[2], &parsed.rank);
    if (ok && parts.size() == 4)
        ok = parseReal(parts[3], &parsed.noise);
    if (!ok)
        throw InputError("dataset '" + spec + "': " + lowRankUsage());
    if (parsed.rows < 1 || parsed.cols < 1 || parsed.rows > kMaxSide || parsed.cols > kMaxSide)
        throw InputError("dataset '" + spec + "': rows and columns must be from 1 to " + std::to_string(kMaxSide));
    if (parsed.rank < 1 || parsed.rank > std::min({parsed.rows, parsed.cols, kMaxRank}))
        throw InputError("dataset '" + spec + "': the rank must be at least 1 and at most the smaller side (and "
                         + std::to_string(kMaxRank) + ")");
    if (!(parsed.noise >= 0) || !std::isfinite(parsed.noise))
        throw InputError("dataset '" + spec + "': the noise is a standard deviation, 0 or more");
    return parsed;
}

Dataset makeLowRankShard(uint64_t seed, int shardIndex, int64_t samples, const LowRankSpec &spec)
{
    if (samples < 1)
        throw InputError("the number of samples must be at least 1, got " + std::to_string(samples));
    // The matrix, from the seed alone: entries of A Bᵀ are sums of `rank`
    // products of N(0, 1/sqrt(rank)) draws, so of unit variance whatever
    // the rank.
    std::mt19937_64 matrixRng(seed ^ 0x5bd1e9955bd1e995u);
    std::normal_distribution<double> factor(0.0, 1.0 / std::sqrt(std::sqrt(double(spec.rank))));
    Eigen::MatrixXd a(spec.rows, spec.rank), b(spec.cols, spec.rank);
    for (Eigen::Index i = 0; i < a.size(); ++i)
        a.data()[i] = factor(matrixRng);
    for (Eigen::Index i = 0; i < b.size(); ++i)
        b.data()[i] = factor(matrixRng);

    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15u + uint64_t(shardIndex) + 1);
    std::uniform_int_distribution<int64_t> row(0, spec.rows - 1), col(0, spec.cols - 1);
    // Drawn for every entry, whatever the noise: the same seed then picks
    // the same entries at every noise level (the floor is the noisy draw
    // against the clean one).
    std::normal_distribution<double> standard(0.0, 1.0);
    Dataset data;
    data.features.resize(samples, 2);
    data.targets.resize(samples, 1);
    for (int64_t s = 0; s < samples; ++s) {
        const int64_t i = row(rng), j = col(rng);
        data.features(s, 0) = float(i);
        data.features(s, 1) = float(j);
        data.targets(s, 0) = float(a.row(i).dot(b.row(j)) + spec.noise * standard(rng));
    }
    data.indexSizes = {spec.rows, spec.cols};
    std::ostringstream description;
    description << "low-rank " << spec.rows << "x" << spec.cols << " rank " << spec.rank << " + N(0, " << spec.noise
                << "²), shard " << shardIndex + 1;
    data.description = description.str();
    return data;
}

} // namespace parasync
