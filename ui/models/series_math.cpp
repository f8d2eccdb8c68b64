#include "ui/models/series_math.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace parasync::ui {

QList<QPointF> envelopePoints(const DecimatedSeries &series)
{
    QList<QPointF> points;
    points.reserve(qsizetype(series.buckets().size() * 2));
    for (const auto &bucket : series.buckets()) {
        points.append(QPointF(bucket.x, bucket.min));
        if (bucket.max != bucket.min)
            points.append(QPointF(bucket.x, bucket.max));
    }
    return points;
}

QList<QPointF> meanPoints(const DecimatedSeries &series)
{
    QList<QPointF> points;
    points.reserve(qsizetype(series.buckets().size()));
    for (const auto &bucket : series.buckets())
        points.append(QPointF(bucket.x, bucket.mean()));
    return points;
}

std::vector<double> debiasedEma(const std::vector<DecimatedSeries::Bucket> &buckets, double smoothing)
{
    std::vector<double> result;
    result.reserve(buckets.size());
    smoothing = std::clamp(smoothing, 0.0, 0.999);
    double last = 0;
    double accumulated = 0; // number of values folded in
    for (const auto &bucket : buckets) {
        const double n = double(std::max<int64_t>(bucket.count, 1));
        const double keep = std::pow(smoothing, n);
        last = last * keep + (1 - keep) * bucket.mean();
        accumulated += n;
        const double debias = 1 - std::pow(smoothing, accumulated);
        result.push_back(debias > 0 ? last / debias : bucket.mean());
    }
    return result;
}

double linearDemoMse(double w, double b)
{
    return (w - kTrueW) * (w - kTrueW) / 3 + (b - kTrueB) * (b - kTrueB) + kNoiseStddev * kNoiseStddev;
}

QList<QPointF> linearDemoContour(double level, int points)
{
    QList<QPointF> result;
    const double excess = level - kNoiseStddev * kNoiseStddev;
    if (excess <= 0 || points < 3)
        return result;
    // (w-2)^2 / (3 e) + (b-10)^2 / e = 1: semi-axes sqrt(3e) along w, sqrt(e) along b.
    const double aw = std::sqrt(3 * excess);
    const double ab = std::sqrt(excess);
    result.reserve(points + 1);
    for (int i = 0; i <= points; ++i) {
        const double angle = 2 * std::numbers::pi * i / points;
        result.append(QPointF(kTrueW + aw * std::cos(angle), kTrueB + ab * std::sin(angle)));
    }
    return result;
}

std::vector<double> contourLevels(double maxLevel, int count)
{
    std::vector<double> levels;
    const double floor = kNoiseStddev * kNoiseStddev;
    if (!(maxLevel > floor) || count < 1)
        return levels;
    // Geometric in the excess over the noise floor: dense near the minimum.
    const double lowest = std::max((maxLevel - floor) / std::pow(4.0, count - 1), 1e-4);
    for (int i = 0; i < count; ++i) {
        const double excess = lowest * std::pow(4.0, i);
        if (excess > maxLevel - floor + 1e-12)
            break;
        levels.push_back(floor + excess);
    }
    return levels;
}

double distanceToTruth(double w, double b)
{
    return std::hypot(w - kTrueW, b - kTrueB);
}

StepClock::StepClock(const RunSnapshot &snapshot)
{
    const auto &byStep = snapshot.fullLoss.buckets();
    const auto &byTime = snapshot.fullLossByTime.buckets();
    // Both series get one value per evaluation, so bucket i covers the same values.
    const size_t common = std::min(byStep.size(), byTime.size());
    for (size_t i = 0; i < common; ++i)
        m_pairs.emplace_back(byStep[i].x, byTime[i].x);
    for (const auto &step : snapshot.recentSteps)
        m_pairs.emplace_back(double(step.globalStep), step.wallTime - snapshot.startWallTime);
    std::sort(m_pairs.begin(), m_pairs.end());
    // Keep time non-decreasing along the step axis (clocks of several
    // records at one step may disagree by microseconds).
    for (size_t i = 1; i < m_pairs.size(); ++i)
        m_pairs[i].second = std::max(m_pairs[i].second, m_pairs[i - 1].second);
}

namespace {
double interpolate(const std::vector<std::pair<double, double>> &pairs, double key, bool byFirst)
{
    if (pairs.empty())
        return 0;
    const auto keyOf = [byFirst](const std::pair<double, double> &p) { return byFirst ? p.first : p.second; };
    const auto valueOf = [byFirst](const std::pair<double, double> &p) { return byFirst ? p.second : p.first; };
    const auto it
        = std::lower_bound(pairs.begin(), pairs.end(), key, [&](const auto &p, double k) { return keyOf(p) < k; });
    if (it == pairs.begin())
        return valueOf(pairs.front());
    if (it == pairs.end())
        return valueOf(pairs.back());
    const auto &hi = *it;
    const auto &lo = *(it - 1);
    const double dk = keyOf(hi) - keyOf(lo);
    if (dk <= 0)
        return valueOf(lo);
    return valueOf(lo) + (key - keyOf(lo)) / dk * (valueOf(hi) - valueOf(lo));
}
} // namespace

double StepClock::secondsAt(double globalStep) const
{
    return interpolate(m_pairs, globalStep, true);
}

double StepClock::stepAt(double seconds) const
{
    return interpolate(m_pairs, seconds, false);
}

int parameterIndex(const RunSnapshot &snapshot, const char *name)
{
    for (size_t i = 0; i < snapshot.parameterNames.size(); ++i)
        if (snapshot.parameterNames[i] == name)
            return int(i);
    return -1;
}

bool drawsParameterValues(const RunSnapshot &snapshot)
{
    return snapshot.variableNames.empty() || (parameterIndex(snapshot, "w") >= 0 && parameterIndex(snapshot, "b") >= 0);
}

ParameterPath parameterPath(const RunSnapshot &snapshot, size_t maxPoints)
{
    ParameterPath path;
    const int wi = parameterIndex(snapshot, "w");
    const int bi = parameterIndex(snapshot, "b");
    if (wi < 0 || bi < 0)
        return path;
    const size_t needed = size_t(std::max(wi, bi)) + 1;
    // The recent steps hold the exact values (the start of the path too,
    // which a decimated bucket only has as min/max); the buckets cover what
    // came before them.
    std::vector<const StepRecord *> recent;
    for (const StepRecord &step : snapshot.recentSteps)
        if (step.outcome != proto::DROPPED_STALE && step.parameters.size() >= needed)
            recent.push_back(&step);
    // Parameters belong to the step they were read at (computed_from_step).
    const double recentStart
        = recent.empty() ? std::numeric_limits<double>::infinity() : double(recent.front()->computedFromStep);
    if (size_t(std::max(wi, bi)) < snapshot.parameterSeries.size()) {
        const auto &w = snapshot.parameterSeries[size_t(wi)].buckets();
        const auto &b = snapshot.parameterSeries[size_t(bi)].buckets();
        for (size_t i = 0; i < std::min(w.size(), b.size()) && w[i].x < recentStart; ++i) {
            // `last` rather than the mean: the path goes through values the
            // parameters really had.
            path.steps.push_back(w[i].x);
            path.w.push_back(w[i].last);
            path.b.push_back(b[i].last);
        }
    }
    const size_t stride = std::max<size_t>(1, (recent.size() + maxPoints - 1) / std::max<size_t>(maxPoints, 1));
    for (size_t i = 0; i < recent.size(); ++i) {
        if (i % stride != 0 && i + 1 != recent.size())
            continue;
        path.steps.push_back(double(recent[i]->computedFromStep));
        path.w.push_back(recent[i]->parameters[size_t(wi)]);
        path.b.push_back(recent[i]->parameters[size_t(bi)]);
    }
    return path;
}

} // namespace parasync::ui

#include "ui/models/chart_style.h"

namespace parasync::ui {

QString ModePeriod::label() const
{
    return QStringLiteral("%1, steps %2\u2013%3%4")
        .arg(shortModeLabel(mode))
        .arg(firstStep)
        .arg(lastStep)
        .arg(partial ? QStringLiteral(" (recent)") : QString());
}

std::vector<ModePeriod> modePeriods(const RunSnapshot &snapshot, int stalenessBins)
{
    std::vector<ModePeriod> periods;
    if (snapshot.recentSteps.empty())
        return periods;
    // Boundaries: the steps at which the mode changed.
    std::vector<const ModeMarker *> changes;
    for (const auto &change : snapshot.modeChanges)
        changes.push_back(&change);
    std::stable_sort(changes.begin(), changes.end(),
                     [](const ModeMarker *a, const ModeMarker *b) { return a->globalStep < b->globalStep; });

    const auto periodIndex = [&changes](int64_t step) {
        size_t index = 0;
        while (index < changes.size() && step >= changes[index]->globalStep)
            ++index;
        return index;
    };
    periods.resize(changes.size() + 1);
    for (size_t i = 0; i < periods.size(); ++i)
        periods[i].mode
            = i == 0 ? (changes.empty() ? snapshot.mode : changes.front()->previous) : changes[i - 1]->current;
    std::vector<double> firstTime(periods.size(), std::numeric_limits<double>::max());
    std::vector<double> lastTime(periods.size(), std::numeric_limits<double>::lowest());
    std::vector<bool> seen(periods.size(), false);
    const int bins = std::max(stalenessBins, 1);
    for (const StepRecord &step : snapshot.recentSteps) {
        const size_t index = periodIndex(step.globalStep);
        ModePeriod &period = periods[index];
        if (!seen[index]) {
            period.firstStep = step.globalStep;
            period.lastStep = step.globalStep;
            seen[index] = true;
        }
        period.firstStep = std::min(period.firstStep, step.globalStep);
        period.lastStep = std::max(period.lastStep, step.globalStep);
        firstTime[index] = std::min(firstTime[index], step.wallTime);
        lastTime[index] = std::max(lastTime[index], step.wallTime);
        ModePeriod::Worker &worker = period.workers[step.worker];
        if (worker.staleness.empty())
            worker.staleness.assign(size_t(bins), 0);
        ++worker.steps;
        if (step.outcome == proto::DROPPED_STALE)
            ++worker.dropped;
        worker.waitUs += step.waitUs;
        worker.busyUs += step.computeUs + step.pushUs + step.waitUs;
        if (step.staleness >= 0) // -1: unknown (replayed from metrics.csv)
            worker.staleness[size_t(std::min<int64_t>(step.staleness, bins - 1))] += 1;
    }
    const int64_t firstRecent = snapshot.recentSteps.front().globalStep;
    std::vector<ModePeriod> result;
    for (size_t i = 0; i < periods.size(); ++i) {
        if (!seen[i])
            continue;
        ModePeriod &period = periods[i];
        period.seconds = std::max(0.0, lastTime[i] - firstTime[i]);
        // The first update of a run produces global step 1; a later period
        // begins with the step at which the mode changed.
        const int64_t begins = i == 0 ? 1 : changes[i - 1]->globalStep;
        period.partial = firstRecent > begins;
        result.push_back(std::move(period));
    }
    return result;
}

} // namespace parasync::ui
