#pragma once

// Which workers are persistently slower than the others: the straggler a
// sync step waits for and an asynchronous run learns less from. Horovod's
// users asked for exactly this ("identify the slow rank", horovod#867).
//
// A worker's pace is how long a step takes it when the ps does not hold it:
// the wall time over the last `window`, less the time its pushes were held
// (a sync barrier, a staleness bound), over the steps it finished. Held time
// is left out so that in sync, where every worker finishes one step a global
// step, the fast ones (held at the barrier) and the slow one (never held)
// still differ. A worker whose pace is more than `threshold` times the median
// of the others' paces is slow; it is flagged once it was slow at
// `persistence` looks in a row, so that one slow step (a checkpoint written,
// a page fault) flags nobody. It is unflagged once it was back within half
// the margin (1.5 times the others' for a threshold of 2) at as many looks:
// a worker whose pace hovers at the threshold is not flagged and unflagged
// over and over.
// Not thread-safe: ps:0 calls it under its lock.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

namespace parasync {

class StragglerDetector
{
public:
    using Clock = std::chrono::steady_clock;

    struct Settings
    {
        // Slow: a step takes more than this many times the others' median.
        double threshold = 2.0;
        // The pace is measured over this much of the recent past; a worker
        // is judged once it has been seen for half of it.
        std::chrono::milliseconds window{10000};
        // Looks in a row a worker must be slow (or fine again) for its flag
        // to change.
        int persistence = 3;
    };

    // One live worker at a look, counted from its join: the steps it
    // finished and the time its pushes were held, a hold in progress included.
    struct Sample
    {
        int worker = 0;
        int64_t steps = 0;
        std::chrono::microseconds held{0};
    };

    // A worker whose flag changed at a look, with the figures behind it.
    struct Change
    {
        int worker = 0;
        bool straggler = false;
        double secondsPerStep = 0;       // its pace over the window
        double othersSecondsPerStep = 0; // the median of the others' paces
    };

    // The defaults (not a default argument: Settings' initialisers are not
    // usable inside the class that nests it).
    StragglerDetector();
    explicit StragglerDetector(Settings settings);

    const Settings &settings() const { return m_settings; }
    // Looks at the live workers. One missing from `live` has left or died: it
    // is forgotten (a flag it had goes without a Change). Returns the flags
    // that changed at this look, by worker index.
    std::vector<Change> look(Clock::time_point now, const std::vector<Sample> &live);

    bool flagged(int worker) const;
    // The flagged workers, by index.
    std::vector<int> stragglers() const;
    // The worker's pace at the last look; 0 before it can be judged.
    double secondsPerStep(int worker) const;

private:
    struct Point
    {
        Clock::time_point at;
        int64_t steps = 0;
        std::chrono::microseconds held{0};
    };
    struct Worker
    {
        std::deque<Point> points; // oldest first, spanning the window
        double secondsPerStep = 0;
        int slowLooks = 0; // in a row
        int fineLooks = 0; // in a row
        bool flagged = false;
    };

    // The pace over the points kept; none while they span less than half
    // the window.
    std::optional<double> paceOf(const Worker &worker) const;

    Settings m_settings;
    std::map<int, Worker> m_workers;
};

} // namespace parasync
