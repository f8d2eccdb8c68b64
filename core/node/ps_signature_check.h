#pragma once

// The checks a ps task makes of the model it is given: a worker's signature
// against the cluster's, the names a signature declares, and the shard the
// chief sends against what the signature places on this task. Each answers
// in words a user can act on; empty means no problem.

#include "engine/variable_placement.h"
#include "proto/parasync.pb.h"

#include <string>
#include <vector>

namespace parasync {

// Which field of two signatures differs, in words, and what aligns them.
struct SignatureDifference
{
    std::string what; // empty: none
    std::string fix = "Give every task the same --model, --dataset and --optimizer";
};

// The first field in which a worker's signature differs from the cluster's.
SignatureDifference signatureDifference(const proto::ModelSignature &cluster, const proto::ModelSignature &worker);

// Variable and metric names become keys of the step log's JSON, metrics.csv
// columns and TensorBoard tags: refuse a name that would break one of them (a
// quote, a comma, a newline) or repeats another.
std::string signatureNamesProblem(const proto::ModelSignature &signature);

// Says how the shard the chief sent differs from the pieces the signature's
// placement gives this ps task (`task`, as "ps:1"), in words; empty when it
// holds exactly them.
std::string shardPlacementProblem(const std::vector<VariableSlice> &expected, const proto::ShardState &shard,
                                  const std::string &task);

// "[784, 10]", a scalar "[]".
template<typename Dims>
std::string describeShape(const Dims &dims)
{
    std::string text = "[";
    for (auto d : dims)
        text += (text.size() > 1 ? ", " : "") + std::to_string(d);
    return text + "]";
}

} // namespace parasync
