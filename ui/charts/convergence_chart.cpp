#include "ui/charts/convergence_chart.h"

#include "ui/charts/chart_annotations.h"
#include "ui/charts/chart_setup.h"
#include "ui/models/chart_style.h"
#include "ui/models/series_math.h"

#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>
#include <limits>

namespace parasync::ui {

namespace {
QColor parameterColor(const std::string &name, size_t index)
{
    if (name == "w")
        return QColor(0x1f, 0x77, 0xb4);
    if (name == "b")
        return QColor(0x2c, 0xa0, 0x2c);
    return workerColor(int(index) + 3);
}
} // namespace

ConvergenceChart::ConvergenceChart(QWidget *parent)
    : RunChart(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_xAxis(new QValueAxis)
    , m_yAxis(new QValueAxis)
    , m_trueW(new QLineSeries)
    , m_trueB(new QLineSeries)
{
    styleChart(m_chart, title());
    m_xAxis->setTitleText(tr("global step"));
    m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    m_yAxis->setTitleText(tr("parameter value"));
    addAxes(m_chart, m_xAxis, m_yAxis);

    m_trueW->setName(tr("true w = 2"));
    m_trueW->setPen(QPen(parameterColor("w", 0).lighter(140), 1.5, Qt::DashLine));
    m_trueB->setName(tr("true b = 10"));
    m_trueB->setPen(QPen(parameterColor("b", 1).lighter(140), 1.5, Qt::DashLine));
    for (QLineSeries *series : {m_trueW, m_trueB})
        addSeries(m_chart, series, m_xAxis, m_yAxis);
    m_markers = std::make_unique<ChartAnnotations>(m_chart, m_xAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view, new QLabel(tr("No parameters yet: the linear model reports w and b with every step."), this));
}

QString ConvergenceChart::title() const
{
    return tr("w and b by global step");
}

QLineSeries *ConvergenceChart::seriesFor(size_t parameter)
{
    while (m_parameters.size() <= parameter) {
        auto *series = new QLineSeries;
        addSeries(m_chart, series, m_xAxis, m_yAxis);
        m_parameters.push_back(series);
    }
    return m_parameters[parameter];
}

void ConvergenceChart::rebuild()
{
    const bool hasData = m_snapshot && !m_snapshot->parameterSeries.empty()
                         && std::any_of(m_snapshot->parameterSeries.begin(), m_snapshot->parameterSeries.end(),
                                        [](const DecimatedSeries &s) { return !s.isEmpty(); });
    showData(hasData);
    if (!m_snapshot)
        return;
    const RunSnapshot &snapshot = *m_snapshot;
    PlotExtent extent;
    for (size_t i = 0; i < snapshot.parameterSeries.size(); ++i) {
        const std::string name
            = i < snapshot.parameterNames.size() ? snapshot.parameterNames[i] : "p" + std::to_string(i);
        QLineSeries *series = seriesFor(i);
        series->setName(QString::fromStdString(name));
        series->setPen(QPen(parameterColor(name, i), 2));
        const QList<QPointF> points = envelopePoints(snapshot.parameterSeries[i]);
        extent.add(points);
        series->replace(points);
    }
    const bool linear = parameterIndex(snapshot, "w") >= 0 && parameterIndex(snapshot, "b") >= 0;
    m_trueW->setVisible(linear);
    m_trueB->setVisible(linear);
    if (extent.isEmpty())
        return;
    extent.xMax = std::max(extent.xMax, extent.xMin + 1);
    if (linear) {
        m_trueW->replace({QPointF(extent.xMin, kTrueW), QPointF(extent.xMax, kTrueW)});
        m_trueB->replace({QPointF(extent.xMin, kTrueB), QPointF(extent.xMax, kTrueB)});
        extent.addY(kTrueW);
        extent.addY(kTrueB);
    }
    setRoundRange(m_xAxis, extent.xMin, extent.xMax);
    setPaddedRange(m_yAxis, extent.yMin, extent.yMax, 0.1);

    markRunChanges();
}

CsvTable ConvergenceChart::csv() const
{
    const RunSnapshot *snapshot = m_snapshot.get();
    return bucketTable(
        QStringLiteral("series"), snapshot ? snapshot->parameterSeries.size() : 0,
        [snapshot](size_t i) {
            return i < snapshot->parameterNames.size() ? QString::fromStdString(snapshot->parameterNames[i])
                                                       : QStringLiteral("p%1").arg(i);
        },
        [snapshot](size_t i) -> const DecimatedSeries & { return snapshot->parameterSeries[i]; });
}

int ConvergenceChart::pointCount() const
{
    return pointsOf(m_parameters);
}

} // namespace parasync::ui
