#include "engine/sparse_models.h"

#include "base/error.h"
#include "engine/dataset.h"
#include "engine/sparse_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace parasync {

namespace {

constexpr int64_t kMaxFactorizationMachineRank = 1024;

// "fm" or "fm:K": the rank asked for; nullopt for another model's name.
std::optional<int64_t> factorizationMachineRank(const std::string &name)
{
    if (name == "fm")
        return kDefaultFactorizationMachineRank;
    if (name.rfind("fm:", 0) != 0)
        return std::nullopt;
    const std::string digits = name.substr(3);
    int64_t rank = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || rank < 1
        || rank > kMaxFactorizationMachineRank)
        throw InputError("the model '" + name + "' needs a rank from 1 to "
                         + std::to_string(kMaxFactorizationMachineRank) + " after 'fm:' (e.g. fm:8), or write fm for "
                         + std::to_string(kDefaultFactorizationMachineRank));
    return rank;
}

std::string number(float x)
{
    std::ostringstream out;
    out << x;
    return out.str();
}

// Where a batch's ids lie in a table's row block: its ids are ascending, so
// a binary search finds each.
class RowLookup
{
public:
    RowLookup(const RowBlock &block, int64_t rowWidth, const std::string &table, const std::string &model)
        : m_block(block)
        , m_rowWidth(size_t(rowWidth))
        , m_table(table)
        , m_model(model)
    {
        if (block.values.size() != block.ids.size() * m_rowWidth)
            throw InputError("the " + model + " model was given " + std::to_string(block.values.size()) + " values for "
                             + std::to_string(block.ids.size()) + " rows of table '" + table + "', whose rows hold "
                             + std::to_string(rowWidth) + " each: a bug in the caller, which must pull whole rows");
    }

    // The index of `id`'s row in the block.
    size_t find(uint64_t id) const
    {
        const auto at = std::lower_bound(m_block.ids.begin(), m_block.ids.end(), id);
        if (at == m_block.ids.end() || *at != id)
            throw InputError("the " + m_model + " model needs row " + std::to_string(id) + " of table '" + m_table
                             + "', which the rows it was given lack: a bug in the caller, which must pull every "
                               "row touchedIds() names");
        return size_t(at - m_block.ids.begin());
    }

    const float *row(size_t index) const { return m_block.values.data() + index * m_rowWidth; }

private:
    const RowBlock &m_block;
    size_t m_rowWidth;
    std::string m_table;
    std::string m_model;
};

// log(1 + e^z) without overflow.
double softplus(double z)
{
    return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

double sigmoid(double z)
{
    return 1.0 / (1.0 + std::exp(-z));
}

// A factorization machine of rank K over one id per field (Rendle, 2010):
//   logit = b + sum_f w[id_f] + sum_{f<g} <v[id_f], v[id_g]>,
// the pairwise sum computed as (|sum_f v_f|^2 - sum_f |v_f|^2) / 2 in
// O(F K). Rank 0 has no factors: logistic regression over the ids, which
// is what "sparse_lr" is.
class FactorizationMachine final : public Model
{
public:
    FactorizationMachine(int64_t fields, int64_t rank) : m_fields(fields), m_rank(rank) {}

    std::string name() const override { return m_rank == 0 ? "sparse_lr" : "fm:" + std::to_string(m_rank); }
    int64_t featureDim() const override { return m_fields; }
    int64_t outputDim() const override { return 1; }

    std::vector<Variable> initialVariables(uint64_t) const override
    {
        return {{"bias", {1}, Eigen::VectorXf::Zero(1)}};
    }

    std::vector<TableDeclaration> tables(uint64_t seed) const override
    {
        // Weights start at 0, as a linear model may; factors must start
        // apart, since at v = 0 every factor's gradient is 0.
        std::vector<TableDeclaration> declared{{"weights", 1, 0, 0.0f, seed}};
        if (m_rank > 0)
            declared.push_back({"factors", m_rank, 0, 0.01f, seed});
        return declared;
    }

    std::vector<std::vector<uint64_t>> touchedIds(const Dataset &data, const std::vector<int64_t> &rows) const override
    {
        checkData(data, rows);
        std::vector<uint64_t> ids;
        if (rows.empty()) {
            ids = data.ids;
        } else {
            ids.reserve(rows.size() * size_t(m_fields));
            for (const int64_t row : rows) {
                const std::span<const uint64_t> sample = data.idsOf(row);
                ids.insert(ids.end(), sample.begin(), sample.end());
            }
        }
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        // Weights and factors are rows of the same ids.
        if (m_rank > 0)
            return {ids, ids};
        return {std::move(ids)};
    }

    float lossAndGradient(const Parameters &, const Dataset &, const std::vector<int64_t> &,
                          Parameters *) const override
    {
        throw InputError(name()
                         + " needs its table rows: its weights live in embedding tables on the ps tasks, so the "
                           "caller must pull the rows touchedIds() names and use the lossAndGradient() that takes "
                           "them");
    }

    float lossAndGradient(const Parameters &params, const RowBlocks &tableRows, const Dataset &data,
                          const std::vector<int64_t> &rows, Parameters *gradient,
                          RowBlocks *rowGradients) const override
    {
        checkData(data, rows);
        checkRows(params, tableRows);
        const RowLookup weights(tableRows[0], 1, "weights", name());
        std::optional<RowLookup> factors;
        if (m_rank > 0)
            factors.emplace(tableRows[1], m_rank, "factors", name());
        if (gradient)
            gradient->assign(1, Eigen::VectorXf::Zero(1));
        if (rowGradients) {
            rowGradients->resize(tableRows.size());
            for (size_t t = 0; t < tableRows.size(); ++t) {
                (*rowGradients)[t].ids = tableRows[t].ids;
                (*rowGradients)[t].values.assign(tableRows[t].values.size(), 0.0f);
            }
        }

        const int64_t n = rows.empty() ? data.size() : int64_t(rows.size());
        const double scale = 1.0 / double(n);
        Sample sample(m_fields, m_rank);
        double lossSum = 0;
        for (int64_t i = 0; i < n; ++i) {
            const int64_t row = rows.empty() ? i : rows[size_t(i)];
            const double y = label(data, row);
            const double z = logit(params, weights, factors, data.idsOf(row), sample);
            lossSum += softplus(z) - y * z;
            if (!gradient && !rowGradients)
                continue;
            // d/dz of the mean log loss.
            const double dz = (sigmoid(z) - y) * scale;
            if (gradient)
                (*gradient)[0][0] += float(dz);
            if (!rowGradients)
                continue;
            float *gw = (*rowGradients)[0].values.data();
            for (int64_t f = 0; f < m_fields; ++f)
                gw[sample.weightRow[size_t(f)]] += float(dz);
            if (m_rank == 0)
                continue;
            // d/dv_f of the pairwise sum: the sum of the other fields' factors.
            float *gv = (*rowGradients)[1].values.data();
            for (int64_t f = 0; f < m_fields; ++f) {
                const float *v = factors->row(sample.factorRow[size_t(f)]);
                float *g = gv + sample.factorRow[size_t(f)] * size_t(m_rank);
                for (int64_t k = 0; k < m_rank; ++k)
                    g[k] += float(dz * (sample.factorSum[size_t(k)] - double(v[k])));
            }
        }
        return float(lossSum * scale);
    }

    std::vector<float> predictions(const Parameters &params, const RowBlocks &tableRows,
                                   const Dataset &data) const override
    {
        checkData(data, {});
        checkRows(params, tableRows);
        const RowLookup weights(tableRows[0], 1, "weights", name());
        std::optional<RowLookup> factors;
        if (m_rank > 0)
            factors.emplace(tableRows[1], m_rank, "factors", name());
        Sample sample(m_fields, m_rank);
        std::vector<float> probabilities(size_t(data.size()));
        for (int64_t i = 0; i < data.size(); ++i)
            probabilities[size_t(i)] = float(sigmoid(logit(params, weights, factors, data.idsOf(i), sample)));
        return probabilities;
    }

    float accuracy(const Parameters &, const Dataset &) const override
    {
        return std::numeric_limits<float>::quiet_NaN();
    }
    // Its labels are 0/1 but its held-out metrics are log loss and AUC: at a
    // click rate far from one half, accuracy says little.
    bool classifies() const override { return false; }

private:
    // One sample's rows and factor sum, reused from sample to sample.
    struct Sample
    {
        Sample(int64_t fields, int64_t rank)
            : weightRow(size_t(fields))
            , factorRow(size_t(fields))
            , factorSum(size_t(rank))
        {
        }
        std::vector<size_t> weightRow;
        std::vector<size_t> factorRow;
        std::vector<double> factorSum;
    };

    double logit(const Parameters &params, const RowLookup &weights, const std::optional<RowLookup> &factors,
                 std::span<const uint64_t> ids, Sample &sample) const
    {
        double z = params[0][0];
        for (int64_t f = 0; f < m_fields; ++f) {
            sample.weightRow[size_t(f)] = weights.find(ids[size_t(f)]);
            z += *weights.row(sample.weightRow[size_t(f)]);
        }
        if (m_rank == 0)
            return z;
        std::fill(sample.factorSum.begin(), sample.factorSum.end(), 0.0);
        double squares = 0;
        for (int64_t f = 0; f < m_fields; ++f) {
            sample.factorRow[size_t(f)] = factors->find(ids[size_t(f)]);
            const float *v = factors->row(sample.factorRow[size_t(f)]);
            for (int64_t k = 0; k < m_rank; ++k) {
                sample.factorSum[size_t(k)] += v[k];
                squares += double(v[k]) * double(v[k]);
            }
        }
        double sumSquared = 0;
        for (const double s : sample.factorSum)
            sumSquared += s * s;
        return z + 0.5 * (sumSquared - squares);
    }

    static double label(const Dataset &data, int64_t row)
    {
        const float y = data.targets(row, 0);
        if (y != 0.0f && y != 1.0f)
            throw InputError("the data (" + data.description + ") has label " + number(y) + " at sample "
                             + std::to_string(row) + "; a click model's labels are 0 (no click) or 1 (click)");
        return y;
    }

    void checkData(const Dataset &data, const std::vector<int64_t> &rows) const
    {
        if (!data.categorical())
            throw InputError("the " + name() + " model takes categorical data, ids per sample, but the data ("
                             + data.description + ") has numeric features: use --dataset=clicklog[:F:V[:S]]");
        if (data.fields != m_fields)
            throw InputError("the " + name() + " model was made for " + std::to_string(m_fields)
                             + " fields per sample, but the data (" + data.description + ") has "
                             + std::to_string(data.fields) + "; use data of the model's shape or start a new model");
        if (data.ids.size() != size_t(data.size() * m_fields) || data.targets.rows() != data.size()
            || data.targets.cols() != 1)
            throw std::invalid_argument("a click log needs fields ids and one label per sample");
        if (rows.empty() && data.size() == 0)
            throw InputError("the data (" + data.description + ") has no samples");
        for (const int64_t row : rows)
            if (row < 0 || row >= data.size())
                throw std::out_of_range("row " + std::to_string(row) + " is outside the dataset");
    }

    void checkRows(const Parameters &params, const RowBlocks &tableRows) const
    {
        if (params.size() != 1 || params[0].size() != 1)
            throw std::invalid_argument("parameters do not match the " + name() + " model's variables");
        const size_t tables = m_rank > 0 ? 2 : 1;
        if (tableRows.size() != tables)
            throw InputError("the " + name() + " model has " + std::to_string(tables) + " tables but was given rows of "
                             + std::to_string(tableRows.size())
                             + ": a bug in the caller, which must pass one row block per table, in declaration order");
    }

    int64_t m_fields;
    int64_t m_rank;
};

} // namespace

bool isSparseModelName(const std::string &name)
{
    return name == "sparse_lr" || factorizationMachineRank(name).has_value();
}

std::unique_ptr<Model> makeSparseModel(const std::string &name, int64_t fields)
{
    std::optional<int64_t> rank;
    if (name == "sparse_lr")
        rank = 0;
    else
        rank = factorizationMachineRank(name);
    if (!rank)
        throw InputError("unknown sparse model '" + name + "'; sparse models: sparse_lr, fm, fm:K");
    if (fields < 1)
        throw InputError("the " + name + " model needs at least one field per sample, the data has "
                         + std::to_string(fields) + "; use --dataset=clicklog[:F:V[:S]]");
    return std::make_unique<FactorizationMachine>(fields, *rank);
}

} // namespace parasync
