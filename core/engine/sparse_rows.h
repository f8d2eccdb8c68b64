#pragma once

// Rows of a sparse model's tables (engine/sparse_table.h) as they travel
// (proto::SparseRows, proto::RowRequest), and as a ps task takes a push's row
// gradients: per table, the ids ascending and one row of values per id. A
// view lies in the parsed request; a sync step, whose gradients outlive
// their requests, keeps owned copies and sums them id by id (an id only some
// workers touched counts as zero in the others'). The checks a ps makes of
// them, as a hostile client could fill them, are here too.

#include "engine/sparse_table.h"
#include "proto/parasync.pb.h"

#include <span>
#include <string>
#include <vector>

namespace parasync {

// One table's row gradients where they lie.
struct TableRowsView
{
    int table = 0; // index into the signature's tables
    RowBlockView rows;
};
// At most one entry per table, in table order.
using RowGradientView = std::vector<TableRowsView>;

// One table's row gradients, owned.
struct TableRows
{
    int table = 0;
    RowBlock rows;
};
using RowGradients = std::vector<TableRows>;

RowGradientView viewOf(const RowGradients &rows);
RowGradients copyOf(const RowGradientView &rows);

// Adds `add` into `sum`, id by id: an id in both sums its rows, an id in one
// keeps its row. Both hold at most one entry per table, in table order, and
// ids ascending; so does the sum.
void addRows(RowGradients *sum, const RowGradientView &add);
// Multiplies every value by `factor` (1 / contributions, for an average).
void scaleRows(RowGradients *rows, float factor);

// How many rows a view holds.
int64_t rowCount(const RowGradientView &rows);

// The tables a signature declares (ModelSignature.tables).
std::vector<TableDeclaration> tablesOf(const proto::ModelSignature &signature);
// What is wrong with a signature's tables, in words (empty: nothing): more
// than kMaxTables, a width or stddev out of range, a name that is empty,
// too long, of other characters than [A-Za-z0-9_./-], repeated, or a
// variable's.
std::string tableSpecsProblem(const proto::ModelSignature &signature);
constexpr int kMaxTables = 64;

void toSparseRows(const TableRows &rows, proto::SparseRows *out);
TableRows fromSparseRows(const proto::SparseRows &rows);
// Views into the message, which must outlive them; checked first
// (rowBlocksProblem).
RowGradientView viewOf(const google::protobuf::RepeatedPtrField<proto::SparseRows> &blocks);

// Every ps task's rows of each of `tables` tables, joined into one
// TableState per table with the ids ascending: what a checkpoint holds.
// Throws InputError when a shard lacks a table or names it otherwise.
std::vector<proto::TableState> joinTableStates(const std::vector<proto::ShardState> &shards,
                                               const proto::ModelSignature &signature);
// The rows of whole tables (a checkpoint's) that each of shards->size() ps
// tasks holds (psOfRow), appended to each shard's tables.
void splitTableStates(const google::protobuf::RepeatedPtrField<proto::TableState> &whole,
                      std::vector<proto::ShardState> *shards);

// What is wrong with a request's row blocks (a push's row_gradients), in
// words naming `field`, or empty: a table index out of range, two blocks of
// one table or tables out of order, ids not ascending or repeated (merge a
// batch's duplicates first), an id at or above the table's id_limit, or one
// that another ps task holds (psOfRow), or a number of values other than
// ids x row_width.
std::string rowBlocksProblem(const google::protobuf::RepeatedPtrField<proto::SparseRows> &blocks,
                             const std::vector<TableDeclaration> &tables, int psIndex, int numPs,
                             const std::string &field);
// The same for the ids a request asks rows for (a push's pull, a
// PullRequest's tables).
std::string rowRequestsProblem(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests,
                               const std::vector<TableDeclaration> &tables, int psIndex, int numPs,
                               const std::string &field);

} // namespace parasync
