#include "ui/charts/loss_chart.h"

#include "ui/charts/chart_annotations.h"
#include "ui/charts/chart_setup.h"
#include "ui/models/chart_style.h"
#include "ui/models/series_math.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSlider>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

namespace parasync::ui {

LossChart::LossChart(QWidget *parent)
    : RunChart(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_xAxis(new QValueAxis)
    , m_linearY(new QValueAxis)
    , m_logY(new QLogValueAxis)
    , m_fullLoss(new QLineSeries)
    , m_accuracyY(new QValueAxis)
    , m_logToggle(new QCheckBox(tr("Log scale"), this))
    , m_smoothingSlider(new QSlider(Qt::Horizontal, this))
    , m_smoothingLabel(new QLabel(this))
{
    styleChart(m_chart, title());
    m_xAxis->setTitleText(tr("global step"));
    m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    // Until a signature names the model: the demo's linear model.
    m_linearY->setTitleText(lossAxisTitle("linear", false));
    m_logY->setTitleText(lossAxisTitle("linear", true));
    m_logY->setLabelFormat(QStringLiteral("%.3g"));
    m_logY->setBase(10);
    addAxes(m_chart, m_xAxis, m_linearY);
    // The log axis is created once and swapped in; keep it owned meanwhile.
    m_logY->setParent(this);

    m_accuracyY->setTitleText(tr("accuracy"));
    m_accuracyY->setRange(0, 1);
    m_accuracyY->setLabelFormat(QStringLiteral("%.1f"));
    m_accuracyY->setParent(this); // added to the chart with the first accuracy

    m_fullLoss->setName(tr("chief full-shard loss"));
    QPen fullPen(chiefLossColor(), 2.5);
    m_fullLoss->setPen(fullPen);
    attach(m_fullLoss);

    m_markers = std::make_unique<ChartAnnotations>(m_chart, m_xAxis);

    m_view->setRubberBand(QChartView::RectangleRubberBand);

    m_smoothingSlider->setRange(0, 99);
    m_smoothingSlider->setValue(int(m_smoothing * 100));
    m_smoothingSlider->setToolTip(tr("Exponential moving average of the batch loss, debiased as in TensorBoard"));
    m_smoothingSlider->setObjectName(QStringLiteral("lossSmoothing"));
    m_logToggle->setObjectName(QStringLiteral("lossLogScale"));
    connect(m_smoothingSlider, &QSlider::valueChanged, this, [this](int value) { setSmoothing(value / 100.0); });
    connect(m_logToggle, &QCheckBox::toggled, this, &LossChart::setLogScale);

    auto *controls = new QHBoxLayout;
    controls->addWidget(m_logToggle);
    controls->addSpacing(16);
    controls->addWidget(new QLabel(tr("Smoothing"), this));
    controls->addWidget(m_smoothingSlider, 1);
    controls->addWidget(m_smoothingLabel);
    controls->addStretch(1);
    setChartView(
        m_view,
        new QLabel(tr("No loss yet: start the demo cluster, connect to a cluster or open a run directory."), this),
        controls);
    m_smoothingLabel->setText(QString::number(m_smoothing, 'f', 2));
    // The loss falls over orders of magnitude (MSE ~100 at the start, ~0.1
    // at the end): on a linear axis the interesting part is a flat line.
    setLogScale(true);
}

QString LossChart::title() const
{
    return tr("Loss by global step");
}

bool LossChart::logScale() const
{
    return m_logToggle->isChecked();
}

void LossChart::setLogScale(bool on)
{
    if (m_logToggle->isChecked() != on) {
        m_logToggle->setChecked(on); // comes back here through toggled()
        return;
    }
    QAbstractAxis *from = on ? static_cast<QAbstractAxis *>(m_linearY) : m_logY;
    QAbstractAxis *to = on ? static_cast<QAbstractAxis *>(m_logY) : m_linearY;
    if (m_chart->axes(Qt::Vertical).contains(to))
        return;
    // The accuracy lines keep their own axis.
    auto seriesList = m_chart->series();
    seriesList.removeIf([this](QAbstractSeries *series) { return series->attachedAxes().contains(m_accuracyY); });
    for (QAbstractSeries *series : seriesList)
        series->detachAxis(from);
    m_chart->removeAxis(from);
    from->setParent(this);
    m_chart->addAxis(to, Qt::AlignLeft);
    for (QAbstractSeries *series : seriesList)
        series->attachAxis(to);
    markDirty();
    ensureUpToDate();
}

void LossChart::setSmoothing(double smoothing)
{
    m_smoothing = std::clamp(smoothing, 0.0, 0.99);
    m_smoothingLabel->setText(QString::number(m_smoothing, 'f', 2));
    if (m_smoothingSlider->value() != int(std::lround(m_smoothing * 100)))
        m_smoothingSlider->setValue(int(std::lround(m_smoothing * 100)));
    markDirty();
}

void LossChart::attach(QLineSeries *series)
{
    addSeries(m_chart, series, m_xAxis, logScale() ? static_cast<QAbstractAxis *>(m_logY) : m_linearY);
}

LossChart::WorkerSeries &LossChart::seriesFor(int worker)
{
    auto it = m_workers.find(worker);
    if (it != m_workers.end())
        return it->second;
    WorkerSeries series;
    const QColor color = workerColor(worker);
    series.raw = new QLineSeries;
    QColor faint = color;
    faint.setAlpha(70);
    series.raw->setPen(QPen(faint, 1));
    series.raw->setName(workerName(worker) + tr(" raw"));
    series.smoothed = new QLineSeries;
    series.smoothed->setPen(QPen(color, 2));
    series.smoothed->setName(workerName(worker) + tr(" batch loss"));
    attach(series.raw);
    attach(series.smoothed);
    WorkerSeries &added = m_workers.emplace(worker, series).first->second;
    // Series paint in the order they were added: every faint raw envelope
    // first, then the smoothed lines, the chief's loss on top.
    for (auto &[index, lines] : m_workers) {
        m_chart->removeSeries(lines.smoothed);
        attach(lines.smoothed);
    }
    m_chart->removeSeries(m_fullLoss);
    attach(m_fullLoss);
    // One legend entry per worker: the smoothed line. With many workers the
    // entries would be a row of unnamed squares: one entry then stands for
    // them all (the colours are the step timeline's).
    constexpr size_t kMostWorkersInLegend = 12;
    const bool summarised = m_workers.size() > kMostWorkersInLegend;
    for (auto &[index, lines] : m_workers) {
        hideFromLegend(m_chart, lines.raw);
        if (summarised)
            hideFromLegend(m_chart, lines.smoothed);
    }
    if (summarised) {
        // Markers are made anew whenever a line is re-attached (above), so
        // the label is set again with every worker that joins.
        for (QLegendMarker *marker : m_chart->legend()->markers(m_workers.begin()->second.smoothed)) {
            marker->setVisible(true);
            marker->setLabel(
                tr("%1 workers' batch loss (colours as in the step timeline)").arg(qsizetype(m_workers.size())));
        }
    }
    return added;
}

QLineSeries *LossChart::metricLine(const std::string &name, size_t index)
{
    if (const auto it = m_metrics.find(name); it != m_metrics.end())
        return it->second;
    auto *line = new QLineSeries;
    // A dashed line: measured on other data than the losses it is drawn beside.
    QPen pen(metricColor(index), 2.5, Qt::DashLine);
    line->setPen(pen);
    if (metricAxis(name) == MetricAxis::Accuracy) {
        line->setName(metricLabel(name) + tr(" (right axis)"));
        if (!m_chart->axes(Qt::Vertical).contains(m_accuracyY))
            m_chart->addAxis(m_accuracyY, Qt::AlignRight);
        addSeries(m_chart, line, m_xAxis, m_accuracyY);
    } else {
        line->setName(metricLabel(name));
        attach(line);
    }
    m_metrics.emplace(name, line);
    return line;
}

void LossChart::rebuild()
{
    const bool hasData = m_snapshot && (!m_snapshot->batchLossByWorker.empty() || !m_snapshot->fullLoss.isEmpty());
    showData(hasData);
    if (!m_snapshot)
        return;
    const RunSnapshot &snapshot = *m_snapshot;
    const bool log = logScale();
    if (!snapshot.signature.model().empty()) {
        m_linearY->setTitleText(lossAxisTitle(snapshot.signature.model(), false));
        m_logY->setTitleText(lossAxisTitle(snapshot.signature.model(), true));
    }
    PlotExtent extent;
    // The x range spans every point, also those a log axis cannot draw: a
    // loss that reached exactly 0 (a separable dataset) must not freeze the
    // axis at the last step whose loss was positive.
    const auto extend = [&](const QList<QPointF> &points) {
        for (const QPointF &p : points) {
            extent.addX(p.x());
            if (!log || p.y() > 0)
                extent.addY(p.y());
        }
    };
    const auto positive = [log](QList<QPointF> points) {
        // A log axis cannot show 0; such points are left out rather than
        // breaking the whole line.
        if (log)
            points.removeIf([](const QPointF &p) { return !(p.y() > 0); });
        return points;
    };

    for (const auto &[worker, series] : snapshot.batchLossByWorker) {
        WorkerSeries &lines = seriesFor(worker);
        const QList<QPointF> all = envelopePoints(series);
        extend(all);
        const QList<QPointF> raw = positive(all);
        const std::vector<double> ema = debiasedEma(series.buckets(), m_smoothing);
        QList<QPointF> smooth;
        smooth.reserve(qsizetype(ema.size()));
        for (size_t i = 0; i < ema.size(); ++i)
            smooth.append(QPointF(series.buckets()[i].x, ema[i]));
        smooth = positive(std::move(smooth));
        lines.raw->replace(raw);
        lines.smoothed->replace(smooth);
    }
    const QList<QPointF> allFull = meanPoints(snapshot.fullLoss);
    extend(allFull);
    const QList<QPointF> full = positive(allFull);
    // Dots help while evaluations are few; later they would hide the line.
    m_fullLoss->setPointsVisible(full.size() <= 40);
    m_fullLoss->replace(full);
    // A Python chief need not measure its whole shard: no line, no entry.
    showInLegendWhenDrawn(m_chart, m_fullLoss, !full.isEmpty());

    for (size_t i = 0; i < snapshot.metricNames.size() && i < snapshot.metricSeries.size(); ++i) {
        const std::string &name = snapshot.metricNames[i];
        const MetricAxis axis = metricAxis(name);
        if (axis == MetricAxis::None || snapshot.metricSeries[i].isEmpty())
            continue;
        QLineSeries *line = metricLine(name, i);
        QList<QPointF> points = meanPoints(snapshot.metricSeries[i]);
        if (axis == MetricAxis::Loss) {
            extend(points);
            points = positive(std::move(points));
        }
        line->setPointsVisible(points.size() <= 40);
        line->replace(points);
    }

    if (!extent.isEmpty()) {
        setRoundRange(m_xAxis, extent.xMin, std::max(extent.xMax, extent.xMin + 1));
        if (extent.yMin > extent.yMax) {
            extent.yMin = log ? 0.1 : 0;
            extent.yMax = 1;
        }
        if (log) {
            setLogRange(m_logY, extent.yMin / 1.5, extent.yMax * 1.5);
        } else {
            setPaddedRange(m_linearY, extent.yMin, extent.yMax, 1e-6, 0.0);
        }
    }

    markRunChanges();
}

void LossChart::renderTo(QPainter *painter, const QRectF &target)
{
    ensureUpToDate();
    if (m_view->isHidden()) {
        // Never rendered on screen: give the chart a size before painting.
        m_chart->resize(target.size());
    }
    ChartWidget::renderTo(painter, target);
}

CsvTable LossChart::csv() const
{
    CsvTable table;
    table.header
        = {QStringLiteral("series"), QStringLiteral("global_step"), QStringLiteral("min"),     QStringLiteral("max"),
           QStringLiteral("mean"),   QStringLiteral("count"),       QStringLiteral("smoothed")};
    if (!m_snapshot)
        return table;
    for (const auto &[worker, series] : m_snapshot->batchLossByWorker) {
        const std::vector<double> ema = debiasedEma(series.buckets(), m_smoothing);
        const QString name = workerName(worker) + QStringLiteral(" batch loss");
        for (size_t i = 0; i < series.buckets().size(); ++i) {
            const auto &bucket = series.buckets()[i];
            table.rows.push_back({name, QString::number(bucket.x, 'g', 12), QString::number(bucket.min, 'g', 8),
                                  QString::number(bucket.max, 'g', 8), QString::number(bucket.mean(), 'g', 8),
                                  QString::number(bucket.count), QString::number(ema[i], 'g', 8)});
        }
    }
    const auto addRows = [&table](const QString &name, const DecimatedSeries &series) {
        for (const auto &bucket : series.buckets())
            table.rows.push_back({name, QString::number(bucket.x, 'g', 12), QString::number(bucket.min, 'g', 8),
                                  QString::number(bucket.max, 'g', 8), QString::number(bucket.mean(), 'g', 8),
                                  QString::number(bucket.count), QString()});
    };
    addRows(QStringLiteral("chief full loss"), m_snapshot->fullLoss);
    for (size_t i = 0; i < m_snapshot->metricNames.size() && i < m_snapshot->metricSeries.size(); ++i)
        addRows(metricLabel(m_snapshot->metricNames[i]), m_snapshot->metricSeries[i]);
    return table;
}

int LossChart::pointCount() const
{
    int count = int(m_fullLoss->count());
    for (const auto &[name, line] : m_metrics)
        count += int(line->count());
    for (const auto &[worker, series] : m_workers)
        count += int(series.raw->count() + series.smoothed->count());
    return count;
}

} // namespace parasync::ui
