#include "ui/models/compared_metrics.h"

#include "ui/models/series_math.h"

#include <QObject>

#include <algorithm>

namespace parasync::ui {

namespace {

QList<QPointF> metricSeriesPoints(const RunSnapshot &run, const char *name)
{
    for (size_t i = 0; i < run.metricNames.size() && i < run.metricSeries.size(); ++i)
        if (run.metricNames[i] == name)
            return meanPoints(run.metricSeries[i]);
    return {};
}

QList<QPointF> batchLossPoints(const RunSnapshot &run)
{
    // The chief's batch loss (worker 0, else the lowest index left),
    // smoothed: one worker's batches are noisy, and all workers' together
    // mix shards.
    if (run.batchLossByWorker.empty())
        return {};
    const auto &series = run.batchLossByWorker.begin()->second;
    const std::vector<double> ema = debiasedEma(series.buckets(), 0.6);
    QList<QPointF> points;
    for (size_t i = 0; i < ema.size(); ++i)
        points.append(QPointF(series.buckets()[i].x, ema[i]));
    return points;
}

// The applied (or aggregated) steps by global step, then each window of
// consecutive ones as one point at its last global step.
QList<QPointF> windowedStepPoints(const RunSnapshot &run, ComparedMetric metric, int windows)
{
    std::vector<const StepRecord *> steps;
    for (const StepRecord &step : run.recentSteps)
        if (step.counted())
            steps.push_back(&step);
    std::stable_sort(steps.begin(), steps.end(),
                     [](const StepRecord *a, const StepRecord *b) { return a->globalStep < b->globalStep; });
    // A sync update is a record from each worker it aggregated, all at its
    // global step: throughput counts the step once, at its first record (a
    // window of two records of one update was a point at 0 steps a second).
    if (metric == ComparedMetric::Throughput)
        steps.erase(
            std::unique(steps.begin(), steps.end(),
                        [](const StepRecord *a, const StepRecord *b) { return a->globalStep == b->globalStep; }),
            steps.end());
    QList<QPointF> points;
    if (steps.size() < 2)
        return points;
    const size_t width = std::max<size_t>(1, steps.size() / size_t(std::max(1, windows)));
    for (size_t begin = 0; begin + 1 < steps.size(); begin += width) {
        const size_t end = std::min(begin + width, steps.size() - 1);
        if (metric == ComparedMetric::Throughput) {
            const double seconds = steps[end]->wallTime - steps[begin]->wallTime;
            if (seconds > 0)
                points.append(QPointF(double(steps[end]->globalStep),
                                      double(steps[end]->globalStep - steps[begin]->globalStep) / seconds));
        } else {
            double sum = 0;
            int count = 0;
            for (size_t i = begin + 1; i <= end; ++i)
                if (steps[i]->staleness >= 0) {
                    sum += double(steps[i]->staleness);
                    ++count;
                }
            if (count > 0)
                points.append(QPointF(double(steps[end]->globalStep), sum / count));
        }
    }
    return points;
}

} // namespace

const std::vector<ComparedMetric> &comparedMetrics()
{
    static const std::vector<ComparedMetric> all{ComparedMetric::HeldOutAccuracy, ComparedMetric::HeldOutLoss,
                                                 ComparedMetric::FullLoss,        ComparedMetric::BatchLoss,
                                                 ComparedMetric::Throughput,      ComparedMetric::Staleness};
    return all;
}

QString comparedMetricName(ComparedMetric metric)
{
    switch (metric) {
    case ComparedMetric::HeldOutAccuracy: return QObject::tr("Held-out accuracy");
    case ComparedMetric::HeldOutLoss: return QObject::tr("Held-out loss");
    case ComparedMetric::FullLoss: return QObject::tr("Full loss (chief's shard)");
    case ComparedMetric::BatchLoss: return QObject::tr("Batch loss (chief, smoothed)");
    case ComparedMetric::Throughput: return QObject::tr("Throughput");
    case ComparedMetric::Staleness: return QObject::tr("Staleness");
    }
    return {};
}

QString comparedMetricAxisTitle(ComparedMetric metric)
{
    switch (metric) {
    case ComparedMetric::HeldOutAccuracy: return QObject::tr("held-out accuracy (fraction correct)");
    case ComparedMetric::HeldOutLoss: return QObject::tr("loss on held-out data (log scale)");
    case ComparedMetric::FullLoss: return QObject::tr("loss on the chief's whole shard (log scale)");
    case ComparedMetric::BatchLoss: return QObject::tr("loss of the chief's batches (log scale)");
    case ComparedMetric::Throughput: return QObject::tr("global steps per second");
    case ComparedMetric::Staleness: return QObject::tr("mean staleness of applied gradients (global steps)");
    }
    return {};
}

QString comparedMetricKey(ComparedMetric metric)
{
    switch (metric) {
    case ComparedMetric::HeldOutAccuracy: return QStringLiteral("heldout_accuracy");
    case ComparedMetric::HeldOutLoss: return QStringLiteral("heldout_loss");
    case ComparedMetric::FullLoss: return QStringLiteral("full_loss");
    case ComparedMetric::BatchLoss: return QStringLiteral("batch_loss");
    case ComparedMetric::Throughput: return QStringLiteral("global_steps_per_s");
    case ComparedMetric::Staleness: return QStringLiteral("staleness");
    }
    return {};
}

bool comparedMetricIsLogScale(ComparedMetric metric)
{
    return metric == ComparedMetric::HeldOutLoss || metric == ComparedMetric::FullLoss
           || metric == ComparedMetric::BatchLoss;
}

QList<QPointF> comparedMetricPoints(const RunSnapshot &run, ComparedMetric metric, int windows)
{
    switch (metric) {
    case ComparedMetric::HeldOutAccuracy: return metricSeriesPoints(run, "heldout_accuracy");
    case ComparedMetric::HeldOutLoss: return metricSeriesPoints(run, "heldout_loss");
    case ComparedMetric::FullLoss: return meanPoints(run.fullLoss);
    case ComparedMetric::BatchLoss: return batchLossPoints(run);
    case ComparedMetric::Throughput:
    case ComparedMetric::Staleness: return windowedStepPoints(run, metric, windows);
    }
    return {};
}

std::vector<ComparedMetric> metricsPresent(const std::vector<const RunSnapshot *> &runs)
{
    std::vector<ComparedMetric> present;
    for (ComparedMetric metric : comparedMetrics())
        if (std::any_of(runs.begin(), runs.end(),
                        [metric](const RunSnapshot *run) { return !comparedMetricPoints(*run, metric).isEmpty(); }))
            present.push_back(metric);
    return present;
}

} // namespace parasync::ui
