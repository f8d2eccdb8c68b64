#pragma once

// The set-up every QChart of the app shares: its title and legend, axes with
// round ticks, series drawn against their axes, and the labelled lines that
// mark a run's mode changes. ChartWidget holds the rest of a chart's widget
// (its view, its placeholder, painting it for the exporter).

#include "orchestration/run_state.h"
#include "ui/charts/chart_annotations.h"
#include "ui/charts/exportable_chart.h"

#include <QList>
#include <QPointF>
#include <QString>

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

class QAbstractAxis;
class QAbstractBarSeries;
class QAbstractSeries;
class QBarSet;
class QChart;
class QLineSeries;
class QLogValueAxis;
class QColor;
class QValueAxis;

namespace parasync::ui {

// The look every QChart of the app shares: a bold title, the legend below.
void styleChart(QChart *chart, const QString &title);
// Sets the range and round tick values (1, 2, 5 x 10^n apart), anchored at 0,
// so a step axis reads 0, 5000, 10000 rather than 1, 7496, 14992.
void setRoundRange(QValueAxis *axis, double min, double max, int maxTicks = 8);
// Sets the range and a tick for every decade -- or every 10^k decades when
// there would be more than `maxTicks`, as in a run whose loss grew from 1 to
// 1e38: forty one-decade labels crowd into ellipses.
void setLogRange(QLogValueAxis *axis, double min, double max, int maxTicks = 10);
// The smallest box around the points a chart draws; empty until one is
// added.
struct PlotExtent
{
    double xMin = std::numeric_limits<double>::max();
    double xMax = std::numeric_limits<double>::lowest();
    double yMin = std::numeric_limits<double>::max();
    double yMax = std::numeric_limits<double>::lowest();

    void addX(double x)
    {
        xMin = std::min(xMin, x);
        xMax = std::max(xMax, x);
    }
    void addY(double y)
    {
        yMin = std::min(yMin, y);
        yMax = std::max(yMax, y);
    }
    void add(const QList<QPointF> &points)
    {
        for (const QPointF &p : points) {
            addX(p.x());
            addY(p.y());
        }
    }
    bool isEmpty() const { return xMin > xMax; }
};

// Sets the range of `axis` to [min, max] widened by 5 % of its span on each
// side (at least `minPad`), but not below `floor`, with nice tick values:
// the lines do not touch the plot's edges.
void setPaddedRange(QValueAxis *axis, double min, double max, double minPad,
                    double floor = -std::numeric_limits<double>::infinity());
// Adds `x` at the bottom and `y` on the left.
void addAxes(QChart *chart, QAbstractAxis *x, QAbstractAxis *y);
// Adds `series` to `chart`, drawn against `x` and `y`.
void addSeries(QChart *chart, QAbstractSeries *series, QAbstractAxis *x, QAbstractAxis *y);
// Leaves `series` out of the legend (a second line of an entry already there).
void hideFromLegend(QChart *chart, QAbstractSeries *series);
// Shows `series` in the legend only while it has points to show.
void showInLegendWhenDrawn(QChart *chart, QAbstractSeries *series, bool drawn);
// A set of bars named `label`, in `color` with white edges so that
// neighbouring bars stay apart, holding `values`.
QBarSet *newBarSet(const QString &label, const QColor &color, const std::vector<double> &values);
// Every bar of `series`, all its sets together.
int barCount(const QAbstractBarSeries *series);
// Every point of `lines` together.
int pointsOf(const std::vector<QLineSeries *> &lines);
// The CSV of `count` bucketed series, one row per bucket: the series' name
// (nameOf(i), in the column `seriesColumn`), then global_step, min, max,
// mean, last and count.
CsvTable bucketTable(const QString &seriesColumn, size_t count, const std::function<QString(size_t)> &nameOf,
                     const std::function<const DecimatedSeries &(size_t)> &seriesOf);
// A dashed line at the global step of each of the run's mode changes,
// labelled "→ sync @ 301", in the mode marker colour; and one at each
// failover of ps:0's pair, "ps:0 failover @ 812", in the failover colour.
std::vector<ChartAnnotations::Annotation> runMarkerLines(const RunSnapshot &snapshot);

} // namespace parasync::ui
