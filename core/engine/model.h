#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace parasync {

struct Dataset;
struct TableDeclaration;
struct RowBlock;
using RowBlocks = std::vector<RowBlock>;

// One model variable: name, shape and its values flattened row-major.
struct Variable
{
    std::string name;
    std::vector<int64_t> shape;
    Eigen::VectorXf value;
};

// The model's parameters, in declaration order. Which ps task holds which
// variable, or which slice of it, is the VariablePlacement's to say.
using Parameters = std::vector<Eigen::VectorXf>;

// A gradient's values where they already lie, one span per variable: a ps
// checks and applies a pushed gradient in the parsed request itself, since
// a copy is one more pass over 4 MB a step at 1,000,000 parameters. Only
// what must outlive the request (a sync step's gradients, a staged slice)
// is copied.
using GradientView = std::vector<std::span<const float>>;

// Spans over `values`, which must outlive them.
GradientView viewOf(const Parameters &values);

// A span as the Eigen vector it is, without a copy.
inline Eigen::Map<const Eigen::VectorXf> asVector(std::span<const float> values)
{
    return {values.data(), Eigen::Index(values.size())};
}

// A model is stateless maths: parameters come from the ps, data from the
// worker's shard. All methods are const and thread-safe.
class Model
{
public:
    virtual ~Model() = default;

    // "linear", "softmax", "mlp" (whatever its hidden units) or "mf" (whatever its rank).
    virtual std::string name() const = 0;
    virtual int64_t featureDim() const = 0;
    // Linear: 1 (regression target); softmax: number of classes.
    virtual int64_t outputDim() const = 0;

    // Names and shapes of the variables, with initial values drawn from `seed`
    // (truncated normal, as the seeds' tf.truncated_normal, for the linear
    // model; small values for softmax).
    virtual std::vector<Variable> initialVariables(uint64_t seed) const = 0;

    // Mean loss over the rows `rows` of `data` (all rows when empty), and the
    // gradient of that loss with respect to each variable (same layout as
    // `params`). Linear: mean squared error; softmax: mean cross-entropy.
    virtual float lossAndGradient(const Parameters &params, const Dataset &data, const std::vector<int64_t> &rows,
                                  Parameters *gradient) const = 0;

    // Mean loss over all of `data`.
    float loss(const Parameters &params, const Dataset &data) const
    {
        return lossAndGradient(params, data, {}, nullptr);
    }

    // Fraction of rows classified correctly (softmax), or NaN (linear).
    virtual float accuracy(const Parameters &params, const Dataset &data) const = 0;
    // True for a classifier, whose accuracy() is a number.
    virtual bool classifies() const = 0;

    // Sparse models (engine/sparse_models.h) also have embedding tables,
    // whose rows live on the ps tasks by id (engine/sparse_table.h): only
    // the rows a batch touches are pulled and pushed. Dense models have none.
    virtual std::vector<TableDeclaration> tables(uint64_t seed) const;
    // The distinct ids, ascending, of each table's rows that the samples
    // `rows` of `data` touch (all samples when empty), one list per table.
    virtual std::vector<std::vector<uint64_t>> touchedIds(const Dataset &data, const std::vector<int64_t> &rows) const;
    // lossAndGradient() for a model with tables: `tableRows` holds at least
    // the touched rows of each table (touchedIds(), in that order); the row
    // gradients come back in *rowGradients, one block per table with the
    // ids of `tableRows`' blocks. A dense model ignores the rows.
    virtual float lossAndGradient(const Parameters &params, const RowBlocks &tableRows, const Dataset &data,
                                  const std::vector<int64_t> &rows, Parameters *gradient,
                                  RowBlocks *rowGradients) const;
    // Each sample's predicted probability of label 1 (a binary classifier
    // over a click log); empty for other models.
    virtual std::vector<float> predictions(const Parameters &params, const RowBlocks &tableRows,
                                           const Dataset &data) const;
};

// The metrics a built-in model reports on held-out data (--eval_dataset or
// --eval_fraction), as ModelSignature.metric_names declares them: the loss,
// and for a classifier the accuracy.
std::vector<std::string> heldOutMetricNames(const Model &model);
// Their values for `params` on `heldOut`, in the same order.
std::vector<float> heldOutMetrics(const Model &model, const Parameters &params, const Dataset &heldOut);
// The same for a model with tables, whose rows of the held-out ids are in
// `tableRows`: "heldout_loss" (log loss) and "heldout_auc".
std::vector<float> heldOutMetrics(const Model &model, const Parameters &params, const RowBlocks &tableRows,
                                  const Dataset &heldOut);

// Makes the model named by --model for data of the given shape: "linear",
// "softmax", "mlp" / "mlp:HIDDEN" (one hidden layer of tanh units,
// kDefaultHiddenUnits unless given). Throws InputError for an unknown name
// (listing the known ones) or a shape the model cannot take.
// "mf" / "mf:RANK" fits a low-rank matrix (engine/low_rank.h) and needs
// the data's `indexSizes` (its rows and columns).
// "sparse_lr", "fm" / "fm:K" (engine/sparse_models.h) take categorical
// data, `featureDim` ids per sample (Dataset.fields), whatever `outputDim`.
std::unique_ptr<Model> makeModel(const std::string &name, int64_t featureDim, int64_t outputDim,
                                 const std::vector<int64_t> &indexSizes = {});
constexpr int64_t kDefaultHiddenUnits = 32;
constexpr int64_t kDefaultFactorizationRank = 3;
constexpr int64_t kMaxHiddenUnits = 1 << 16;

// Whether --model names a classifier (softmax, mlp): its data are classes.
// Throws InputError for an mlp with a bad number of hidden units.
bool isClassifierName(const std::string &name);

// Whether --model names a matrix factorization (mf, mf:RANK). Throws
// InputError for a bad rank.
bool isMatrixFactorizationName(const std::string &name);

// The model names makeModel() knows, for --help and the designer.
std::vector<std::string> modelNames();

} // namespace parasync
