#pragma once

// Base of the app's charts: a widget that rebuilds its series only when it
// is visible or about to be exported, so that the hidden tabs of a busy run
// cost nothing, and that paints a QChart onto any device for the exporter.

#include "ui/exportable_chart.h"

#include <QWidget>

class QChart;

namespace parasync::ui {

class ChartWidget : public QWidget, public ExportableChart
{
    Q_OBJECT

public:
    explicit ChartWidget(QWidget *parent = nullptr);

    // Rebuilds now if new data arrived since the last rebuild.
    void ensureUpToDate();

protected:
    // New data: rebuild at once when visible, otherwise when shown or exported.
    void markDirty();
    virtual void rebuild() = 0;
    void showEvent(QShowEvent *event) override;

    // Paints `chart` (title, legend, axes and everything parented to it)
    // into `target` at the target's size, then gives the chart its on-screen
    // size back.
    static void renderChart(QChart *chart, QPainter *painter, const QRectF &target);

private:
    bool m_dirty = false;
};

} // namespace parasync::ui
