#pragma once

// A non-convex problem whose answer is known: a matrix Y = A Bᵀ of a low
// rank, seen one noisy entry at a time, fitted by a matrix factorization
// U Vᵀ. The best any model can do on entries it has not seen is the noise's
// variance -- the floor a held-out loss falls to when training went well and
// stays above when staleness led it astray (Recht and Ré's Hogwild!-era
// matrix completion is the classic asynchronous-SGD workload; the fitting
// problem is non-convex, its minima equivalent up to a rotation of U and V).
//
// --dataset=lowrank:ROWS:COLS:RANK[:NOISE] draws it; --model=mf:RANK fits it.

#include "engine/dataset.h"

#include <cstdint>
#include <string>

namespace parasync {

struct LowRankSpec
{
    int64_t rows = 50;
    int64_t cols = 50;
    int64_t rank = 3;
    double noise = 0.1; // standard deviation of each seen entry's noise
    // The mean squared error of the true matrix on fresh entries: the
    // held-out loss's floor.
    double floor() const { return noise * noise; }
};

// "lowrank" (the defaults above) or "lowrank:ROWS:COLS:RANK[:NOISE]";
// throws InputError saying what to write.
LowRankSpec parseLowRankSpec(const std::string &spec);

// Worker shard `shardIndex` of the problem `seed` makes: A and B depend on
// `seed` alone (every shard sees one matrix; entries of Y have unit
// variance), each shard draws `samples` entries (i, j) uniformly with its own
// seed. Features are the row and column indices as numbers, the target the
// noisy entry; indexSizes is {rows, cols}.
Dataset makeLowRankShard(uint64_t seed, int shardIndex, int64_t samples, const LowRankSpec &spec);

} // namespace parasync
