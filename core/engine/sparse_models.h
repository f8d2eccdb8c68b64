#pragma once

// Models over categorical data with embedding tables (engine/sparse_table.h),
// trained on a click log (engine/click_log.h):
//   "sparse_lr"  logistic regression over the ids, p = sigmoid(b + sum_f w[id_f]);
//                table "weights" (rows of 1), dense "bias" [1]
//   "fm", "fm:K" a factorization machine (Rendle, 2010) of rank K (default 8):
//                p = sigmoid(b + sum_f w[id_f] + sum_{f<g} <v[id_f], v[id_g]>);
//                tables "weights" (rows of 1) and "factors" (rows of K), dense "bias" [1]
// Both minimise the mean log loss. Their held-out metrics are the log loss
// and the AUC.

#include "engine/model.h"

#include <memory>
#include <string>

namespace parasync {

constexpr int64_t kDefaultFactorizationMachineRank = 8;

// Whether --model names one of these ("sparse_lr", "fm", "fm:K"); throws
// InputError for a bad rank.
bool isSparseModelName(const std::string &name);

// The model for data of `fields` ids per sample. Throws InputError for an
// unknown name or a bad rank.
std::unique_ptr<Model> makeSparseModel(const std::string &name, int64_t fields);

} // namespace parasync
