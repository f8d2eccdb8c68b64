#pragma once

// Labelled markers drawn over a QChart's plot area: vertical lines at an x
// value (a mode change at a global step) or points at (x, y) (the (w, b) at
// which the mode changed). They are graphics items parented to the chart, so
// they follow resizes and are part of what the exporter paints.

#include <QColor>
#include <QObject>
#include <QString>

#include <cmath>
#include <limits>
#include <vector>

class QChart;
class QValueAxis;
class QGraphicsItem;

namespace parasync::ui {

class ChartAnnotations : public QObject
{
    Q_OBJECT

public:
    struct Annotation
    {
        double x = 0;
        double y = std::numeric_limits<double>::quiet_NaN(); // NaN: a vertical line at x
        QString label;
        QColor color;
    };

    // `yAxis` may be null when only vertical lines are used.
    ChartAnnotations(QChart *chart, QValueAxis *xAxis, QValueAxis *yAxis = nullptr);
    ~ChartAnnotations() override;

    void setAnnotations(std::vector<Annotation> annotations);
    int count() const { return int(m_annotations.size()); }
    // Follows the axes' ranges and the plot area.
    void reposition();

private:
    QChart *m_chart;
    QValueAxis *m_xAxis;
    QValueAxis *m_yAxis;
    std::vector<Annotation> m_annotations;
    std::vector<QGraphicsItem *> m_items; // owned by the chart (parented)
};

} // namespace parasync::ui
