#pragma once

// What Compare runs can draw of each run, for any model: the held-out
// accuracy and loss the workers report (ModelSignature.metric_names
// "heldout_accuracy", "heldout_loss"), the chief's batch loss and full-shard
// loss, the throughput in global steps per second and the mean staleness of
// the applied gradients, each by global step. Plain functions, no widgets.

#include "orchestration/run_state.h"

#include <QList>
#include <QPointF>
#include <QString>

#include <vector>

namespace parasync::ui {

enum class ComparedMetric { HeldOutAccuracy, HeldOutLoss, FullLoss, BatchLoss, Throughput, Staleness };

// Every metric, in the order the picker lists them.
const std::vector<ComparedMetric> &comparedMetrics();
// "Held-out accuracy", for the picker and titles.
QString comparedMetricName(ComparedMetric metric);
// The y axis's title in words, "held-out accuracy (fraction correct)".
QString comparedMetricAxisTitle(ComparedMetric metric);
// A file-name and CSV-column form, "heldout_accuracy".
QString comparedMetricKey(ComparedMetric metric);
// Losses span decades: drawn on a log axis.
bool comparedMetricIsLogScale(ComparedMetric metric);

// The metric's points of one run, x = global step; empty when the run has
// none of it (no held-out data, a run replayed from metrics.csv without
// timings). Throughput and staleness come from the snapshot's recent steps,
// in about `windows` windows of consecutive steps.
QList<QPointF> comparedMetricPoints(const RunSnapshot &run, ComparedMetric metric, int windows = 100);
// The metrics at least one of `runs` has, in comparedMetrics() order.
std::vector<ComparedMetric> metricsPresent(const std::vector<const RunSnapshot *> &runs);

} // namespace parasync::ui
