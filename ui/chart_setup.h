#pragma once

// The set-up every QChart of the app shares: its title and legend, and axes
// with round ticks.

#include <QString>

class QChart;
class QValueAxis;

namespace parasync::ui {

// The look every QChart of the app shares: a bold title, the legend below.
void styleChart(QChart *chart, const QString &title);
// Sets the range and round tick values (1, 2, 5 x 10^n apart), anchored at 0,
// so a step axis reads 0, 5000, 10000 rather than 1, 7496, 14992.
void setRoundRange(QValueAxis *axis, double min, double max, int maxTicks = 8);

} // namespace parasync::ui
