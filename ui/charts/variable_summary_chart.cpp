#include "ui/charts/variable_summary_chart.h"

#include "ui/charts/chart_annotations.h"
#include "ui/charts/chart_setup.h"
#include "ui/models/chart_style.h"
#include "ui/models/series_math.h"

#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

namespace parasync::ui {

namespace {
QString variableName(const RunSnapshot &snapshot, size_t variable)
{
    return variable < snapshot.variableNames.size() ? QString::fromStdString(snapshot.variableNames[variable])
                                                    : QStringLiteral("variable[%1]").arg(variable);
}
} // namespace

VariableSummaryChart::VariableSummaryChart(Figure figure, QWidget *parent)
    : RunChart(parent)
    , m_figure(figure)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_xAxis(new QValueAxis)
{
    styleChart(m_chart, title());
    m_xAxis->setTitleText(tr("global step"));
    m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    if (figure == Figure::UpdatePerStep) {
        m_logY = new QLogValueAxis;
        m_logY->setBase(10);
        m_logY->setLabelFormat(QStringLiteral("%.1e"));
        m_logY->setTitleText(tr("L2 norm (log)"));
    } else {
        m_linearY = new QValueAxis;
        m_linearY->setTitleText(figure == Figure::Norm ? tr("L2 norm") : tr("L2 distance"));
    }
    addAxes(m_chart, m_xAxis, yAxis());
    m_markers = std::make_unique<ChartAnnotations>(m_chart, m_xAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view, new QLabel(tr("No variable summaries yet: the chief measures its variables every "
                                       "--display_step of its steps."),
                                    this));
}

QAbstractAxis *VariableSummaryChart::yAxis() const
{
    return m_logY ? static_cast<QAbstractAxis *>(m_logY) : m_linearY;
}

QString VariableSummaryChart::exportName() const
{
    switch (m_figure) {
    case Figure::Norm: return QStringLiteral("variable_norms");
    case Figure::DistanceFromStart: return QStringLiteral("variable_distance_from_start");
    case Figure::UpdatePerStep: return QStringLiteral("variable_updates");
    }
    return {};
}

QString VariableSummaryChart::title() const
{
    switch (m_figure) {
    case Figure::Norm: return tr("Variable norms by global step");
    case Figure::DistanceFromStart: return tr("Distance from the start by global step");
    case Figure::UpdatePerStep: return tr("Update per global step (L2 norm of the change)");
    }
    return {};
}

const DecimatedSeries &VariableSummaryChart::seriesOf(const VariableSeries &variable) const
{
    switch (m_figure) {
    case Figure::Norm: return variable.norm;
    case Figure::DistanceFromStart: return variable.distanceFromStart;
    case Figure::UpdatePerStep: break;
    }
    return variable.updatePerStep;
}

QLineSeries *VariableSummaryChart::lineFor(size_t variable)
{
    while (m_lines.size() <= variable) {
        auto *series = new QLineSeries;
        addSeries(m_chart, series, m_xAxis, yAxis());
        m_lines.push_back(series);
    }
    return m_lines[variable];
}

void VariableSummaryChart::rebuild()
{
    const bool hasData = m_snapshot
                         && std::any_of(m_snapshot->variableSeries.begin(), m_snapshot->variableSeries.end(),
                                        [this](const VariableSeries &v) { return !seriesOf(v).isEmpty(); });
    showData(hasData);
    if (!m_snapshot)
        return;
    const RunSnapshot &snapshot = *m_snapshot;
    PlotExtent extent;
    for (size_t i = 0; i < snapshot.variableSeries.size(); ++i) {
        QLineSeries *line = lineFor(i);
        line->setName(variableName(snapshot, i));
        line->setPen(QPen(workerColor(int(i)), 2));
        QList<QPointF> points = envelopePoints(seriesOf(snapshot.variableSeries[i]));
        // A log axis cannot place 0 (a sync chief that measured twice in one
        // step saw no change): such points are left out, not drawn at -inf.
        if (m_logY)
            points.removeIf([](const QPointF &p) { return !(p.y() > 0); });
        extent.add(points);
        line->replace(points);
    }
    // Variables of an earlier run (another model) drawn no more.
    for (size_t i = snapshot.variableSeries.size(); i < m_lines.size(); ++i)
        m_lines[i]->clear();
    if (extent.isEmpty())
        return;
    setRoundRange(m_xAxis, extent.xMin, std::max(extent.xMax, extent.xMin + 1));
    if (m_logY) {
        setLogRange(m_logY, std::pow(10.0, std::floor(std::log10(extent.yMin))),
                    std::pow(10.0, std::ceil(std::log10(extent.yMax))));
    } else {
        setPaddedRange(m_linearY, extent.yMin, extent.yMax, 1e-3, 0.0);
    }
    markRunChanges();
}

CsvTable VariableSummaryChart::csv() const
{
    const RunSnapshot *snapshot = m_snapshot.get();
    return bucketTable(
        QStringLiteral("variable"), snapshot ? snapshot->variableSeries.size() : 0,
        [snapshot](size_t i) { return variableName(*snapshot, i); },
        [this, snapshot](size_t i) -> const DecimatedSeries & { return seriesOf(snapshot->variableSeries[i]); });
}

int VariableSummaryChart::pointCount() const
{
    return pointsOf(m_lines);
}

} // namespace parasync::ui
