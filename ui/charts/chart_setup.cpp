#include "ui/charts/chart_setup.h"

#include "ui/models/chart_style.h"
#include "ui/models/timeline_mapping.h"

#include <QAbstractBarSeries>
#include <QAbstractSeries>
#include <QBarSet>
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

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

void setLogRange(QLogValueAxis *axis, double min, double max, int maxTicks)
{
    axis->setRange(min, max);
    const double decades = min > 0 && max > min ? std::log10(max / min) : 1;
    const double decadesPerTick = std::max(1.0, std::ceil(decades / std::max(1, maxTicks)));
    axis->setBase(std::pow(10.0, decadesPerTick));
}

void setPaddedRange(QValueAxis *axis, double min, double max, double minPad, double floor)
{
    const double pad = std::max((max - min) * 0.05, minPad);
    axis->setRange(std::max(floor, min - pad), max + pad);
    axis->applyNiceNumbers();
}

void addAxes(QChart *chart, QAbstractAxis *x, QAbstractAxis *y)
{
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
}

void addSeries(QChart *chart, QAbstractSeries *series, QAbstractAxis *x, QAbstractAxis *y)
{
    chart->addSeries(series);
    series->attachAxis(x);
    series->attachAxis(y);
}

void hideFromLegend(QChart *chart, QAbstractSeries *series)
{
    showInLegendWhenDrawn(chart, series, false);
}

void showInLegendWhenDrawn(QChart *chart, QAbstractSeries *series, bool drawn)
{
    for (QLegendMarker *marker : chart->legend()->markers(series))
        marker->setVisible(drawn);
}

QBarSet *newBarSet(const QString &label, const QColor &color, const std::vector<double> &values)
{
    auto *set = new QBarSet(label);
    set->setColor(color);
    set->setBorderColor(Qt::white);
    QList<qreal> list;
    for (const double v : values)
        list.append(v);
    set->append(list);
    return set;
}

int pointsOf(const std::vector<QLineSeries *> &lines)
{
    int count = 0;
    for (const QLineSeries *line : lines)
        count += int(line->count());
    return count;
}

int barCount(const QAbstractBarSeries *series)
{
    int count = 0;
    const auto sets = series->barSets();
    for (const QBarSet *set : sets)
        count += int(set->count());
    return count;
}

std::vector<ChartAnnotations::Annotation> runMarkerLines(const RunSnapshot &snapshot)
{
    std::vector<ChartAnnotations::Annotation> lines;
    const double anyHeight = std::numeric_limits<double>::quiet_NaN();
    for (const auto &change : snapshot.modeChanges)
        lines.push_back({double(change.globalStep), anyHeight, modeChangeLabel(change), modeMarkerColor()});
    for (const auto &failover : snapshot.failovers)
        lines.push_back({double(failover.globalStep), anyHeight, failoverLabel(failover), failoverMarkerColor()});
    return lines;
}

CsvTable bucketTable(const QString &seriesColumn, size_t count, const std::function<QString(size_t)> &nameOf,
                     const std::function<const DecimatedSeries &(size_t)> &seriesOf)
{
    CsvTable table;
    table.header
        = {seriesColumn,           QStringLiteral("global_step"), QStringLiteral("min"),  QStringLiteral("max"),
           QStringLiteral("mean"), QStringLiteral("last"),        QStringLiteral("count")};
    for (size_t i = 0; i < count; ++i) {
        const QString name = nameOf(i);
        for (const auto &bucket : seriesOf(i).buckets())
            table.rows.push_back({name, QString::number(bucket.x, 'g', 12), QString::number(bucket.min, 'g', 8),
                                  QString::number(bucket.max, 'g', 8), QString::number(bucket.mean(), 'g', 8),
                                  QString::number(bucket.last, 'g', 8), QString::number(bucket.count)});
    }
    return table;
}

} // namespace parasync::ui
