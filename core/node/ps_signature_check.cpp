#include "node/ps_signature_check.h"

#include "engine/sparse_rows.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace parasync {

SignatureDifference signatureDifference(const proto::ModelSignature &cluster, const proto::ModelSignature &worker)
{
    if (cluster.model() != worker.model())
        return {"it trains model '" + worker.model() + "' but the cluster trains '" + cluster.model() + "'"};
    if (cluster.feature_dim() != worker.feature_dim())
        return {"its data has " + std::to_string(worker.feature_dim()) + " features but the cluster's has "
                + std::to_string(cluster.feature_dim())};
    if (cluster.output_dim() != worker.output_dim())
        return {"its model has " + std::to_string(worker.output_dim()) + " outputs/classes but the cluster's has "
                + std::to_string(cluster.output_dim())};
    if (cluster.variables_size() != worker.variables_size())
        return {"its model has " + std::to_string(worker.variables_size()) + " variables but the cluster's has "
                + std::to_string(cluster.variables_size())};
    for (int i = 0; i < cluster.variables_size(); ++i) {
        const auto &a = cluster.variables(i);
        const auto &b = worker.variables(i);
        if (a.name() != b.name() || !std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()))
            return {"variable " + std::to_string(i) + " is '" + b.name() + "' of a different shape than the cluster's '"
                    + a.name() + "'"};
        if (!std::equal(a.slice_rows().begin(), a.slice_rows().end(), b.slice_rows().begin(), b.slice_rows().end())) {
            const auto slices = [](const auto &rows) {
                if (rows.empty())
                    return std::string("keeps it whole");
                std::string text;
                for (const int64_t r : rows)
                    text += (text.empty() ? "" : ", ") + std::to_string(r);
                return "splits it into " + std::to_string(rows.size()) + " slices (rows " + text + ")";
            };
            return {"variable '" + b.name() + "': it " + slices(b.slice_rows()) + " but the cluster "
                        + slices(a.slice_rows()),
                    "Give every worker the same --min_slice_bytes"};
        }
    }
    if (cluster.tables_size() != worker.tables_size())
        return {"its model has " + std::to_string(worker.tables_size()) + " embedding tables but the cluster's has "
                + std::to_string(cluster.tables_size())};
    for (int t = 0; t < cluster.tables_size(); ++t) {
        const proto::TableSpec &a = cluster.tables(t);
        const proto::TableSpec &b = worker.tables(t);
        if (a.name() != b.name() || a.row_width() != b.row_width() || a.id_limit() != b.id_limit()
            || a.init_stddev() != b.init_stddev() || a.seed() != b.seed())
            return {"table " + std::to_string(t) + " is '" + b.name() + "' (rows of " + std::to_string(b.row_width())
                        + ", id_limit " + std::to_string(b.id_limit()) + ", seed " + std::to_string(b.seed())
                        + ") but the cluster's is '" + a.name() + "' (rows of " + std::to_string(a.row_width())
                        + ", id_limit " + std::to_string(a.id_limit()) + ", seed " + std::to_string(a.seed()) + ")",
                    "Give every task the same --model and --seed"};
    }
    if (cluster.optimizer() != worker.optimizer())
        return {"it uses optimizer '" + worker.optimizer() + "' but the cluster uses '" + cluster.optimizer() + "'"};
    if (!std::equal(cluster.metric_names().begin(), cluster.metric_names().end(), worker.metric_names().begin(),
                    worker.metric_names().end())) {
        const auto list = [](const auto &names) {
            std::string text;
            for (const auto &name : names)
                text += (text.empty() ? "" : ", ") + name;
            return text.empty() ? std::string("none") : text;
        };
        return {"it reports the metrics " + list(worker.metric_names()) + " but the cluster's workers report "
                    + list(cluster.metric_names()),
                "Give every worker the same --eval_dataset or --eval_fraction"};
    }
    return {};
}

std::string signatureNamesProblem(const proto::ModelSignature &signature)
{
    constexpr size_t kMaxVariableNameLength = 128;
    std::set<std::string> variables;
    for (const auto &variable : signature.variables()) {
        const std::string &name = variable.name();
        const bool valid = !name.empty() && name.size() <= kMaxVariableNameLength
                           && std::all_of(name.begin(), name.end(), [](char c) {
                                  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'
                                         || c == '/' || c == ':';
                              });
        if (!valid)
            return "variable name '" + name.substr(0, kMaxVariableNameLength)
                   + "' is not 1-128 characters of letters, digits, '_', '.', '-', '/' or ':': rename the variable";
        if (!variables.insert(name).second)
            return "variable name '" + name + "' is declared twice: give each variable its own name";
    }

    constexpr int kMaxMetrics = 32;
    constexpr size_t kMaxNameLength = 64;
    if (signature.metric_names_size() > kMaxMetrics)
        return "the signature declares " + std::to_string(signature.metric_names_size()) + " metric names, more than "
               + std::to_string(kMaxMetrics) + ": report fewer metrics";
    std::set<std::string> seen;
    for (const std::string &name : signature.metric_names()) {
        const bool valid
            = !name.empty() && name.size() <= kMaxNameLength && std::all_of(name.begin(), name.end(), [](char c) {
                  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
              });
        if (!valid)
            return "metric name '" + name.substr(0, kMaxNameLength)
                   + "' is not 1-64 characters of letters, digits, '_', '.' or '-': rename the metric";
        if (!seen.insert(name).second)
            return "metric name '" + name + "' is declared twice: declare each metric once";
    }
    return tableSpecsProblem(signature);
}

std::string shardPlacementProblem(const std::vector<VariableSlice> &expected, const proto::ShardState &shard,
                                  const std::string &task)
{
    const auto names = [&expected] {
        std::string text;
        for (const VariableSlice &slice : expected)
            text += (text.empty() ? "'" : ", '") + slice.name + "'";
        return text.empty() ? std::string("nothing") : text;
    };
    if (shard.variables_size() != int(expected.size()))
        return "the chief sent " + task + " " + std::to_string(shard.variables_size())
               + " variables, but its signature places " + names() + " here: give every task the same --ps_hosts";
    for (size_t j = 0; j < expected.size(); ++j) {
        const VariableSlice &slice = expected[j];
        const auto &variable = shard.variables(int(j));
        const auto &shape = variable.value().shape();
        if (variable.name() != slice.name)
            return "the chief sent " + task + " '" + variable.name() + "' as its variable " + std::to_string(j)
                   + ", but its signature places '" + slice.name + "' there: give every task the same --ps_hosts";
        if (!std::equal(shape.begin(), shape.end(), slice.shape.begin(), slice.shape.end()))
            return "the chief sent " + task + " '" + variable.name() + "' of shape " + describeShape(shape)
                   + ", but its signature declares " + describeShape(slice.shape)
                   + ": its checkpoint or the chief's state is corrupt";
    }
    return {};
}

} // namespace parasync
