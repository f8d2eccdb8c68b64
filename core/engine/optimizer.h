#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace parasync {

// Optimizer state of one variable, owned by the ps task that holds the
// variable (as TensorFlow keeps Adagrad accumulators and Adam moments on ps).
struct SlotState
{
    // "accumulator" (Adagrad), "momentum" (Momentum), "m" and "v" (Adam).
    std::map<std::string, Eigen::VectorXf> slots;
    // Updates applied so far (Adam's t).
    int64_t updateCount = 0;
};

struct OptimizerOptions
{
    std::string name = "sgd";
    float learningRate = 0.05f;
    float momentum = 0.9f;              // momentum
    float initialAccumulator = 0.1f;    // adagrad and ftrl (n), as tf.train.AdagradOptimizer, FtrlOptimizer
    float beta1 = 0.9f, beta2 = 0.999f; // adam
    float epsilon = 1e-8f;              // adam
    float l1 = 0.0f, l2 = 0.0f;         // ftrl, as tf.train.FtrlOptimizer
};

// Applies one gradient to one variable, with TensorFlow 1.x's update rules:
//   sgd:      v -= lr * g
//   momentum: a = momentum * a + g;  v -= lr * a
//   adagrad:  a += g^2;  v -= lr * g / sqrt(a)        (a starts at 0.1)
//   adam:     t += 1; lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)
//             m = b1 m + (1 - b1) g;  s = b2 s + (1 - b2) g^2
//             v -= lr_t * m / (sqrt(s) + eps)
//   ftrl:     FTRL-Proximal (McMahan et al., KDD 2013), tf.train.FtrlOptimizer
//             with learning_rate_power -0.5: n starts at 0.1 (initialAccumulator), z at 0;
//             n' = n + g^2;  z += g - (sqrt(n') - sqrt(n)) / lr * v;  n = n'
//             v = |z| <= l1 ? 0 : -(z - sign(z) l1) / (sqrt(n) / lr + 2 l2)
// `learningRateScale` (1 but for a staleness-aware rule, ModeConfig.
// learning_rate_by_staleness) multiplies this gradient's own share of the
// step, the same way in every rule: sgd and adagrad scale the step, momentum
// and adam the gradient's entry into the moving average (a = momentum * a +
// scale * g; m = b1 m + (1 - b1) scale * g), ftrl its entry into z (z +=
// scale * g - ...), so that the gradients before it keep their weight.
// Adagrad's accumulator, adam's s and ftrl's n see the gradient as it is:
// they estimate its size, which staleness does not change.
// Stateless itself (the state is in SlotState); thread-compatible.
class Optimizer
{
public:
    virtual ~Optimizer() = default;
    virtual std::string name() const = 0;
    // Creates the slots for a variable of `size` elements.
    virtual SlotState makeSlots(Eigen::Index size) const = 0;
    virtual void apply(Eigen::Ref<Eigen::VectorXf> value, const Eigen::Ref<const Eigen::VectorXf> &gradient,
                       SlotState &state, float learningRateScale) const = 0;

    // The rule for the rows of a sparse table (engine/sparse_table.h), whose
    // state lies beside each row instead of in a SlotState: how many state
    // values each value has (sgd 0, momentum and adagrad 1, ftrl 2), or -1
    // when the rule has no row form (adam counts updates per variable).
    virtual int rowSlots() const = 0;
    // Their names, as SlotState's ("accumulator", "linear"), rowSlots() of them.
    virtual std::vector<std::string> rowSlotNames() const = 0;
    // Fills a new row's state: rowSlots() x value.size() floats, slot after slot.
    virtual void initRowSlots(std::span<float> slots) const = 0;
    // One row's update: the same rule as apply(), on `value` with its state
    // `slots` (rowSlots() x value.size() floats, slot after slot).
    virtual void applyRow(std::span<float> value, std::span<float> slots, std::span<const float> gradient,
                          float learningRateScale) const = 0;
};

// Throws InputError for an unknown name (listing the known ones) or a
// non-positive learning rate.
std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions &options);

std::vector<std::string> optimizerNames();

} // namespace parasync
