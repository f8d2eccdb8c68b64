#include "orchestration/comparison_spread.h"

#include <algorithm>
#include <cmath>

namespace parasync {

namespace {

// The median of a sorted, non-empty list: the middle value, or the mean of
// the two middle ones.
double medianOfSorted(const std::vector<double> &sorted)
{
    const size_t n = sorted.size();
    return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

void pool(StalenessFigures *into, const StalenessFigures &run)
{
    for (const auto &[value, count] : run.counts)
        into->counts[value] += count;
    double sum = 0;
    into->gradients = 0;
    into->max = 0;
    for (const auto &[value, count] : into->counts) {
        into->gradients += count;
        sum += double(value) * double(count);
        into->max = std::max(into->max, value);
    }
    into->mean = into->gradients > 0 ? sum / double(into->gradients) : 0;
}

} // namespace

Spread spreadOf(const std::vector<double> &perRun)
{
    Spread spread;
    spread.runs = int(perRun.size());
    std::vector<double> values;
    for (const double value : perRun)
        if (std::isfinite(value))
            values.push_back(value);
    spread.values = int(values.size());
    if (values.empty())
        return spread;
    std::sort(values.begin(), values.end());
    spread.median = medianOfSorted(values);
    spread.low = values.front();
    spread.high = values.back();
    return spread;
}

std::vector<ContenderSpread> contenderSpreads(const ModeComparisonSummary &summary)
{
    std::vector<ContenderSpread> contenders;
    for (size_t i = 0; i < summary.runs.size(); ++i) {
        const ModeRunSummary &run = summary.runs[i];
        auto it = std::find_if(contenders.begin(), contenders.end(),
                               [&run](const ContenderSpread &c) { return c.name == run.name; });
        if (it == contenders.end()) {
            contenders.push_back({});
            it = contenders.end() - 1;
            it->name = run.name;
            it->mode = run.mode;
        }
        it->runs.push_back(i);
        it->seeds.push_back(run.seed);
    }
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    for (ContenderSpread &c : contenders) {
        std::vector<double> toTarget, stepAtTarget, finalLoss, pace, stalenessMedian;
        std::map<QString, std::vector<double>> metrics;
        std::map<int, std::vector<double>> workerPace, workerWait;
        for (const size_t index : c.runs) {
            const ModeRunSummary &run = summary.runs[index];
            toTarget.push_back(run.secondsToTarget.value_or(kNaN));
            stepAtTarget.push_back(run.secondsToTarget ? double(run.globalStepAtTarget) : kNaN);
            finalLoss.push_back(run.finalLoss);
            // A failed run that never stepped has no pace, not a pace of 0.
            pace.push_back(run.globalSteps > 0 ? run.globalStepsPerSecond : kNaN);
            stalenessMedian.push_back(run.staleness.gradients > 0 ? double(run.staleness.quantile(0.5)) : kNaN);
            pool(&c.staleness, run.staleness);
            for (const WorkerStepFigures &worker : run.workers) {
                workerPace[worker.worker].push_back(worker.stepsPerSecond);
                workerWait[worker.worker].push_back(worker.waitFraction);
            }
        }
        // Every metric any run logged, NaN for the runs without it.
        for (const size_t index : c.runs)
            for (const auto &entry : summary.runs[index].metrics)
                metrics.emplace(entry.first, std::vector<double>{});
        for (auto &[name, values] : metrics)
            for (const size_t index : c.runs)
                values.push_back(summary.runs[index].finalMetric(name));
        c.secondsToTarget = spreadOf(toTarget);
        c.globalStepAtTarget = spreadOf(stepAtTarget);
        c.finalLoss = spreadOf(finalLoss);
        c.globalStepsPerSecond = spreadOf(pace);
        c.stalenessMedian = spreadOf(stalenessMedian);
        for (const auto &[name, values] : metrics)
            c.finalMetrics[name] = spreadOf(values);
        for (const auto &[worker, values] : workerPace)
            c.workerStepsPerSecond[worker] = spreadOf(values);
        for (const auto &[worker, values] : workerWait)
            c.workerWaitFraction[worker] = spreadOf(values);
    }
    return contenders;
}

bool repeatedOverSeeds(const ModeComparisonSummary &summary)
{
    for (const ContenderSpread &c : contenderSpreads(summary))
        if (c.runs.size() > 1)
            return true;
    return false;
}

bool beyondSpread(const Spread &a, const Spread &b, bool higherIsBetter, bool missingIsWorst)
{
    // One run says nothing of the spread: never a difference beyond it.
    if (a.runs < 2 || b.runs < 2)
        return false;
    if (missingIsWorst) {
        // Every run of `a` has the figure; `b` never had it: better.
        if (!a.all())
            return false;
        if (!b.any())
            return true;
    } else if (!a.all() || !b.all()) {
        return false;
    }
    // a's worst against b's best (of the runs that have the figure).
    return higherIsBetter ? a.low > b.high : a.high < b.low;
}

std::vector<std::pair<size_t, size_t>> differencesBeyondSpread(
    const std::vector<ContenderSpread> &contenders, const std::function<Spread(const ContenderSpread &)> &figure,
    bool higherIsBetter, bool missingIsWorst)
{
    std::vector<std::pair<size_t, size_t>> differences;
    for (size_t a = 0; a < contenders.size(); ++a)
        for (size_t b = 0; b < contenders.size(); ++b)
            if (a != b && beyondSpread(figure(contenders[a]), figure(contenders[b]), higherIsBetter, missingIsWorst))
                differences.emplace_back(a, b);
    return differences;
}

SpreadCurve spreadCurve(const std::vector<std::vector<std::pair<double, double>>> &series, int samples)
{
    SpreadCurve curve;
    std::vector<const std::vector<std::pair<double, double>> *> runs;
    for (const auto &points : series)
        if (!points.empty())
            runs.push_back(&points);
    if (runs.empty())
        return curve;
    if (runs.size() == 1) {
        // Nothing to spread: the run's own points, none lost to sampling.
        for (const auto &[x, value] : *runs.front()) {
            curve.x.push_back(x);
            curve.median.push_back(value);
            curve.low.push_back(value);
            curve.high.push_back(value);
        }
        return curve;
    }
    double first = runs.front()->front().first, last = runs.front()->back().first;
    for (const auto *points : runs) {
        first = std::min(first, points->front().first);
        last = std::max(last, points->back().first);
    }
    samples = std::max(samples, 2);
    std::vector<size_t> cursor(runs.size(), 0);
    std::vector<double> values;
    for (int s = 0; s < samples; ++s) {
        const double x = first + (last - first) * double(s) / double(samples - 1);
        values.clear();
        for (size_t r = 0; r < runs.size(); ++r) {
            const auto &points = *runs[r];
            if (x < points.front().first || x > points.back().first)
                continue; // not started, or over
            while (cursor[r] + 1 < points.size() && points[cursor[r] + 1].first <= x)
                ++cursor[r];
            values.push_back(points[cursor[r]].second);
        }
        if (values.empty())
            continue;
        std::sort(values.begin(), values.end());
        curve.x.push_back(x);
        curve.median.push_back(medianOfSorted(values));
        curve.low.push_back(values.front());
        curve.high.push_back(values.back());
    }
    return curve;
}

} // namespace parasync
