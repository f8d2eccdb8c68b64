#include "engine/parameter_shard.h"

#include "base/error.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace parasync {

void toTensor(const Eigen::VectorXf &values, const std::vector<int64_t> &shape, proto::Tensor *out)
{
    toTensor(values.data(), values.size(), shape, out);
}

void toTensor(const float *values, int64_t count, const std::vector<int64_t> &shape, proto::Tensor *out)
{
    out->mutable_shape()->Assign(shape.begin(), shape.end());
    auto *data = out->mutable_values();
    // Reserve + Add copies once; Resize would first zero-fill every value
    // (megabytes per step for a large model, on the worker and the ps alike).
    data->Clear();
    data->Reserve(int(count));
    data->Add(values, values + count);
}

bool allFinite(std::span<const float> values)
{
    // x * 0 is 0 for every finite x and NaN for NaN and +-inf, so the sum is
    // finite exactly when every value is.
    return std::isfinite((asVector(values).array() * 0.0f).sum());
}

Eigen::VectorXf fromTensor(const proto::Tensor &tensor, Eigen::Index expectedSize)
{
    if (expectedSize >= 0 && tensor.values_size() != expectedSize)
        throw InputError("tensor has " + std::to_string(tensor.values_size()) + " values, expected "
                         + std::to_string(expectedSize));
    return Eigen::Map<const Eigen::VectorXf>(tensor.values().data(), tensor.values_size());
}

ValuesSnapshot::ValuesSnapshot(ValuesSnapshot &&other) noexcept
    : m_values(std::move(other.m_values))
    , m_readers(std::move(other.m_readers))
{
    other.m_values.clear();
    other.m_readers.clear();
}

ValuesSnapshot &ValuesSnapshot::operator=(ValuesSnapshot &&other) noexcept
{
    if (this != &other) {
        release();
        m_values = std::move(other.m_values);
        m_readers = std::move(other.m_readers);
        other.m_values.clear();
        other.m_readers.clear();
    }
    return *this;
}

void ValuesSnapshot::release()
{
    // Release order: the reads of the values (a send, a copy) happen before
    // the shard, seeing no reader (acquire), writes to the buffer again.
    for (std::atomic<int> *readers : m_readers)
        readers->fetch_sub(1, std::memory_order_release);
    m_readers.clear();
    m_values.clear();
}

ParameterShard::ParameterShard(std::unique_ptr<Optimizer> optimizer) : m_optimizer(std::move(optimizer)) {}

ParameterShard::~ParameterShard() = default;

void ParameterShard::load(const proto::ShardState &state)
{
    // Adam's t: a negative count makes its next step 0/0 (every value NaN),
    // the largest overflows. Checked before anything is replaced.
    constexpr int64_t maxUpdateCount = int64_t(1) << 53;
    for (const auto &var : state.variables()) {
        if (var.update_count() < 0 || var.update_count() > maxUpdateCount)
            throw InputError("variable '" + var.name() + "' has update count " + std::to_string(var.update_count())
                             + ", outside 0 to 2^53: its checkpoint or the chief's state is corrupt");
        // The shape is what every gradient is checked against and what every
        // answer carries: it must describe the values it comes with. Counted
        // with an early exit, since a hostile shape may claim 2^63 elements.
        int64_t elements = 1;
        for (const int64_t d : var.value().shape()) {
            if (d < 0 || (d > 0 && elements > var.value().values_size() / d)) {
                elements = -1;
                break;
            }
            elements *= d;
        }
        if (elements != var.value().values_size())
            throw InputError("variable '" + var.name() + "' holds " + std::to_string(var.value().values_size())
                             + " values, which its shape does not describe: its checkpoint or the chief's state is "
                               "corrupt");
    }
    m_names.clear();
    m_shapes.clear();
    for (auto &buffer : m_values)
        retire(std::move(buffer));
    m_values.clear();
    m_slots.clear();
    for (const auto &var : state.variables()) {
        m_names.push_back(var.name());
        m_shapes.emplace_back(var.value().shape().begin(), var.value().shape().end());
        m_values.push_back(std::make_unique<Buffer>());
        m_values.back()->values = fromTensor(var.value());
        SlotState slots = m_optimizer->makeSlots(m_values.back()->values.size());
        for (auto &[name, value] : slots.slots) {
            auto it = var.slots().find(name);
            if (it != var.slots().end() && it->second.values_size() == value.size())
                value = fromTensor(it->second);
        }
        slots.updateCount = var.update_count();
        m_slots.push_back(std::move(slots));
    }
    if (state.tables_size() != 0 && size_t(state.tables_size()) != m_tables.size())
        throw InputError("the state holds " + std::to_string(state.tables_size()) + " tables, the model declares "
                         + std::to_string(m_tables.size()) + ": its checkpoint or the chief's state is corrupt");
    for (size_t t = 0; t < size_t(state.tables_size()); ++t) {
        const proto::TableState &in = state.tables(int(t));
        SparseTable &table = m_tables[t];
        if (in.name() != table.declaration().name)
            throw InputError("table " + std::to_string(t) + " of the state is '" + in.name() + "', the model's '"
                             + table.declaration().name + "': its checkpoint or the chief's state is corrupt");
        if (!std::is_sorted(in.ids().begin(), in.ids().end(), std::less_equal<>()))
            throw InputError("table '" + in.name()
                             + "' of the state has its ids out of order or repeated: its "
                               "checkpoint or the chief's state is corrupt");
        TableContents contents;
        contents.ids.assign(in.ids().begin(), in.ids().end());
        contents.values.assign(in.values().begin(), in.values().end());
        contents.slotNames.assign(in.slot_names().begin(), in.slot_names().end());
        contents.slots.assign(in.slots().begin(), in.slots().end());
        table.clear();
        table.load(contents);
    }
    m_initialized = true;
}

void ParameterShard::declareTables(const std::vector<TableDeclaration> &tables)
{
    m_tables.clear();
    m_tables.reserve(tables.size());
    for (const TableDeclaration &table : tables)
        m_tables.emplace_back(table, m_optimizer);
}

void ParameterShard::gatherRows(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests, bool lookupOnly,
                                google::protobuf::RepeatedPtrField<proto::SparseRows> *out)
{
    for (const proto::RowRequest &request : requests) {
        SparseTable &table = m_tables[size_t(request.table())];
        proto::SparseRows *rows = out->Add();
        rows->set_table(request.table());
        rows->mutable_ids()->CopyFrom(request.ids());
        // Every value is written by gather: no zeros first.
        const int values = int(request.ids_size() * table.rowWidth());
        rows->mutable_values()->Reserve(values);
        float *to = rows->mutable_values()->AddNAlreadyReserved(values);
        table.gather({request.ids().data(), size_t(request.ids_size())}, {to, size_t(values)}, !lookupOnly);
    }
}

void ParameterShard::applyRows(const RowGradientView &rows, float learningRateScale)
{
    for (const TableRowsView &block : rows)
        m_tables[size_t(block.table)].apply(block.rows.ids, block.rows.values, learningRateScale);
}

proto::ShardState ParameterShard::save(int psIndex) const
{
    proto::ShardState state;
    state.set_ps_index(psIndex);
    for (size_t i = 0; i < m_values.size(); ++i) {
        auto *var = state.add_variables();
        var->set_name(m_names[i]);
        toTensor(m_values[i]->values, m_shapes[i], var->mutable_value());
        for (const auto &[name, value] : m_slots[i].slots)
            toTensor(value, m_shapes[i], &(*var->mutable_slots())[name]);
        var->set_update_count(m_slots[i].updateCount);
    }
    for (const SparseTable &table : m_tables) {
        const TableContents contents = table.save();
        proto::TableState *out = state.add_tables();
        out->set_name(table.declaration().name);
        out->mutable_ids()->Assign(contents.ids.begin(), contents.ids.end());
        out->mutable_values()->Assign(contents.values.begin(), contents.values.end());
        out->mutable_slot_names()->Assign(contents.slotNames.begin(), contents.slotNames.end());
        out->mutable_slots()->Assign(contents.slots.begin(), contents.slots.end());
    }
    return state;
}

void ParameterShard::apply(const GradientView &gradient, float learningRateScale)
{
    if (gradient.size() != m_values.size())
        throw InputError("gradient has " + std::to_string(gradient.size()) + " variables, this ps holds "
                         + std::to_string(m_values.size()));
    for (size_t i = 0; i < m_values.size(); ++i) {
        if (Eigen::Index(gradient[i].size()) != m_values[i]->values.size())
            throw InputError("gradient of '" + m_names[i] + "' has " + std::to_string(gradient[i].size())
                             + " values, the variable has " + std::to_string(m_values[i]->values.size()));
    }
    for (size_t i = 0; i < m_values.size(); ++i)
        m_optimizer->apply(writable(i), asVector(gradient[i]), m_slots[i], learningRateScale);
}

std::span<const float> ParameterShard::values(int i) const
{
    const Eigen::VectorXf &values = m_values[size_t(i)]->values;
    return {values.data(), size_t(values.size())};
}

void ParameterShard::copyValuesTo(google::protobuf::RepeatedPtrField<proto::Tensor> *out) const
{
    out->Clear();
    for (size_t i = 0; i < m_values.size(); ++i)
        toTensor(m_values[i]->values, m_shapes[i], out->Add());
}

void ParameterShard::share(google::protobuf::RepeatedPtrField<proto::Tensor> *shapes, ValuesSnapshot *snapshot)
{
    snapshot->release();
    // Clear() keeps the tensors and their values' capacity for the next
    // answer that needs them in the message.
    shapes->Clear();
    for (size_t i = 0; i < m_values.size(); ++i) {
        Buffer &buffer = *m_values[i];
        // Relaxed: the shard's guard orders this against writable().
        buffer.readers.fetch_add(1, std::memory_order_relaxed);
        snapshot->m_readers.push_back(&buffer.readers);
        snapshot->m_values.emplace_back(buffer.values.data(), size_t(buffer.values.size()));
        proto::Tensor *tensor = shapes->Add();
        tensor->mutable_shape()->Assign(m_shapes[i].begin(), m_shapes[i].end());
        tensor->mutable_values()->Clear();
    }
}

Eigen::VectorXf &ParameterShard::writable(size_t i)
{
    std::unique_ptr<Buffer> &current = m_values[i];
    if (current->readers.load(std::memory_order_acquire) == 0)
        return current->values;
    // An answer is still being sent from these values: update a copy. A
    // retired buffer of the same size that no snapshot holds any more is
    // reused, so that a busy ps copies into memory it already has mapped
    // instead of faulting in 4 MB a step at 1,000,000 parameters.
    std::unique_ptr<Buffer> next;
    for (auto it = m_retired.begin(); it != m_retired.end(); ++it) {
        if ((*it)->values.size() == current->values.size() && (*it)->readers.load(std::memory_order_acquire) == 0) {
            next = std::move(*it);
            m_retired.erase(it);
            break;
        }
    }
    if (!next)
        next = std::make_unique<Buffer>();
    next->values = current->values;
    retire(std::move(current));
    current = std::move(next);
    return current->values;
}

void ParameterShard::retire(std::unique_ptr<Buffer> buffer)
{
    m_retired.push_back(std::move(buffer));
    // As many snapshots as there are workers may hold buffers at once; of
    // the free ones, one per variable is kept for the next copy.
    size_t free = 0;
    std::erase_if(m_retired, [&](const std::unique_ptr<Buffer> &b) {
        return b->readers.load(std::memory_order_acquire) == 0 && ++free > m_values.size();
    });
}

} // namespace parasync
