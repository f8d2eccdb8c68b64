#pragma once

// A mode comparison repeated over seeds: each contender (async, sync, ssp:10,
// ...) ran once per seed, and a single run's figure may be luck -- the
// staleness workload's async ends at a held-out accuracy anywhere from 0.69
// to 0.77 by seed. Here the runs of one contender are gathered and each
// figure becomes a median with its range over the seeds, the curves a median
// with a band, and two contenders are said to differ in a figure only where
// their ranges do not overlap (every seed of one beats every seed of the
// other): what a reader may take home from three seeds, and no more.
//
// Pure functions of a ModeComparisonSummary (mode_comparison.h), callable
// from any thread; the figure (ui/mode_comparison_*) draws what they give.

#include "orchestration/mode_comparison.h"

#include <QString>

#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace parasync {

// One figure over the seeds of a contender. A run without the figure (the
// target not reached, no held-out data) counts in `runs` but not `values`.
struct Spread
{
    double median = std::numeric_limits<double>::quiet_NaN();
    double low = std::numeric_limits<double>::quiet_NaN();
    double high = std::numeric_limits<double>::quiet_NaN();
    int values = 0; // runs that have the figure
    int runs = 0;   // runs of the contender
    bool any() const { return values > 0; }
    bool all() const { return values == runs && runs > 0; }
};

// NaN (or infinite) entries are the runs without the figure.
Spread spreadOf(const std::vector<double> &perRun);

// The runs of one contender, in the order they ran.
struct ContenderSpread
{
    QString name; // the run directory's name ("async", "sync-15of16")
    proto::ModeConfig mode;
    std::vector<size_t> runs; // indexes into ModeComparisonSummary::runs
    std::vector<uint64_t> seeds;
    Spread secondsToTarget; // a run that did not reach the target has no value
    Spread globalStepAtTarget;
    Spread finalLoss;
    Spread globalStepsPerSecond;
    Spread stalenessMedian;
    std::map<QString, Spread> finalMetrics; // by held-out metric name
    // Every run's applied gradients pooled: the contender's staleness.
    StalenessFigures staleness;
    // A worker's steps per second and waiting share over the seeds.
    std::map<int, Spread> workerStepsPerSecond;
    std::map<int, Spread> workerWaitFraction;
};

// The contenders in the order they first ran, each with its runs; a failed
// run is one of them (its figures missing).
std::vector<ContenderSpread> contenderSpreads(const ModeComparisonSummary &summary);
// Whether some contender ran more than once: the figure then draws medians
// and spreads instead of single runs.
bool repeatedOverSeeds(const ModeComparisonSummary &summary);

// Whether every run of `a` did better than every run of `b` on a figure:
// lower is better unless `higherIsBetter`. Only when each has at least two
// values is a spread known; a single run's figure is never called out as a
// difference beyond the spread. `missingIsWorst`: a run without the figure
// (the target never reached) counts as worse than any value.
bool beyondSpread(const Spread &a, const Spread &b, bool higherIsBetter, bool missingIsWorst = false);

// Every pair (better, worse) of contenders whose figure differs beyond the
// spread, by contender index, better first; `figure` picks the figure.
std::vector<std::pair<size_t, size_t>> differencesBeyondSpread(
    const std::vector<ContenderSpread> &contenders, const std::function<Spread(const ContenderSpread &)> &figure,
    bool higherIsBetter, bool missingIsWorst = false);

// A curve over the seeds: at each x, the median and the range of the runs
// that got that far. With one run, its own points (low = median = high).
struct SpreadCurve
{
    std::vector<double> x, median, low, high;
    bool empty() const { return x.empty(); }
};

// `series` holds each run's (x, value) points in increasing x. The runs are
// read at `samples` x values from the first point to the longest run's last,
// each run at a sample by its last point at or before it (a logged value
// holds until the next is logged); a run contributes only up to its own last
// point.
SpreadCurve spreadCurve(const std::vector<std::vector<std::pair<double, double>>> &series, int samples = 120);

} // namespace parasync
