#include "engine/model.h"

#include "base/error.h"
#include "engine/click_log.h"
#include "engine/dataset.h"
#include "engine/sparse_models.h"
#include "engine/sparse_table.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

namespace parasync {

namespace {

using RowMajorMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::string number(float x)
{
    std::ostringstream out;
    out << x;
    return out.str();
}

// As tf.truncated_normal: draws beyond two standard deviations are redrawn.
Eigen::VectorXf truncatedNormal(Eigen::Index size, float stddev, std::mt19937_64 &rng)
{
    std::normal_distribution<double> normal(0.0, 1.0);
    Eigen::VectorXf values(size);
    for (Eigen::Index i = 0; i < size; ++i) {
        double x = normal(rng);
        while (std::abs(x) > 2.0)
            x = normal(rng);
        values[i] = static_cast<float>(x * stddev);
    }
    return values;
}

// The batch a call works on: the whole dataset without a copy, or the gathered rows.
class Batch
{
public:
    Batch(const Dataset &data, const std::vector<int64_t> &rows, int64_t featureDim, const std::string &modelName)
        : m_data(data)
    {
        if (data.categorical())
            throw InputError("the " + modelName + " model takes numeric features, but the data (" + data.description
                             + ") is categorical, ids per sample: train it with --model=sparse_lr or --model=fm");
        if (data.featureDim() != featureDim) {
            throw InputError("the " + modelName + " model was made for " + std::to_string(featureDim)
                             + " features per sample, but the data (" + data.description + ") has "
                             + std::to_string(data.featureDim())
                             + "; use data of the model's shape or start a new model");
        }
        if (data.targets.rows() != data.features.rows() || data.targets.cols() != 1)
            throw std::invalid_argument("Dataset targets must be one column with a row per sample");
        if (rows.empty()) {
            if (data.size() == 0)
                throw InputError("the data (" + data.description + ") has no samples");
            return;
        }
        for (const int64_t row : rows) {
            if (row < 0 || row >= data.size())
                throw std::out_of_range("row " + std::to_string(row) + " is outside the dataset");
        }
        m_features = data.features(rows, Eigen::all);
        m_targets = data.targets(rows, 0);
        m_gathered = true;
    }

    const Eigen::MatrixXf &features() const { return m_gathered ? m_features : m_data.features; }
    Eigen::Ref<const Eigen::VectorXf> targets() const
    {
        if (m_gathered)
            return m_targets;
        return m_data.targets.col(0);
    }

private:
    const Dataset &m_data;
    Eigen::MatrixXf m_features;
    Eigen::VectorXf m_targets;
    bool m_gathered = false;
};

void checkParameters(const Parameters &params, const std::vector<Eigen::Index> &sizes, const std::string &modelName)
{
    bool ok = params.size() == sizes.size();
    for (size_t i = 0; ok && i < sizes.size(); ++i)
        ok = params[i].size() == sizes[i];
    if (!ok)
        throw std::invalid_argument("parameters do not match the " + modelName + " model's variables");
}

class LinearRegression final : public Model
{
public:
    // The overload with table rows stays Model's: a dense model ignores them.
    using Model::lossAndGradient;
    explicit LinearRegression(int64_t featureDim) : m_featureDim(featureDim) {}

    std::string name() const override { return "linear"; }
    int64_t featureDim() const override { return m_featureDim; }
    int64_t outputDim() const override { return 1; }

    std::vector<Variable> initialVariables(uint64_t seed) const override
    {
        std::mt19937_64 rng(seed);
        Variable w{"w", {m_featureDim}, truncatedNormal(m_featureDim, 1.0f, rng)};
        Variable b{"b", {1}, truncatedNormal(1, 1.0f, rng)};
        return {std::move(w), std::move(b)};
    }

    float lossAndGradient(const Parameters &params, const Dataset &data, const std::vector<int64_t> &rows,
                          Parameters *gradient) const override
    {
        checkParameters(params, {m_featureDim, 1}, name());
        const Batch batch(data, rows, m_featureDim, name());
        const Eigen::MatrixXf &x = batch.features();
        const Eigen::Ref<const Eigen::VectorXf> y = batch.targets();
        const float n = static_cast<float>(x.rows());

        const Eigen::VectorXf residual = (x * params[0]).array() + params[1][0] - y.array();
        if (gradient) {
            // d/dpred mean((y - pred)^2) = 2 (pred - y) / n
            const Eigen::VectorXf dPred = residual * (2.0f / n);
            gradient->resize(2);
            (*gradient)[0] = x.transpose() * dPred;
            (*gradient)[1] = Eigen::VectorXf::Constant(1, dPred.sum());
        }
        return residual.squaredNorm() / n;
    }

    bool classifies() const override { return false; }

    float accuracy(const Parameters &, const Dataset &) const override
    {
        return std::numeric_limits<float>::quiet_NaN();
    }

private:
    int64_t m_featureDim;
};

// The class of each row, checked against the model's classes.
std::vector<Eigen::Index> classLabels(const Eigen::Ref<const Eigen::VectorXf> &targets, const Dataset &data,
                                      int64_t classes, const std::string &modelName)
{
    std::vector<Eigen::Index> labels(static_cast<size_t>(targets.size()));
    for (Eigen::Index i = 0; i < targets.size(); ++i) {
        const float t = targets[i];
        if (!(t >= 0.0f && t < static_cast<float>(classes)) || t != std::floor(t)) {
            throw InputError("the data (" + data.description + ") has class index " + number(t) + ", but the "
                             + modelName + " model has " + std::to_string(classes) + " classes (0 to "
                             + std::to_string(classes - 1) + "); targets must be whole class numbers in that range");
        }
        labels[static_cast<size_t>(i)] = static_cast<Eigen::Index>(t);
    }
    return labels;
}

// Mean cross-entropy of softmax(logits) against the labels; with `dLogits`,
// its gradient with respect to the logits (the softmax's output minus the
// one-hot labels, over n).
float softmaxCrossEntropy(Eigen::MatrixXf logits, const std::vector<Eigen::Index> &labels, Eigen::MatrixXf *dLogits)
{
    const Eigen::Index n = logits.rows();
    // Shifting each row by its maximum keeps exp() finite; log-sum-exp adds it back.
    const Eigen::VectorXf rowMax = logits.rowwise().maxCoeff();
    logits.colwise() -= rowMax;
    Eigen::MatrixXf probabilities = logits.array().exp();
    const Eigen::VectorXf sumExp = probabilities.rowwise().sum();
    const Eigen::VectorXf logSumExp = sumExp.array().log();
    double lossSum = 0.0;
    for (Eigen::Index i = 0; i < n; ++i)
        lossSum += logSumExp[i] - logits(i, labels[static_cast<size_t>(i)]);
    if (dLogits) {
        probabilities.array().colwise() /= sumExp.array();
        for (Eigen::Index i = 0; i < n; ++i)
            probabilities(i, labels[static_cast<size_t>(i)]) -= 1.0f;
        *dLogits = probabilities / static_cast<float>(n);
    }
    return static_cast<float>(lossSum / static_cast<double>(n));
}

// The share of rows whose largest logit is their label's.
float accuracyOf(const Eigen::MatrixXf &logits, const std::vector<Eigen::Index> &labels)
{
    Eigen::Index correct = 0;
    for (Eigen::Index i = 0; i < logits.rows(); ++i) {
        Eigen::Index predicted = 0;
        logits.row(i).maxCoeff(&predicted);
        correct += predicted == labels[static_cast<size_t>(i)] ? 1 : 0;
    }
    return static_cast<float>(correct) / static_cast<float>(logits.rows());
}

class SoftmaxRegression final : public Model
{
public:
    using Model::lossAndGradient;
    SoftmaxRegression(int64_t featureDim, int64_t classes) : m_featureDim(featureDim), m_classes(classes) {}

    std::string name() const override { return "softmax"; }
    int64_t featureDim() const override { return m_featureDim; }
    int64_t outputDim() const override { return m_classes; }

    std::vector<Variable> initialVariables(uint64_t seed) const override
    {
        std::mt19937_64 rng(seed);
        Variable w{"W", {m_featureDim, m_classes}, truncatedNormal(m_featureDim * m_classes, 0.01f, rng)};
        Variable b{"b", {m_classes}, Eigen::VectorXf::Zero(m_classes)};
        return {std::move(w), std::move(b)};
    }

    float lossAndGradient(const Parameters &params, const Dataset &data, const std::vector<int64_t> &rows,
                          Parameters *gradient) const override
    {
        checkParameters(params, {m_featureDim * m_classes, m_classes}, name());
        const Batch batch(data, rows, m_featureDim, name());
        const Eigen::MatrixXf &x = batch.features();
        const std::vector<Eigen::Index> labels = classLabels(batch.targets(), data, m_classes, name());
        Eigen::MatrixXf dLogits;
        const float loss = softmaxCrossEntropy(logitsFor(params, x), labels, gradient ? &dLogits : nullptr);
        if (gradient) {
            gradient->resize(2);
            (*gradient)[0].resize(m_featureDim * m_classes);
            Eigen::Map<RowMajorMatrixXf>((*gradient)[0].data(), m_featureDim, m_classes) = x.transpose() * dLogits;
            (*gradient)[1] = dLogits.colwise().sum().transpose();
        }
        return loss;
    }

    bool classifies() const override { return true; }

    float accuracy(const Parameters &params, const Dataset &data) const override
    {
        checkParameters(params, {m_featureDim * m_classes, m_classes}, name());
        const Batch batch(data, {}, m_featureDim, name());
        return accuracyOf(logitsFor(params, batch.features()), classLabels(batch.targets(), data, m_classes, name()));
    }

private:
    Eigen::MatrixXf logitsFor(const Parameters &params, const Eigen::MatrixXf &x) const
    {
        const Eigen::Map<const RowMajorMatrixXf> w(params[0].data(), m_featureDim, m_classes);
        Eigen::MatrixXf logits = x * w;
        logits.rowwise() += params[1].transpose();
        return logits;
    }

    int64_t m_featureDim;
    int64_t m_classes;
};

// A classifier with one hidden layer of tanh units: the smallest model on
// which staleness costs what it costs deep networks -- its loss is not
// convex, so a stale gradient can push it into a worse basin rather than
// only slow it down. tanh rather than ReLU: smooth, so the gradient is
// exact at every point (tst_models checks it numerically). Variables as a
// TF1 two-layer model names them: hidden/W [features, hidden], hidden/b,
// out/W [hidden, classes], out/b; weights row-major.
class MultilayerPerceptron final : public Model
{
public:
    using Model::lossAndGradient;
    MultilayerPerceptron(int64_t featureDim, int64_t hidden, int64_t classes)
        : m_featureDim(featureDim)
        , m_hidden(hidden)
        , m_classes(classes)
    {
    }

    std::string name() const override { return "mlp"; }
    int64_t featureDim() const override { return m_featureDim; }
    int64_t outputDim() const override { return m_classes; }

    std::vector<Variable> initialVariables(uint64_t seed) const override
    {
        // Glorot-like scales: each layer's output starts with about unit
        // variance, so tanh starts in its linear range, not saturated.
        std::mt19937_64 rng(seed);
        const float hiddenScale = 1.0f / std::sqrt(float(m_featureDim));
        const float outScale = 1.0f / std::sqrt(float(m_hidden));
        return {
            {"hidden/W", {m_featureDim, m_hidden}, truncatedNormal(m_featureDim * m_hidden, hiddenScale, rng)},
            {"hidden/b", {m_hidden}, Eigen::VectorXf::Zero(m_hidden)},
            {"out/W", {m_hidden, m_classes}, truncatedNormal(m_hidden * m_classes, outScale, rng)},
            {"out/b", {m_classes}, Eigen::VectorXf::Zero(m_classes)},
        };
    }

    float lossAndGradient(const Parameters &params, const Dataset &data, const std::vector<int64_t> &rows,
                          Parameters *gradient) const override
    {
        checkParameters(params, sizes(), name());
        const Batch batch(data, rows, m_featureDim, name());
        const Eigen::MatrixXf &x = batch.features();
        const std::vector<Eigen::Index> labels = classLabels(batch.targets(), data, m_classes, name());
        const Eigen::MatrixXf activations = hiddenActivations(params, x);
        Eigen::MatrixXf dLogits;
        const float loss = softmaxCrossEntropy(logitsFor(params, activations), labels, gradient ? &dLogits : nullptr);
        if (gradient) {
            const Eigen::Map<const RowMajorMatrixXf> outW(params[2].data(), m_hidden, m_classes);
            // Back through tanh: d tanh(z)/dz = 1 - tanh(z)^2.
            const Eigen::MatrixXf dHidden
                = ((dLogits * outW.transpose()).array() * (1.0f - activations.array().square())).matrix();
            gradient->resize(4);
            (*gradient)[0].resize(m_featureDim * m_hidden);
            Eigen::Map<RowMajorMatrixXf>((*gradient)[0].data(), m_featureDim, m_hidden) = x.transpose() * dHidden;
            (*gradient)[1] = dHidden.colwise().sum().transpose();
            (*gradient)[2].resize(m_hidden * m_classes);
            Eigen::Map<RowMajorMatrixXf>((*gradient)[2].data(), m_hidden, m_classes)
                = activations.transpose() * dLogits;
            (*gradient)[3] = dLogits.colwise().sum().transpose();
        }
        return loss;
    }

    bool classifies() const override { return true; }

    float accuracy(const Parameters &params, const Dataset &data) const override
    {
        checkParameters(params, sizes(), name());
        const Batch batch(data, {}, m_featureDim, name());
        return accuracyOf(logitsFor(params, hiddenActivations(params, batch.features())),
                          classLabels(batch.targets(), data, m_classes, name()));
    }

private:
    std::vector<Eigen::Index> sizes() const
    {
        return {m_featureDim * m_hidden, m_hidden, m_hidden * m_classes, m_classes};
    }

    Eigen::MatrixXf hiddenActivations(const Parameters &params, const Eigen::MatrixXf &x) const
    {
        const Eigen::Map<const RowMajorMatrixXf> w(params[0].data(), m_featureDim, m_hidden);
        Eigen::MatrixXf z = x * w;
        z.rowwise() += params[1].transpose();
        return z.array().tanh().matrix();
    }

    Eigen::MatrixXf logitsFor(const Parameters &params, const Eigen::MatrixXf &activations) const
    {
        const Eigen::Map<const RowMajorMatrixXf> w(params[2].data(), m_hidden, m_classes);
        Eigen::MatrixXf logits = activations * w;
        logits.rowwise() += params[3].transpose();
        return logits;
    }

    int64_t m_featureDim;
    int64_t m_hidden;
    int64_t m_classes;
};

// Y ≈ U Vᵀ, fitted one seen entry (i, j, y) at a time: the prediction is
// u_i · v_j, the loss the mean squared error, the gradient reaches only the
// rows i of U and j of V that the batch touched (dense here: every value
// travels; sparse variables are another matter). Started small and random,
// as a factorization must be: at U = V = 0 every gradient is 0.
class MatrixFactorization final : public Model
{
public:
    using Model::lossAndGradient;
    MatrixFactorization(int64_t rows, int64_t cols, int64_t rank) : m_rows(rows), m_cols(cols), m_rank(rank) {}

    std::string name() const override { return "mf"; }
    int64_t featureDim() const override { return 2; }
    int64_t outputDim() const override { return 1; }

    std::vector<Variable> initialVariables(uint64_t seed) const override
    {
        std::mt19937_64 rng(seed);
        // Factors a tenth of the data's (entries of unit variance): small
        // enough not to start far off, large enough to break the symmetry.
        const float scale = 0.1f / std::sqrt(std::sqrt(float(m_rank)));
        Variable u{"mf/U", {m_rows, m_rank}, truncatedNormal(m_rows * m_rank, scale, rng)};
        Variable v{"mf/V", {m_cols, m_rank}, truncatedNormal(m_cols * m_rank, scale, rng)};
        return {std::move(u), std::move(v)};
    }

    float lossAndGradient(const Parameters &params, const Dataset &data, const std::vector<int64_t> &rows,
                          Parameters *gradient) const override
    {
        checkParameters(params, {m_rows * m_rank, m_cols * m_rank}, name());
        const Batch batch(data, rows, 2, name());
        const Eigen::MatrixXf &x = batch.features();
        const Eigen::Ref<const Eigen::VectorXf> y = batch.targets();
        const Eigen::Map<const RowMajorMatrixXf> u(params[0].data(), m_rows, m_rank);
        const Eigen::Map<const RowMajorMatrixXf> v(params[1].data(), m_cols, m_rank);
        if (gradient) {
            gradient->assign(2, Eigen::VectorXf());
            (*gradient)[0] = Eigen::VectorXf::Zero(m_rows * m_rank);
            (*gradient)[1] = Eigen::VectorXf::Zero(m_cols * m_rank);
        }
        const float n = float(x.rows());
        double sum = 0;
        for (Eigen::Index s = 0; s < x.rows(); ++s) {
            const int64_t i = index(x(s, 0), m_rows, "row");
            const int64_t j = index(x(s, 1), m_cols, "column");
            const float error = u.row(i).dot(v.row(j)) - y[s];
            sum += double(error) * double(error);
            if (!gradient)
                continue;
            Eigen::Map<RowMajorMatrixXf> gu((*gradient)[0].data(), m_rows, m_rank);
            Eigen::Map<RowMajorMatrixXf> gv((*gradient)[1].data(), m_cols, m_rank);
            gu.row(i) += (2.0f * error / n) * v.row(j);
            gv.row(j) += (2.0f * error / n) * u.row(i);
        }
        return float(sum / double(n));
    }

    float accuracy(const Parameters &, const Dataset &) const override
    {
        return std::numeric_limits<float>::quiet_NaN();
    }
    bool classifies() const override { return false; }

private:
    // A feature that must be a whole index below `size`: a data row that is
    // not one is the data's fault, said in words.
    static int64_t index(float value, int64_t size, const char *what)
    {
        const auto whole = int64_t(value);
        if (!(value >= 0) || float(whole) != value || whole >= size)
            throw InputError(std::string("a sample's ") + what + " index " + number(value)
                             + " is not a whole number from 0 to " + std::to_string(size - 1)
                             + ": the mf model needs data from --dataset=lowrank:...");
        return whole;
    }

    int64_t m_rows;
    int64_t m_cols;
    int64_t m_rank;
};

// A model name with an optional size, "FAMILY" or "FAMILY:N": N (or
// `byDefault` for the bare family), or nullopt for another model's name.
// Throws InputError naming `what` N is and its range for a bad number.
std::optional<int64_t> sizedModel(const std::string &name, const std::string &family, int64_t byDefault, int64_t most,
                                  const std::string &what, const std::string &example)
{
    if (name == family)
        return byDefault;
    if (name.rfind(family + ":", 0) != 0)
        return std::nullopt;
    const std::string digits = name.substr(family.size() + 1);
    int64_t size = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || size < 1 || size > most)
        throw InputError("the model '" + name + "' needs " + what + " from 1 to " + std::to_string(most) + " after '"
                         + family + ":' (e.g. " + example + "), or write " + family + " for "
                         + std::to_string(byDefault));
    return size;
}

// "mf" or "mf:RANK": the rank asked for.
std::optional<int64_t> factorizationRank(const std::string &name)
{
    return sizedModel(name, "mf", kDefaultFactorizationRank, 1024, "a rank", "mf:5");
}

// "mlp" or "mlp:HIDDEN": the hidden units asked for.
std::optional<int64_t> mlpHiddenUnits(const std::string &name)
{
    return sizedModel(name, "mlp", kDefaultHiddenUnits, kMaxHiddenUnits, "a number of hidden units", "mlp:64");
}

} // namespace

GradientView viewOf(const Parameters &values)
{
    GradientView view;
    view.reserve(values.size());
    for (const Eigen::VectorXf &v : values)
        view.emplace_back(v.data(), size_t(v.size()));
    return view;
}

std::unique_ptr<Model> makeModel(const std::string &name, int64_t featureDim, int64_t outputDim,
                                 const std::vector<int64_t> &indexSizes)
{
    if (isSparseModelName(name))
        return makeSparseModel(name, featureDim);
    const std::optional<int64_t> hidden = mlpHiddenUnits(name);
    if (const std::optional<int64_t> rank = factorizationRank(name)) {
        if (featureDim != 2 || indexSizes.size() != 2)
            throw InputError("the " + name
                             + " model fits a matrix seen one entry at a time: give it "
                               "--dataset=lowrank:ROWS:COLS:RANK (features: a row and a column index)");
        return std::make_unique<MatrixFactorization>(indexSizes[0], indexSizes[1], *rank);
    }
    if (name != "linear" && name != "softmax" && !hidden) {
        std::string known;
        for (const std::string &n : modelNames())
            known += (known.empty() ? "" : ", ") + n;
        throw InputError("unknown model '" + name + "'; known models: " + known);
    }
    if (featureDim < 1) {
        throw InputError("the " + name + " model needs at least one feature per sample, the data has "
                         + std::to_string(featureDim));
    }
    if (name == "linear")
        return std::make_unique<LinearRegression>(featureDim);
    if (outputDim < 2) {
        throw InputError("the " + name + " model needs at least 2 classes, the data has " + std::to_string(outputDim)
                         + "; use a classification dataset or the linear model");
    }
    if (hidden)
        return std::make_unique<MultilayerPerceptron>(featureDim, *hidden, outputDim);
    return std::make_unique<SoftmaxRegression>(featureDim, outputDim);
}

bool isMatrixFactorizationName(const std::string &name)
{
    return factorizationRank(name).has_value();
}

bool isClassifierName(const std::string &name)
{
    return name == "softmax" || mlpHiddenUnits(name).has_value();
}

std::vector<std::string> modelNames()
{
    return {"linear", "softmax", "mlp", "mf", "sparse_lr", "fm"};
}

std::vector<TableDeclaration> Model::tables(uint64_t) const
{
    return {};
}

std::vector<std::vector<uint64_t>> Model::touchedIds(const Dataset &, const std::vector<int64_t> &) const
{
    return {};
}

float Model::lossAndGradient(const Parameters &params, const RowBlocks &, const Dataset &data,
                             const std::vector<int64_t> &rows, Parameters *gradient, RowBlocks *rowGradients) const
{
    if (rowGradients)
        rowGradients->clear();
    return lossAndGradient(params, data, rows, gradient);
}

std::vector<float> Model::predictions(const Parameters &, const RowBlocks &, const Dataset &) const
{
    return {};
}

namespace {

bool hasTables(const Model &model)
{
    return !model.tables(0).empty();
}

} // namespace

std::vector<std::string> heldOutMetricNames(const Model &model)
{
    if (hasTables(model))
        return {"heldout_loss", "heldout_auc"};
    if (model.classifies())
        return {"heldout_loss", "heldout_accuracy"};
    return {"heldout_loss"};
}

std::vector<float> heldOutMetrics(const Model &model, const Parameters &params, const Dataset &heldOut)
{
    if (hasTables(model))
        throw InputError("the " + model.name()
                         + " model's held-out metrics need its table rows of the held-out ids: a bug in the caller, "
                           "which must pull them and use the heldOutMetrics() that takes them");
    if (model.classifies())
        return {model.loss(params, heldOut), model.accuracy(params, heldOut)};
    return {model.loss(params, heldOut)};
}

std::vector<float> heldOutMetrics(const Model &model, const Parameters &params, const RowBlocks &tableRows,
                                  const Dataset &heldOut)
{
    if (!hasTables(model))
        return heldOutMetrics(model, params, heldOut);
    const std::vector<float> probabilities = model.predictions(params, tableRows, heldOut);
    const std::span<const float> labels(heldOut.targets.data(), size_t(heldOut.targets.rows()));
    return {logLoss(probabilities, labels), areaUnderRoc(probabilities, labels)};
}

} // namespace parasync
