#include "ui/charts/chart_widget.h"

#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>

#include <algorithm>

namespace parasync::ui {

ChartWidget::ChartWidget(QWidget *parent) : QWidget(parent) {}

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

void ChartWidget::setChartView(QChartView *view, QLabel *placeholder, QLayout *controls)
{
    m_chartView = view;
    m_placeholder = placeholder;
    view->setRenderHint(QPainter::Antialiasing);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    if (controls)
        layout->addLayout(controls);
    if (placeholder) {
        placeholder->setAlignment(Qt::AlignCenter);
        placeholder->setStyleSheet(QStringLiteral("color: gray"));
        layout->addWidget(placeholder);
    }
    layout->addWidget(view, 1);
    if (placeholder)
        view->hide();
}

void ChartWidget::showData(bool hasData)
{
    m_hasData = hasData || !m_placeholder;
    if (m_placeholder)
        m_placeholder->setVisible(!hasData);
    m_chartView->setVisible(hasData);
}

void ChartWidget::renderTo(QPainter *painter, const QRectF &target)
{
    ensureUpToDate();
    if (!m_hasData) {
        // Empty axes say nothing in an exported figure either: the
        // placeholder's words, as the window shows them.
        painter->save();
        painter->fillRect(target, Qt::white);
        QFont font = painter->font();
        font.setPixelSize(std::max(11, int(target.height() / 24)));
        painter->setFont(font);
        painter->setPen(Qt::gray);
        painter->drawText(target.adjusted(24, 24, -24, -24), Qt::AlignCenter | Qt::TextWordWrap, m_placeholder->text());
        painter->restore();
        return;
    }
    QChart *chart = m_chartView->chart();
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
