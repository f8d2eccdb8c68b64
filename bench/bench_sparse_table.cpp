// A sparse table on one ps task (engine/sparse_table.h), in-process:
//   - one step's pull and push: gather (creating) then apply of the rows of
//     1,000 ids x 16 floats with Adagrad, drawn Zipf over 1M ranks (as
//     bench_sparse_step draws them), against tables of 1M and 10M rows,
//     and of 10K (Zipf over its 10K), which the caches hold: what the work
//     costs without the waits for memory;
//   - what a 10M x 16 Adagrad table takes split over 4 ps tasks by psOfRow:
//     rows per task, payload, memoryBytes(), the overhead per row;
//   - the hot-ids counter's add() of one batch of 1,000 ids;
//   - the same step's memory reads without the table: a batch's rows read
//     at random from plain memory laid out as a 1M- or 10M-row table's
//     (the rows and their state alone, or with an index's control bytes
//     and slots beside them), prefetched as the table prefetches: what
//     this machine's memory charges for the table's size, whatever the
//     code around the reads.
// The memory figures are benchmark counters, so they print with the times.
//
//   bench_sparse_table [Google Benchmark flags]

#include "engine/optimizer.h"
#include "engine/sparse_table.h"
#include "zipf_ids.h"

#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

using namespace parasync;
using bench::idOfRank;
using bench::kIdsPerStep;
using bench::splitmix;
using bench::zipfBatches;

constexpr int64_t kWidth = 16;
// The batches' ids: Zipf over at most this many ranks whatever the table's
// size, as bench_sparse_step draws them, so that a 10M-row table sees the
// same rows a step as a 1M-row one, only spread over ten times the memory.
constexpr size_t kHotRanks = 1'000'000;

std::shared_ptr<const Optimizer> adagrad()
{
    OptimizerOptions options;
    options.name = "adagrad";
    options.learningRate = 0.05f;
    return makeOptimizer(options);
}

TableDeclaration factors()
{
    TableDeclaration table;
    table.name = "factors";
    table.rowWidth = kWidth;
    table.initStddev = 0.01f;
    table.seed = 1;
    return table;
}

// Adds the rows of ranks [0, rows) (those for which `keep` holds) to `table`.
template<class Keep>
void fill(SparseTable &table, size_t rows, Keep keep)
{
    constexpr size_t batch = 65536;
    std::vector<uint64_t> ids;
    ids.reserve(batch);
    std::vector<float> out;
    for (size_t start = 0; start < rows; start += batch) {
        ids.clear();
        for (size_t r = start; r < std::min(rows, start + batch); ++r) {
            const uint64_t id = idOfRank(r);
            if (keep(id))
                ids.push_back(id);
        }
        out.resize(ids.size() * size_t(kWidth));
        table.gather(ids, out, true);
    }
}

// One table kept between the calls of a benchmark, so that it is filled
// once per size; a new size lets go of the old one first.
struct Filled
{
    size_t rows = 0;
    std::unique_ptr<SparseTable> table;
    std::vector<std::vector<uint64_t>> batches;
};
Filled &filled()
{
    static Filled instance;
    return instance;
}

SparseTable &tableOf(size_t rows)
{
    Filled &f = filled();
    if (f.rows != rows || !f.table) {
        f.table.reset();
        f.batches.clear();
        f.table = std::make_unique<SparseTable>(factors(), adagrad());
        fill(*f.table, rows, [](uint64_t) { return true; });
        f.batches = zipfBatches(std::min(rows, kHotRanks), 512, true);
        f.rows = rows;
    }
    return *f.table;
}

void reportMemory(benchmark::State &state, const SparseTable &table)
{
    const double rows = double(table.rows());
    const double payload = double(table.payloadBytes());
    const double memory = double(table.memoryBytes());
    state.counters["table_rows"] = rows;
    state.counters["payload_MB"] = payload / 1e6;
    state.counters["memory_MB"] = memory / 1e6;
    state.counters["overhead_B_per_row"] = (memory - payload) / rows;
    state.counters["overhead_pct"] = (memory / payload - 1.0) * 100.0;
}

// One step's pull (creating rows, as training does) and push of 1,000 Zipf
// ids' rows, Adagrad.
void BM_GatherApply(benchmark::State &state)
{
    const auto rows = size_t(state.range(0));
    SparseTable &table = tableOf(rows);
    const auto &batches = filled().batches;
    std::vector<float> values(kIdsPerStep * size_t(kWidth));
    std::vector<float> gradient(kIdsPerStep * size_t(kWidth));
    uint64_t noise = 7;
    for (float &g : gradient)
        g = float(double(splitmix(noise) >> 11) * 0x1.0p-53 - 0.5) * 0.01f;
    size_t next = 0;
    double uniqueIds = 0.0;
    for (auto _ : state) {
        const std::vector<uint64_t> &ids = batches[next];
        next = (next + 1) % batches.size();
        const size_t n = ids.size() * size_t(kWidth);
        table.gather(ids, std::span<float>(values).first(n), true);
        table.apply(ids, std::span<const float>(gradient).first(n), 1.0f);
        benchmark::DoNotOptimize(values.data());
        uniqueIds += double(ids.size());
    }
    state.counters["rows_per_step"] = uniqueIds / double(state.iterations());
    // CPU seconds per row (printed as e.g. "250n").
    state.counters["time_per_row"]
        = benchmark::Counter(uniqueIds, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    reportMemory(state, table);
}
BENCHMARK(BM_GatherApply)->Arg(10'000)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMicrosecond);

// 10M rows x 16 with Adagrad over 4 ps tasks by psOfRow: what each task's
// table takes. The time is that of filling them.
void BM_MemoryOver4Ps(benchmark::State &state)
{
    constexpr int numPs = 4;
    constexpr size_t rows = 10'000'000;
    filled() = Filled{}; // one 10M table at a time
    for (auto _ : state) {
        std::vector<std::unique_ptr<SparseTable>> tables;
        for (int ps = 0; ps < numPs; ++ps) {
            tables.push_back(std::make_unique<SparseTable>(factors(), adagrad()));
            fill(*tables.back(), rows, [ps](uint64_t id) { return psOfRow(id, numPs) == ps; });
        }
        double payload = 0.0, memory = 0.0, fewest = double(rows), most = 0.0;
        for (int ps = 0; ps < numPs; ++ps) {
            const SparseTable &t = *tables[size_t(ps)];
            payload += double(t.payloadBytes());
            memory += double(t.memoryBytes());
            fewest = std::min(fewest, double(t.rows()));
            most = std::max(most, double(t.rows()));
            state.counters["memory_MB_ps" + std::to_string(ps)] = double(t.memoryBytes()) / 1e6;
        }
        state.counters["rows_per_ps_min"] = fewest;
        state.counters["rows_per_ps_max"] = most;
        state.counters["payload_MB"] = payload / 1e6;
        state.counters["memory_MB"] = memory / 1e6;
        state.counters["overhead_B_per_row"] = (memory - payload) / double(rows);
        state.counters["overhead_pct"] = (memory / payload - 1.0) * 100.0;
    }
}
BENCHMARK(BM_MemoryOver4Ps)->Iterations(1)->Unit(benchmark::kMillisecond);

// The hot-ids view's counter: one pull's ids (1,000 Zipf ids of 1M, merged),
// with 64 counters and with the ps tasks' 1,024 (node/ps_task.h).
void BM_HotIdsAdd(benchmark::State &state)
{
    const auto batches = zipfBatches(1'000'000, 64, true);
    HotIds hot(size_t(state.range(0)));
    size_t next = 0;
    for (auto _ : state) {
        hot.add(batches[next]);
        next = (next + 1) % batches.size();
    }
    benchmark::DoNotOptimize(hot.total());
}
BENCHMARK(BM_HotIdsAdd)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);

// Plain memory in 2 MiB pages where the kernel grants them, as the table's
// (sparse_table.cpp), filled so that every page is there.
struct HugeRegion
{
    char *bytes = nullptr;
    size_t size = 0;
    explicit HugeRegion(size_t n) : size(n)
    {
        void *memory = nullptr;
        if (::posix_memalign(&memory, size_t(2) << 20, n) != 0)
            throw std::bad_alloc();
        ::madvise(memory, n, MADV_HUGEPAGE);
        std::memset(memory, 1, n);
        bytes = static_cast<char *>(memory);
    }
    ~HugeRegion() { std::free(bytes); }
    HugeRegion(const HugeRegion &) = delete;
    HugeRegion &operator=(const HugeRegion &) = delete;
};

// As sparse_table.cpp's prefetchLine: GCC drops __builtin_prefetch calls
// it thinks dead when a function issues several.
inline void prefetch(const char *address)
{
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetcht0 %0" : : "m"(*address));
#else
    __builtin_prefetch(address, 0, 3);
#endif
}

// Whether BM_ScatteredReads reads an index entry beside each row.
enum class IndexPlace : int64_t {
    None = 0,  // the rows and their state alone: the floor
    Apart = 1, // abseil's: control bytes and slots in arrays of their own
    Slot = 2,  // a 16-byte slot alone (id and row, no control bytes): one line
};

// A batch's rows read from memory laid out as a table of range(0) rows:
// each row's two cache lines (16 floats and Adagrad's 16) in an arena, and
// with range(1) == IndexPlace::Apart a line of its index entry's control
// bytes and one of its 16-byte slot (a slot and a control byte a row, at
// most 7/8 full); with IndexPlace::Slot the slot's line alone, as an
// open-addressing index without control bytes would read it at best. The
// same batches as BM_GatherApply's, each id at a random place; eight rows
// ahead prefetched. No table code: what the reads alone cost at this size,
// on this machine.
void BM_ScatteredReads(benchmark::State &state)
{
    const auto rows = size_t(state.range(0));
    const auto place = IndexPlace(state.range(1));
    size_t slots = 16;
    while (slots * 7 < rows * 8)
        slots *= 2;
    constexpr size_t kRowBytes = 2 * kWidth * sizeof(float);
    HugeRegion arena(rows * kRowBytes);
    HugeRegion control(place == IndexPlace::Apart ? slots : 64);
    HugeRegion slot(place != IndexPlace::None ? slots * 16 : 64);
    const auto batches = zipfBatches(std::min(rows, kHotRanks), 512, true);
    // Where each id's row, control byte and slot lie.
    struct Places
    {
        const char *row, *control, *slot;
    };
    std::vector<std::vector<Places>> places;
    for (const auto &ids : batches) {
        auto &p = places.emplace_back();
        for (uint64_t id : ids) {
            uint64_t mixed = id;
            const size_t row = size_t(splitmix(mixed) % rows) * kRowBytes;
            const size_t entry = size_t(splitmix(mixed) % slots);
            p.push_back({arena.bytes + row, place == IndexPlace::Apart ? control.bytes + entry : nullptr,
                         place != IndexPlace::None ? slot.bytes + entry * 16 : nullptr});
        }
    }
    std::vector<float> values(kIdsPerStep * size_t(kWidth));
    size_t next = 0;
    double rowsRead = 0.0;
    for (auto _ : state) {
        const auto &p = places[next];
        next = (next + 1) % places.size();
        uint64_t sum = 0;
        constexpr size_t kAhead = 8;
        for (size_t k = 0; k < p.size(); ++k) {
            if (k + kAhead < p.size()) {
                const Places &ahead = p[k + kAhead];
                if (ahead.control)
                    prefetch(ahead.control);
                if (ahead.slot)
                    prefetch(ahead.slot);
                prefetch(ahead.row);
                prefetch(ahead.row + 64);
            }
            const Places &at = p[k];
            if (at.control)
                sum += uint64_t(*at.control);
            if (at.slot)
                sum += uint64_t(*at.slot);
            std::memcpy(values.data() + k * size_t(kWidth), at.row, kWidth * sizeof(float));
            sum += uint64_t(at.row[64]);
        }
        benchmark::DoNotOptimize(sum);
        benchmark::DoNotOptimize(values.data());
        rowsRead += double(p.size());
    }
    state.counters["rows_per_step"] = rowsRead / double(state.iterations());
    state.counters["memory_MB"] = double(arena.size + control.size + slot.size) / 1e6;
}
BENCHMARK(BM_ScatteredReads)
    ->ArgNames({"rows", "index"})
    ->ArgsProduct({{1'000'000, 10'000'000},
                   {int64_t(IndexPlace::None), int64_t(IndexPlace::Apart), int64_t(IndexPlace::Slot)}})
    ->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
