#include "ui/charts/parameter_path_chart.h"

#include "ui/charts/chart_annotations.h"
#include "ui/charts/chart_setup.h"
#include "ui/models/chart_style.h"
#include "ui/models/series_math.h"
#include "ui/models/timeline_mapping.h"

#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

namespace parasync::ui {

ParameterPathChart::ParameterPathChart(QWidget *parent)
    : RunChart(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_wAxis(new QValueAxis)
    , m_bAxis(new QValueAxis)
    , m_path(new QLineSeries)
    , m_start(new QScatterSeries)
    , m_current(new QScatterSeries)
    , m_truth(new QScatterSeries)
{
    styleChart(m_chart, title());
    m_wAxis->setTitleText(tr("w"));
    m_bAxis->setTitleText(tr("b"));
    addAxes(m_chart, m_wAxis, m_bAxis);

    const auto add = [this](QAbstractSeries *series) { addSeries(m_chart, series, m_wAxis, m_bAxis); };
    for (int i = 0; i < kContours; ++i) {
        auto *contour = new QLineSeries;
        contour->setPen(QPen(QColor(0xb0, 0xb0, 0xb0), 1));
        contour->setName(tr("MSE contours"));
        add(contour);
        if (i > 0)
            hideFromLegend(m_chart, contour);
        m_contours.push_back(contour);
    }
    m_path->setName(tr("(w, b)"));
    m_path->setPen(QPen(QColor(0x1f, 0x77, 0xb4), 2));
    add(m_path);
    m_start->setName(tr("start"));
    m_start->setMarkerSize(9);
    m_start->setColor(QColor(0x7f, 0x7f, 0x7f));
    add(m_start);
    m_current->setName(tr("now"));
    m_current->setMarkerSize(12);
    m_current->setColor(QColor(0x1f, 0x77, 0xb4));
    add(m_current);
    m_truth->setName(tr("true (2, 10)"));
    m_truth->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    m_truth->setMarkerSize(11);
    m_truth->setColor(droppedColor());
    add(m_truth);
    m_truth->replace({QPointF(kTrueW, kTrueB)});

    m_markers = std::make_unique<ChartAnnotations>(m_chart, m_wAxis, m_bAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    auto *placeholder
        = new QLabel(tr("No (w, b) yet. The path over the loss surface is drawn for the linear model."), this);
    placeholder->setWordWrap(true);
    setChartView(m_view, placeholder);
}

QString ParameterPathChart::title() const
{
    return tr("(w, b) path over the loss surface");
}

void ParameterPathChart::rebuild()
{
    const ParameterPath path = m_snapshot ? parameterPath(*m_snapshot) : ParameterPath{};
    showData(!path.isEmpty());
    if (path.isEmpty())
        return;

    QList<QPointF> points;
    points.reserve(qsizetype(path.steps.size()));
    double wMin = kTrueW, wMax = kTrueW, bMin = kTrueB, bMax = kTrueB;
    for (size_t i = 0; i < path.steps.size(); ++i) {
        points.append(QPointF(path.w[i], path.b[i]));
        wMin = std::min(wMin, path.w[i]);
        wMax = std::max(wMax, path.w[i]);
        bMin = std::min(bMin, path.b[i]);
        bMax = std::max(bMax, path.b[i]);
    }
    m_path->replace(points);
    m_start->replace({points.front()});
    m_current->replace({points.back()});

    const double wPad = std::max((wMax - wMin) * 0.08, 0.25);
    const double bPad = std::max((bMax - bMin) * 0.08, 0.25);
    // Round ranges, set only when they change: every change re-lays out the
    // chart and moves the contours.
    const auto roundRange = [](QValueAxis *axis, double min, double max) {
        const double step = niceTickStep(max - min, 6);
        const double lo = std::floor(min / step) * step;
        const double hi = std::ceil(max / step) * step;
        if (axis->min() != lo || axis->max() != hi)
            axis->setRange(lo, hi);
    };
    roundRange(m_wAxis, wMin - wPad, wMax + wPad);
    roundRange(m_bAxis, bMin - bPad, bMax + bPad);

    // Iso-lines up to the loss at the view's farthest corner.
    double maxLevel = 0;
    for (const double w : {m_wAxis->min(), m_wAxis->max()})
        for (const double b : {m_bAxis->min(), m_bAxis->max()})
            maxLevel = std::max(maxLevel, linearDemoMse(w, b));
    std::vector<double> levels = contourLevels(maxLevel, kContours);
    if (levels != m_levels) {
        m_levels = std::move(levels);
        for (size_t i = 0; i < m_contours.size(); ++i) {
            if (i < m_levels.size())
                m_contours[i]->replace(linearDemoContour(m_levels[i]));
            else
                m_contours[i]->clear();
        }
    }

    // Where the path was when the mode changed: the last bucket at or
    // before the change's step.
    std::vector<ChartAnnotations::Annotation> markers;
    for (const auto &change : m_snapshot->modeChanges) {
        // The last point read before the change (steps are only nearly
        // sorted: async workers read in any order).
        size_t index = 0;
        for (size_t i = 0; i < path.steps.size(); ++i)
            if (path.steps[i] <= double(change.globalStep))
                index = i;
        markers.push_back({path.w[index], path.b[index], modeChangeLabel(change), modeMarkerColor()});
    }
    m_markers->setAnnotations(std::move(markers));
}

CsvTable ParameterPathChart::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("series"), QStringLiteral("global_step"), QStringLiteral("w"), QStringLiteral("b"),
                    QStringLiteral("mse")};
    if (!m_snapshot)
        return table;
    const ParameterPath path = parameterPath(*m_snapshot);
    for (size_t i = 0; i < path.steps.size(); ++i)
        table.rows.push_back({QStringLiteral("path"), QString::number(path.steps[i], 'g', 12),
                              QString::number(path.w[i], 'g', 8), QString::number(path.b[i], 'g', 8),
                              QString::number(linearDemoMse(path.w[i], path.b[i]), 'g', 8)});
    for (const double level : m_levels)
        for (const QPointF &p : linearDemoContour(level, 48))
            table.rows.push_back({QStringLiteral("contour"), QString(), QString::number(p.x(), 'g', 8),
                                  QString::number(p.y(), 'g', 8), QString::number(level, 'g', 8)});
    return table;
}

int ParameterPathChart::pointCount() const
{
    return int(m_path->count());
}

} // namespace parasync::ui
