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
    : ChartWidget(parent)
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

ConvergenceChart::~ConvergenceChart()
{
    m_markers.reset();
}

QString ConvergenceChart::title() const
{
    return tr("w and b by global step");
}

void ConvergenceChart::setSnapshot(std::shared_ptr<const RunSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    markDirty();
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
    double xMin = std::numeric_limits<double>::max();
    double xMax = std::numeric_limits<double>::lowest();
    double yMin = std::numeric_limits<double>::max();
    double yMax = std::numeric_limits<double>::lowest();
    for (size_t i = 0; i < snapshot.parameterSeries.size(); ++i) {
        const std::string name
            = i < snapshot.parameterNames.size() ? snapshot.parameterNames[i] : "p" + std::to_string(i);
        QLineSeries *series = seriesFor(i);
        series->setName(QString::fromStdString(name));
        series->setPen(QPen(parameterColor(name, i), 2));
        const QList<QPointF> points = envelopePoints(snapshot.parameterSeries[i]);
        for (const QPointF &p : points) {
            xMin = std::min(xMin, p.x());
            xMax = std::max(xMax, p.x());
            yMin = std::min(yMin, p.y());
            yMax = std::max(yMax, p.y());
        }
        series->replace(points);
    }
    const bool linear = parameterIndex(snapshot, "w") >= 0 && parameterIndex(snapshot, "b") >= 0;
    m_trueW->setVisible(linear);
    m_trueB->setVisible(linear);
    if (xMin > xMax)
        return;
    xMax = std::max(xMax, xMin + 1);
    if (linear) {
        m_trueW->replace({QPointF(xMin, kTrueW), QPointF(xMax, kTrueW)});
        m_trueB->replace({QPointF(xMin, kTrueB), QPointF(xMax, kTrueB)});
        yMin = std::min(yMin, kTrueW);
        yMax = std::max(yMax, kTrueB);
    }
    setRoundRange(m_xAxis, xMin, xMax);
    const double pad = std::max((yMax - yMin) * 0.05, 0.1);
    m_yAxis->setRange(yMin - pad, yMax + pad);
    m_yAxis->applyNiceNumbers();

    m_markers->setAnnotations(runMarkerLines(snapshot));
}

CsvTable ConvergenceChart::csv() const
{
    CsvTable table = bucketTable(QStringLiteral("series"));
    if (!m_snapshot)
        return table;
    for (size_t i = 0; i < m_snapshot->parameterSeries.size(); ++i) {
        const QString name = i < m_snapshot->parameterNames.size()
                                 ? QString::fromStdString(m_snapshot->parameterNames[i])
                                 : QStringLiteral("p%1").arg(i);
        appendBucketRows(&table, name, m_snapshot->parameterSeries[i]);
    }
    return table;
}

int ConvergenceChart::modeMarkerCount() const
{
    return m_markers->count();
}

int ConvergenceChart::pointCount() const
{
    return pointsOf(m_parameters);
}

} // namespace parasync::ui
