#include "ui/charts/mode_comparison_charts.h"

#include "config/update_modes.h"
#include "ui/charts/chart_setup.h"
#include "ui/models/chart_style.h"

#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace parasync::ui {

namespace {

// Bars drawn with their value above them, at most (ModeBarChart).
constexpr size_t kLabelledBarsAtMost = 16;

// An empty chart's axes and stray titles say nothing: a grey line instead.
QLabel *shownOnceARunEnds(const QString &title, QWidget *parent)
{
    auto *placeholder
        = new QLabel(QObject::tr("%1: drawn as soon as the first run has logged its steps").arg(title), parent);
    placeholder->setWordWrap(true);
    return placeholder;
}

// Keeps one line series per run in `lines`, on the chart's axes.
void keepOneLinePerRun(QChart *chart, std::vector<QLineSeries *> &lines, size_t runs, QAbstractAxis *x,
                       QAbstractAxis *y)
{
    while (lines.size() < runs) {
        auto *line = new QLineSeries;
        addSeries(chart, line, x, y);
        lines.push_back(line);
    }
    while (lines.size() > runs) {
        chart->removeSeries(lines.back());
        delete lines.back();
        lines.pop_back();
    }
}

// One contender's line: a run's own points, or over seeds the median with
// the runs' range as a band under it.
struct ContenderLine
{
    QString label;
    QColor color;
    SpreadCurve curve;
    bool repeated = false;
};

// Draws `contenders` as one line each (kept in `lines`, so that a live
// redraw does not flicker) and, for a contender over seeds, its band
// (made anew in `bands`). Points at or below 0 are left out when `logY`.
// Returns the largest x and the y range drawn (yMin > yMax when none).
struct Extent
{
    double xMax = 0;
    double yMin = std::numeric_limits<double>::max();
    double yMax = std::numeric_limits<double>::lowest();
};

Extent drawContenderLines(QChart *chart, std::vector<QLineSeries *> &lines, std::vector<QAreaSeries *> &bands,
                          const std::vector<ContenderLine> &contenders, QAbstractAxis *x, QAbstractAxis *y, bool logY)
{
    for (QAreaSeries *band : bands) {
        chart->removeSeries(band);
        delete band; // its two edges are its children
    }
    bands.clear();
    keepOneLinePerRun(chart, lines, contenders.size(), x, y);
    Extent extent;
    for (size_t i = 0; i < contenders.size(); ++i) {
        const ContenderLine &c = contenders[i];
        QList<QPointF> median;
        auto *upper = new QLineSeries;
        auto *lower = new QLineSeries;
        for (size_t k = 0; k < c.curve.x.size(); ++k) {
            if (logY && !(c.curve.low[k] > 0))
                continue;
            median.append(QPointF(c.curve.x[k], c.curve.median[k]));
            upper->append(c.curve.x[k], c.curve.high[k]);
            lower->append(c.curve.x[k], c.curve.low[k]);
            extent.xMax = std::max(extent.xMax, c.curve.x[k]);
            extent.yMin = std::min(extent.yMin, c.curve.low[k]);
            extent.yMax = std::max(extent.yMax, c.curve.high[k]);
        }
        lines[i]->setName(c.label);
        lines[i]->setPen(QPen(c.color, 2));
        lines[i]->replace(median);
        if (!c.repeated) {
            delete upper;
            delete lower;
            continue;
        }
        auto *band = new QAreaSeries(upper, lower);
        upper->setParent(band);
        lower->setParent(band);
        QColor fill = c.color;
        fill.setAlpha(55);
        band->setBrush(fill);
        band->setPen(Qt::NoPen);
        addSeries(chart, band, x, y);
        hideFromLegend(chart, band);
        bands.push_back(band);
    }
    return extent;
}

} // namespace

QString secondsText(double value)
{
    return QObject::tr("%1 s").arg(value, 0, 'f', value < 10 ? 1 : 0);
}

QString lossText(double value)
{
    return std::isfinite(value) ? QString::number(value, 'g', 3) : QStringLiteral("–");
}

QString timeToTargetText(const ModeRunSummary &run)
{
    if (!run.failure.isEmpty() && run.loss.empty())
        return QObject::tr("failed");
    return run.secondsToTarget ? secondsText(*run.secondsToTarget) : QObject::tr("not reached");
}

QString spreadText(const Spread &spread, int digits, char format)
{
    if (!spread.any())
        return QStringLiteral("–");
    const auto number = [&](double value) { return QString::number(value, format, digits); };
    // A range that rounds to one number is that number.
    QString text
        = number(spread.low) == number(spread.high)
              ? number(spread.median)
              : QStringLiteral("%1 (%2–%3)").arg(number(spread.median), number(spread.low), number(spread.high));
    // Of the runs that have it: "11.3 (in 1 of 3)".
    if (spread.values < spread.runs)
        text += QObject::tr(" (in %1 of %2)").arg(spread.values).arg(spread.runs);
    return text;
}

namespace {

// A time-to-target bar's label over seeds, on two lines (axis labels are
// HTML): "4.1 s<br>(3.2–5.0)", "not reached".
QString timeSpreadText(const Spread &spread)
{
    if (!spread.any())
        return QObject::tr("not reached");
    return spreadText(spread, 1).replace(QStringLiteral(" ("), QObject::tr(" s<br>("), Qt::CaseSensitive);
}

} // namespace

std::vector<int> workerIndices(const ModeComparisonSummary &summary)
{
    std::set<int> indices;
    for (const ModeRunSummary &run : summary.runs)
        for (const WorkerStepFigures &worker : run.workers)
            indices.insert(worker.worker);
    return {indices.begin(), indices.end()};
}

const WorkerStepFigures *workerOf(const ModeRunSummary &run, int index)
{
    for (const WorkerStepFigures &worker : run.workers)
        if (worker.worker == index)
            return &worker;
    return nullptr;
}

QStringList heldOutMetricNames(const ModeComparisonSummary &summary)
{
    std::set<QString> names;
    for (const ModeRunSummary &run : summary.runs)
        for (const auto &entry : run.metrics)
            names.insert(entry.first);
    return {names.begin(), names.end()};
}

QString heldOutMetric(const ModeComparisonSummary &summary)
{
    // Held-out loss first: it keeps telling the modes apart after accuracy
    // has saturated (on the staleness workload every mode ends near accuracy
    // 1, while async's held-out loss is ten times sync's).
    const QStringList names = heldOutMetricNames(summary);
    for (const char *preferred : {"heldout_loss", "heldout_accuracy"})
        if (names.contains(QLatin1String(preferred)))
            return QLatin1String(preferred);
    return names.isEmpty() ? QString() : names.front();
}

bool higherIsBetter(const QString &metric)
{
    return metric.endsWith(QLatin1String("accuracy")) || metric.endsWith(QLatin1String("auc"));
}

QString metricText(const QString &metric)
{
    return QString(metric)
        .replace(QLatin1Char('_'), QLatin1Char(' '))
        .replace(QLatin1String("heldout"), QLatin1String("held-out"));
}

QColor modeRunColor(const std::vector<ModeRunSummary> &runs, size_t run)
{
    const UpdateModeInfo *info = findUpdateMode(runs[run].mode.mode());
    if (!info)
        return runColor(int(run));
    // By contender, not by run: the seeds of one contender share its colour.
    std::set<QString> sameModeBefore;
    for (size_t i = 0; i < run; ++i) {
        if (!runs[run].name.isEmpty() && runs[i].name == runs[run].name)
            return modeRunColor(runs, i);
        if (runs[i].mode.mode() == runs[run].mode.mode())
            sameModeBefore.insert(runs[i].name);
    }
    const QColor color = QColor::fromRgb(QRgb(info->rgb));
    switch (sameModeBefore.size() % 4) {
    case 0: return color;
    case 1: return color.darker(160);
    case 2: return color.lighter(150);
    default: return color.darker(250);
    }
}

QString modeRunLabel(const ModeRunSummary &run)
{
    return run.mode.mode() == proto::UPDATE_MODE_UNSPECIFIED ? run.name : shortModeLabel(run.mode);
}

QString contenderLabel(const ModeComparisonSummary &summary, const ContenderSpread &contender)
{
    return modeRunLabel(summary.runs[contender.runs.front()]);
}

QString workerRateSpread(const ModeRunSummary &run)
{
    if (run.workers.empty())
        return QStringLiteral("–");
    const auto [slowest, fastest] = std::minmax_element(
        run.workers.begin(), run.workers.end(),
        [](const WorkerStepFigures &a, const WorkerStepFigures &b) { return a.stepsPerSecond < b.stepsPerSecond; });
    return QStringLiteral("%1-%2").arg(slowest->stepsPerSecond, 0, 'f', 1).arg(fastest->stepsPerSecond, 0, 'f', 1);
}

QString medianWaitingText(const ModeRunSummary &run)
{
    if (run.workers.empty())
        return QStringLiteral("–");
    std::vector<double> waits;
    for (const WorkerStepFigures &worker : run.workers)
        waits.push_back(worker.waitFraction);
    std::sort(waits.begin(), waits.end());
    return QStringLiteral("%1 %").arg(100 * waits[waits.size() / 2], 0, 'f', 0);
}

// ---------------------------------------------------------------------------

ModeComparisonChart::ModeComparisonChart(QWidget *parent) : ChartWidget(parent) {}

void ModeComparisonChart::setSummary(std::shared_ptr<const ModeComparisonSummary> summary)
{
    m_summary = std::move(summary);
    summaryChanged();
    markDirty();
}

// ---------------------------------------------------------------------------

ModeLossChart::ModeLossChart(Axis axis, QWidget *parent)
    : ModeComparisonChart(parent)
    , m_axis(axis)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_xAxis(new QValueAxis)
    , m_yAxis(new QLogValueAxis)
    , m_target(new QLineSeries)
{
    styleChart(m_chart, title());
    m_xAxis->setTitleText(axis == Axis::WallTime ? tr("seconds since the run's first step") : tr("global step"));
    m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    m_yAxis->setTitleText(tr("chief's full-shard loss (log scale)"));
    m_yAxis->setLabelFormat(QStringLiteral("%.3g"));
    m_yAxis->setBase(10);
    addAxes(m_chart, m_xAxis, m_yAxis);
    QPen targetPen(QColor(0x55, 0x55, 0x55), 1.5, Qt::DashLine);
    m_target->setPen(targetPen);
    addSeries(m_chart, m_target, m_xAxis, m_yAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view, shownOnceARunEnds(title(), this));
}

QString ModeLossChart::exportName() const
{
    return m_axis == Axis::WallTime ? QStringLiteral("mode_loss_by_time") : QStringLiteral("mode_loss_by_step");
}

QString ModeLossChart::title() const
{
    return m_axis == Axis::WallTime ? tr("Loss by wall time") : tr("Loss by global step");
}

void ModeLossChart::rebuild()
{
    const std::vector<ContenderSpread> contenders
        = m_summary ? contenderSpreads(*m_summary) : std::vector<ContenderSpread>{};
    showData(!contenders.empty());
    while (m_reached.size() < contenders.size()) {
        auto *reached = new QScatterSeries;
        reached->setMarkerSize(11);
        addSeries(m_chart, reached, m_xAxis, m_yAxis);
        hideFromLegend(m_chart, reached);
        m_reached.push_back(reached);
    }
    while (m_reached.size() > contenders.size()) {
        m_chart->removeSeries(m_reached.back());
        delete m_reached.back();
        m_reached.pop_back();
    }
    std::vector<ContenderLine> lines;
    for (size_t c = 0; c < contenders.size(); ++c) {
        std::vector<std::vector<std::pair<double, double>>> series;
        QList<QPointF> reached;
        for (const size_t index : contenders[c].runs) {
            const ModeRunSummary &run = m_summary->runs[index];
            auto &points = series.emplace_back();
            for (const LossPoint &p : run.loss) {
                if (!(p.loss > 0))
                    continue; // the log axis
                const double x = m_axis == Axis::WallTime ? p.seconds : double(p.globalStep);
                points.emplace_back(x, p.loss);
                // A dot where a single run first reached the target; over
                // seeds the time-to-target panel gives the spread instead.
                if (contenders[c].runs.size() == 1 && reached.isEmpty() && run.secondsToTarget
                    && p.globalStep == run.globalStepAtTarget && std::abs(p.seconds - *run.secondsToTarget) < 1e-9)
                    reached.append(QPointF(x, p.loss));
            }
        }
        const QColor color = modeRunColor(m_summary->runs, contenders[c].runs.front());
        lines.push_back(
            {contenderLabel(*m_summary, contenders[c]), color, spreadCurve(series), contenders[c].runs.size() > 1});
        m_reached[c]->setColor(color);
        m_reached[c]->setBorderColor(Qt::white);
        m_reached[c]->replace(reached);
    }
    const Extent extent = drawContenderLines(m_chart, m_lines, m_bands, lines, m_xAxis, m_yAxis, true);
    const double target = m_summary ? m_summary->targetLoss : 0;
    m_target->setName(tr("target %1").arg(lossText(target)));
    const double xMax = extent.xMax > 0 ? extent.xMax : 1;
    m_target->replace({QPointF(0, target), QPointF(xMax, target)});
    setRoundRange(m_xAxis, 0, xMax);
    // Runs of a few seconds get ticks at tenths.
    m_xAxis->setLabelFormat(m_axis == Axis::WallTime && xMax < 5 ? QStringLiteral("%.1f") : QStringLiteral("%.0f"));
    if (extent.yMax > 0)
        setLogRange(m_yAxis, std::min(extent.yMin, target) / 1.5, std::max(extent.yMax, target) * 1.5);
}

CsvTable ModeLossChart::csv() const
{
    CsvTable table;
    table.header
        = {QStringLiteral("mode"),
           m_axis == Axis::WallTime ? QStringLiteral("seconds_since_first_step") : QStringLiteral("global_step"),
           QStringLiteral("full_loss")};
    if (!m_summary)
        return table;
    for (const ModeRunSummary &run : m_summary->runs)
        for (const LossPoint &p : run.loss)
            table.rows.push_back(
                {modeRunLabel(run),
                 m_axis == Axis::WallTime ? QString::number(p.seconds, 'f', 3) : QString::number(p.globalStep),
                 QString::number(p.loss, 'g', 8)});
    return table;
}

int ModeLossChart::pointCount() const
{
    return pointsOf(m_lines);
}

// ---------------------------------------------------------------------------

ModeHeldOutChart::ModeHeldOutChart(Axis axis, QWidget *parent)
    : ModeComparisonChart(parent)
    , m_axis(axis)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_placeholder(shownOnceARunEnds(title(), this))
    , m_xAxis(new QValueAxis)
    , m_yAxis(new QLogValueAxis)
{
    styleChart(m_chart, title());
    m_xAxis->setTitleText(axis == Axis::WallTime ? tr("seconds since the run's first step") : tr("global step"));
    m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    m_yAxis->setLabelFormat(QStringLiteral("%.3g"));
    m_yAxis->setBase(10);
    addAxes(m_chart, m_xAxis, m_yAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view, m_placeholder);
}

QString ModeHeldOutChart::title() const
{
    return m_axis == Axis::WallTime ? tr("What the model learned: held-out data by wall time")
                                    : tr("What an update was worth: held-out data by global step");
}

QString ModeHeldOutChart::metric() const
{
    if (!m_summary)
        return {};
    if (!m_chosen.isEmpty() && heldOutMetricNames(*m_summary).contains(m_chosen))
        return m_chosen;
    return heldOutMetric(*m_summary);
}

void ModeHeldOutChart::setMetric(const QString &metric)
{
    m_chosen = metric;
    markDirty();
}

void ModeHeldOutChart::rebuild()
{
    const QString name = metric();
    const std::vector<ContenderSpread> contenders
        = m_summary && !name.isEmpty() ? contenderSpreads(*m_summary) : std::vector<ContenderSpread>{};
    if (m_summary && !m_summary->runs.empty() && name.isEmpty())
        m_placeholder->setText(tr("No held-out data in these runs: give the chief some (--eval_fraction=0.2, or "
                                  "--eval_dataset) to see what each mode's model learned, beside how fast it "
                                  "trained"));
    showData(!contenders.empty());
    std::vector<ContenderLine> lines;
    for (const ContenderSpread &contender : contenders) {
        std::vector<std::vector<std::pair<double, double>>> series;
        for (const size_t index : contender.runs) {
            const ModeRunSummary &run = m_summary->runs[index];
            auto &points = series.emplace_back();
            const auto it = run.metrics.find(name);
            if (it == run.metrics.end())
                continue;
            for (const MetricPoint &p : it->second)
                if (std::isfinite(p.value) && p.value > 0) // the log axis
                    points.emplace_back(m_axis == Axis::WallTime ? p.seconds : double(p.globalStep), p.value);
        }
        lines.push_back({contenderLabel(*m_summary, contender), modeRunColor(m_summary->runs, contender.runs.front()),
                         spreadCurve(series), contender.runs.size() > 1});
    }
    const Extent extent = drawContenderLines(m_chart, m_lines, m_bands, lines, m_xAxis, m_yAxis, true);
    m_yAxis->setTitleText(tr("%1 (log scale)").arg(metricText(name)));
    setRoundRange(m_xAxis, 0, extent.xMax > 0 ? extent.xMax : 1);
    if (extent.yMax >= extent.yMin)
        setLogRange(m_yAxis, extent.yMin / 1.5, extent.yMax * 1.5);
}

CsvTable ModeHeldOutChart::csv() const
{
    CsvTable table;
    const QString name = metric();
    table.header = {QStringLiteral("mode"), QStringLiteral("seconds_since_first_step"), QStringLiteral("global_step"),
                    name.isEmpty() ? QStringLiteral("heldout") : name};
    if (!m_summary || name.isEmpty())
        return table;
    for (const ModeRunSummary &run : m_summary->runs) {
        const auto it = run.metrics.find(name);
        if (it == run.metrics.end())
            continue;
        for (const MetricPoint &p : it->second)
            table.rows.push_back({run.name, QString::number(p.seconds, 'f', 3), QString::number(p.globalStep),
                                  QString::number(p.value, 'g', 8)});
    }
    return table;
}

int ModeHeldOutChart::pointCount() const
{
    return pointsOf(m_lines);
}

// ---------------------------------------------------------------------------

ModeStalenessChart::ModeStalenessChart(QWidget *parent)
    : ModeComparisonChart(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_xAxis(new QValueAxis)
    , m_yAxis(new QValueAxis)
{
    styleChart(m_chart, title());
    m_xAxis->setTitleText(tr("staleness (global steps between read and apply)"));
    m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    m_yAxis->setTitleText(tr("% of applied gradients at or below"));
    m_yAxis->setLabelFormat(QStringLiteral("%.0f"));
    addAxes(m_chart, m_xAxis, m_yAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view, shownOnceARunEnds(title(), this));
}

QString ModeStalenessChart::title() const
{
    return tr("How stale the applied gradients were");
}

void ModeStalenessChart::rebuild()
{
    // Over seeds, a contender's gradients of every run pooled: one curve.
    const std::vector<ContenderSpread> contenders
        = m_summary ? contenderSpreads(*m_summary) : std::vector<ContenderSpread>{};
    bool any = false;
    int64_t xMax = 1;
    for (const ContenderSpread &contender : contenders) {
        any = any || contender.staleness.gradients > 0;
        xMax = std::max(xMax, contender.staleness.max);
    }
    showData(any);
    keepOneLinePerRun(m_chart, m_lines, contenders.size(), m_xAxis, m_yAxis);
    for (size_t i = 0; i < contenders.size(); ++i) {
        const StalenessFigures &staleness = contenders[i].staleness;
        // A step line: flat between the stalenesses seen, rising at each.
        QList<QPointF> points;
        double share = 0;
        for (const auto &[value, count] : staleness.counts) {
            points.append(QPointF(double(value), share));
            share += 100.0 * double(count) / double(staleness.gradients);
            points.append(QPointF(double(value), share));
        }
        if (!points.isEmpty())
            points.append(QPointF(double(xMax), 100.0));
        // The table has the medians and maxima.
        m_lines[i]->setName(contenderLabel(*m_summary, contenders[i]));
        m_lines[i]->setPen(QPen(modeRunColor(m_summary->runs, contenders[i].runs.front()), 2));
        m_lines[i]->replace(points);
    }
    setRoundRange(m_xAxis, 0, double(xMax));
    m_yAxis->setRange(0, 100);
}

CsvTable ModeStalenessChart::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("mode"), QStringLiteral("staleness"), QStringLiteral("gradients"),
                    QStringLiteral("share_at_or_below")};
    if (!m_summary)
        return table;
    for (const ModeRunSummary &run : m_summary->runs) {
        int64_t seen = 0;
        for (const auto &[value, count] : run.staleness.counts) {
            seen += count;
            table.rows.push_back({run.name, QString::number(value), QString::number(count),
                                  QString::number(double(seen) / double(run.staleness.gradients), 'f', 6)});
        }
    }
    return table;
}

int ModeStalenessChart::pointCount() const
{
    return pointsOf(m_lines);
}

// ---------------------------------------------------------------------------

ModeBarChart::ModeBarChart(Figure figure, QWidget *parent)
    : ModeComparisonChart(parent)
    , m_figure(figure)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_categoryAxis(new QBarCategoryAxis)
    , m_valueAxis(new QValueAxis)
{
    styleChart(m_chart, title());
    // The time to the target has one bar per mode: stacked sets, each zero
    // but in its own mode's column, give every bar its mode's colour.
    if (figure == Figure::TimeToTarget)
        m_bars = new QStackedBarSeries;
    else
        m_bars = new QBarSeries;
    addAxes(m_chart, m_categoryAxis, m_valueAxis);
    addSeries(m_chart, m_bars, m_categoryAxis, m_valueAxis);
    switch (figure) {
    case Figure::TimeToTarget:
        m_categoryAxis->setTitleText(tr("update mode"));
        m_valueAxis->setTitleText(tr("seconds from the first step"));
        m_chart->legend()->hide(); // the categories name the modes
        break;
    case Figure::WorkerStepsPerSecond:
        m_categoryAxis->setTitleText(tr("worker"));
        m_valueAxis->setTitleText(tr("steps per second"));
        break;
    case Figure::WorkerWaitFraction:
        m_categoryAxis->setTitleText(tr("worker"));
        m_valueAxis->setTitleText(tr("% of its step time spent waiting"));
        break;
    }
    if (figure != Figure::TimeToTarget) {
        // Shown while they fit (see rebuild); the table has every number.
        m_bars->setLabelsVisible(true);
        m_bars->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
        m_bars->setLabelsFormat(QStringLiteral("@value"));
        m_bars->setLabelsPrecision(3);
    }
    setChartView(m_view, shownOnceARunEnds(title(), this));
}

QString ModeBarChart::exportName() const
{
    switch (m_figure) {
    case Figure::TimeToTarget: return QStringLiteral("mode_time_to_target");
    case Figure::WorkerStepsPerSecond: return QStringLiteral("mode_worker_steps_per_second");
    case Figure::WorkerWaitFraction: return QStringLiteral("mode_worker_wait_fraction");
    }
    return {};
}

QString ModeBarChart::title() const
{
    switch (m_figure) {
    case Figure::TimeToTarget:
        return m_summary ? tr("Time to a full loss of %1").arg(lossText(m_summary->targetLoss))
                         : tr("Time to the target loss");
    case Figure::WorkerStepsPerSecond: return tr("Steps per second by worker");
    case Figure::WorkerWaitFraction: return tr("Waiting by worker");
    }
    return {};
}

void ModeBarChart::summaryChanged()
{
    m_chart->setTitle(title());
}

ModeBarChart::Table ModeBarChart::table() const
{
    Table result;
    if (!m_summary)
        return result;
    // One bar per contender: a run's figure, or over seeds the median (the
    // range in the label under it and in the figure's table).
    const std::vector<ContenderSpread> contenders = contenderSpreads(*m_summary);
    for (const ContenderSpread &contender : contenders)
        result.colors.push_back(modeRunColor(m_summary->runs, contender.runs.front()));
    if (m_figure == Figure::TimeToTarget) {
        for (size_t i = 0; i < contenders.size(); ++i) {
            const ContenderSpread &c = contenders[i];
            const QString label = modeRunLabel(m_summary->runs[c.runs.front()]);
            // Axis labels are HTML: the time under the mode's name.
            result.categories << QStringLiteral("%1<br>%2")
                                     .arg(label, c.runs.size() > 1 ? timeSpreadText(c.secondsToTarget)
                                                                   : timeToTargetText(m_summary->runs[c.runs.front()]));
            std::vector<double> values(contenders.size(), 0);
            values[i] = c.secondsToTarget.any() ? c.secondsToTarget.median : 0;
            result.sets.emplace_back(label, std::move(values));
        }
        return result;
    }
    const std::vector<int> workers = workerIndices(*m_summary);
    for (const int index : workers)
        result.categories << workerName(index);
    for (const ContenderSpread &c : contenders) {
        std::vector<double> values;
        const auto &figures = m_figure == Figure::WorkerStepsPerSecond ? c.workerStepsPerSecond : c.workerWaitFraction;
        for (const int index : workers) {
            const auto it = figures.find(index);
            const double value = it == figures.end() || !it->second.any() ? 0 : it->second.median;
            values.push_back(m_figure == Figure::WorkerStepsPerSecond ? value : 100 * value);
        }
        result.sets.emplace_back(contenderLabel(*m_summary, c), std::move(values));
    }
    return result;
}

void ModeBarChart::rebuild()
{
    const Table data = table();
    showData(!data.sets.empty());
    m_bars->clear();
    m_categoryAxis->clear();
    m_categoryAxis->append(data.categories);
    double maxValue = 0;
    for (size_t i = 0; i < data.sets.size(); ++i) {
        QBarSet *set = newBarSet(data.sets[i].first, data.colors[i], data.sets[i].second);
        set->setLabelColor(QColor(0x30, 0x30, 0x30));
        m_bars->append(set);
        for (const double v : data.sets[i].second)
            maxValue = std::max(maxValue, v);
    }
    // A number over each bar reads up to a dozen or so bars; past that (16
    // workers, five runs) the labels pile into one another.
    if (m_figure != Figure::TimeToTarget)
        m_bars->setLabelsVisible(data.sets.size() * size_t(data.categories.size()) <= kLabelledBarsAtMost);
    if (m_figure == Figure::WorkerWaitFraction)
        setRoundRange(m_valueAxis, 0, std::min(100.0, std::max(5.0, maxValue * 1.15)), 6);
    else
        setRoundRange(m_valueAxis, 0, std::max(1.0, maxValue * 1.15), 6);
}

CsvTable ModeBarChart::csv() const
{
    CsvTable result;
    result.header = {QStringLiteral("mode"),
                     m_figure == Figure::TimeToTarget ? QStringLiteral("reached") : QStringLiteral("worker"),
                     QStringLiteral("value")};
    if (!m_summary)
        return result;
    if (m_figure == Figure::TimeToTarget) {
        // Every run, each seed its own row: the bars' medians come from these.
        result.header << QStringLiteral("seed");
        for (const ModeRunSummary &run : m_summary->runs)
            result.rows.push_back({modeRunLabel(run),
                                   run.secondsToTarget ? QStringLiteral("yes") : QStringLiteral("no"),
                                   run.secondsToTarget ? QString::number(*run.secondsToTarget, 'f', 3) : QString(),
                                   QString::number(run.seed)});
        return result;
    }
    const Table data = table();
    for (const auto &[name, values] : data.sets)
        for (size_t i = 0; i < values.size() && i < size_t(data.categories.size()); ++i)
            result.rows.push_back({name, data.categories[qsizetype(i)], QString::number(values[i], 'g', 6)});
    return result;
}

int ModeBarChart::pointCount() const
{
    return barCount(m_bars);
}

} // namespace parasync::ui
