#include "ui/chart_widget.h"

#include <QChart>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QPainter>

namespace parasync::ui {

ChartWidget::ChartWidget(QWidget *parent)
    : QWidget(parent)
{
}

void ChartWidget::ensureUpToDate()
{
    if (!m_dirty)
        return;
    m_dirty = false;
    rebuild();
}

void ChartWidget::markDirty()
{
    m_dirty = true;
    if (isVisible())
        ensureUpToDate();
}

void ChartWidget::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    ensureUpToDate();
}

void ChartWidget::renderChart(QChart *chart, QPainter *painter, const QRectF &target)
{
    const QRectF onScreen = chart->geometry();
    // The chart's layout (axes, legend, plot area) is normally applied on the
    // next event loop pass; activate it now so the export has the new size.
    chart->setGeometry(QRectF(onScreen.topLeft(), target.size()));
    if (chart->layout())
        chart->layout()->activate();
    chart->scene()->render(painter, target, QRectF(onScreen.topLeft(), target.size()), Qt::IgnoreAspectRatio);
    chart->setGeometry(onScreen);
    if (chart->layout())
        chart->layout()->activate();
}

} // namespace parasync::ui
