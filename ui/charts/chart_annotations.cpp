#include "ui/charts/chart_annotations.h"

#include <QChart>
#include <QFontMetricsF>
#include <QGraphicsItem>
#include <QPainter>
#include <QValueAxis>

namespace parasync::ui {

namespace {

// One marker: a dashed vertical line over the plot area (or a diamond at a
// point) and its label in a box, painted in the chart's coordinates.
class AnnotationItem : public QGraphicsItem
{
public:
    AnnotationItem(QGraphicsItem *parent, const ChartAnnotations::Annotation &annotation, int slot)
        : QGraphicsItem(parent)
        , m_annotation(annotation)
        , m_slot(slot)
    {
        setZValue(100); // above the series
    }

    void place(const QRectF &plotArea, QPointF anchor, bool vertical)
    {
        prepareGeometryChange();
        m_plotArea = plotArea;
        m_anchor = anchor;
        m_vertical = vertical;
        QFont font;
        font.setPointSizeF(8);
        const QFontMetricsF metrics(font);
        const QSizeF textSize(metrics.horizontalAdvance(m_annotation.label) + 6, metrics.height() + 2);
        if (m_vertical) {
            // Staggered in three rows so neighbouring markers stay readable.
            const double y = plotArea.top() + 2 + (m_slot % 3) * (textSize.height() + 1);
            double x = anchor.x() + 2;
            if (x + textSize.width() > plotArea.right())
                x = anchor.x() - 2 - textSize.width();
            m_labelRect = QRectF(QPointF(x, y), textSize);
        } else {
            // Mode changes late in a run sit on nearly the same (w, b):
            // their labels are stacked upwards.
            m_labelRect = QRectF(
                QPointF(anchor.x() + 8, anchor.y() - textSize.height() - 4 - (m_slot % 4) * (textSize.height() + 2)),
                textSize);
        }
    }

    QRectF boundingRect() const override
    {
        QRectF rect = m_labelRect;
        if (m_vertical)
            rect |= QRectF(m_anchor.x() - 1, m_plotArea.top(), 2, m_plotArea.height());
        else
            rect |= QRectF(m_anchor - QPointF(6, 6), QSizeF(12, 12));
        return rect.adjusted(-1, -1, 1, 1);
    }

    void paint(QPainter *painter, const QStyleOptionGraphicsItem *, QWidget *) override
    {
        painter->save();
        QPen pen(m_annotation.color, 1.5, Qt::DashLine);
        painter->setPen(pen);
        if (m_vertical) {
            painter->drawLine(QPointF(m_anchor.x(), m_plotArea.top()), QPointF(m_anchor.x(), m_plotArea.bottom()));
        } else {
            painter->setPen(QPen(m_annotation.color, 1.5));
            painter->setBrush(Qt::white);
            const QPointF c = m_anchor;
            const QPointF diamond[4] = {c + QPointF(0, -6), c + QPointF(6, 0), c + QPointF(0, 6), c + QPointF(-6, 0)};
            painter->drawPolygon(diamond, 4);
        }
        QColor fill = Qt::white;
        fill.setAlpha(220);
        painter->setPen(QPen(m_annotation.color, 1));
        painter->setBrush(fill);
        painter->drawRect(m_labelRect);
        QFont font = painter->font();
        font.setPointSizeF(8);
        painter->setFont(font);
        painter->setPen(m_annotation.color.darker(130));
        painter->drawText(m_labelRect, Qt::AlignCenter, m_annotation.label);
        painter->restore();
    }

private:
    ChartAnnotations::Annotation m_annotation;
    int m_slot;
    QRectF m_plotArea;
    QPointF m_anchor;
    QRectF m_labelRect;
    bool m_vertical = true;
};

} // namespace

ChartAnnotations::ChartAnnotations(QChart *chart, QValueAxis *xAxis, QValueAxis *yAxis)
    : QObject(chart)
    , m_chart(chart)
    , m_xAxis(xAxis)
    , m_yAxis(yAxis)
{
    connect(chart, &QChart::plotAreaChanged, this, &ChartAnnotations::reposition);
    connect(xAxis, &QValueAxis::rangeChanged, this, &ChartAnnotations::reposition);
    if (yAxis)
        connect(yAxis, &QValueAxis::rangeChanged, this, &ChartAnnotations::reposition);
}

ChartAnnotations::~ChartAnnotations() = default; // the items belong to the chart

void ChartAnnotations::setAnnotations(std::vector<Annotation> annotations)
{
    const bool same = annotations.size() == m_annotations.size()
                      && std::equal(annotations.begin(), annotations.end(), m_annotations.begin(),
                                    [](const auto &a, const auto &b) {
                                        return a.x == b.x && a.label == b.label && a.color == b.color
                                               && (a.y == b.y || (std::isnan(a.y) && std::isnan(b.y)));
                                    });
    if (!same) {
        for (QGraphicsItem *item : m_items)
            delete item;
        m_items.clear();
        m_annotations = std::move(annotations);
        for (size_t i = 0; i < m_annotations.size(); ++i)
            m_items.push_back(new AnnotationItem(m_chart, m_annotations[i], int(i)));
    }
    reposition();
}

void ChartAnnotations::reposition()
{
    const QRectF plot = m_chart->plotArea();
    const double xMin = m_xAxis->min();
    const double xMax = m_xAxis->max();
    for (size_t i = 0; i < m_items.size(); ++i) {
        auto *item = static_cast<AnnotationItem *>(m_items[i]);
        const Annotation &annotation = m_annotations[i];
        const bool vertical = std::isnan(annotation.y) || !m_yAxis;
        if (xMax <= xMin || annotation.x < xMin || annotation.x > xMax) {
            item->setVisible(false);
            continue;
        }
        const double x = plot.left() + (annotation.x - xMin) / (xMax - xMin) * plot.width();
        double y = plot.top();
        if (!vertical) {
            const double yMin = m_yAxis->min();
            const double yMax = m_yAxis->max();
            if (yMax <= yMin || annotation.y < yMin || annotation.y > yMax) {
                item->setVisible(false);
                continue;
            }
            y = plot.bottom() - (annotation.y - yMin) / (yMax - yMin) * plot.height();
        }
        item->place(plot, QPointF(x, y), vertical);
        item->setVisible(true);
    }
}

} // namespace parasync::ui
