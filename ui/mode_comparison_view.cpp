#include "ui/mode_comparison_view.h"

#include "base/qt_text.h"
#include "config/node_options.h"
#include "ui/chart_exporter.h"
#include "ui/chart_setup.h"
#include "ui/models/chart_style.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFontMetricsF>
#include <QGridLayout>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace parasync::ui {

namespace {

// Bars drawn with their value above them, at most (ModeBarChart).
constexpr size_t kLabelledBarsAtMost = 16;

QString seconds(double value)
{
    return QObject::tr("%1 s").arg(value, 0, 'f', value < 10 ? 1 : 0);
}

QString lossText(double value)
{
    return std::isfinite(value) ? QString::number(value, 'g', 3) : QStringLiteral("–");
}

// Every worker index any run has, in order.
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

// A failure with the task's last output lines, as one CSV cell a
// spreadsheet shows on one line.
QString oneLine(const QString &text)
{
    QStringList lines = text.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    for (QString &line : lines)
        line = line.trimmed();
    return lines.join(QStringLiteral(" / "));
}

QString timeToTargetText(const ModeRunSummary &run)
{
    if (!run.failure.isEmpty() && run.loss.empty())
        return QObject::tr("failed");
    return run.secondsToTarget ? seconds(*run.secondsToTarget) : QObject::tr("not reached");
}

// An empty chart's axes and stray titles say nothing: a grey line instead.
QLabel *shownOnceARunEnds(const QString &title, QWidget *parent)
{
    auto *placeholder
        = new QLabel(QObject::tr("%1: drawn as soon as the first run has logged its steps").arg(title), parent);
    placeholder->setWordWrap(true);
    return placeholder;
}

// The held-out metric the figure and the verdict speak of: held-out loss
// where a run logged it -- it keeps telling the modes apart after accuracy
// has saturated (on the staleness workload every mode ends near accuracy 1,
// while async's held-out loss is ten times sync's) -- else accuracy, else
// the first metric there is; empty when none.
QString heldOutMetric(const ModeComparisonSummary &summary)
{
    QString fallback;
    for (const ModeRunSummary &run : summary.runs) {
        if (run.metrics.count(QStringLiteral("heldout_loss")))
            return QStringLiteral("heldout_loss");
        if (fallback.isEmpty() && !run.metrics.empty())
            fallback = run.metrics.count(QStringLiteral("heldout_accuracy")) ? QStringLiteral("heldout_accuracy")
                                                                             : run.metrics.begin()->first;
    }
    return fallback;
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

} // namespace

QString modeRunLabel(const ModeRunSummary &run)
{
    return run.mode.mode() == proto::UPDATE_MODE_UNSPECIFIED ? run.name : shortModeLabel(run.mode);
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

ModeLossChart::ModeLossChart(Axis axis, QWidget *parent)
    : ChartWidget(parent)
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

void ModeLossChart::setSummary(std::shared_ptr<const ModeComparisonSummary> summary)
{
    m_summary = std::move(summary);
    markDirty();
}

void ModeLossChart::rebuild()
{
    const size_t runs = m_summary ? m_summary->runs.size() : 0;
    showData(runs > 0);
    while (m_lines.size() < runs) {
        auto *line = new QLineSeries;
        auto *reached = new QScatterSeries;
        reached->setMarkerSize(11);
        for (QAbstractSeries *series : {static_cast<QAbstractSeries *>(line), static_cast<QAbstractSeries *>(reached)})
            addSeries(m_chart, series, m_xAxis, m_yAxis);
        hideFromLegend(m_chart, reached);
        m_lines.push_back(line);
        m_reached.push_back(reached);
    }
    while (m_lines.size() > runs) {
        m_chart->removeSeries(m_lines.back());
        m_chart->removeSeries(m_reached.back());
        delete m_lines.back();
        delete m_reached.back();
        m_lines.pop_back();
        m_reached.pop_back();
    }
    double xMax = 0;
    double yMin = std::numeric_limits<double>::max(), yMax = 0;
    for (size_t i = 0; i < runs; ++i) {
        const ModeRunSummary &run = m_summary->runs[i];
        QList<QPointF> points;
        points.reserve(qsizetype(run.loss.size()));
        QList<QPointF> reached;
        for (const LossPoint &p : run.loss) {
            if (!(p.loss > 0))
                continue; // the log axis
            const double x = m_axis == Axis::WallTime ? p.seconds : double(p.globalStep);
            points.append(QPointF(x, p.loss));
            xMax = std::max(xMax, x);
            yMin = std::min(yMin, p.loss);
            yMax = std::max(yMax, p.loss);
            if (reached.isEmpty() && run.secondsToTarget && p.globalStep == run.globalStepAtTarget
                && std::abs(p.seconds - *run.secondsToTarget) < 1e-9)
                reached.append(QPointF(x, p.loss));
        }
        m_lines[i]->setName(modeRunLabel(run));
        m_lines[i]->setPen(QPen(runColor(int(i)), 2));
        m_lines[i]->replace(points);
        m_reached[i]->setColor(runColor(int(i)));
        m_reached[i]->setBorderColor(Qt::white);
        m_reached[i]->replace(reached);
    }
    const double target = m_summary ? m_summary->targetLoss : 0;
    m_target->setName(tr("target %1").arg(lossText(target)));
    if (xMax <= 0)
        xMax = 1;
    m_target->replace({QPointF(0, target), QPointF(xMax, target)});
    setRoundRange(m_xAxis, 0, xMax);
    // Runs of a few seconds get ticks at tenths.
    m_xAxis->setLabelFormat(m_axis == Axis::WallTime && xMax < 5 ? QStringLiteral("%.1f") : QStringLiteral("%.0f"));
    if (yMax > 0) {
        yMin = std::min(yMin, target);
        yMax = std::max(yMax, target);
        setLogRange(m_yAxis, yMin / 1.5, yMax * 1.5);
    }
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
    int count = 0;
    for (const QLineSeries *line : m_lines)
        count += int(line->count());
    return count;
}

// ---------------------------------------------------------------------------

ModeHeldOutChart::ModeHeldOutChart(QWidget *parent)
    : ChartWidget(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_placeholder(shownOnceARunEnds(title(), this))
    , m_xAxis(new QValueAxis)
    , m_yAxis(new QLogValueAxis)
{
    styleChart(m_chart, title());
    // By wall time: a sync step averages many gradients, an async one is
    // one, so what the runs learned compares at equal time, not equal steps.
    m_xAxis->setTitleText(tr("seconds since the run's first step"));
    m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    m_yAxis->setLabelFormat(QStringLiteral("%.3g"));
    m_yAxis->setBase(10);
    addAxes(m_chart, m_xAxis, m_yAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view, m_placeholder);
}

QString ModeHeldOutChart::title() const
{
    return tr("What the model learned: held-out data by wall time");
}

QString ModeHeldOutChart::metric() const
{
    return m_summary ? heldOutMetric(*m_summary) : QString();
}

void ModeHeldOutChart::setSummary(std::shared_ptr<const ModeComparisonSummary> summary)
{
    m_summary = std::move(summary);
    markDirty();
}

void ModeHeldOutChart::rebuild()
{
    const QString name = metric();
    const size_t runs = m_summary && !name.isEmpty() ? m_summary->runs.size() : 0;
    if (m_summary && !m_summary->runs.empty() && name.isEmpty())
        m_placeholder->setText(tr("No held-out data in these runs: give the chief some (--eval_fraction=0.2, or "
                                  "--eval_dataset) to see what each mode's model learned, beside how fast it "
                                  "trained"));
    showData(runs > 0);
    while (m_lines.size() < runs) {
        auto *line = new QLineSeries;
        addSeries(m_chart, line, m_xAxis, m_yAxis);
        m_lines.push_back(line);
    }
    while (m_lines.size() > runs) {
        m_chart->removeSeries(m_lines.back());
        delete m_lines.back();
        m_lines.pop_back();
    }
    double xMax = 0;
    double yMin = std::numeric_limits<double>::max(), yMax = std::numeric_limits<double>::lowest();
    for (size_t i = 0; i < runs; ++i) {
        const ModeRunSummary &run = m_summary->runs[i];
        QList<QPointF> points;
        const auto it = run.metrics.find(name);
        if (it != run.metrics.end()) {
            for (const MetricPoint &p : it->second) {
                if (!std::isfinite(p.value) || !(p.value > 0))
                    continue; // the log axis
                points.append(QPointF(p.seconds, p.value));
                xMax = std::max(xMax, p.seconds);
                yMin = std::min(yMin, p.value);
                yMax = std::max(yMax, p.value);
            }
        }
        m_lines[i]->setName(modeRunLabel(run));
        m_lines[i]->setPen(QPen(runColor(int(i)), 2));
        m_lines[i]->replace(points);
    }
    m_yAxis->setTitleText(tr("%1 (log scale)").arg(metricText(name)));
    setRoundRange(m_xAxis, 0, xMax > 0 ? xMax : 1);
    if (yMax >= yMin)
        setLogRange(m_yAxis, yMin / 1.5, yMax * 1.5);
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
    int count = 0;
    for (const QLineSeries *line : m_lines)
        count += int(line->count());
    return count;
}

// ---------------------------------------------------------------------------

ModeStalenessChart::ModeStalenessChart(QWidget *parent)
    : ChartWidget(parent)
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

void ModeStalenessChart::setSummary(std::shared_ptr<const ModeComparisonSummary> summary)
{
    m_summary = std::move(summary);
    markDirty();
}

void ModeStalenessChart::rebuild()
{
    const size_t runs = m_summary ? m_summary->runs.size() : 0;
    bool any = false;
    for (size_t i = 0; i < runs; ++i)
        any = any || m_summary->runs[i].staleness.gradients > 0;
    showData(any);
    while (m_lines.size() < runs) {
        auto *line = new QLineSeries;
        addSeries(m_chart, line, m_xAxis, m_yAxis);
        m_lines.push_back(line);
    }
    while (m_lines.size() > runs) {
        m_chart->removeSeries(m_lines.back());
        delete m_lines.back();
        m_lines.pop_back();
    }
    int64_t xMax = 1;
    for (size_t i = 0; i < runs; ++i)
        xMax = std::max(xMax, m_summary->runs[i].staleness.max);
    for (size_t i = 0; i < runs; ++i) {
        const ModeRunSummary &run = m_summary->runs[i];
        const StalenessFigures &staleness = run.staleness;
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
        m_lines[i]->setName(modeRunLabel(run)); // the table has the medians and maxima
        m_lines[i]->setPen(QPen(runColor(int(i)), 2));
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
    int count = 0;
    for (const QLineSeries *line : m_lines)
        count += int(line->count());
    return count;
}

// ---------------------------------------------------------------------------

ModeBarChart::ModeBarChart(Figure figure, QWidget *parent)
    : ChartWidget(parent)
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

void ModeBarChart::setSummary(std::shared_ptr<const ModeComparisonSummary> summary)
{
    m_summary = std::move(summary);
    m_chart->setTitle(title());
    markDirty();
}

ModeBarChart::Table ModeBarChart::table() const
{
    Table result;
    if (!m_summary)
        return result;
    const auto &runs = m_summary->runs;
    if (m_figure == Figure::TimeToTarget) {
        for (size_t i = 0; i < runs.size(); ++i) {
            // Axis labels are HTML: the time under the mode's name.
            result.categories << QStringLiteral("%1<br>%2").arg(modeRunLabel(runs[i]), timeToTargetText(runs[i]));
            std::vector<double> values(runs.size(), 0);
            values[i] = runs[i].secondsToTarget.value_or(0);
            result.sets.emplace_back(modeRunLabel(runs[i]), std::move(values));
        }
        return result;
    }
    const std::vector<int> workers = workerIndices(*m_summary);
    for (const int index : workers)
        result.categories << workerName(index);
    for (const ModeRunSummary &run : runs) {
        std::vector<double> values;
        for (const int index : workers) {
            const WorkerStepFigures *worker = workerOf(run, index);
            if (!worker)
                values.push_back(0);
            else if (m_figure == Figure::WorkerStepsPerSecond)
                values.push_back(worker->stepsPerSecond);
            else
                values.push_back(100 * worker->waitFraction);
        }
        result.sets.emplace_back(modeRunLabel(run), std::move(values));
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
        QBarSet *set = newBarSet(data.sets[i].first, runColor(int(i)), data.sets[i].second);
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
        for (const ModeRunSummary &run : m_summary->runs)
            result.rows.push_back({modeRunLabel(run),
                                   run.secondsToTarget ? QStringLiteral("yes") : QStringLiteral("no"),
                                   run.secondsToTarget ? QString::number(*run.secondsToTarget, 'f', 3) : QString()});
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

// ---------------------------------------------------------------------------

ModeSummaryTable::ModeSummaryTable(QWidget *parent) : QWidget(parent)
{
    setMinimumSize(300, 220);
}

QString ModeSummaryTable::title() const
{
    return tr("The numbers");
}

void ModeSummaryTable::setSummary(std::shared_ptr<const ModeComparisonSummary> summary)
{
    m_summary = std::move(summary);
    update();
}

CsvTable ModeSummaryTable::csv() const
{
    CsvTable table;
    if (!m_summary)
        return table;
    table.header << QString();
    for (const ModeRunSummary &run : m_summary->runs)
        table.header << modeRunLabel(run);
    const auto row = [&](const QString &name, const auto &cell) {
        QStringList fields{name};
        for (const ModeRunSummary &run : m_summary->runs)
            fields << cell(run);
        table.rows.push_back(fields);
    };
    row(tr("time to target"), [](const ModeRunSummary &run) { return timeToTargetText(run); });
    row(tr("at global step"), [](const ModeRunSummary &run) {
        return run.secondsToTarget ? QString::number(run.globalStepAtTarget) : QStringLiteral("–");
    });
    row(tr("final full loss"), [](const ModeRunSummary &run) { return lossText(run.finalLoss); });
    // What the pace cost: the held-out metrics and the staleness behind them.
    std::set<QString> metrics;
    for (const ModeRunSummary &run : m_summary->runs)
        for (const auto &entry : run.metrics)
            metrics.insert(entry.first);
    for (const QString &metric : metrics)
        row(tr("final %1").arg(metricText(metric)),
            [&metric](const ModeRunSummary &run) { return lossText(run.finalMetric(metric)); });
    row(tr("staleness median/p90/max"), [](const ModeRunSummary &run) {
        const StalenessFigures &staleness = run.staleness;
        return staleness.gradients == 0 ? QStringLiteral("–")
                                        : QStringLiteral("%1 / %2 / %3")
                                              .arg(staleness.quantile(0.5))
                                              .arg(staleness.quantile(0.9))
                                              .arg(staleness.max);
    });
    row(tr("global steps/s"),
        [](const ModeRunSummary &run) { return QString::number(run.globalStepsPerSecond, 'f', 1); });
    const std::vector<int> workers = workerIndices(*m_summary);
    if (workers.size() > kWorkersNamedAtMost) {
        row(tr("workers' steps/s"), &workerRateSpread);
        row(tr("median waiting"), &medianWaitingText);
    }
    for (const int index : workers.size() > kWorkersNamedAtMost ? std::vector<int>() : workers) {
        row(tr("%1 steps/s").arg(workerName(index)), [index](const ModeRunSummary &run) {
            const WorkerStepFigures *worker = workerOf(run, index);
            return worker ? QString::number(worker->stepsPerSecond, 'f', 1) : QStringLiteral("–");
        });
        row(tr("%1 waiting").arg(workerName(index)), [index](const ModeRunSummary &run) {
            const WorkerStepFigures *worker = workerOf(run, index);
            return worker ? QStringLiteral("%1 %").arg(100 * worker->waitFraction, 0, 'f', 0) : QStringLiteral("–");
        });
    }
    row(tr("run length"), [](const ModeRunSummary &run) { return seconds(run.seconds); });
    row(tr("ended"), [](const ModeRunSummary &run) { return run.failure.isEmpty() ? run.stopReason : tr("failed"); });
    return table;
}

int ModeSummaryTable::pointCount() const
{
    return m_summary ? int(m_summary->runs.size()) : 0;
}

void ModeSummaryTable::renderTo(QPainter *painter, const QRectF &target)
{
    painter->save();
    painter->fillRect(target, Qt::white);
    const CsvTable table = csv();
    const double margin = 12;
    const QRectF area = target.adjusted(margin, margin, -margin, -margin);
    QFont titleFont = painter->font();
    titleFont.setBold(true);
    titleFont.setPixelSize(std::max(11, int(area.height() / 22)));
    painter->setFont(titleFont);
    painter->setPen(Qt::black);
    const double titleHeight = titleFont.pixelSize() * 1.8;
    painter->drawText(QRectF(area.left(), area.top(), area.width(), titleHeight), Qt::AlignHCenter | Qt::AlignTop,
                      title());
    if (table.rows.empty()) {
        painter->restore();
        return;
    }
    const int rows = int(table.rows.size()) + 1;
    const double rowHeight = std::min(34.0, (area.height() - titleHeight) / rows);
    const int columns = int(table.header.size());
    QFont cellFont = painter->font();
    cellFont.setBold(false);
    cellFont.setPixelSize(std::max(9, int(rowHeight * 0.5)));
    QFont headFont = cellFont;
    headFont.setBold(true);
    // The row names as wide as the longest needs, up to half the table.
    double nameWidth = 0;
    const QFontMetricsF headMetrics(headFont, painter->device());
    for (const QStringList &row : table.rows)
        nameWidth = std::max(nameWidth, headMetrics.horizontalAdvance(row.value(0)));
    const double firstColumn = std::min(area.width() * 0.5, nameWidth + 16);
    const double columnWidth = (area.width() - firstColumn) / std::max(1, columns - 1);
    double y = area.top() + titleHeight;
    for (int r = 0; r < rows; ++r) {
        const QStringList &fields = r == 0 ? table.header : table.rows[size_t(r - 1)];
        if (r % 2 == 0 && r > 0)
            painter->fillRect(QRectF(area.left(), y, area.width(), rowHeight), QColor(0xf3, 0xf3, 0xf3));
        for (int c = 0; c < columns && c < fields.size(); ++c) {
            const QRectF cell
                = c == 0 ? QRectF(area.left() + 4, y, firstColumn - 4, rowHeight)
                         : QRectF(area.left() + firstColumn + (c - 1) * columnWidth, y, columnWidth, rowHeight);
            QFont font = r == 0 || c == 0 ? headFont : cellFont;
            // A long cell ("target reached") gets a smaller font before it is cut.
            const double advance = QFontMetricsF(font, painter->device()).horizontalAdvance(fields[c]);
            if (advance > cell.width() - 6)
                font.setPixelSize(std::max(8, int(font.pixelSize() * std::max(0.7, (cell.width() - 6) / advance))));
            painter->setFont(font);
            painter->setPen(r == 0 && c > 0 ? runColor(c - 1).darker(120) : QColor(0x20, 0x20, 0x20));
            const QString text = painter->fontMetrics().elidedText(fields[c], Qt::ElideRight, int(cell.width()) - 4);
            painter->drawText(cell, (c == 0 ? Qt::AlignLeft : Qt::AlignHCenter) | Qt::AlignVCenter, text);
        }
        y += rowHeight;
        if (r == 0) {
            painter->setPen(QColor(0xa0, 0xa0, 0xa0));
            painter->drawLine(QPointF(area.left(), y), QPointF(area.right(), y));
        }
    }
    painter->restore();
}

void ModeSummaryTable::paintEvent(QPaintEvent *)
{
    QPainter painter(this);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setRenderHint(QPainter::TextAntialiasing);
    renderTo(&painter, QRectF(rect()));
}

// ---------------------------------------------------------------------------

ModeComparisonView::ModeComparisonView(QWidget *parent)
    : QWidget(parent)
    , m_heading(new QLabel(this))
    , m_byTime(new ModeLossChart(ModeLossChart::Axis::WallTime, this))
    , m_byStep(new ModeLossChart(ModeLossChart::Axis::GlobalStep, this))
    , m_heldOut(new ModeHeldOutChart(this))
    , m_staleness(new ModeStalenessChart(this))
    , m_timeToTarget(new ModeBarChart(ModeBarChart::Figure::TimeToTarget, this))
    , m_stepsPerSecond(new ModeBarChart(ModeBarChart::Figure::WorkerStepsPerSecond, this))
    , m_waitFraction(new ModeBarChart(ModeBarChart::Figure::WorkerWaitFraction, this))
    , m_table(new ModeSummaryTable(this))
{
    m_heading->setWordWrap(true);
    m_heading->setTextFormat(Qt::RichText);
    m_heading->setObjectName(QStringLiteral("modeComparisonHeading"));
    auto *grid = new QGridLayout;
    grid->setContentsMargins(0, 0, 0, 0);
    // The pace in the first row, its price in the second, the workers in the third.
    const QList<QWidget *> widgets{m_byTime,    m_byStep, m_timeToTarget,   m_heldOut,
                                   m_staleness, m_table,  m_stepsPerSecond, m_waitFraction};
    for (int i = 0; i < widgets.size(); ++i) {
        widgets[i]->setMinimumSize(320, 240);
        grid->addWidget(widgets[i], i / 3, i % 3);
        grid->setColumnStretch(i % 3, 1);
        grid->setRowStretch(i / 3, 1);
    }
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->addWidget(m_heading);
    layout->addLayout(grid, 1);
}

QList<ExportableChart *> ModeComparisonView::panels() const
{
    return {m_byTime, m_byStep, m_timeToTarget, m_heldOut, m_staleness, m_table, m_stepsPerSecond, m_waitFraction};
}

void ModeComparisonView::setSummary(const ModeComparisonSummary &summary)
{
    m_summary = std::make_shared<const ModeComparisonSummary>(summary);
    m_byTime->setSummary(m_summary);
    m_byStep->setSummary(m_summary);
    m_heldOut->setSummary(m_summary);
    m_staleness->setSummary(m_summary);
    m_timeToTarget->setSummary(m_summary);
    m_stepsPerSecond->setSummary(m_summary);
    m_waitFraction->setSummary(m_summary);
    m_table->setSummary(m_summary);
    m_heading->setText(QStringLiteral("<b>%1</b><br>%2<br>%3")
                           .arg(title().toHtmlEscaped(), m_setting.toHtmlEscaped(),
                                modeComparisonVerdict(*m_summary).toHtmlEscaped()));
}

void ModeComparisonView::setSetting(const QString &setting)
{
    m_setting = setting;
    if (m_summary)
        setSummary(*m_summary);
    else
        m_heading->setText(setting.toHtmlEscaped());
}

QString ModeComparisonView::title() const
{
    QStringList modes;
    if (m_summary)
        for (const ModeRunSummary &run : m_summary->runs)
            modes << modeRunLabel(run);
    return modes.isEmpty() ? tr("Update modes compared")
                           : tr("Update modes compared: %1, one run each").arg(modes.join(QStringLiteral(", ")));
}

void ModeComparisonView::renderTo(QPainter *painter, const QRectF &target)
{
    painter->save();
    painter->fillRect(target, Qt::white);
    painter->translate(target.topLeft());
    const QSizeF size = target.size();
    const double margin = size.width() * 0.012;
    // Text sized by the figure's width as much as its height: a taller
    // figure (more panel rows) keeps the title of a wide one.
    const double textScale = std::min(size.height(), size.width() * 1050 / 1800);
    QFont titleFont = painter->font();
    titleFont.setBold(true);
    titleFont.setPixelSize(std::max(12, int(textScale * 0.026)));
    QFont textFont = titleFont;
    textFont.setBold(false);
    textFont.setPixelSize(std::max(10, int(textScale * 0.017)));
    painter->setPen(Qt::black);
    double y = margin;
    painter->setFont(titleFont);
    const double titleHeight = titleFont.pixelSize() * 1.4;
    painter->drawText(QRectF(margin, y, size.width() - 2 * margin, titleHeight), Qt::AlignLeft | Qt::AlignVCenter,
                      title());
    y += titleHeight;
    painter->setFont(textFont);
    const double lineHeight = textFont.pixelSize() * 1.45;
    for (const QString &line : {m_setting, m_summary ? modeComparisonVerdict(*m_summary) : QString()}) {
        if (line.isEmpty())
            continue;
        painter->drawText(QRectF(margin, y, size.width() - 2 * margin, lineHeight), Qt::AlignLeft | Qt::AlignVCenter,
                          painter->fontMetrics().elidedText(line, Qt::ElideRight, int(size.width() - 2 * margin)));
        y += lineHeight;
    }
    y += margin / 2;
    // Panels laid out as for cells about 600 px wide, scaled into the cells:
    // their labels then read at any export size.
    const QList<ExportableChart *> cells = panels();
    const double gap = margin;
    const double cellWidth = (size.width() - 2 * margin - 2 * gap) / 3;
    const int rows = int((cells.size() + 2) / 3);
    const double cellHeight = (size.height() - y - margin - (rows - 1) * gap) / rows;
    const double zoom = cellWidth / 600;
    for (int i = 0; i < cells.size(); ++i) {
        const int row = i / 3; // three panels a row
        const int column = i % 3;
        const QRectF cell(margin + column * (cellWidth + gap), y + row * (cellHeight + gap), cellWidth, cellHeight);
        ChartExporter::paintScaled(painter, cells[i], cell, zoom);
        painter->setPen(QColor(0xd8, 0xd8, 0xd8));
        painter->drawRect(cell);
    }
    painter->restore();
}

CsvTable ModeComparisonView::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("mode"), QStringLiteral("seconds_since_first_step"), QStringLiteral("global_step"),
                    QStringLiteral("full_loss")};
    if (!m_summary)
        return table;
    for (const ModeRunSummary &run : m_summary->runs)
        for (const LossPoint &p : run.loss)
            table.rows.push_back({run.name, QString::number(p.seconds, 'f', 3), QString::number(p.globalStep),
                                  QString::number(p.loss, 'g', 8)});
    return table;
}

int ModeComparisonView::pointCount() const
{
    int count = 0;
    for (ExportableChart *panel : panels())
        count += panel->pointCount();
    return count;
}

// ---------------------------------------------------------------------------

QString describeComparisonSetting(const ClusterPlan &plan)
{
    // Workers grouped by pace: "worker:0 20 ms, worker:1 60 ms a step".
    std::map<std::pair<int, int>, QStringList> byPace;
    float jitter = plan.training.pace.computeJitter;
    for (int i = 0; i < plan.cluster.numWorkers(); ++i) {
        const WorkerPace pace = plan.paceOf(i);
        byPace[{pace.computeMs, pace.stragglerMs}] << workerName(i);
        jitter = std::max(jitter, pace.computeJitter);
    }
    QStringList paces;
    for (const auto &[pace, workers] : byPace) {
        const QString time = pace.first > 0 ? QObject::tr("%1 ms").arg(pace.first) : QObject::tr("full speed");
        const QString delay = pace.second > 0 ? QObject::tr(" + %1 ms delay").arg(pace.second) : QString();
        // Past a few, the workers of one pace are counted, not named.
        const QString who
            = workers.size() > 3 ? QObject::tr("%1 workers").arg(workers.size()) : workers.join(QStringLiteral(", "));
        paces << who + QLatin1Char(' ') + time + delay;
    }
    return QObject::tr("%1 ps, %2 workers; compute per step: %3 (jitter %4); %5 model, learning rate %6, batch %7, "
                       "seed %8")
        .arg(plan.cluster.numPs())
        .arg(plan.cluster.numWorkers())
        .arg(paces.join(QStringLiteral("; ")))
        .arg(double(jitter))
        .arg(QString::fromStdString(plan.training.model))
        .arg(double(plan.training.learningRate))
        .arg(plan.training.batchSize)
        .arg(plan.training.seed);
}

CsvTable modeComparisonTable(const ModeComparisonSummary &summary)
{
    CsvTable table;
    const std::vector<int> workers = workerIndices(summary);
    table.header = {QStringLiteral("mode"), QStringLiteral("target"), QStringLiteral("time_to_target_s"),
                    QStringLiteral("final_loss"), QStringLiteral("global_steps_per_s")};
    for (const int index : workers)
        table.header << QStringLiteral("worker%1_steps_per_s").arg(index)
                     << QStringLiteral("worker%1_wait_fraction").arg(index);
    table.header << QStringLiteral("staleness") << QStringLiteral("global_step_at_target")
                 << QStringLiteral("run_seconds") << QStringLiteral("ended") << QStringLiteral("failure")
                 << QStringLiteral("run_directory");
    // The price of each mode's pace: how stale its applied gradients were,
    // and what the model learned (the held-out metrics any run logged).
    table.header << QStringLiteral("mode_spec") << QStringLiteral("staleness_median") << QStringLiteral("staleness_p90")
                 << QStringLiteral("staleness_max") << QStringLiteral("staleness_mean");
    QStringList metricNames;
    for (const ModeRunSummary &run : summary.runs)
        for (const auto &entry : run.metrics)
            if (!metricNames.contains(entry.first))
                metricNames << entry.first;
    for (const QString &name : std::as_const(metricNames))
        table.header << QStringLiteral("final_") + name;
    for (const ModeRunSummary &run : summary.runs) {
        QStringList row{run.name, QString::number(summary.targetLoss, 'g', 9),
                        run.secondsToTarget ? QString::number(*run.secondsToTarget, 'f', 3) : QString(),
                        std::isfinite(run.finalLoss) ? QString::number(run.finalLoss, 'g', 6) : QString(),
                        QString::number(run.globalStepsPerSecond, 'f', 2)};
        for (const int index : workers) {
            const WorkerStepFigures *worker = workerOf(run, index);
            row << (worker ? QString::number(worker->stepsPerSecond, 'f', 2) : QString())
                << (worker ? QString::number(worker->waitFraction, 'f', 4) : QString());
        }
        row << (run.mode.mode() == proto::SSP ? QString::number(run.mode.staleness()) : QString())
            << (run.secondsToTarget ? QString::number(run.globalStepAtTarget) : QString())
            << QString::number(run.seconds, 'f', 3) << run.stopReason << oneLine(run.failure)
            << QDir::toNativeSeparators(run.directory);
        const bool hasStaleness = run.staleness.gradients > 0;
        row << (run.mode.mode() == proto::UPDATE_MODE_UNSPECIFIED ? QString() : qs(modeSpec(run.mode)))
            << (hasStaleness ? QString::number(run.staleness.quantile(0.5)) : QString())
            << (hasStaleness ? QString::number(run.staleness.quantile(0.9)) : QString())
            << (hasStaleness ? QString::number(run.staleness.max) : QString())
            << (hasStaleness ? QString::number(run.staleness.mean, 'f', 3) : QString());
        for (const QString &name : std::as_const(metricNames)) {
            const double value = run.finalMetric(name);
            row << (std::isfinite(value) ? QString::number(value, 'g', 6) : QString());
        }
        table.rows.push_back(row);
    }
    return table;
}

bool exportModeComparison(ModeComparisonView *view, const QString &directory, QStringList *written, QString *error)
{
    // The figure as the charts are exported; its CSVs are its own.
    if (!ChartExporter::exportAll({view}, directory, nullptr, written, error,
                                  ChartExporter::Png | ChartExporter::Svg | ChartExporter::Pdf))
        return false;
    if (!view->summary())
        return true;
    const QDir dir(directory);
    const auto note = [written](const QString &path) {
        if (written)
            written->append(path);
    };
    const QString table = dir.filePath(QStringLiteral("comparison.csv"));
    if (!ChartExporter::writeCsv(modeComparisonTable(*view->summary()), table, error))
        return false;
    note(table);
    const QString series = dir.filePath(QStringLiteral("mode_comparison_series.csv"));
    if (!ChartExporter::writeCsv(view->csv(), series, error))
        return false;
    note(series);
    return true;
}

QString modeComparisonVerdict(const ModeComparisonSummary &summary)
{
    std::vector<const ModeRunSummary *> reached;
    QStringList others;
    for (const ModeRunSummary &run : summary.runs) {
        if (run.secondsToTarget)
            reached.push_back(&run);
        else if (!run.failure.isEmpty())
            others << QObject::tr("%1 failed").arg(modeRunLabel(run));
        else if (run.inProgress)
            others << QObject::tr("%1 has not reached it yet (%2 so far)").arg(modeRunLabel(run), seconds(run.seconds));
        else
            others << QObject::tr("%1 did not reach it in its %2 run").arg(modeRunLabel(run), seconds(run.seconds));
    }
    std::stable_sort(reached.begin(), reached.end(), [](const ModeRunSummary *a, const ModeRunSummary *b) {
        return *a->secondsToTarget < *b->secondsToTarget;
    });
    QString text;
    if (reached.empty()) {
        text = QObject::tr("No mode reached a full loss of %1.").arg(lossText(summary.targetLoss));
    } else {
        text = QObject::tr("%1 reached a full loss of %2 first (%3)")
                   .arg(modeRunLabel(*reached.front()), lossText(summary.targetLoss),
                        seconds(*reached.front()->secondsToTarget));
        for (size_t i = 1; i < reached.size(); ++i)
            text += QObject::tr(", then %1 (%2)").arg(modeRunLabel(*reached[i]), seconds(*reached[i]->secondsToTarget));
        text += QLatin1Char('.');
    }
    if (!others.isEmpty())
        text += QLatin1Char(' ') + others.join(QStringLiteral("; ")) + QLatin1Char('.');
    // What each model learned, best first: the price of the pace above.
    const QString metric = heldOutMetric(summary);
    if (!metric.isEmpty()) {
        std::vector<std::pair<double, QString>> finals;
        for (const ModeRunSummary &run : summary.runs) {
            const double value = run.finalMetric(metric);
            if (std::isfinite(value))
                finals.emplace_back(value, modeRunLabel(run));
        }
        const bool higher = higherIsBetter(metric);
        std::stable_sort(finals.begin(), finals.end(), [higher](const auto &a, const auto &b) {
            return higher ? a.first > b.first : a.first < b.first;
        });
        QStringList parts;
        for (const auto &[value, label] : finals)
            parts << QStringLiteral("%1 %2").arg(label, QString::number(value, 'g', 3));
        if (!parts.isEmpty())
            text += QObject::tr(" Final %1, best first: %2.").arg(metricText(metric), parts.join(QStringLiteral(", ")));
    }
    if (summary.cancelled)
        text += QObject::tr(" (Cancelled before every mode ran.)");
    if (summary.runsToCome > 0)
        text = QObject::tr("So far: %1 %2 more to run.").arg(text).arg(summary.runsToCome);
    return text;
}

} // namespace parasync::ui
