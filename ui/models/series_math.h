#pragma once

// Turning a run's decimated series into chart points: min/max envelopes,
// TensorBoard's debiased exponential moving average, the linear demo's loss
// surface and the distance to the true (w, b). Plain functions, no widgets.

#include "orchestration/run_state.h"

#include <QList>
#include <QPointF>
#include <QString>

#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace parasync::ui {

// The linear demo's truth: y = 2x + 10 + N(0, 0.33), x ~ U[-1, 1].
inline constexpr double kTrueW = 2.0;
inline constexpr double kTrueB = 10.0;
inline constexpr double kNoiseStddev = 0.33;

// Two points per bucket, (x, min) then (x, max): a line through them draws
// every spike of the raw data while the point count stays bounded.
QList<QPointF> envelopePoints(const DecimatedSeries &series);
// One point per bucket at its mean.
QList<QPointF> meanPoints(const DecimatedSeries &series);

// TensorBoard's smoothing: an exponential moving average with weight
// `smoothing` in [0, 1), divided by (1 - smoothing^n) so that the first
// points are not pulled towards zero. A bucket of n values counts as n
// values equal to its mean. Returns one value per bucket.
std::vector<double> debiasedEma(const std::vector<DecimatedSeries::Bucket> &buckets, double smoothing);

// Mean squared error of (w, b) on the linear demo's data, in expectation:
// (w - 2)^2 / 3 + (b - 10)^2 + 0.33^2 (E[x^2] = 1/3 for x ~ U[-1, 1]).
double linearDemoMse(double w, double b);
// The iso-line MSE(w, b) = level: an ellipse around (2, 10); empty when the
// level is below the noise floor.
QList<QPointF> linearDemoContour(double level, int points = 96);
// Levels for contours that cover a view of (w, b) around the truth, spaced
// geometrically so both the bowl's floor and its walls get lines.
std::vector<double> contourLevels(double maxLevel, int count);

double distanceToTruth(double w, double b);

// Global step -> seconds since the run started, interpolated from the
// pairs a snapshot holds (the full-loss series by step and by time, and the
// recent steps). Used to put step-indexed series on a wall-time axis.
class StepClock
{
public:
    explicit StepClock(const RunSnapshot &snapshot);
    bool isEmpty() const { return m_pairs.empty(); }
    double secondsAt(double globalStep) const;
    double stepAt(double seconds) const;

private:
    std::vector<std::pair<double, double>> m_pairs; // step, seconds; sorted by step
};

// w and b by global step: exact values from the recent steps, and bucket by
// bucket before them (the parameter series are appended together, so their
// buckets line up).
struct ParameterPath
{
    std::vector<double> steps;
    std::vector<double> w;
    std::vector<double> b;
    bool isEmpty() const { return steps.empty(); }
};
// At most about `maxPoints` points (plus the decimated buckets before the
// recent steps).
ParameterPath parameterPath(const RunSnapshot &snapshot, size_t maxPoints = 3000);
// The index of "w" / "b" in snapshot.parameterNames, or -1.
int parameterIndex(const RunSnapshot &snapshot, const char *name);
// Whether the parameters tab draws the values of w and b (the linear model's
// view, with its true values and loss surface); any other model's tab shows
// how each variable moves (norm, distance from the start, update size). A run
// that has named no variables yet (or whose files predate the summaries)
// keeps the values, whatever they are called.
bool drawsParameterValues(const RunSnapshot &snapshot);

} // namespace parasync::ui

namespace parasync::ui {

// A stretch of the run under one update mode, as far as the snapshot's
// recent steps reach: per-worker figures that make the modes comparable.
struct ModePeriod
{
    proto::ModeConfig mode;
    int64_t firstStep = 0;
    int64_t lastStep = 0;
    double seconds = 0;   // wall time the recent steps of this period span
    bool partial = false; // the recent-step window begins after the period began
    struct Worker
    {
        int64_t steps = 0; // gradients pushed (applied, aggregated or dropped)
        int64_t dropped = 0;
        int64_t waitUs = 0;
        int64_t busyUs = 0;             // compute + push + wait
        std::vector<int64_t> staleness; // histogram, last bin is ">= size-1"
    };
    std::map<int, Worker> workers;
    QString label() const; // "sync r=2, steps 1200-2000"
};
std::vector<ModePeriod> modePeriods(const RunSnapshot &snapshot, int stalenessBins);

} // namespace parasync::ui
