#pragma once

// Colours and words every chart shares, so that worker:1 has the same colour
// in the timeline, the loss chart and the bar charts.

#include "parasync.pb.h"

#include <QColor>
#include <QString>

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
QString workerName(int worker); // "worker:1"

} // namespace parasync::ui

class QChart;
class QValueAxis;

namespace parasync::ui {

// The look every QChart of the app shares: a bold title, the legend below.
void styleChart(QChart *chart, const QString &title);
// Sets the range and round tick values (1, 2, 5 x 10^n apart), anchored at 0,
// so a step axis reads 0, 5000, 10000 rather than 1, 7496, 14992.
void setRoundRange(QValueAxis *axis, double min, double max, int maxTicks = 8);

} // namespace parasync::ui
