#pragma once

// Sparse variables: embedding tables whose rows are addressed by 64-bit ids
// (hashed features, so the vocabulary need not be known in advance) and
// spread over the ps tasks by id. A batch touches a few thousand rows of a
// table that may hold millions; only those rows travel (ps-lite's key-value
// push and pull, TensorFlow 1.x's embedding_lookup on partitioned variables
// with IndexedSlices gradients).

#include "engine/optimizer.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace parasync {

// A table as the model declares it (ModelSignature.tables).
struct TableDeclaration
{
    std::string name;     // "weights", "factors"
    int64_t rowWidth = 0; // floats per row, 1 .. kMaxRowWidth
    uint64_t idLimit = 0; // ids are below it; 0: any 64-bit id
    float initStddev = 0; // rows start N(0, initStddev) truncated at 2 stddev; 0: zeros
    uint64_t seed = 0;    // with the id, what a new row's values are drawn from

    static constexpr int64_t kMaxRowWidth = 4096;
};

// Rows of one table by id, as they travel: ids ascending with no repeats,
// values row after row (ids.size() x rowWidth).
struct RowBlock
{
    std::vector<uint64_t> ids;
    std::vector<float> values;
};

// One row block per table of a model, in declaration order.
using RowBlocks = std::vector<RowBlock>;

// A row block where it already lies (a parsed request).
struct RowBlockView
{
    std::span<const uint64_t> ids;
    std::span<const float> values;
};

// Which ps task holds row `id` of every table: a mixing hash of the id
// modulo the number of ps tasks, so that hot, consecutive or strided ids
// spread evenly and a checkpoint restores into another number of ps tasks
// by hashing again (docs/sparse.md).
int psOfRow(uint64_t id, int numPs);

// The values a row starts with: drawn from (seed, id) alone, so that every
// ps count, and a lookup that does not create the row, gives the same.
void initialRow(const TableDeclaration &table, uint64_t id, std::span<float> out);

// Everything a table holds, as saved and restored: ids ascending, their
// rows, and the optimizer's state per row (slotNames.size() x rowWidth
// floats per row, slot after slot).
struct TableContents
{
    std::vector<uint64_t> ids;
    std::vector<float> values;
    std::vector<std::string> slotNames;
    std::vector<float> slots;
    // Updates applied to each row (for a rule that counts them); one per id.
    // No row rule counts them (adam, which would, has no row form), so rows
    // keep no count: save() gives 0s and load() takes none or one per id.
    std::vector<int64_t> updateCounts;
};

// The rows of one table that one ps task holds, with their optimizer state,
// in an arena of fixed-size blocks (no copy of the table when it grows; the
// slack is one block) indexed by an open-addressing hash map of id to row.
// A row costs its values, its optimizer state and 20 to 40 bytes of index
// (memoryBytes() says what it is). Not thread-safe: the ps task guards it.
class SparseTable
{
public:
    // Throws InputError when the optimizer has no rule for rows (Optimizer::
    // rowSlots() < 0) or the declaration is out of range.
    SparseTable(TableDeclaration table, std::shared_ptr<const Optimizer> optimizer);
    ~SparseTable();
    SparseTable(SparseTable &&) noexcept;
    SparseTable &operator=(SparseTable &&) noexcept;

    const TableDeclaration &declaration() const { return m_table; }
    int64_t rowWidth() const { return m_table.rowWidth; }

    // Copies the rows of `ids` into `out` (ids.size() x rowWidth). With
    // `create`, a row not held yet is made (initialRow) and kept: a
    // training pull. Without, its initial values are copied and nothing is
    // kept: an evaluation's lookup. A training pull of at most
    // kRememberedGatherRows ids is remembered with where its rows lie, one
    // of the last kRememberedGathers: a worker's next push carries
    // gradients for exactly the rows its pull asked for, and notHeld() and
    // apply() of those ids find their rows without the index.
    void gather(std::span<const uint64_t> ids, std::span<float> out, bool create);
    bool holds(uint64_t id) const;
    // The ids of `ids` this table does not hold, in their order.
    std::vector<uint64_t> notHeld(std::span<const uint64_t> ids) const;
    // Applies one row gradient per id (ids.size() x rowWidth), each with the
    // optimizer's row rule, its share multiplied by `learningRateScale`. A
    // row not held is made first (initialRow), as a pull would have made
    // it: a backup replaying its primary's updates may lack a row the
    // primary made. A ps task refuses a worker's gradient for a row never
    // pulled before it calls this (notHeld), so for a primary every row is
    // held; one lookup a row, none for ids a remembered gather had.
    void apply(std::span<const uint64_t> ids, std::span<const float> gradients, float learningRateScale);

    // The gathers remembered: one a worker's stream for up to this many
    // workers on a ps task at once; a gather of a larger batch than this
    // many rows is not kept (a table fill, a chief's held-out pull), so the
    // memory is at most 12 bytes a row of these (memoryBytes() counts it).
    static constexpr size_t kRememberedGathers = 32;
    static constexpr size_t kRememberedGatherRows = 8192;

    int64_t rows() const;
    // The rows and their optimizer state alone.
    size_t payloadBytes() const;
    // All the table takes: payload, index and the arena's unused slack.
    size_t memoryBytes() const;

    TableContents save() const;
    // Adds (or replaces) the rows of `contents`, with their state; slots it
    // lacks, or of another optimizer, start fresh. Throws InputError when
    // sizes do not match the declaration.
    void load(const TableContents &contents);
    void clear();

    // L2 norms of up to `maxRows` rows, spread over the table (for the
    // Parameters tab's distribution).
    std::vector<float> rowNorms(size_t maxRows) const;

private:
    struct Impl;
    TableDeclaration m_table;
    std::unique_ptr<Impl> m_impl;
};

// The most often pulled ids of a table, estimated in constant memory by the
// Space-Saving algorithm (Metwally et al., 2005): `capacity` counters, each
// id's count exact while it holds one and over-estimated by at most the
// count it took over. What the app's hot-ids view shows.
class HotIds
{
public:
    explicit HotIds(size_t capacity = 64);
    void add(std::span<const uint64_t> ids);
    struct Entry
    {
        uint64_t id = 0;
        int64_t count = 0;
        int64_t error = 0; // the count may be this much too high
    };
    // The `n` largest, largest first.
    std::vector<Entry> top(size_t n) const;
    int64_t total() const { return m_total; }

private:
    // The slot of m_index that holds `id`, or the empty one where it would go.
    size_t slotOf(uint64_t id) const;
    void eraseSlot(size_t slot);
    // A counter with the smallest count, to take over.
    size_t smallest();

    size_t m_capacity;
    std::vector<Entry> m_entries;
    // Linear probing from an id to its entry's position + 1 (0: empty), at
    // most a quarter full: a held id is found in O(1), not by a scan of
    // every counter.
    std::vector<uint32_t> m_index;
    // No count is below m_minCount (counts only grow), so a counter at it is
    // a smallest one; m_cursor is where the last search for one stopped.
    int64_t m_minCount = 0;
    size_t m_cursor = 0;
    int64_t m_total = 0;
};

} // namespace parasync
