#pragma once

// Colours and words every chart shares, so that worker:1 has the same colour
// in the timeline, the loss chart and the bar charts.

#include "config/update_modes.h"

#include <QColor>
#include <QString>

#include <QStringList>

#include <string>

namespace parasync {
struct FailoverMarker;
struct ModeMarker;
struct RunSnapshot;
} // namespace parasync

namespace parasync::ui {

QColor workerColor(int worker);
// Colours of the run lines in the comparison view.
QColor runColor(int run);
// Shading of time a worker spent held, by reason.
QColor waitColor(proto::WorkerPhase reason);
QColor droppedColor();
QColor modeMarkerColor();
// ps:0's backup took over (--ps_backup_hosts): its line's colour and label.
QColor failoverMarkerColor();
QString failoverLabel(const FailoverMarker &failover);
// ps:0 flagged a worker as a straggler, or unflagged it (in its lane).
QColor stragglerMarkerColor();
QColor chiefLossColor();

// "sync r=2", "ssp s=10", "async": short enough for a marker label.
QString shortModeLabel(const proto::ModeConfig &mode);
// "→ sync r=2 @ 301": a mode change's marker, on every chart of one run.
QString modeChangeLabel(const ModeMarker &change);
QString workerName(int worker); // "worker:1"
// "blocked by sync", "training": a worker's phase in the charts' words.
QString workerPhaseText(proto::WorkerPhase phase);

// The loss axis's title for a model (ModelSignature.model): "loss (mean
// squared error)" for linear, "loss (cross-entropy)" for softmax, plain
// "loss" for a model a worker declared, whose loss the app cannot know.
QString lossAxisTitle(const std::string &model, bool logScale);

// A reported metric (ModelSignature.metric_names) in the charts' words:
// "heldout_loss" -> "held-out loss", "accuracy" -> "accuracy".
QString metricLabel(const std::string &metricName);
// Where the loss chart draws a metric: a loss beside the losses, an accuracy
// on its own 0-1 axis, anything else not at all (metrics.csv has it).
enum class MetricAxis { Loss, Accuracy, None };
MetricAxis metricAxis(const std::string &metricName);
QColor metricColor(size_t metric);
// Each reported metric's newest value, "held-out loss 0.47", for summaries.
QStringList latestMetricTexts(const RunSnapshot &snapshot);

} // namespace parasync::ui
