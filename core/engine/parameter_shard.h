#pragma once

#include "engine/model.h"
#include "engine/optimizer.h"
#include "proto/parasync.pb.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace parasync {

// The variables one ps task holds, with their optimizer slots: whole
// variables and slices of partitioned ones, as the model's VariablePlacement
// gives this task (variable_placement.h). Not thread-safe: the ps service
// guards it.
class ParameterShard
{
public:
    explicit ParameterShard(std::unique_ptr<Optimizer> optimizer);

    // Replaces the variables and slots (chief initialisation or restore).
    // Missing slots are created fresh.
    void load(const proto::ShardState &state);
    proto::ShardState save(int psIndex) const;

    bool isInitialized() const { return m_initialized; }
    int size() const { return int(m_values.size()); }

    // Applies one (averaged) gradient, one entry per variable of the shard.
    void apply(const GradientView &gradient);

    const Parameters &values() const { return m_values; }
    // Shape and name of variable `i` of the shard, as the chief declared it.
    const std::vector<int64_t> &shape(int i) const { return m_shapes[size_t(i)]; }
    const std::string &name(int i) const { return m_names[size_t(i)]; }
    // Copies the values into the repeated Tensor field of a response.
    void copyValuesTo(google::protobuf::RepeatedPtrField<proto::Tensor> *out) const;

private:
    std::unique_ptr<Optimizer> m_optimizer;
    std::vector<std::string> m_names;
    std::vector<std::vector<int64_t>> m_shapes;
    Parameters m_values;
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
