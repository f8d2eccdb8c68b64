#include "orchestration/staleness_cost_table.h"

#include <algorithm>
#include <cmath>

namespace parasync {

namespace {

float median(std::vector<float> values)
{
    if (values.empty())
        return std::nanf("");
    const auto middle = values.begin() + std::ptrdiff_t(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    if (values.size() % 2 == 1)
        return *middle;
    const float below = *std::max_element(values.begin(), middle);
    return (below + *middle) / 2.0f;
}

// Bucket edges: 0, 1, 2, 4, ..., 128 (the last holds 128 and more).
constexpr int kBuckets = 9;

} // namespace

float StalenessCostTable::Bucket::medianCosine() const
{
    return median(cosines);
}

float StalenessCostTable::Bucket::medianRelativeError() const
{
    return median(relativeErrors);
}

std::string StalenessCostTable::Bucket::label() const
{
    if (highest < 0)
        return std::to_string(lowest) + "+";
    if (highest == lowest)
        return std::to_string(lowest);
    return std::to_string(lowest) + "-" + std::to_string(highest);
}

StalenessCostTable::StalenessCostTable()
{
    m_buckets.resize(kBuckets);
    for (int i = 0; i < kBuckets; ++i) {
        Bucket &b = m_buckets[size_t(i)];
        b.lowest = i == 0 ? 0 : int64_t(1) << (i - 1);
        b.highest = i == 0 ? 0 : i + 1 == kBuckets ? -1 : (int64_t(1) << i) - 1;
    }
}

void StalenessCostTable::add(int64_t stepsApart, float cosine, float relativeError)
{
    if (stepsApart < 0 || !std::isfinite(cosine) || !std::isfinite(relativeError))
        return;
    auto bucket
        = std::find_if(m_buckets.rbegin(), m_buckets.rend(), [&](const Bucket &b) { return stepsApart >= b.lowest; });
    bucket->cosines.push_back(cosine);
    bucket->relativeErrors.push_back(relativeError);
    ++m_count;
}

void StalenessCostTable::clear()
{
    for (Bucket &b : m_buckets) {
        b.cosines.clear();
        b.relativeErrors.clear();
    }
    m_count = 0;
}

std::optional<float> StalenessCostTable::medianCosineFrom(int64_t stepsApart) const
{
    std::vector<float> cosines;
    for (const Bucket &b : m_buckets)
        if (b.lowest >= stepsApart)
            cosines.insert(cosines.end(), b.cosines.begin(), b.cosines.end());
    if (cosines.empty())
        return std::nullopt;
    return median(std::move(cosines));
}

} // namespace parasync
