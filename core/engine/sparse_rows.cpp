#include "engine/sparse_rows.h"

#include "base/error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

namespace parasync {

namespace {

// The sum of two blocks of one table whose rows are `width` values wide.
RowBlock mergedSum(const RowBlock &a, RowBlockView b)
{
    const size_t width = !a.ids.empty()   ? a.values.size() / a.ids.size()
                         : !b.ids.empty() ? b.values.size() / b.ids.size()
                                          : 0;
    RowBlock sum;
    sum.ids.reserve(a.ids.size() + b.ids.size());
    sum.values.reserve((a.ids.size() + b.ids.size()) * width);
    size_t i = 0, j = 0;
    auto append = [&](const float *row) { sum.values.insert(sum.values.end(), row, row + width); };
    while (i < a.ids.size() || j < b.ids.size()) {
        if (j == b.ids.size() || (i < a.ids.size() && a.ids[i] < b.ids[j])) {
            sum.ids.push_back(a.ids[i]);
            append(a.values.data() + i * width);
            ++i;
        } else if (i == a.ids.size() || b.ids[j] < a.ids[i]) {
            sum.ids.push_back(b.ids[j]);
            append(b.values.data() + j * width);
            ++j;
        } else {
            sum.ids.push_back(a.ids[i]);
            append(a.values.data() + i * width);
            float *row = sum.values.data() + sum.values.size() - width;
            const float *other = b.values.data() + j * width;
            for (size_t k = 0; k < width; ++k)
                row[k] += other[k];
            ++i;
            ++j;
        }
    }
    return sum;
}

} // namespace

RowGradientView viewOf(const RowGradients &rows)
{
    RowGradientView view;
    view.reserve(rows.size());
    for (const TableRows &t : rows)
        view.push_back({t.table, {t.rows.ids, t.rows.values}});
    return view;
}

RowGradients copyOf(const RowGradientView &rows)
{
    RowGradients copy;
    copy.reserve(rows.size());
    for (const TableRowsView &t : rows)
        copy.push_back(
            {t.table, {{t.rows.ids.begin(), t.rows.ids.end()}, {t.rows.values.begin(), t.rows.values.end()}}});
    return copy;
}

void addRows(RowGradients *sum, const RowGradientView &add)
{
    for (const TableRowsView &t : add) {
        auto at = std::lower_bound(sum->begin(), sum->end(), t.table,
                                   [](const TableRows &s, int table) { return s.table < table; });
        if (at == sum->end() || at->table != t.table)
            sum->insert(
                at, TableRows{t.table,
                              {{t.rows.ids.begin(), t.rows.ids.end()}, {t.rows.values.begin(), t.rows.values.end()}}});
        else
            at->rows = mergedSum(at->rows, t.rows);
    }
}

void scaleRows(RowGradients *rows, float factor)
{
    for (TableRows &t : *rows)
        for (float &v : t.rows.values)
            v *= factor;
}

int64_t rowCount(const RowGradientView &rows)
{
    int64_t count = 0;
    for (const TableRowsView &t : rows)
        count += int64_t(t.rows.ids.size());
    return count;
}

std::vector<TableDeclaration> tablesOf(const proto::ModelSignature &signature)
{
    std::vector<TableDeclaration> tables;
    tables.reserve(size_t(signature.tables_size()));
    for (const proto::TableSpec &spec : signature.tables())
        tables.push_back({spec.name(), spec.row_width(), spec.id_limit(), spec.init_stddev(), spec.seed()});
    return tables;
}

std::string tableSpecsProblem(const proto::ModelSignature &signature)
{
    if (signature.tables_size() > kMaxTables)
        return "the signature declares " + std::to_string(signature.tables_size()) + " tables, more than "
               + std::to_string(kMaxTables) + ": merge tables of one width into one";
    std::set<std::string> names;
    for (const auto &variable : signature.variables())
        names.insert(variable.name());
    for (int t = 0; t < signature.tables_size(); ++t) {
        const proto::TableSpec &spec = signature.tables(t);
        const std::string which = "table " + std::to_string(t) + " ('" + spec.name().substr(0, 64) + "')";
        const std::string &name = spec.name();
        const bool wellFormed
            = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](unsigned char c) {
                  return std::isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
              });
        if (!wellFormed)
            return which + ": a table's name is 1-64 characters of A-Z, a-z, 0-9, '_', '.', '/' and '-'";
        if (!names.insert(name).second)
            return which + ": the name is taken by another table or a variable: give each its own";
        if (spec.row_width() < 1 || spec.row_width() > TableDeclaration::kMaxRowWidth)
            return which + " has rows of " + std::to_string(spec.row_width()) + " values: give 1 to "
                   + std::to_string(TableDeclaration::kMaxRowWidth);
        if (!std::isfinite(spec.init_stddev()) || spec.init_stddev() < 0)
            return which + " has init_stddev " + std::to_string(spec.init_stddev())
                   + ": give 0 (rows start at zero) or a positive number";
    }
    return {};
}

void toSparseRows(const TableRows &rows, proto::SparseRows *out)
{
    out->set_table(rows.table);
    out->mutable_ids()->Assign(rows.rows.ids.begin(), rows.rows.ids.end());
    out->mutable_values()->Assign(rows.rows.values.begin(), rows.rows.values.end());
}

TableRows fromSparseRows(const proto::SparseRows &rows)
{
    return {rows.table(), {{rows.ids().begin(), rows.ids().end()}, {rows.values().begin(), rows.values().end()}}};
}

RowGradientView viewOf(const google::protobuf::RepeatedPtrField<proto::SparseRows> &blocks)
{
    RowGradientView view;
    view.reserve(size_t(blocks.size()));
    for (const proto::SparseRows &block : blocks)
        view.push_back(
            {block.table(),
             {{block.ids().data(), size_t(block.ids_size())}, {block.values().data(), size_t(block.values_size())}}});
    return view;
}

std::vector<proto::TableState> joinTableStates(const std::vector<proto::ShardState> &shards,
                                               const proto::ModelSignature &signature)
{
    std::vector<proto::TableState> whole(size_t(signature.tables_size()));
    for (int t = 0; t < signature.tables_size(); ++t) {
        const proto::TableSpec &spec = signature.tables(t);
        const size_t width = size_t(spec.row_width());
        proto::TableState &out = whole[size_t(t)];
        out.set_name(spec.name());
        // Each shard's ids ascending, the shards' sets disjoint: sorted
        // together by id, row and state follow.
        struct Row
        {
            uint64_t id;
            const proto::TableState *from;
            int index;
        };
        std::vector<Row> rows;
        size_t slotCount = 0;
        for (size_t k = 0; k < shards.size(); ++k) {
            if (shards[k].tables_size() != signature.tables_size() || shards[k].tables(t).name() != spec.name())
                throw InputError("ps:" + std::to_string(k) + " does not hold table '" + spec.name() + "' as table "
                                 + std::to_string(t));
            const proto::TableState &part = shards[k].tables(t);
            if (size_t(part.values_size()) != size_t(part.ids_size()) * width
                || (part.ids_size() > 0
                    && size_t(part.slots_size()) != size_t(part.ids_size()) * width * size_t(part.slot_names_size())))
                throw InputError("ps:" + std::to_string(k) + "'s rows of table '" + spec.name()
                                 + "' do not fill rows of " + std::to_string(width));
            if (part.ids_size() > 0) {
                if (out.slot_names_size() == 0)
                    out.mutable_slot_names()->CopyFrom(part.slot_names());
                slotCount = size_t(part.slot_names_size());
            }
            for (int i = 0; i < part.ids_size(); ++i)
                rows.push_back({part.ids(i), &part, i});
        }
        std::sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.id < b.id; });
        out.mutable_ids()->Reserve(int(rows.size()));
        out.mutable_values()->Reserve(int(rows.size() * width));
        out.mutable_slots()->Reserve(int(rows.size() * width * slotCount));
        for (const Row &row : rows) {
            out.add_ids(row.id);
            const float *values = row.from->values().data() + size_t(row.index) * width;
            out.mutable_values()->Add(values, values + width);
            if (size_t(row.from->slot_names_size()) == slotCount) {
                const float *slots = row.from->slots().data() + size_t(row.index) * width * slotCount;
                out.mutable_slots()->Add(slots, slots + width * slotCount);
            }
        }
        if (size_t(out.slots_size()) != rows.size() * width * slotCount)
            throw InputError("the ps tasks keep different optimizer state for table '" + spec.name()
                             + "': give every task the same --optimizer");
    }
    return whole;
}

void splitTableStates(const google::protobuf::RepeatedPtrField<proto::TableState> &whole,
                      std::vector<proto::ShardState> *shards)
{
    const int numPs = int(shards->size());
    for (const proto::TableState &table : whole) {
        const size_t rows = size_t(table.ids_size());
        const size_t width = rows > 0 ? size_t(table.values_size()) / rows : 0;
        const size_t slotValues = rows > 0 ? size_t(table.slots_size()) / rows : 0;
        std::vector<proto::TableState *> parts;
        for (proto::ShardState &shard : *shards) {
            proto::TableState *part = shard.add_tables();
            part->set_name(table.name());
            part->mutable_slot_names()->CopyFrom(table.slot_names());
            parts.push_back(part);
        }
        for (size_t i = 0; i < rows; ++i) {
            proto::TableState *part = parts[size_t(psOfRow(table.ids(int(i)), numPs))];
            part->add_ids(table.ids(int(i)));
            const float *values = table.values().data() + i * width;
            part->mutable_values()->Add(values, values + width);
            const float *slots = table.slots().data() + i * slotValues;
            part->mutable_slots()->Add(slots, slots + slotValues);
        }
    }
}

namespace {

// The checks both kinds of request share: tables, order, ids.
template<typename Block>
std::string idsProblem(const google::protobuf::RepeatedPtrField<Block> &blocks,
                       const std::vector<TableDeclaration> &tables, int psIndex, int numPs, const std::string &field)
{
    int previousTable = -1;
    for (int b = 0; b < blocks.size(); ++b) {
        const Block &block = blocks[b];
        const std::string which = field + "[" + std::to_string(b) + "]";
        if (block.table() < 0 || size_t(block.table()) >= tables.size())
            return which + " names table " + std::to_string(block.table())
                   + ", which the model does not declare (it has " + std::to_string(tables.size())
                   + "): number the tables as ModelSignature.tables lists them, from 0";
        if (block.table() <= previousTable)
            return which + " is for table " + std::to_string(block.table()) + " after table "
                   + std::to_string(previousTable) + ": send one block per table, in table order";
        previousTable = block.table();
        const TableDeclaration &table = tables[size_t(block.table())];
        for (int i = 0; i < block.ids_size(); ++i) {
            const uint64_t id = block.ids(i);
            if (i > 0 && id <= block.ids(i - 1))
                return which + " ('" + table.name + "'): id " + std::to_string(id) + " follows "
                       + std::to_string(block.ids(i - 1))
                       + ": send the ids ascending, each once (merge a batch's duplicate ids and sum their rows)";
            if (table.idLimit != 0 && id >= table.idLimit)
                return which + " ('" + table.name + "'): id " + std::to_string(id)
                       + " is not below the table's id_limit " + std::to_string(table.idLimit)
                       + ": hash or clip ids into the declared range";
            // One ps task holds every row: no hash (a 64-bit division an id).
            if (const int owner = numPs == 1 ? 0 : psOfRow(id, numPs); owner != psIndex)
                return which + " ('" + table.name + "'): row " + std::to_string(id)
                       + " lives on ps:" + std::to_string(owner) + ", not ps:" + std::to_string(psIndex)
                       + ": send each row to the ps task psOfRow(id) names";
        }
    }
    return {};
}

} // namespace

std::string rowBlocksProblem(const google::protobuf::RepeatedPtrField<proto::SparseRows> &blocks,
                             const std::vector<TableDeclaration> &tables, int psIndex, int numPs,
                             const std::string &field)
{
    if (std::string problem = idsProblem(blocks, tables, psIndex, numPs, field); !problem.empty())
        return problem;
    for (int b = 0; b < blocks.size(); ++b) {
        const proto::SparseRows &block = blocks[b];
        const TableDeclaration &table = tables[size_t(block.table())];
        if (int64_t(block.values_size()) != int64_t(block.ids_size()) * table.rowWidth)
            return field + "[" + std::to_string(b) + "] ('" + table.name + "') has "
                   + std::to_string(block.values_size()) + " values for " + std::to_string(block.ids_size())
                   + " ids, but the table's rows are " + std::to_string(table.rowWidth) + " wide: send ids x "
                   + std::to_string(table.rowWidth) + " values, row after row";
    }
    return {};
}

std::string rowRequestsProblem(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests,
                               const std::vector<TableDeclaration> &tables, int psIndex, int numPs,
                               const std::string &field)
{
    return idsProblem(requests, tables, psIndex, numPs, field);
}

} // namespace parasync
