#pragma once

// The ids of a click log's batches, as the sparse benchmarks draw them
// (bench_sparse_table, bench_sparse_step): ranks from a Zipf distribution
// (a few ids are pulled by most batches, most ids rarely), each rank hashed
// to a 64-bit id as hashed features are. Header-only: the in-process table
// benchmark links the engine alone.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace parasync::bench {

constexpr size_t kIdsPerStep = 1000;
constexpr double kZipfExponent = 1.1;

inline uint64_t splitmix(uint64_t &state)
{
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Rank r's id: hashed features are scattered over the 64-bit ids.
inline uint64_t idOfRank(uint64_t rank)
{
    uint64_t state = rank * 1000003ULL;
    return splitmix(state);
}

// Batches of 1,000 ids drawn from a Zipf distribution over `rows` ranks,
// before the timing starts; `asPulled`: as a ps receives them (ascending, no
// repeats).
inline std::vector<std::vector<uint64_t>> zipfBatches(size_t rows, size_t batches, bool asPulled)
{
    std::vector<double> cdf(rows);
    double sum = 0.0;
    for (size_t k = 0; k < rows; ++k) {
        sum += 1.0 / std::pow(double(k + 1), kZipfExponent);
        cdf[k] = sum;
    }
    uint64_t state = 2024;
    std::vector<std::vector<uint64_t>> out(batches);
    for (auto &batch : out) {
        batch.reserve(kIdsPerStep);
        for (size_t i = 0; i < kIdsPerStep; ++i) {
            const double u = double(splitmix(state) >> 11) * 0x1.0p-53 * sum;
            const auto rank = size_t(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
            batch.push_back(idOfRank(std::min(rank, rows - 1)));
        }
        if (asPulled) {
            std::sort(batch.begin(), batch.end());
            batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
        }
    }
    return out;
}

} // namespace parasync::bench
