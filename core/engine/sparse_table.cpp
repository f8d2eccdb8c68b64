#include "engine/sparse_table.h"

#include "base/error.h"

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
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

// A table's large allocations -- its blocks of rows and its index -- in the
// kernel's 2 MiB pages where it offers them (transparent huge pages in
// "madvise" mode, Debian's default). A step reads a thousand rows at random
// all over the table; in 4 KiB pages each of them also misses the TLB, and
// a table of 10M rows took twice as long a row as one of 1M
// (bench_sparse_table). Below 2 MiB, or where the kernel says no, the
// allocation is an ordinary one.
constexpr size_t kHugePageBytes = size_t(2) << 20;

void *allocateTableMemory(size_t bytes)
{
    if (bytes < kHugePageBytes)
        return ::operator new(bytes);
    void *memory = nullptr;
    if (::posix_memalign(&memory, kHugePageBytes, bytes) != 0)
        throw std::bad_alloc();
    // Advice, not a request: without huge pages the memory works the same.
    ::madvise(memory, (bytes + 4095) & ~size_t(4095), MADV_HUGEPAGE);
    return memory;
}

void freeTableMemory(void *memory, size_t bytes)
{
    if (bytes < kHugePageBytes)
        ::operator delete(memory);
    else
        std::free(memory);
}

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
        return static_cast<T *>(allocateTableMemory(n * sizeof(T)));
    }
    void deallocate(T *p, size_t n)
    {
        *bytes -= n * sizeof(T);
        freeTableMemory(p, n * sizeof(T));
    }
    template<class U>
    bool operator==(const CountingAllocator<U> &other) const
    {
        return bytes == other.bytes;
    }
};

// Starts loading the cache line at `address`. Not __builtin_prefetch:
// GCC 12 at -O2 deletes its calls as dead code when a function issues more
// than one (two lines of a row, or a loop over them; a single one it
// keeps), and none of prefetchRow's was in the binary: every row a step
// touched was a cache miss waited for in turn. An asm statement it must
// keep.
inline void prefetchLine(const char *address)
{
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetcht0 %0" : : "m"(*address));
#else
    __builtin_prefetch(address, 0, 3);
#endif
}

// Where HotIds' index looks for `id` first. Not mix64(id), whose low bits
// psOfRow fixes for every id of one ps task (with 4 of them, a quarter of
// the slots would be used).
size_t hotIdsHome(uint64_t id, size_t mask)
{
    return size_t(mix64(id + kGolden) >> 32) & mask;
}

// A block of rows, freed as it was allocated.
struct BlockFree
{
    size_t bytes = 0;
    void operator()(float *block) const { freeTableMemory(block, bytes); }
};
using ArenaBlock = std::unique_ptr<float[], BlockFree>;

ArenaBlock allocateArenaBlock(size_t floats)
{
    const size_t bytes = floats * sizeof(float);
    return ArenaBlock(static_cast<float *>(allocateTableMemory(bytes)), BlockFree{bytes});
}

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
    // An id to its row's place in the arena. The id is in the entry, not
    // only at the row's head, so that looking an id up reads the index
    // alone: with the id read from the row, every lookup waited for a
    // cache miss in the arena before it knew whether it had found its row,
    // and a step's three lookups a row took 600 ns a row at 1M rows
    // (bench_sparse_step's ps, perf). 16 bytes an entry, against 4 then,
    // and the rows lost their 8-byte id: about 10 bytes a row more in all.
    using Entry = std::pair<const uint64_t, uint32_t>;
    using Index = absl::flat_hash_map<uint64_t, uint32_t, absl::Hash<uint64_t>, std::equal_to<uint64_t>,
                                      CountingAllocator<Entry>>;
    static constexpr uint32_t kNoRow = std::numeric_limits<uint32_t>::max();

    Impl(const TableDeclaration &table, std::shared_ptr<const Optimizer> rule)
        : optimizer(std::move(rule))
        , slotCount(size_t(optimizer->rowSlots()))
        , width(size_t(table.rowWidth))
        , stride(width * (1 + slotCount))
        , rowFloats(stride)
        , index(0, absl::Hash<uint64_t>(), std::equal_to<uint64_t>(), CountingAllocator<Entry>(&indexBytes))
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
    std::span<float> valueOf(uint32_t row) const { return {rowData(row), width}; }
    std::span<float> slotsOf(uint32_t row) const { return {rowData(row) + width, width * slotCount}; }

    // Starts loading a row's first cache lines (its values, then its state).
    void prefetchRow(uint32_t row) const
    {
        constexpr size_t kLine = 64;
        constexpr size_t kMaxLines = 8;
        const char *data = reinterpret_cast<const char *>(rowData(row));
        const size_t lines = std::min(kMaxLines, (rowFloats * sizeof(float) + kLine - 1) / kLine);
        for (size_t line = 0; line < lines; ++line)
            prefetchLine(data + line * kLine);
    }

    // Visits the rows of `ids` in three stages some ids apart, so that a
    // batch's cache misses overlap instead of following one another: the
    // index entry of id i + 2k is loaded, id i + k is looked up (`find`
    // gives its row or kNoRow) and its row loaded, and row i is used
    // (`use(i, row)`). Without `lookups`, `find` knows the rows (a
    // remembered gather's) and the index is not loaded: in a table of 10M
    // rows its lines, all misses to memory, took the places the rows'
    // loads needed, and a push's update waited on them (perf: 60 % of
    // apply()'s samples on the two index prefetches, none of whose lines it
    // read).
    template<class Find, class Use>
    void pipeline(std::span<const uint64_t> ids, bool lookups, Find find, Use use) const
    {
        constexpr size_t kAhead = 8;
        std::array<uint32_t, kAhead> found{};
        const size_t n = ids.size();
        for (size_t i = 0; i < n + kAhead; ++i) {
            // Row i - k's place in `found` is where row i goes next.
            if (i >= kAhead)
                use(i - kAhead, found[i % kAhead]);
            if (lookups && i + kAhead < n)
                index.prefetch(ids[i + kAhead]);
            if (i < n) {
                const uint32_t row = find(i);
                found[i % kAhead] = row;
                if (row != kNoRow)
                    prefetchRow(row);
            }
        }
    }

    uint32_t rowOf(uint64_t id) const
    {
        const auto it = index.find(id);
        return it == index.end() ? kNoRow : it->second;
    }

    // A training gather's ids and where their rows lie. In a table of 1M
    // rows an id's index entry is a cache miss, and a step looked each
    // pushed id up twice more (the check that it was pulled, the update)
    // after the pull that found it: a fifth of the ps's time a step.
    // Row numbers never change once made; clear() forgets these.
    struct Gathered
    {
        std::vector<uint64_t> ids; // empty: nothing remembered here
        std::vector<uint32_t> rows;
    };

    const Gathered *gatheredFor(std::span<const uint64_t> ids) const
    {
        if (ids.empty())
            return nullptr;
        for (const Gathered &g : gathered)
            if (g.ids.size() == ids.size() && std::equal(ids.begin(), ids.end(), g.ids.begin()))
                return &g;
        return nullptr;
    }

    // The place for the next gather to remember, the oldest once all are
    // taken; emptied until the gather is complete.
    Gathered *startRemembering(std::span<const uint64_t> ids)
    {
        if (ids.empty() || ids.size() > kRememberedGatherRows)
            return nullptr;
        if (gathered.size() < kRememberedGathers)
            gathered.emplace_back();
        Gathered *g = &gathered[nextGathered];
        nextGathered = (nextGathered + 1) % kRememberedGathers;
        g->ids.clear();
        g->rows.clear();
        g->rows.reserve(ids.size());
        return g;
    }

    size_t gatheredBytes() const
    {
        size_t bytes = gathered.capacity() * sizeof(Gathered);
        for (const Gathered &g : gathered)
            bytes += g.ids.capacity() * sizeof(uint64_t) + g.rows.capacity() * sizeof(uint32_t);
        return bytes;
    }

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
            ArenaBlock block = allocateArenaBlock(rows * rowFloats);
            std::copy_n(rowBlocks[0].get(), rowCount * rowFloats, block.get());
            rowBlocks[0] = std::move(block);
            firstBlockRows = rows;
            return;
        }
        const size_t rows = rowBlocks.empty() ? std::min(kFirstBlockRows, rowsPerBlock) : rowsPerBlock;
        rowBlocks.reserve(rowBlocks.size() + 1);
        rowBlocks.push_back(allocateArenaBlock(rows * rowFloats));
        if (rowBlocks.size() == 1)
            firstBlockRows = rows;
    }

    // The row of `id`, made when it is new (`made` says so; its values and
    // state are for the caller to fill).
    uint32_t findOrAdd(uint64_t id, bool *made)
    {
        reserveRow();
        const auto [it, added] = index.try_emplace(id, uint32_t(rowCount));
        *made = added;
        if (added)
            ++rowCount;
        return it->second;
    }

    // The row of `id`, made from its initial values and fresh optimizer
    // state when it is new: a training pull's first touch, or a backup's
    // replay of an update to a row its primary made.
    uint32_t rowMadeIfNew(const TableDeclaration &table, uint64_t id)
    {
        bool made = false;
        const uint32_t row = findOrAdd(id, &made);
        if (made) {
            initialRow(table, id, valueOf(row));
            optimizer->initRowSlots(slotsOf(row));
        }
        return row;
    }

    std::shared_ptr<const Optimizer> optimizer;
    size_t slotCount;
    size_t width;
    size_t stride;    // floats of a row's payload: its values, then each slot
    size_t rowFloats; // what a row takes in the arena: its payload
    size_t rowsPerBlock = 1;
    uint32_t blockShift = 0;
    size_t firstBlockRows = 0;
    size_t rowCount = 0;
    // Rows in order of arrival: values, slots.
    std::vector<ArenaBlock> rowBlocks;
    size_t indexBytes = 0; // before `index`, whose allocator counts into it
    Index index;
    std::vector<Gathered> gathered; // a ring of kRememberedGathers at most
    size_t nextGathered = 0;
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
    Impl &impl = *m_impl;
    const size_t width = impl.width;
    if (out.size() != ids.size() * width)
        throw std::invalid_argument("gather: " + std::to_string(out.size()) + " values for "
                                    + std::to_string(ids.size()) + " rows of " + std::to_string(width));
    const auto copy = [&](size_t i, uint32_t row) {
        const std::span<float> to = out.subspan(i * width, width);
        if (row == Impl::kNoRow) {
            initialRow(m_table, ids[i], to);
            return;
        }
        const std::span<const float> held = impl.valueOf(row);
        std::copy(held.begin(), held.end(), to.begin());
    };
    if (!create) {
        impl.pipeline(
            ids, true, [&](size_t i) { return impl.rowOf(ids[i]); }, copy);
        return;
    }
    Impl::Gathered *remembered = impl.startRemembering(ids);
    impl.pipeline(
        ids, true,
        [&](size_t i) {
            const uint32_t row = impl.rowMadeIfNew(m_table, ids[i]);
            if (remembered)
                remembered->rows.push_back(row);
            return row;
        },
        copy);
    // Only now: a gather that threw half-way is not remembered.
    if (remembered)
        remembered->ids.assign(ids.begin(), ids.end());
}

bool SparseTable::holds(uint64_t id) const
{
    return m_impl->index.contains(id);
}

std::vector<uint64_t> SparseTable::notHeld(std::span<const uint64_t> ids) const
{
    const Impl &impl = *m_impl;
    std::vector<uint64_t> missing;
    if (impl.gatheredFor(ids))
        return missing;
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i + kAhead < ids.size())
            impl.index.prefetch(ids[i + kAhead]);
        if (!impl.index.contains(ids[i]))
            missing.push_back(ids[i]);
    }
    return missing;
}

void SparseTable::apply(std::span<const uint64_t> ids, std::span<const float> gradients, float learningRateScale)
{
    Impl &impl = *m_impl;
    const size_t width = impl.width;
    if (gradients.size() != ids.size() * width)
        throw std::invalid_argument("apply: " + std::to_string(gradients.size()) + " gradient values for "
                                    + std::to_string(ids.size()) + " rows of " + std::to_string(width));
    const Optimizer &optimizer = *impl.optimizer;
    const auto update = [&](size_t i, uint32_t row) {
        optimizer.applyRow(impl.valueOf(row), impl.slotsOf(row), gradients.subspan(i * width, width),
                           learningRateScale);
    };
    if (const Impl::Gathered *remembered = impl.gatheredFor(ids)) {
        impl.pipeline(
            ids, false, [&](size_t i) { return remembered->rows[i]; }, update);
        return;
    }
    impl.pipeline(
        ids, true, [&](size_t i) { return impl.rowMadeIfNew(m_table, ids[i]); }, update);
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
           + impl.rowBlocks.capacity() * sizeof(impl.rowBlocks[0]) + impl.indexBytes + impl.gatheredBytes();
}

TableContents SparseTable::save() const
{
    const Impl &impl = *m_impl;
    std::vector<std::pair<uint64_t, uint32_t>> order(impl.index.begin(), impl.index.end());
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
    Impl::Index empty(0, absl::Hash<uint64_t>(), std::equal_to<uint64_t>(),
                      CountingAllocator<Impl::Entry>(&impl.indexBytes));
    impl.index.swap(empty);
    impl.rowBlocks.clear();
    impl.rowBlocks.shrink_to_fit();
    impl.rowCount = 0;
    impl.firstBlockRows = 0;
    // Their row numbers would name other ids' rows now.
    impl.gathered.clear();
    impl.nextGathered = 0;
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
