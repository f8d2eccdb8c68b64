#pragma once

#include "engine/model.h"
#include "engine/optimizer.h"
#include "engine/sparse_rows.h"
#include "engine/sparse_table.h"
#include "proto/parasync.pb.h"

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace parasync {

class ParameterShard;

// A shard's values as they were when an answer took them, sent from the
// shard's own memory after the ps's lock is let go: at 1,000,000 parameters
// copying them into every answer was a pass over 4 MB per step (7 % of the
// machine's samples beside a 1M step). While a snapshot holds a variable's
// values, the shard updates a copy of them instead (ParameterShard::apply),
// so what the answer sends is exactly the values after the push it answers.
// Release it as soon as the answer has gone: until then every update of the
// variable pays for that copy.
class ValuesSnapshot
{
public:
    ValuesSnapshot() = default;
    ValuesSnapshot(ValuesSnapshot &&other) noexcept;
    ValuesSnapshot &operator=(ValuesSnapshot &&other) noexcept;
    ValuesSnapshot(const ValuesSnapshot &) = delete;
    ValuesSnapshot &operator=(const ValuesSnapshot &) = delete;
    ~ValuesSnapshot() { release(); }

    bool empty() const { return m_values.empty(); }
    // One span per variable of the shard, in its order.
    const GradientView &values() const { return m_values; }
    // Gives the values back to the shard; the spans are empty after it (and
    // their storage kept for the next share()). Safe from any thread.
    void release();

private:
    friend class ParameterShard;
    GradientView m_values;
    std::vector<std::atomic<int> *> m_readers;
};

// The variables one ps task holds, with their optimizer slots: whole
// variables and slices of partitioned ones, as the model's VariablePlacement
// gives this task (variable_placement.h), and the rows of a sparse model's
// tables that hash to this task (sparse_table.h). Not thread-safe: the ps
// service guards it; only the snapshots it hands out are released from
// anywhere.
class ParameterShard
{
public:
    explicit ParameterShard(std::unique_ptr<Optimizer> optimizer);
    ~ParameterShard();
    ParameterShard(const ParameterShard &) = delete;
    ParameterShard &operator=(const ParameterShard &) = delete;

    // The model's tables, empty: declared before load() (from the
    // signature), since a fresh start sends no rows.
    void declareTables(const std::vector<TableDeclaration> &tables);
    // Replaces the variables and slots (chief initialisation or restore),
    // and the tables' rows when the state has them (one TableState per
    // declared table, by name). Missing slots are created fresh.
    void load(const proto::ShardState &state);
    proto::ShardState save(int psIndex) const;

    bool isInitialized() const { return m_initialized; }
    int size() const { return int(m_values.size()); }

    // Applies one (averaged) gradient, one entry per variable of the shard,
    // its share of the step multiplied by `learningRateScale` (Optimizer::
    // apply). A variable whose values a snapshot holds is updated in a copy,
    // which becomes the variable's values from then on.
    void apply(const GradientView &gradient, float learningRateScale = 1.0f);

    int tableCount() const { return int(m_tables.size()); }
    const SparseTable &table(int t) const { return m_tables[size_t(t)]; }
    // Copies the rows asked for into `out` (one SparseRows per request, in
    // its order), made on first touch unless `lookupOnly`. The requests must
    // have been checked (rowRequestsProblem).
    void gatherRows(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests, bool lookupOnly,
                    google::protobuf::RepeatedPtrField<proto::SparseRows> *out);
    // Applies row gradients (checked: rowBlocksProblem), each row's share
    // multiplied by `learningRateScale`. A row not held yet is made first:
    // only a backup, replaying what its primary applied, meets one.
    void applyRows(const RowGradientView &rows, float learningRateScale);

    // Variable `i`'s values, its shape and name as the chief declared them.
    std::span<const float> values(int i) const;
    const std::vector<int64_t> &shape(int i) const { return m_shapes[size_t(i)]; }
    const std::string &name(int i) const { return m_names[size_t(i)]; }
    // Copies the values into the repeated Tensor field of a response.
    void copyValuesTo(google::protobuf::RepeatedPtrField<proto::Tensor> *out) const;
    // The values, without a copy, into *snapshot (released first; its
    // storage is kept, so that an answer allocates nothing), for an answer
    // sent after the caller lets go of the lock that guards the shard;
    // `shapes` gets one tensor per variable with its shape and no values.
    void share(google::protobuf::RepeatedPtrField<proto::Tensor> *shapes, ValuesSnapshot *snapshot);
    // Buffers of values that snapshots still held when their variable moved
    // on, or that wait to be the next copy (for tests: this stays bounded).
    size_t retiredBuffers() const { return m_retired.size(); }

private:
    // A variable's values and how many snapshots read them.
    struct Buffer
    {
        Eigen::VectorXf values;
        std::atomic<int> readers{0};
    };
    // Variable `i`'s values, to be updated in place: a copy in a buffer no
    // snapshot holds when the current one is held.
    Eigen::VectorXf &writable(size_t i);
    // Keeps `buffer` while snapshots hold it; drops it otherwise.
    void retire(std::unique_ptr<Buffer> buffer);

    std::shared_ptr<const Optimizer> m_optimizer;
    std::vector<SparseTable> m_tables;
    std::vector<std::string> m_names;
    std::vector<std::vector<int64_t>> m_shapes;
    std::vector<std::unique_ptr<Buffer>> m_values;
    // Buffers a variable left while snapshots held them: reused, once free,
    // as the next copy of a variable of their size.
    std::vector<std::unique_ptr<Buffer>> m_retired;
    std::vector<SlotState> m_slots;
    bool m_initialized = false;
};

// True when no value is NaN or infinite. One vectorised pass: Eigen's own
// allFinite() computes x - x twice per value and took a sixth of ps:0's time
// on a 1,000,000-parameter step.
bool allFinite(std::span<const float> values);

// Eigen <-> proto tensors. fromTensor throws InputError when the size does
// not match `expectedSize` (>= 0).
void toTensor(const Eigen::VectorXf &values, const std::vector<int64_t> &shape, proto::Tensor *out);
// The same for `count` values from `values` (a slice of a variable).
void toTensor(const float *values, int64_t count, const std::vector<int64_t> &shape, proto::Tensor *out);
Eigen::VectorXf fromTensor(const proto::Tensor &tensor, Eigen::Index expectedSize = -1);

} // namespace parasync
