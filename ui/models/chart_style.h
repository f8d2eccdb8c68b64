#pragma once

// Colours and words every chart shares, so that worker:1 has the same colour
// in the timeline, the loss chart and the bar charts.

#include "config/node_options.h"

#include <QColor>
#include <QString>

namespace parasync {
struct ModeMarker;
}

namespace parasync::ui {

QColor workerColor(int worker);
// Colours of the run lines in the comparison view.
QColor runColor(int run);
// Shading of time a worker spent held, by reason.
QColor waitColor(proto::WorkerPhase reason);
QColor droppedColor();
QColor modeMarkerColor();
QColor chiefLossColor();

// "sync r=2", "ssp s=10", "async": short enough for a marker label.
QString shortModeLabel(const proto::ModeConfig &mode);
// "→ sync r=2 @ 301": a mode change's marker, on every chart of one run.
QString modeChangeLabel(const ModeMarker &change);
QString workerName(int worker); // "worker:1"

} // namespace parasync::ui
