#pragma once

// What every chart of the app offers to the exporter: a file name, a title,
// a way to paint itself with title, legend and axis labels onto any paint
// device (PNG, SVG, the screen), and its series as a table.

#include <QList>
#include <QSize>
#include <QString>
#include <QStringList>

#include <vector>

class QPainter;
class QRectF;

namespace parasync::ui {

// A CSV table: one header row, then rows of the same width.
struct CsvTable
{
    QStringList header;
    std::vector<QStringList> rows;
};

class ExportableChart
{
public:
    virtual ~ExportableChart() = default;

    // File name without extension ("loss", "step_timeline").
    virtual QString exportName() const = 0;
    virtual QString title() const = 0;
    // Size of the exported image in pixels (and of the SVG's view box).
    virtual QSize exportSize() const { return QSize(1200, 700); }
    // Paints the whole chart into `target`: title, legend, axes with their
    // labels, all series and the mode markers. Brings the chart up to date
    // with its latest snapshot first.
    virtual void renderTo(QPainter *painter, const QRectF &target) = 0;
    // Every series the chart shows, long format (one row per point).
    virtual CsvTable csv() const = 0;
    // Mode-change markers currently drawn (tests check every chart has them).
    virtual int modeMarkerCount() const = 0;
    // Points currently drawn, all series (tests check the chart got data).
    virtual int pointCount() const = 0;
};

} // namespace parasync::ui
