#include "ui/charts/embedding_table_charts.h"

#include "ui/charts/chart_setup.h"

#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QLocale>
#include <QValueAxis>

#include <algorithm>

namespace parasync::ui {

namespace {

QColor rowsColor()
{
    return QColor(0x26, 0x80, 0x8e);
}

QColor pullsColor()
{
    return QColor(0xf0, 0x8c, 0x2e);
}

QString psName(size_t index)
{
    return QStringLiteral("ps:%1").arg(index);
}

} // namespace

void EmbeddingTableChart::setTables(std::shared_ptr<const EmbeddingTablesSnapshot> tables, const std::string &table)
{
    m_tables = std::move(tables);
    m_tableName = table;
    markDirty();
}

const TableSummary *EmbeddingTableChart::table() const
{
    if (!m_tables || m_tables->tables.empty())
        return nullptr;
    for (const TableSummary &table : m_tables->tables)
        if (table.name == m_tableName)
            return &table;
    return &m_tables->tables.front();
}

PsShareChart::PsShareChart(QWidget *parent)
    : EmbeddingTableChart(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_categoryAxis(new QBarCategoryAxis)
    , m_valueAxis(new QValueAxis)
    , m_bars(new QBarSeries)
{
    styleChart(m_chart, title());
    addAxes(m_chart, m_categoryAxis, m_valueAxis);
    addSeries(m_chart, m_bars, m_categoryAxis, m_valueAxis);
    m_categoryAxis->setTitleText(tr("ps task"));
    m_valueAxis->setTitleText(tr("share of the table (%)"));
    m_valueAxis->setLabelFormat(QStringLiteral("%.0f"));
    setChartView(m_view, new QLabel(tr("No table rows on the ps tasks yet"), this));
}

QString PsShareChart::title() const
{
    const TableSummary *shown = table();
    return shown ? tr("Rows and pulls of '%1' by ps task").arg(QString::fromStdString(shown->name))
                 : tr("Rows and pulls by ps task");
}

void PsShareChart::rebuild()
{
    const TableSummary *shown = table();
    showData(shown && shown->rows > 0);
    if (!shown || shown->rows <= 0)
        return;
    m_chart->setTitle(title());
    QStringList categories;
    std::vector<double> rows;
    std::vector<double> pulls;
    for (size_t i = 0; i < shown->byPs.size(); ++i) {
        categories << psName(i);
        rows.push_back(shown->byPs[i] ? 100 * shown->byPs[i]->rowShare : 0);
        pulls.push_back(shown->byPs[i] ? 100 * shown->byPs[i]->pullShare : 0);
    }
    const QList<QBarSet *> sets = m_bars->barSets();
    if (sets.size() == 2 && m_categoryAxis->categories() == categories) {
        for (size_t i = 0; i < rows.size(); ++i) {
            sets[0]->replace(qsizetype(i), rows[i]);
            sets[1]->replace(qsizetype(i), pulls[i]);
        }
    } else {
        m_bars->clear();
        m_categoryAxis->clear();
        m_categoryAxis->append(categories);
        m_bars->append(newBarSet(tr("rows held"), rowsColor(), rows));
        m_bars->append(newBarSet(tr("rows pulled since the start"), pullsColor(), pulls));
    }
    // An even split is 100 / n: the axis reaches past the largest share.
    double largest = 0;
    for (size_t i = 0; i < rows.size(); ++i)
        largest = std::max({largest, rows[i], pulls[i]});
    setRoundRange(m_valueAxis, 0, std::min(100.0, std::max(10.0, largest * 1.15)), 6);
}

CsvTable PsShareChart::csv() const
{
    CsvTable result;
    result.header = {QStringLiteral("ps_task"), QStringLiteral("rows"), QStringLiteral("row_share"),
                     QStringLiteral("rows_pulled"), QStringLiteral("pull_share")};
    const TableSummary *shown = table();
    if (!shown)
        return result;
    for (size_t i = 0; i < shown->byPs.size(); ++i) {
        const auto &figures = shown->byPs[i];
        if (!figures)
            continue;
        result.rows.push_back({psName(i), QString::number(figures->rows), QString::number(figures->rowShare, 'g', 6),
                               QString::number(figures->rowsPulled), QString::number(figures->pullShare, 'g', 6)});
    }
    return result;
}

int PsShareChart::pointCount() const
{
    return barCount(m_bars);
}

RowNormChart::RowNormChart(QWidget *parent)
    : EmbeddingTableChart(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_normAxis(new QValueAxis)
    , m_shareAxis(new QValueAxis)
    , m_outline(new QLineSeries)
    , m_area(new QAreaSeries(m_outline))
{
    m_outline->setParent(m_area); // the area draws it; the chart owns the area
    styleChart(m_chart, title());
    addAxes(m_chart, m_normAxis, m_shareAxis);
    addSeries(m_chart, m_area, m_normAxis, m_shareAxis);
    m_area->setColor(QColor(0x26, 0x80, 0x8e, 0xb0));
    m_area->setBorderColor(QColor(0x1b, 0x5e, 0x68));
    m_normAxis->setTitleText(tr("row L2 norm"));
    m_shareAxis->setTitleText(tr("share of the sampled rows (%)"));
    m_shareAxis->setLabelFormat(QStringLiteral("%.0f"));
    m_chart->legend()->hide();
    setChartView(m_view, new QLabel(tr("No rows sampled yet"), this));
}

QString RowNormChart::title() const
{
    const TableSummary *shown = table();
    return shown ? tr("Row norms of '%1'").arg(QString::fromStdString(shown->name)) : tr("Row norms");
}

QString RowNormChart::sampleText() const
{
    const TableSummary *shown = table();
    return shown ? tr("%1 of %2 rows sampled")
                       .arg(QLocale().toString(shown->norms.samples), QLocale().toString(qint64(shown->rows)))
                 : QString();
}

void RowNormChart::rebuild()
{
    const TableSummary *shown = table();
    const NormHistogram *norms = shown ? &shown->norms : nullptr;
    showData(norms && norms->samples > 0);
    m_bins = norms && norms->samples > 0 ? int(norms->counts.size()) : 0;
    if (m_bins == 0)
        return;
    m_chart->setTitle(title());
    // The row count under the axis: a long title is cut short in a narrow chart.
    m_normAxis->setTitleText(tr("row L2 norm (%1)").arg(sampleText()));
    // Steps: each bin a flat top over its width, down to 0 at both ends.
    QList<QPointF> points;
    const double width = norms->binWidth();
    double largest = 0;
    points.append(QPointF(norms->lower, 0));
    for (int i = 0; i < m_bins; ++i) {
        const double share = 100.0 * norms->counts[size_t(i)] / norms->samples;
        largest = std::max(largest, share);
        points.append(QPointF(norms->lower + i * width, share));
        points.append(QPointF(norms->lower + (i + 1) * width, share));
    }
    points.append(QPointF(norms->upper, 0));
    m_outline->replace(points);
    setPaddedRange(m_normAxis, norms->lower, norms->upper, width / 2, 0);
    setRoundRange(m_shareAxis, 0, std::max(5.0, largest * 1.1), 6);
}

CsvTable RowNormChart::csv() const
{
    CsvTable result;
    result.header = {QStringLiteral("norm_from"), QStringLiteral("norm_to"), QStringLiteral("rows_sampled"),
                     QStringLiteral("share")};
    const TableSummary *shown = table();
    if (!shown || shown->norms.samples == 0)
        return result;
    const NormHistogram &norms = shown->norms;
    for (size_t i = 0; i < norms.counts.size(); ++i)
        result.rows.push_back({QString::number(norms.lower + double(i) * norms.binWidth(), 'g', 6),
                               QString::number(norms.lower + double(i + 1) * norms.binWidth(), 'g', 6),
                               QString::number(norms.counts[i]),
                               QString::number(double(norms.counts[i]) / norms.samples, 'g', 6)});
    return result;
}

} // namespace parasync::ui
