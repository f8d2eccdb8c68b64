#pragma once

// A synthetic click log with a known answer: categorical fields whose values
// follow a Zipf law (a few values are most of the traffic, as ads, queries
// and users are), each value hashed into a 64-bit id, and labels drawn from a
// hidden logistic model over the ids. The generating model's own
// probabilities score the best AUC any model can reach on the data, so a
// trained model's held-out AUC has a target.

#include "engine/dataset.h"

#include <cstdint>
#include <span>
#include <string>

namespace parasync {

// The default is steep (Zipf 2: a field's top value is 61% of its traffic,
// its top 10 are 94%) so that a few tens of thousands of samples get within
// 0.01 of the best AUC: 2 workers x 20,000 samples and about 1,000 steps of
// 100 with adagrad. A long tail (clicklog:10:100000:1.1, as real clicks are)
// has most of its ids seen a few times or never in such a run, and trained
// models stay about 0.04 below the best AUC there.
struct ClickLogShape
{
    int64_t fields = 10;             // ids per sample
    int64_t valuesPerField = 100000; // each field's vocabulary
    double zipf = 2.0;               // exponent of the values' Zipf law
};

// "clicklog", "clicklog:F:V" or "clicklog:F:V:S" (dataset.h). Throws
// InputError naming the bad part and the range it takes.
ClickLogShape parseClickLogSpec(const std::string &spec);

// The id of value `value` of field `field`: a hash of both, as hashed
// feature columns make it (no vocabulary needed, collisions negligible).
uint64_t clickLogId(int64_t field, int64_t value);

// Worker shard `shardIndex`'s `samples` samples of the log drawn for
// `seed`: the hidden model depends on `seed` alone, so every shard (and the
// held-out draw) samples one problem. Dataset.ids holds the ids,
// targets the labels (0 or 1), trueProbability the hidden model's
// probability of each sample's label being 1.
Dataset makeClickLog(const ClickLogShape &shape, uint64_t seed, int shardIndex, int64_t samples);

// Area under the ROC curve of `scores` against 0/1 `labels` (ties count
// half): the probability that a random positive scores above a random
// negative. NaN when either class is missing.
float areaUnderRoc(std::span<const float> scores, std::span<const float> labels);
// Mean log loss of probabilities against 0/1 labels, clamped away from 0
// and 1 so one confident mistake is large but finite.
float logLoss(std::span<const float> probabilities, std::span<const float> labels);

} // namespace parasync
