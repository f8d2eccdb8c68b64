#pragma once

// What staleness costs over a run: the workers' probes (engine/staleness_cost.h,
// carried by the step log and the telemetry) gathered by how many global steps
// lay between the stale and the fresh parameters.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

// The probes of a run, by how many global steps apart the two parameter sets
// were, in buckets that double: 0, 1, 2-3, 4-7, ..., 128 and more. Keeps
// every probe's values (a probe every --staleness_probe_every steps: tens of
// thousands in an hour), so that a bucket gives medians, which a few huge
// relative errors near a minimum do not pull around as they would a mean.
class StalenessCostTable
{
public:
    struct Bucket
    {
        int64_t lowest = 0;
        int64_t highest = 0; // -1: no upper end
        std::vector<float> cosines;
        std::vector<float> relativeErrors;
        size_t count() const { return cosines.size(); }
        float medianCosine() const;
        float medianRelativeError() const;
        // "0", "1", "2-3", "128+".
        std::string label() const;
    };

    StalenessCostTable();
    void add(int64_t stepsApart, float cosine, float relativeError);
    void clear();
    const std::vector<Bucket> &buckets() const { return m_buckets; }
    size_t count() const { return m_count; }
    // The median cosine over every probe of at least `stepsApart` steps, or
    // nullopt when there is none: one number for "what a gradient that old
    // is worth" in tables.
    std::optional<float> medianCosineFrom(int64_t stepsApart) const;

private:
    std::vector<Bucket> m_buckets;
    size_t m_count = 0;
};

} // namespace parasync
