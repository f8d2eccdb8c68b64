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
        value -= (m_lr * learningRateScale) * gradient;
        ++state.updateCount;
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
        accumulation = m_momentum * accumulation + learningRateScale * gradient;
        value -= m_lr * accumulation;
        ++state.updateCount;
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
        accumulator += gradient.cwiseAbs2();
        value.array() -= (m_lr * learningRateScale) * gradient.array() * accumulator.array().rsqrt();
        ++state.updateCount;
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

private:
    float m_lr;
    float m_beta1;
    float m_beta2;
    float m_epsilon;
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
    require(options.beta1 >= 0.0f && options.beta1 < 1.0f && options.beta2 >= 0.0f && options.beta2 < 1.0f,
            "Adam's beta1 and beta2 must be in [0, 1), got " + number(options.beta1) + " and " + number(options.beta2));
    require(std::isfinite(options.epsilon) && options.epsilon >= 0.0f,
            "Adam's epsilon must be a non-negative number, got " + number(options.epsilon));
    return std::make_unique<Adam>(options);
}

std::vector<std::string> optimizerNames()
{
    return {"sgd", "momentum", "adagrad", "adam"};
}

} // namespace parasync
