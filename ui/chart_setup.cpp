#include "ui/chart_setup.h"

#include "ui/models/timeline_mapping.h"

#include <QChart>
#include <QLegend>
#include <QValueAxis>

#include <algorithm>

namespace parasync::ui {

void styleChart(QChart *chart, const QString &title)
{
    chart->setTitle(title);
    QFont font = chart->titleFont();
    font.setBold(true);
    font.setPointSizeF(std::max(font.pointSizeF(), 9.0) * 1.3);
    chart->setTitleFont(font);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(6, 6, 6, 6));
}

void setRoundRange(QValueAxis *axis, double min, double max, int maxTicks)
{
    if (!(max > min))
        max = min + 1;
    // From 0 when the data starts near it: round labels, no odd first tick.
    if (min > 0 && min < (max - min) * 0.05)
        min = 0;
    const double step = niceTickStep(max - min, maxTicks);
    axis->setRange(min, max);
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setTickAnchor(0);
    axis->setTickInterval(step);
}

} // namespace parasync::ui
