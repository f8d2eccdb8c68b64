#include "engine/sparse_table.h"

#include "base/error.h"

#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <utility>

namespace parasync {

namespace {

// splitmix64's output function (Steele, Lea and Flood, 2014): every input bit
// moves about half the output bits, so ids that differ in one bit, or by a
// stride, land far apart.
constexpr uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// A uniform double in (0, 1) from 53 of the bits: never 0, so its log is finite.
double uniformOpen(uint64_t bits)
{
    return (double(bits >> 11) + 0.5) * 0x1.0p-53;
}

// One standard normal value truncated at +-2, drawn from `stream` alone:
// counter-based (splitmix64's sequence from that state), so no generator is
// kept and every column of every row is drawn on its own. A draw beyond 2 is
// redrawn with the next two counters, as tf.truncated_normal does.
double truncatedNormal(uint64_t stream)
{
    for (uint64_t counter = 1;; counter += 2) {
        const double u1 = uniformOpen(mix64(stream + counter * kGolden));
        const double u2 = uniformOpen(mix64(stream + (counter + 1) * kGolden));
        // Box-Muller, the cosine half.
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        if (std::abs(z) <= 2.0)
            return z;
    }
}

// A row's place in the arena (what the index holds) and an id looked up by
// (what it is asked with): the index keeps 4 bytes per entry and reads the
// id of an entry from the head of its row, so that the comparison and the
// row's values share a cache line (an index of 16-byte (id, row) entries cost
// a third more than the payload at 1M rows of 16 floats with Adagrad).
struct RowRef
{
    uint32_t row;
};
struct IdKey
{
    uint64_t id;
};

// Counts what the index allocates, so that memoryBytes() reports abseil's
// real allocation (control bytes, their cloned group, padding) rather than
// an estimate of its layout.
template<class T>
struct CountingAllocator
{
    using value_type = T;
    size_t *bytes = nullptr;

    explicit CountingAllocator(size_t *counter) : bytes(counter) {}
    template<class U>
    CountingAllocator(const CountingAllocator<U> &other) : bytes(other.bytes)
    {
    }
    T *allocate(size_t n)
    {
        *bytes += n * sizeof(T);
        return std::allocator<T>().allocate(n);
    }
    void deallocate(T *p, size_t n)
    {
        *bytes -= n * sizeof(T);
        std::allocator<T>().deallocate(p, n);
    }
    template<class U>
    bool operator==(const CountingAllocator<U> &other) const
    {
        return bytes == other.bytes;
    }
};

// Where HotIds' index looks for `id` first. Not mix64(id), whose low bits
// psOfRow fixes for every id of one ps task (with 4 of them, a quarter of
// the slots would be used).
size_t hotIdsHome(uint64_t id, size_t mask)
{
    return size_t(mix64(id + kGolden) >> 32) & mask;
}

// A row's id, at its head, in floats' storage.
constexpr size_t kIdFloats = sizeof(uint64_t) / sizeof(float);

// Arena blocks of about this many bytes of rows: the slack of a table is at
// most one block, and no row moves once the first block is full.
constexpr size_t kBlockBytes = size_t(4) << 20;
// The first block starts with this many rows and doubles up to a full block,
// so that a table of a few rows takes a few kilobytes.
constexpr size_t kFirstBlockRows = 64;

} // namespace

int psOfRow(uint64_t id, int numPs)
{
    if (numPs <= 0)
        throw std::invalid_argument("psOfRow: the number of ps tasks must be positive, got " + std::to_string(numPs));
    return int(mix64(id) % uint64_t(numPs));
}

void initialRow(const TableDeclaration &table, uint64_t id, std::span<float> out)
{
    if (table.initStddev == 0.0f) {
        std::fill(out.begin(), out.end(), 0.0f);
        return;
    }
    const uint64_t rowKey = mix64(mix64(table.seed ^ kGolden) ^ id);
    const double stddev = table.initStddev;
    for (size_t column = 0; column < out.size(); ++column) {
        const uint64_t stream = mix64(rowKey ^ mix64(uint64_t(column) + kGolden));
        out[column] = float(stddev * truncatedNormal(stream));
    }
}

struct SparseTable::Impl
{
    // Hashes and compares an entry by the id its row holds.
    struct IdHash
    {
        using is_transparent = void;
        const Impl *table;
        size_t operator()(IdKey key) const { return absl::Hash<uint64_t>()(key.id); }
        size_t operator()(RowRef ref) const { return absl::Hash<uint64_t>()(table->idOf(ref.row)); }
    };
    struct IdEqual
    {
        using is_transparent = void;
        const Impl *table;
        bool operator()(RowRef a, RowRef b) const { return a.row == b.row; }
        bool operator()(RowRef a, IdKey b) const { return table->idOf(a.row) == b.id; }
        bool operator()(IdKey a, RowRef b) const { return a.id == table->idOf(b.row); }
        bool operator()(IdKey a, IdKey b) const { return a.id == b.id; }
    };
    using Index = absl::flat_hash_set<RowRef, IdHash, IdEqual, CountingAllocator<RowRef>>;

    Impl(const TableDeclaration &table, std::shared_ptr<const Optimizer> rule)
        : optimizer(std::move(rule))
        , slotCount(size_t(optimizer->rowSlots()))
        , width(size_t(table.rowWidth))
        , stride(width * (1 + slotCount))
        , rowFloats(kIdFloats + stride)
        , index(0, IdHash{this}, IdEqual{this}, CountingAllocator<RowRef>(&indexBytes))
    {
        rowsPerBlock = 1;
        while (rowsPerBlock * 2 * rowFloats * sizeof(float) <= kBlockBytes)
            rowsPerBlock *= 2;
        blockShift = uint32_t(std::countr_zero(rowsPerBlock));
    }
    Impl(const Impl &) = delete;
    Impl &operator=(const Impl &) = delete;

    float *rowData(uint32_t row) const
    {
        return rowBlocks[row >> blockShift].get() + (row & (rowsPerBlock - 1)) * rowFloats;
    }
    uint64_t idOf(uint32_t row) const
    {
        uint64_t id;
        std::memcpy(&id, rowData(row), sizeof id);
        return id;
    }
    std::span<float> valueOf(uint32_t row) const { return {rowData(row) + kIdFloats, width}; }
    std::span<float> slotsOf(uint32_t row) const { return {rowData(row) + kIdFloats + width, width * slotCount}; }

    size_t capacity() const
    {
        if (rowBlocks.size() == 1)
            return firstBlockRows;
        return rowBlocks.size() * rowsPerBlock;
    }

    // Room for one more row; before the index is touched, so that a failed
    // allocation leaves it as it was.
    void reserveRow()
    {
        if (rowCount < capacity())
            return;
        if (rowCount == std::numeric_limits<uint32_t>::max())
            throw InputError("a ps task holds 4,294,967,295 rows of one table, as many as it can: use more ps tasks");
        if (rowBlocks.size() == 1 && firstBlockRows < rowsPerBlock) {
            // Still small: the first block doubles, copying what it holds.
            const size_t rows = std::min(firstBlockRows * 2, rowsPerBlock);
            auto block = std::make_unique_for_overwrite<float[]>(rows * rowFloats);
            std::copy_n(rowBlocks[0].get(), rowCount * rowFloats, block.get());
            rowBlocks[0] = std::move(block);
            firstBlockRows = rows;
            return;
        }
        const size_t rows = rowBlocks.empty() ? std::min(kFirstBlockRows, rowsPerBlock) : rowsPerBlock;
        rowBlocks.reserve(rowBlocks.size() + 1);
        rowBlocks.push_back(std::make_unique_for_overwrite<float[]>(rows * rowFloats));
        if (rowBlocks.size() == 1)
            firstBlockRows = rows;
    }

    // Starts loading the index entries of the id a few after `i`: the rows
    // of a large table are one cache miss after another otherwise.
    void prefetch(std::span<const uint64_t> ids, size_t i) const
    {
        constexpr size_t kAhead = 8;
        if (i + kAhead < ids.size())
            index.prefetch(IdKey{ids[i + kAhead]});
    }

    // The row of `id`, made when it is new (`made` says so; its values and
    // state are for the caller to fill).
    uint32_t findOrAdd(uint64_t id, bool *made)
    {
        reserveRow();
        *made = false;
        const auto it = index.lazy_emplace(IdKey{id}, [&](const Index::constructor &construct) {
            const uint32_t row = uint32_t(rowCount);
            std::memcpy(rowData(row), &id, sizeof id);
            ++rowCount;
            *made = true;
            construct(RowRef{row});
        });
        return it->row;
    }

    std::shared_ptr<const Optimizer> optimizer;
    size_t slotCount;
    size_t width;
    size_t stride;    // floats of a row's payload: its values, then each slot
    size_t rowFloats; // and its id before them
    size_t rowsPerBlock = 1;
    uint32_t blockShift = 0;
    size_t firstBlockRows = 0;
    size_t rowCount = 0;
    // Rows in order of arrival: id, values, slots.
    std::vector<std::unique_ptr<float[]>> rowBlocks;
    size_t indexBytes = 0; // before `index`, whose allocator counts into it
    Index index;
};

SparseTable::SparseTable(TableDeclaration table, std::shared_ptr<const Optimizer> optimizer) : m_table(std::move(table))
{
    if (!optimizer)
        throw std::invalid_argument("SparseTable needs an optimizer");
    if (optimizer->rowSlots() < 0)
        throw InputError("table '" + m_table.name + "': optimizer '" + optimizer->name()
                         + "' has no rule for the rows of a sparse table; use sgd, momentum, adagrad or ftrl");
    if (m_table.rowWidth < 1 || m_table.rowWidth > TableDeclaration::kMaxRowWidth)
        throw InputError("table '" + m_table.name + "' has rows of " + std::to_string(m_table.rowWidth)
                         + " values; give a row width from 1 to " + std::to_string(TableDeclaration::kMaxRowWidth));
    if (!std::isfinite(m_table.initStddev) || m_table.initStddev < 0.0f)
        throw InputError("table '" + m_table.name + "' has initial standard deviation "
                         + std::to_string(m_table.initStddev)
                         + "; give a finite number >= 0 (0 starts every row at zeros)");
    m_impl = std::make_unique<Impl>(m_table, std::move(optimizer));
}

SparseTable::~SparseTable() = default;
SparseTable::SparseTable(SparseTable &&) noexcept = default;
SparseTable &SparseTable::operator=(SparseTable &&) noexcept = default;

void SparseTable::gather(std::span<const uint64_t> ids, std::span<float> out, bool create)
{
    const size_t width = m_impl->width;
    if (out.size() != ids.size() * width)
        throw std::invalid_argument("gather: " + std::to_string(out.size()) + " values for "
                                    + std::to_string(ids.size()) + " rows of " + std::to_string(width));
    for (size_t i = 0; i < ids.size(); ++i) {
        m_impl->prefetch(ids, i);
        const std::span<float> row = out.subspan(i * width, width);
        if (create) {
            bool made = false;
            const uint32_t r = m_impl->findOrAdd(ids[i], &made);
            if (made) {
                initialRow(m_table, ids[i], m_impl->valueOf(r));
                m_impl->optimizer->initRowSlots(m_impl->slotsOf(r));
            }
            const std::span<const float> held = m_impl->valueOf(r);
            std::copy(held.begin(), held.end(), row.begin());
        } else {
            const auto it = m_impl->index.find(IdKey{ids[i]});
            if (it == m_impl->index.end()) {
                initialRow(m_table, ids[i], row);
            } else {
                const std::span<const float> held = m_impl->valueOf(it->row);
                std::copy(held.begin(), held.end(), row.begin());
            }
        }
    }
}

bool SparseTable::holds(uint64_t id) const
{
    return m_impl->index.contains(IdKey{id});
}

void SparseTable::apply(std::span<const uint64_t> ids, std::span<const float> gradients, float learningRateScale)
{
    const size_t width = m_impl->width;
    if (gradients.size() != ids.size() * width)
        throw std::invalid_argument("apply: " + std::to_string(gradients.size()) + " gradient values for "
                                    + std::to_string(ids.size()) + " rows of " + std::to_string(width));
    const Optimizer &optimizer = *m_impl->optimizer;
    for (size_t i = 0; i < ids.size(); ++i) {
        m_impl->prefetch(ids, i);
        const auto it = m_impl->index.find(IdKey{ids[i]});
        // The ps refuses a gradient for a row it does not hold before
        // anything is applied; should one come through, it is dropped rather
        // than made from nothing.
        assert(it != m_impl->index.end() && "gradient for a row the table does not hold");
        if (it == m_impl->index.end())
            continue;
        optimizer.applyRow(m_impl->valueOf(it->row), m_impl->slotsOf(it->row), gradients.subspan(i * width, width),
                           learningRateScale);
    }
}

int64_t SparseTable::rows() const
{
    return int64_t(m_impl->rowCount);
}

size_t SparseTable::payloadBytes() const
{
    return m_impl->rowCount * m_impl->stride * sizeof(float);
}

size_t SparseTable::memoryBytes() const
{
    const Impl &impl = *m_impl;
    size_t arenaRows = 0;
    if (!impl.rowBlocks.empty())
        arenaRows = impl.capacity();
    return sizeof(*this) + sizeof(Impl) + m_table.name.capacity() + arenaRows * impl.rowFloats * sizeof(float)
           + impl.rowBlocks.capacity() * sizeof(impl.rowBlocks[0]) + impl.indexBytes;
}

TableContents SparseTable::save() const
{
    const Impl &impl = *m_impl;
    std::vector<std::pair<uint64_t, uint32_t>> order;
    order.reserve(impl.rowCount);
    for (uint32_t row = 0; row < impl.rowCount; ++row)
        order.emplace_back(impl.idOf(row), row);
    std::sort(order.begin(), order.end());

    TableContents contents;
    contents.slotNames = impl.optimizer->rowSlotNames();
    contents.ids.reserve(order.size());
    contents.values.reserve(order.size() * impl.width);
    contents.slots.reserve(order.size() * impl.width * impl.slotCount);
    for (const auto &[id, row] : order) {
        contents.ids.push_back(id);
        const std::span<const float> value = impl.valueOf(row);
        contents.values.insert(contents.values.end(), value.begin(), value.end());
        const std::span<const float> slots = impl.slotsOf(row);
        contents.slots.insert(contents.slots.end(), slots.begin(), slots.end());
    }
    // No row rule counts updates (adam, which would, has none), so rows do
    // not keep a count: every row's is 0.
    contents.updateCounts.assign(order.size(), 0);
    return contents;
}

void SparseTable::load(const TableContents &contents)
{
    Impl &impl = *m_impl;
    const size_t n = contents.ids.size();
    const size_t width = impl.width;
    const std::string what = "table '" + m_table.name + "' in the checkpoint";
    if (contents.values.size() != n * width)
        throw InputError(what + " has " + std::to_string(contents.values.size()) + " values for " + std::to_string(n)
                         + " rows of " + std::to_string(width) + ": it is corrupt or of another model");
    if (contents.slots.size() != n * width * contents.slotNames.size())
        throw InputError(what + " has " + std::to_string(contents.slots.size()) + " optimizer state values for "
                         + std::to_string(n) + " rows of " + std::to_string(width) + " with "
                         + std::to_string(contents.slotNames.size()) + " slots: it is corrupt");
    if (!contents.updateCounts.empty() && contents.updateCounts.size() != n)
        throw InputError(what + " has " + std::to_string(contents.updateCounts.size()) + " update counts for "
                         + std::to_string(n) + " rows: it is corrupt");

    // Where each of this optimizer's slots is in `contents`, if it is there.
    const std::vector<std::string> names = impl.optimizer->rowSlotNames();
    std::vector<std::pair<size_t, size_t>> kept; // (ours, theirs)
    for (size_t ours = 0; ours < names.size(); ++ours) {
        const auto it = std::find(contents.slotNames.begin(), contents.slotNames.end(), names[ours]);
        if (it != contents.slotNames.end())
            kept.emplace_back(ours, size_t(it - contents.slotNames.begin()));
    }
    const size_t theirStride = width * contents.slotNames.size();
    for (size_t i = 0; i < n; ++i) {
        bool made = false;
        const uint32_t row = impl.findOrAdd(contents.ids[i], &made);
        const std::span<float> value = impl.valueOf(row);
        std::copy_n(contents.values.begin() + ptrdiff_t(i * width), width, value.begin());
        const std::span<float> slots = impl.slotsOf(row);
        impl.optimizer->initRowSlots(slots);
        for (const auto &[ours, theirs] : kept)
            std::copy_n(contents.slots.begin() + ptrdiff_t(i * theirStride + theirs * width), width,
                        slots.begin() + ptrdiff_t(ours * width));
    }
}

void SparseTable::clear()
{
    Impl &impl = *m_impl;
    // Swapped with an empty one, which frees what it held: clear() keeps a
    // small index's allocation.
    Impl::Index empty(0, Impl::IdHash{&impl}, Impl::IdEqual{&impl}, CountingAllocator<RowRef>(&impl.indexBytes));
    impl.index.swap(empty);
    impl.rowBlocks.clear();
    impl.rowBlocks.shrink_to_fit();
    impl.rowCount = 0;
    impl.firstBlockRows = 0;
}

std::vector<float> SparseTable::rowNorms(size_t maxRows) const
{
    const Impl &impl = *m_impl;
    const size_t n = std::min(maxRows, impl.rowCount);
    std::vector<float> norms;
    norms.reserve(n);
    for (size_t k = 0; k < n; ++k) {
        // Evenly spaced over the rows in their order of arrival.
        const auto row = uint32_t(k * impl.rowCount / n);
        double sum = 0.0;
        for (const float v : impl.valueOf(row))
            sum += double(v) * double(v);
        norms.push_back(float(std::sqrt(sum)));
    }
    return norms;
}

HotIds::HotIds(size_t capacity) : m_capacity(std::max<size_t>(capacity, 1))
{
    m_entries.reserve(m_capacity);
    m_index.assign(std::bit_ceil(4 * m_capacity), 0);
}

size_t HotIds::slotOf(uint64_t id) const
{
    const size_t mask = m_index.size() - 1;
    size_t slot = hotIdsHome(id, mask);
    while (m_index[slot] != 0 && m_entries[m_index[slot] - 1].id != id)
        slot = (slot + 1) & mask;
    return slot;
}

void HotIds::eraseSlot(size_t slot)
{
    // Backward-shift deletion: an entry after the hole moves into it unless
    // its home lies cyclically in (hole, its slot], so that every entry stays
    // reachable from its home without tombstones.
    const size_t mask = m_index.size() - 1;
    size_t hole = slot;
    for (size_t next = (hole + 1) & mask; m_index[next] != 0; next = (next + 1) & mask) {
        const size_t home = hotIdsHome(m_entries[m_index[next] - 1].id, mask);
        if (((next - home) & mask) >= ((next - hole) & mask)) {
            m_index[hole] = m_index[next];
            hole = next;
        }
    }
    m_index[hole] = 0;
}

size_t HotIds::smallest()
{
    // From where the last search stopped, the next counter at the lower
    // bound; when none is, the bound rises to the true smallest count. Each
    // takeover lifts one counter off the bound, so a pass over the counters
    // serves as many takeovers as there were counters at it.
    const size_t n = m_entries.size();
    for (int round = 0; round < 2; ++round) {
        for (size_t k = 0; k < n; ++k) {
            const size_t position = (m_cursor + k) % n;
            if (m_entries[position].count == m_minCount) {
                m_cursor = (position + 1) % n;
                return position;
            }
        }
        m_minCount = std::min_element(m_entries.begin(), m_entries.end(), [](const Entry &a, const Entry &b) {
                         return a.count < b.count;
                     })->count;
    }
    return 0; // not reached: the second round finds the smallest
}

void HotIds::add(std::span<const uint64_t> ids)
{
    for (const uint64_t id : ids) {
        ++m_total;
        const size_t slot = slotOf(id);
        if (m_index[slot] != 0) {
            ++m_entries[m_index[slot] - 1].count;
        } else if (m_entries.size() < m_capacity) {
            m_entries.push_back({id, 1, 0});
            m_index[slot] = uint32_t(m_entries.size());
        } else {
            // Space-Saving: the new id takes over a smallest counter, and
            // what that counted becomes its possible error.
            const size_t position = smallest();
            Entry &entry = m_entries[position];
            eraseSlot(slotOf(entry.id));
            entry = {id, entry.count + 1, entry.count};
            m_index[slotOf(id)] = uint32_t(position + 1);
        }
    }
}

std::vector<HotIds::Entry> HotIds::top(size_t n) const
{
    std::vector<Entry> sorted = m_entries;
    const auto first
        = [](const Entry &a, const Entry &b) { return a.count != b.count ? a.count > b.count : a.id < b.id; };
    n = std::min(n, sorted.size());
    std::partial_sort(sorted.begin(), sorted.begin() + ptrdiff_t(n), sorted.end(), first);
    sorted.resize(n);
    return sorted;
}

} // namespace parasync
