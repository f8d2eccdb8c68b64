#include "engine/variable_placement.h"

#include "base/error.h"
#include "engine/parameter_shard.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

namespace parasync {

namespace {

// A tensor's values travel in one repeated field: at most 2^31 - 1 of them.
constexpr int64_t kMaxValues = std::numeric_limits<int32_t>::max();

std::string variableText(const proto::ModelSignature &signature, int i)
{
    return "variable " + std::to_string(i) + " ('" + signature.variables(i).name() + "')";
}

// Values per row (the product of dimensions 1..), checked: the shape comes
// off the wire and may claim 2^40 x 2^40 values.
int64_t valuesPerRow(const proto::ModelSignature &signature, int i)
{
    const auto &shape = signature.variables(i).shape();
    int64_t perRow = 1;
    for (int d = 0; d < shape.size(); ++d) {
        const int64_t dim = shape[d];
        if (dim < 0)
            throw InputError(variableText(signature, i) + " has a negative dimension " + std::to_string(dim)
                             + ": declare each variable's shape as the model has it");
        if (d == 0)
            continue;
        if (dim > 0 && perRow > kMaxValues / dim)
            throw InputError(variableText(signature, i) + " claims more than 2^31 values: declare its real shape");
        perRow *= dim;
    }
    const int64_t rows = shape.empty() ? 1 : shape[0];
    if (rows > 0 && perRow > kMaxValues / rows)
        throw InputError(variableText(signature, i) + " claims more than 2^31 values: declare its real shape");
    return perRow;
}

std::string sizeText(int64_t bytes)
{
    char text[32];
    if (bytes >= (int64_t(1) << 20))
        std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1 << 20));
    else if (bytes >= 1024)
        std::snprintf(text, sizeof text, "%.1f KiB", double(bytes) / 1024.0);
    else
        std::snprintf(text, sizeof text, "%lld bytes", static_cast<long long>(bytes));
    return text;
}

} // namespace

void VariablePlacement::partition(proto::ModelSignature *signature, int numPs, int64_t minSliceBytes)
{
    for (int i = 0; i < signature->variables_size(); ++i) {
        auto *variable = signature->mutable_variables(i);
        variable->clear_slice_rows();
        if (minSliceBytes <= 0 || numPs < 2 || variable->shape().empty())
            continue;
        const int64_t rows = variable->shape(0);
        const int64_t bytes = rows * valuesPerRow(*signature, i) * int64_t(sizeof(float));
        const int64_t parts = std::min({int64_t(numPs), rows, std::max<int64_t>(1, bytes / minSliceBytes)});
        if (parts < 2)
            continue;
        for (int64_t k = 0; k < parts; ++k)
            variable->add_slice_rows(rows / parts + (k < rows % parts ? 1 : 0));
    }
}

VariablePlacement VariablePlacement::fromSignature(const proto::ModelSignature &signature, int numPs)
{
    if (numPs < 1)
        throw InputError("a cluster needs at least one ps task to hold the variables");
    VariablePlacement placement;
    placement.m_numPs = numPs;
    placement.m_onPs.resize(size_t(numPs));
    for (int i = 0; i < signature.variables_size(); ++i) {
        const auto &spec = signature.variables(i);
        const int64_t perRow = valuesPerRow(signature, i);
        const int64_t rows = spec.shape().empty() ? 0 : spec.shape(0);
        const int parts = spec.slice_rows_size();
        if (parts == 0) {
            VariableSlice whole;
            whole.variable = i;
            whole.rows = rows;
            whole.size = spec.shape().empty() ? 1 : rows * perRow;
            whole.name = spec.name();
            whole.shape.assign(spec.shape().begin(), spec.shape().end());
            placement.m_slices.push_back(std::move(whole));
            continue;
        }
        if (spec.shape().empty())
            throw InputError(variableText(signature, i)
                             + " is a scalar but declares slices: only a variable with rows can be partitioned");
        if (parts == 1)
            throw InputError(variableText(signature, i)
                             + " declares a single slice: leave slice_rows empty for a whole variable");
        if (int64_t(placement.m_slices.size()) + parts > kMaxSlices)
            throw InputError(variableText(signature, i) + " declares " + std::to_string(parts) + " slices, more than "
                             + std::to_string(kMaxSlices) + " pieces in all: partition into fewer, larger slices");
        int64_t firstRow = 0;
        for (int k = 0; k < parts; ++k) {
            const int64_t sliceRows = spec.slice_rows(k);
            if (sliceRows < 1 || sliceRows > rows - firstRow)
                throw InputError(variableText(signature, i) + " declares slice " + std::to_string(k) + " of "
                                 + std::to_string(sliceRows) + " rows, but its " + std::to_string(rows) + " rows leave "
                                 + std::to_string(rows - firstRow)
                                 + ": each slice needs at least one row and together they cover dimension 0");
            VariableSlice slice;
            slice.variable = i;
            slice.part = k;
            slice.parts = parts;
            slice.firstRow = firstRow;
            slice.rows = sliceRows;
            slice.offset = firstRow * perRow;
            slice.size = sliceRows * perRow;
            slice.name = spec.name() + "/part_" + std::to_string(k);
            slice.shape.assign(spec.shape().begin(), spec.shape().end());
            slice.shape[0] = sliceRows;
            placement.m_slices.push_back(std::move(slice));
            firstRow += sliceRows;
        }
        if (firstRow != rows)
            throw InputError(variableText(signature, i) + " declares slices of " + std::to_string(firstRow)
                             + " rows in all, but it has " + std::to_string(rows)
                             + ": the slices must cover dimension 0 exactly");
    }
    if (int64_t(placement.m_slices.size()) > kMaxSlices)
        throw InputError("the signature declares more than " + std::to_string(kMaxSlices)
                         + " variables and slices: a model this fragmented is not supported");
    for (size_t j = 0; j < placement.m_slices.size(); ++j) {
        VariableSlice &slice = placement.m_slices[j];
        slice.ps = int(j % size_t(numPs));
        slice.indexOnPs = int(placement.m_onPs[size_t(slice.ps)].size());
        placement.m_onPs[size_t(slice.ps)].push_back(slice);
    }
    return placement;
}

std::vector<proto::ShardState> VariablePlacement::split(const std::vector<proto::VariableState> &whole) const
{
    std::vector<proto::ShardState> shards(static_cast<size_t>(m_numPs));
    for (int k = 0; k < m_numPs; ++k)
        shards[size_t(k)].set_ps_index(k);
    for (const VariableSlice &slice : m_slices) {
        const proto::VariableState &variable = whole.at(size_t(slice.variable));
        const int64_t size = variable.value().values_size();
        if (slice.offset + slice.size > size)
            throw InputError("variable '" + variable.name() + "' holds " + std::to_string(size)
                             + " values, fewer than its shape says");
        const auto cut = [&slice](const proto::Tensor &from, proto::Tensor *to) {
            toTensor(from.values().data() + slice.offset, slice.size, slice.shape, to);
        };
        auto *piece = shards[size_t(slice.ps)].add_variables();
        piece->set_name(slice.name);
        piece->set_update_count(variable.update_count());
        cut(variable.value(), piece->mutable_value());
        for (const auto &[name, slot] : variable.slots())
            if (slot.values_size() == size)
                cut(slot, &(*piece->mutable_slots())[name]);
    }
    return shards;
}

std::vector<proto::VariableState> VariablePlacement::join(const std::vector<proto::ShardState> &shards) const
{
    if (int(shards.size()) != m_numPs)
        throw InputError("have " + std::to_string(shards.size()) + " shards for " + std::to_string(m_numPs)
                         + " ps tasks");
    for (int k = 0; k < m_numPs; ++k)
        if (shards[size_t(k)].variables_size() != int(on(k).size()))
            throw InputError("ps:" + std::to_string(k) + " holds " + std::to_string(shards[size_t(k)].variables_size())
                             + " variables and slices, the placement gives it " + std::to_string(on(k).size()));
    std::vector<proto::VariableState> whole;
    for (size_t first = 0; first < m_slices.size(); first += size_t(m_slices[first].parts)) {
        // The pieces of one variable: m_slices[first .. first + parts).
        const std::vector<VariableSlice> pieces(m_slices.begin() + long(first),
                                                m_slices.begin() + long(first) + m_slices[first].parts);
        const VariableSlice &last = pieces.back();
        const int64_t size = last.offset + last.size;
        proto::VariableState variable;
        variable.set_name(last.whole() ? last.name : last.name.substr(0, last.name.rfind("/part_")));
        std::vector<int64_t> shape = last.shape;
        if (!last.whole())
            shape[0] = last.firstRow + last.rows;
        const auto paste = [size, &shape](const proto::Tensor &from, const VariableSlice &slice, proto::Tensor *to) {
            if (to->values_size() != size) {
                to->mutable_shape()->Assign(shape.begin(), shape.end());
                to->mutable_values()->Resize(int(size), 0.0f);
            }
            std::copy(from.values().begin(), from.values().end(), to->mutable_values()->begin() + slice.offset);
        };
        std::map<std::string, int> slotPieces; // how many pieces carry each slot
        for (const VariableSlice &slice : pieces) {
            const proto::VariableState &piece = shards[size_t(slice.ps)].variables(slice.indexOnPs);
            if (piece.name() != slice.name || piece.value().values_size() != slice.size)
                throw InputError("ps:" + std::to_string(slice.ps) + " holds '" + piece.name() + "' ("
                                 + std::to_string(piece.value().values_size()) + " values) where the placement puts '"
                                 + slice.name + "' (" + std::to_string(slice.size) + ")");
            if (slice.part == 0)
                variable.set_update_count(piece.update_count());
            paste(piece.value(), slice, variable.mutable_value());
            for (const auto &[name, slot] : piece.slots()) {
                if (slot.values_size() != slice.size)
                    continue;
                paste(slot, slice, &(*variable.mutable_slots())[name]);
                ++slotPieces[name];
            }
        }
        // A slot some piece lacked is not whole: left out (the ps makes a
        // fresh one on restore) rather than restored with zeros in part.
        for (const auto &[name, count] : slotPieces)
            if (count != int(pieces.size()))
                variable.mutable_slots()->erase(name);
        whole.push_back(std::move(variable));
    }
    return whole;
}

bool VariablePlacement::partitioned() const
{
    return std::any_of(m_slices.begin(), m_slices.end(), [](const VariableSlice &s) { return !s.whole(); });
}

std::string VariablePlacement::describe(int ps) const
{
    std::string text;
    for (const VariableSlice &slice : on(ps)) {
        if (!text.empty())
            text += ", ";
        if (slice.whole()) {
            text += slice.name;
        } else {
            int64_t rows = 0;
            for (const VariableSlice &s : m_slices)
                if (s.variable == slice.variable)
                    rows += s.rows;
            text += slice.name.substr(0, slice.name.rfind("/part_")) + " rows " + std::to_string(slice.firstRow) + "-"
                    + std::to_string(slice.firstRow + slice.rows - 1) + " of " + std::to_string(rows);
        }
        text += " (" + sizeText(slice.size * int64_t(sizeof(float))) + ")";
    }
    return text;
}

} // namespace parasync
