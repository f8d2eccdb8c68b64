#pragma once

// Base of the app's charts: a widget that rebuilds its series only when it
// is visible or about to be exported, so that the hidden tabs of a busy run
// cost nothing. A QChart chart hands it its view (setChartView): the base
// lays the widget out, shows a grey placeholder line until there is data,
// and paints the chart onto any device for the exporter.

#include "ui/charts/exportable_chart.h"

#include <QWidget>

class QChartView;
class QLabel;
class QLayout;

namespace parasync::ui {

class ChartWidget : public QWidget, public ExportableChart
{
    Q_OBJECT

public:
    explicit ChartWidget(QWidget *parent = nullptr);

    // Rebuilds now if new data arrived since the last rebuild.
    void ensureUpToDate();
    // Paints the chart of the view given to setChartView (title, legend,
    // axes and everything parented to it) into `target` at the target's
    // size, then gives the chart its on-screen size back; while there is no
    // data (showData(false)), the placeholder's text instead.
    void renderTo(QPainter *painter, const QRectF &target) override;

protected:
    // New data: rebuild at once when visible, otherwise when shown or exported.
    void markDirty();
    virtual void rebuild() = 0;
    void showEvent(QShowEvent *event) override;

    // Fills the widget with `view` (antialiased), under `controls` when
    // given. A `placeholder` (its text says what will show there) stands in
    // the view's place, centred and grey, until showData(true).
    void setChartView(QChartView *view, QLabel *placeholder = nullptr, QLayout *controls = nullptr);
    // The chart when there is something to show, else the placeholder.
    void showData(bool hasData);

private:
    bool m_dirty = false;
    bool m_hasData = true; // false: the placeholder stands in, on screen and in exports
    QChartView *m_chartView = nullptr;
    QLabel *m_placeholder = nullptr;
};

} // namespace parasync::ui
