#include "ui/charts/staleness_cost_chart.h"

#include "ui/charts/chart_setup.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace parasync::ui {

namespace {

const QColor kCosineColor(0x2e, 0x7d, 0x32);
const QColor kErrorColor(0xc6, 0x28, 0x28);

// "2-3 (41)": the bucket and how many probes it holds, so that a bar of one
// probe is not read as a finding.
QString category(const StalenessCostFigures &bucket)
{
    return QStringLiteral("%1 (%2)").arg(QString::fromStdString(bucket.label)).arg(bucket.count);
}

} // namespace

StalenessCostChart::StalenessCostChart(QWidget *parent)
    : RunChart(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_categoryAxis(new QBarCategoryAxis)
    , m_cosineAxis(new QValueAxis)
    , m_errorAxis(new QValueAxis)
    , m_cosines(new QBarSeries)
    , m_errors(new QLineSeries)
{
    styleChart(m_chart, title());
    addAxes(m_chart, m_categoryAxis, m_cosineAxis);
    m_chart->addAxis(m_errorAxis, Qt::AlignRight);
    addSeries(m_chart, m_cosines, m_categoryAxis, m_cosineAxis);
    addSeries(m_chart, m_errors, m_categoryAxis, m_errorAxis);
    m_categoryAxis->setTitleText(tr("global steps between the stale and the fresh parameters (probes)"));
    m_cosineAxis->setTitleText(tr("cosine"));
    m_cosineAxis->setRange(-1, 1);
    m_cosineAxis->setTickCount(5);
    m_errorAxis->setTitleText(tr("relative error"));
    m_errorAxis->setTitleBrush(kErrorColor);
    m_errorAxis->setLabelsColor(kErrorColor);
    m_errors->setName(tr("median relative error |stale \u2212 fresh| / |fresh|"));
    m_errors->setColor(kErrorColor);
    m_errors->setPointsVisible(true);
    QPen pen = m_errors->pen();
    pen.setWidthF(2.5);
    m_errors->setPen(pen);
    setChartView(m_view,
                 new QLabel(tr("%1: no probe yet. Workers probe every --staleness_probe_every steps (default 100) "
                               "and report with their next push.")
                                .arg(title()),
                            this));
}

QString StalenessCostChart::title() const
{
    return tr("What a stale gradient is worth");
}

void StalenessCostChart::rebuild()
{
    const bool hasData = m_snapshot && !m_snapshot->stalenessCost.empty();
    showData(hasData);
    if (!hasData)
        return;
    const std::vector<StalenessCostFigures> &buckets = m_snapshot->stalenessCost;
    QStringList categories;
    std::vector<double> cosines;
    QList<QPointF> errors;
    double maxError = 0;
    for (size_t i = 0; i < buckets.size(); ++i) {
        categories << category(buckets[i]);
        cosines.push_back(double(buckets[i].medianCosine));
        errors << QPointF(double(i), double(buckets[i].medianRelativeError));
        maxError = std::max(maxError, double(buckets[i].medianRelativeError));
    }
    if (m_categoryAxis->categories() != categories) {
        m_cosines->clear();
        m_categoryAxis->clear();
        m_categoryAxis->append(categories);
        m_cosines->append(newBarSet(tr("median cosine with the fresh gradient"), kCosineColor, cosines));
    } else {
        QBarSet *set = m_cosines->barSets().constFirst();
        for (size_t i = 0; i < cosines.size(); ++i)
            set->replace(qsizetype(i), cosines[i]);
    }
    m_errors->replace(errors);
    setRoundRange(m_errorAxis, 0, std::max(1.0, maxError * 1.1), 5);
}

CsvTable StalenessCostChart::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("steps_apart"), QStringLiteral("probes"), QStringLiteral("median_cosine"),
                    QStringLiteral("median_relative_error")};
    if (!m_snapshot)
        return table;
    for (const StalenessCostFigures &bucket : m_snapshot->stalenessCost)
        table.rows.push_back({QString::fromStdString(bucket.label), QString::number(bucket.count),
                              QString::number(double(bucket.medianCosine), 'g', 6),
                              QString::number(double(bucket.medianRelativeError), 'g', 6)});
    return table;
}

int StalenessCostChart::pointCount() const
{
    return barCount(m_cosines) + int(m_errors->count());
}

} // namespace parasync::ui
