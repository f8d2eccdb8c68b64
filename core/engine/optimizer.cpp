#include "engine/optimizer.h"

#include "base/error.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace parasync {

namespace {

Eigen::VectorXf &slot(SlotState &state, const std::string &name, Eigen::Index size)
{
    const auto it = state.slots.find(name);
    if (it == state.slots.end() || it->second.size() != size) {
        throw std::invalid_argument("optimizer slot '" + name
                                    + "' is missing or has the wrong size; create it with makeSlots()");
    }
    return it->second;
}

void checkSizes(const Eigen::Ref<Eigen::VectorXf> &value, const Eigen::Ref<const Eigen::VectorXf> &gradient)
{
    if (value.size() != gradient.size()) {
        throw std::invalid_argument("gradient has " + std::to_string(gradient.size()) + " elements, the variable "
                                    + std::to_string(value.size()));
    }
}

// The rules' element-wise maths, on values wherever they lie: a dense
// variable's whole vector (apply) and one row of a sparse table beside its
// state (applyRow) go through the same expression, so the two give the same
// bits for the same values and cannot drift apart.
using Values = Eigen::Map<Eigen::ArrayXf>;
using ConstValues = Eigen::Map<const Eigen::ArrayXf>;

Values mapped(Eigen::Ref<Eigen::VectorXf> v)
{
    return {v.data(), v.size()};
}

Values mapped(Eigen::VectorXf &v)
{
    return {v.data(), v.size()};
}

ConstValues mapped(const Eigen::Ref<const Eigen::VectorXf> &v)
{
    return {v.data(), v.size()};
}

Values mapped(std::span<float> v)
{
    return {v.data(), Eigen::Index(v.size())};
}

ConstValues mapped(std::span<const float> v)
{
    return {v.data(), Eigen::Index(v.size())};
}

void gradientDescentStep(Values value, const ConstValues &gradient, float step)
{
    value -= step * gradient;
}

void momentumStep(Values value, Values accumulation, const ConstValues &gradient, float lr, float momentum, float scale)
{
    accumulation = momentum * accumulation + scale * gradient;
    value -= lr * accumulation;
}

void adagradStep(Values value, Values accumulator, const ConstValues &gradient, float step)
{
    accumulator += gradient.square();
    value -= step * gradient * accumulator.rsqrt();
}

// tf.train.FtrlOptimizer's kernel (ApplyFtrl, learning_rate_power -0.5),
// written so that it needs no temporary: n + g^2 is computed twice, the
// same way both times.
void ftrlStep(Values value, Values accumulator, Values linear, const ConstValues &gradient, float lr, float l1,
              float l2, float scale)
{
    linear += scale * gradient - ((accumulator + gradient.square()).sqrt() - accumulator.sqrt()) / lr * value;
    accumulator += gradient.square();
    value = (linear.abs() > l1).select((l1 * linear.sign() - linear) / (accumulator.sqrt() / lr + 2.0f * l2), 0.0f);
}

// A row's value, its state and its gradient, as applyRow() gets them.
void checkRow(std::span<const float> value, std::span<const float> slots, std::span<const float> gradient, int rowSlots)
{
    if (gradient.size() != value.size() || slots.size() != size_t(rowSlots) * value.size()) {
        throw std::invalid_argument("row gradient has " + std::to_string(gradient.size()) + " values and state "
                                    + std::to_string(slots.size()) + " for a row of " + std::to_string(value.size())
                                    + " values with " + std::to_string(rowSlots) + " slots");
    }
}

class GradientDescent final : public Optimizer
{
public:
    explicit GradientDescent(const OptimizerOptions &options) : m_lr(options.learningRate) {}

    std::string name() const override { return "sgd"; }
    SlotState makeSlots(Eigen::Index) const override { return {}; }

    void apply(Eigen::Ref<Eigen::VectorXf> value, const Eigen::Ref<const Eigen::VectorXf> &gradient, SlotState &state,
               float learningRateScale) const override
    {
        checkSizes(value, gradient);
        gradientDescentStep(mapped(value), mapped(gradient), m_lr * learningRateScale);
        ++state.updateCount;
    }

    int rowSlots() const override { return 0; }
    std::vector<std::string> rowSlotNames() const override { return {}; }
    void initRowSlots(std::span<float>) const override {}
    void applyRow(std::span<float> value, std::span<float> slots, std::span<const float> gradient,
                  float learningRateScale) const override
    {
        checkRow(value, slots, gradient, 0);
        gradientDescentStep(mapped(value), mapped(gradient), m_lr * learningRateScale);
    }

private:
    float m_lr;
};

class Momentum final : public Optimizer
{
public:
    explicit Momentum(const OptimizerOptions &options) : m_lr(options.learningRate), m_momentum(options.momentum) {}

    std::string name() const override { return "momentum"; }

    SlotState makeSlots(Eigen::Index size) const override
    {
        SlotState state;
        state.slots["momentum"] = Eigen::VectorXf::Zero(size);
        return state;
    }

    void apply(Eigen::Ref<Eigen::VectorXf> value, const Eigen::Ref<const Eigen::VectorXf> &gradient, SlotState &state,
               float learningRateScale) const override
    {
        checkSizes(value, gradient);
        Eigen::VectorXf &accumulation = slot(state, "momentum", value.size());
        momentumStep(mapped(value), mapped(accumulation), mapped(gradient), m_lr, m_momentum, learningRateScale);
        ++state.updateCount;
    }

    int rowSlots() const override { return 1; }
    std::vector<std::string> rowSlotNames() const override { return {"momentum"}; }
    void initRowSlots(std::span<float> slots) const override { std::fill(slots.begin(), slots.end(), 0.0f); }
    void applyRow(std::span<float> value, std::span<float> slots, std::span<const float> gradient,
                  float learningRateScale) const override
    {
        checkRow(value, slots, gradient, 1);
        momentumStep(mapped(value), mapped(slots), mapped(gradient), m_lr, m_momentum, learningRateScale);
    }

private:
    float m_lr;
    float m_momentum;
};

class Adagrad final : public Optimizer
{
public:
    explicit Adagrad(const OptimizerOptions &options)
        : m_lr(options.learningRate)
        , m_initialAccumulator(options.initialAccumulator)
    {
    }

    std::string name() const override { return "adagrad"; }

    SlotState makeSlots(Eigen::Index size) const override
    {
        SlotState state;
        state.slots["accumulator"] = Eigen::VectorXf::Constant(size, m_initialAccumulator);
        return state;
    }

    void apply(Eigen::Ref<Eigen::VectorXf> value, const Eigen::Ref<const Eigen::VectorXf> &gradient, SlotState &state,
               float learningRateScale) const override
    {
        checkSizes(value, gradient);
        Eigen::VectorXf &accumulator = slot(state, "accumulator", value.size());
        adagradStep(mapped(value), mapped(accumulator), mapped(gradient), m_lr * learningRateScale);
        ++state.updateCount;
    }

    int rowSlots() const override { return 1; }
    std::vector<std::string> rowSlotNames() const override { return {"accumulator"}; }
    void initRowSlots(std::span<float> slots) const override
    {
        std::fill(slots.begin(), slots.end(), m_initialAccumulator);
    }
    void applyRow(std::span<float> value, std::span<float> slots, std::span<const float> gradient,
                  float learningRateScale) const override
    {
        checkRow(value, slots, gradient, 1);
        adagradStep(mapped(value), mapped(slots), mapped(gradient), m_lr * learningRateScale);
    }

private:
    float m_lr;
    float m_initialAccumulator;
};

class Adam final : public Optimizer
{
public:
    explicit Adam(const OptimizerOptions &options)
        : m_lr(options.learningRate)
        , m_beta1(options.beta1)
        , m_beta2(options.beta2)
        , m_epsilon(options.epsilon)
    {
    }

    std::string name() const override { return "adam"; }

    SlotState makeSlots(Eigen::Index size) const override
    {
        SlotState state;
        state.slots["m"] = Eigen::VectorXf::Zero(size);
        state.slots["v"] = Eigen::VectorXf::Zero(size);
        return state;
    }

    void apply(Eigen::Ref<Eigen::VectorXf> value, const Eigen::Ref<const Eigen::VectorXf> &gradient, SlotState &state,
               float learningRateScale) const override
    {
        checkSizes(value, gradient);
        Eigen::VectorXf &m = slot(state, "m", value.size());
        Eigen::VectorXf &v = slot(state, "v", value.size());
        const int64_t t = ++state.updateCount;
        const double tDouble = static_cast<double>(t);
        const auto lrT = static_cast<float>(m_lr * std::sqrt(1.0 - std::pow(double(m_beta2), tDouble))
                                            / (1.0 - std::pow(double(m_beta1), tDouble)));
        m = m_beta1 * m + ((1.0f - m_beta1) * learningRateScale) * gradient;
        v = m_beta2 * v + (1.0f - m_beta2) * gradient.cwiseAbs2();
        value.array() -= lrT * m.array() / (v.array().sqrt() + m_epsilon);
    }

    // Adam's bias correction counts the updates of the whole variable; a row
    // of a sparse table is updated only when a batch holds its id, so it has
    // no single t (TensorFlow's LazyAdam keeps the variable's). No row form.
    int rowSlots() const override { return -1; }
    std::vector<std::string> rowSlotNames() const override { return {}; }
    void initRowSlots(std::span<float>) const override
    {
        throw std::logic_error("adam has no rule for the rows of a sparse table");
    }
    void applyRow(std::span<float>, std::span<float>, std::span<const float>, float) const override
    {
        throw std::logic_error("adam has no rule for the rows of a sparse table");
    }

private:
    float m_lr;
    float m_beta1;
    float m_beta2;
    float m_epsilon;
};

class Ftrl final : public Optimizer
{
public:
    explicit Ftrl(const OptimizerOptions &options)
        : m_lr(options.learningRate)
        , m_initialAccumulator(options.initialAccumulator)
        , m_l1(options.l1)
        , m_l2(options.l2)
    {
    }

    std::string name() const override { return "ftrl"; }

    SlotState makeSlots(Eigen::Index size) const override
    {
        SlotState state;
        state.slots["accumulator"] = Eigen::VectorXf::Constant(size, m_initialAccumulator);
        state.slots["linear"] = Eigen::VectorXf::Zero(size);
        return state;
    }

    void apply(Eigen::Ref<Eigen::VectorXf> value, const Eigen::Ref<const Eigen::VectorXf> &gradient, SlotState &state,
               float learningRateScale) const override
    {
        checkSizes(value, gradient);
        Eigen::VectorXf &accumulator = slot(state, "accumulator", value.size());
        Eigen::VectorXf &linear = slot(state, "linear", value.size());
        ftrlStep(mapped(value), mapped(accumulator), mapped(linear), mapped(gradient), m_lr, m_l1, m_l2,
                 learningRateScale);
        ++state.updateCount;
    }

    int rowSlots() const override { return 2; }
    std::vector<std::string> rowSlotNames() const override { return {"accumulator", "linear"}; }
    void initRowSlots(std::span<float> slots) const override
    {
        const size_t width = slots.size() / 2;
        std::fill(slots.begin(), slots.begin() + ptrdiff_t(width), m_initialAccumulator);
        std::fill(slots.begin() + ptrdiff_t(width), slots.end(), 0.0f);
    }
    void applyRow(std::span<float> value, std::span<float> slots, std::span<const float> gradient,
                  float learningRateScale) const override
    {
        checkRow(value, slots, gradient, 2);
        const size_t width = value.size();
        ftrlStep(mapped(value), mapped(slots.first(width)), mapped(slots.subspan(width)), mapped(gradient), m_lr, m_l1,
                 m_l2, learningRateScale);
    }

private:
    float m_lr;
    float m_initialAccumulator;
    float m_l1;
    float m_l2;
};

std::string number(float x)
{
    std::ostringstream out;
    out << x;
    return out.str();
}

void require(bool ok, const std::string &message)
{
    if (!ok)
        throw InputError(message);
}

} // namespace

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerOptions &options)
{
    const std::vector<std::string> known = optimizerNames();
    if (std::find(known.begin(), known.end(), options.name) == known.end()) {
        std::string list;
        for (const std::string &n : known)
            list += (list.empty() ? "" : ", ") + n;
        throw InputError("unknown optimizer '" + options.name + "'; known optimizers: " + list);
    }
    const float lr = options.learningRate;
    require(std::isfinite(lr) && lr > 0.0f, "the learning rate must be a positive number, got " + number(lr));

    if (options.name == "sgd")
        return std::make_unique<GradientDescent>(options);
    if (options.name == "momentum") {
        require(std::isfinite(options.momentum) && options.momentum >= 0.0f,
                "the momentum must be a non-negative number, got " + number(options.momentum));
        return std::make_unique<Momentum>(options);
    }
    if (options.name == "adagrad") {
        // A zero accumulator would divide the first update by zero.
        require(std::isfinite(options.initialAccumulator) && options.initialAccumulator > 0.0f,
                "Adagrad's initial accumulator must be positive, got " + number(options.initialAccumulator));
        return std::make_unique<Adagrad>(options);
    }
    if (options.name == "ftrl") {
        // As TensorFlow's: 0 is allowed, since z stays 0 (and the value with
        // it) until a gradient makes n positive.
        require(std::isfinite(options.initialAccumulator) && options.initialAccumulator >= 0.0f,
                "FTRL's initial accumulator must be a non-negative number, got " + number(options.initialAccumulator));
        require(std::isfinite(options.l1) && options.l1 >= 0.0f,
                "FTRL's l1 must be a non-negative number, got " + number(options.l1));
        require(std::isfinite(options.l2) && options.l2 >= 0.0f,
                "FTRL's l2 must be a non-negative number, got " + number(options.l2));
        return std::make_unique<Ftrl>(options);
    }
    require(options.beta1 >= 0.0f && options.beta1 < 1.0f && options.beta2 >= 0.0f && options.beta2 < 1.0f,
            "Adam's beta1 and beta2 must be in [0, 1), got " + number(options.beta1) + " and " + number(options.beta2));
    require(std::isfinite(options.epsilon) && options.epsilon >= 0.0f,
            "Adam's epsilon must be a non-negative number, got " + number(options.epsilon));
    return std::make_unique<Adam>(options);
}

std::vector<std::string> optimizerNames()
{
    return {"sgd", "momentum", "adagrad", "adam", "ftrl"};
}

} // namespace parasync
