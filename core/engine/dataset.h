#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parasync {

// One worker's shard of training data, rows are samples. Between-graph
// replication: every worker loads its own shard.
struct Dataset
{
    // n x featureDim.
    Eigen::MatrixXf features;
    // Regression: n x 1 targets. Classification: n x 1 class indices (as float).
    Eigen::MatrixXf targets;
    // 0 for regression, the number of classes for classification.
    int64_t numClasses = 0;
    // Human-readable origin ("linear y=2x+10+N(0,0.33), shard 1 of 2").
    std::string description;
    // For features that are indices (a matrix's row and column), how many
    // values each can take; empty when the features are numbers.
    std::vector<int64_t> indexSizes;
    // Categorical data (a click log): `fields` ids per sample, sample after
    // sample (size() x fields), each a field's value hashed into a 64-bit id
    // (clickLogId); `features` then has no columns. Empty otherwise.
    int64_t fields = 0;
    std::vector<uint64_t> ids;
    // Synthetic data drawn from a known model: its probability of each
    // sample's label being 1, so that the best any model can score (the
    // generating model's own AUC) is known. Empty otherwise.
    std::vector<float> trueProbability;

    int64_t size() const { return features.rows(); }
    int64_t featureDim() const { return fields > 0 ? fields : features.cols(); }
    bool categorical() const { return fields > 0; }
    std::span<const uint64_t> idsOf(int64_t row) const { return {ids.data() + row * fields, size_t(fields)}; }
};

// Which data a task trains on, as given by --dataset:
//   "linear"            synthetic y = 2x + 10 + N(0, 0.33), x uniform in [-1, 1]
//   "blobs"             synthetic Gaussian blobs, 10 classes in 2 dimensions
//   "blobs:K:D"         K classes in D dimensions
//   "mnist:DIR"         DIR/train-images-idx3-ubyte + DIR/train-labels-idx1-ubyte
//   "idx:IMAGES,LABELS" explicit IDX file paths
//   "lowrank:R:C:K[:N]" synthetic entries of an R x C matrix of rank K, seen
//                       with noise N (engine/low_rank.h); "lowrank" 50:50:3:0.1
//   "clicklog[:F:V[:S]]" synthetic click log (engine/click_log.h): F fields
//                       (default 10), each with V values (default 100000)
//                       drawn Zipf(S) (default 2), hashed into 64-bit ids;
//                       labels from a hidden logistic model over the ids
//   "csv:PATH"          CSV, optional header row, last column is the target
//                       (regression) or class index (classification)
// An empty string picks the model's default ("linear" for linear, "blobs"
// for softmax).
struct DatasetOptions
{
    std::string spec;
    // Worker shard: shard `shardIndex` of `numShards`. Synthetic sets draw
    // `samplesPerShard` samples from seed + shardIndex; file sets take every
    // numShards-th row starting at shardIndex.
    int shardIndex = 0;
    int numShards = 1;
    int64_t samplesPerShard = 100;
    uint64_t seed = 0;
    // True when the model is a classifier (csv: last column is a class index).
    bool classification = false;
    // --eval_fraction: this fraction of the dataset's rows is held out of
    // every worker's shard (HeldOutRows); 0 holds out none.
    double evalFraction = 0;
};

// The rows --eval_fraction holds out of training, the same on every worker:
// the round(fraction x totalRows) rows of smallest hash(seed, row), so the
// choice is spread over the whole dataset (a file sorted by class loses no
// class), needs no shared state between workers, and does not depend on the
// standard library's random number distributions. A dataset's rows are a
// file's rows in order or, for synthetic data, shard after shard of
// samplesPerShard rows each. Throws InputError when the fraction is not
// between 0 and 1, or would hold out no row or every row.
class HeldOutRows
{
public:
    HeldOutRows(double fraction, uint64_t seed, int64_t totalRows);
    bool contains(int64_t row) const { return m_heldOut[size_t(row)]; }
    int64_t count() const { return m_count; }

private:
    std::vector<bool> m_heldOut;
    int64_t m_count = 0;
};

// Loads a worker's shard. Throws InputError naming the file, line or field
// and what to fix: missing files, bad IDX magic numbers or sizes, CSV rows
// with the wrong number of columns or non-numeric cells, unknown specs.
// With options.evalFraction, the shard lacks the held-out rows.
Dataset loadDataset(const DatasetOptions &options);

// The data the chief scores its parameters on, which no worker trains on:
// `evalSpec` (--eval_dataset, the --dataset syntax) when given, a file whole
// or a synthetic draw from a shard no worker has (index options.numShards);
// else the rows options.evalFraction holds out of options.spec. Throws
// InputError as loadDataset does, and when there is no held-out data.
Dataset loadHeldOutData(const DatasetOptions &options, const std::string &evalSpec);

// The colon-separated arguments of a synthetic dataset's spec after its
// name ("lowrank:50:50:3:0.1" with name "lowrank" gives "50", "50", "3",
// "0.1"); none for the name alone. The spec must begin with `name`.
std::vector<std::string_view> specArguments(std::string_view spec, std::string_view name);
// Whether all of `text` is one whole (or real) number, read into *out.
bool parseWhole(std::string_view text, int64_t *out);
bool parseReal(std::string_view text, double *out);

// The default --dataset for a model name.
std::string defaultDatasetFor(const std::string &model);

// Readers, exposed for tests and tools.
Dataset readCsv(const std::string &path, bool classification, int shardIndex, int numShards);
Dataset readIdx(const std::string &imagesPath, const std::string &labelsPath, int shardIndex, int numShards);
Dataset makeLinearData(uint64_t seed, int64_t samples, float w = 2.0f, float b = 10.0f, float noiseStddev = 0.33f);
Dataset makeBlobs(uint64_t seed, int64_t samples, int64_t classes, int64_t dims);
// Worker shard `shardIndex` of the blobs problem made from `seed`: the class
// centres depend on `seed` alone, so all shards sample the same problem, while
// the samples differ per shard. makeBlobs(seed, ...) is shard 0.
Dataset makeBlobsShard(uint64_t seed, int shardIndex, int64_t samples, int64_t classes, int64_t dims);

} // namespace parasync
