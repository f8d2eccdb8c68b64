#include "ui/charts/worker_stats_view.h"

#include "ui/charts/chart_setup.h"
#include "ui/charts/staleness_cost_chart.h"
#include "ui/models/chart_style.h"
#include "ui/models/series_math.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QLabel>
#include <QValueAxis>

#include <algorithm>

namespace parasync::ui {

namespace {

// Past this many workers the staleness histogram is one set of them all.
constexpr size_t kWorkersDrawnApartAtMost = 4;
constexpr int kDefaultStalenessBins = 11;

QColor periodColor(int index)
{
    // Purples for the mode periods, distinct from the workers' colours.
    static const QColor colors[] = {QColor(0xb3, 0x9d, 0xdb), QColor(0x7e, 0x57, 0xc2), QColor(0x51, 0x2d, 0xa8),
                                    QColor(0xce, 0x93, 0xd8), QColor(0x8e, 0x24, 0xaa), QColor(0x4a, 0x14, 0x8c)};
    return colors[index % 6];
}
} // namespace

WorkerBarChart::WorkerBarChart(Figure figure, QWidget *parent)
    : RunChart(parent)
    , m_figure(figure)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_categoryAxis(new QBarCategoryAxis)
    , m_valueAxis(new QValueAxis)
    , m_bars(new QBarSeries)
{
    styleChart(m_chart, title());
    addAxes(m_chart, m_categoryAxis, m_valueAxis);
    addSeries(m_chart, m_bars, m_categoryAxis, m_valueAxis);
    switch (m_figure) {
    case Figure::StepsPerSecond:
        m_categoryAxis->setTitleText(tr("worker"));
        m_valueAxis->setTitleText(tr("steps per second"));
        break;
    case Figure::WaitFraction:
        m_categoryAxis->setTitleText(tr("worker"));
        m_valueAxis->setTitleText(tr("fraction of time waiting"));
        break;
    case Figure::DroppedGradients:
        m_categoryAxis->setTitleText(tr("worker"));
        m_valueAxis->setTitleText(tr("dropped stale gradients"));
        m_valueAxis->setLabelFormat(QStringLiteral("%.0f"));
        break;
    case Figure::StalenessHistogram:
        m_categoryAxis->setTitleText(tr("staleness (global steps)"));
        m_valueAxis->setTitleText(tr("share of gradients (%)"));
        m_valueAxis->setLabelFormat(QStringLiteral("%.0f"));
        break;
    }
    setChartView(m_view, new QLabel(tr("%1: no workers yet").arg(title()), this));
}

QString WorkerBarChart::exportName() const
{
    switch (m_figure) {
    case Figure::StepsPerSecond: return QStringLiteral("worker_steps_per_second");
    case Figure::WaitFraction: return QStringLiteral("worker_wait_fraction");
    case Figure::DroppedGradients: return QStringLiteral("worker_dropped_gradients");
    case Figure::StalenessHistogram: return QStringLiteral("staleness_histogram");
    }
    return {};
}

QString WorkerBarChart::title() const
{
    switch (m_figure) {
    case Figure::StepsPerSecond: return tr("Steps per second by worker");
    case Figure::WaitFraction: return tr("Fraction of time waiting by worker");
    case Figure::DroppedGradients: return tr("Dropped stale gradients by worker");
    case Figure::StalenessHistogram: return tr("Staleness of gradients");
    }
    return {};
}

WorkerBarChart::Table WorkerBarChart::table() const
{
    Table result;
    if (!m_snapshot || m_snapshot->workers.empty())
        return result;
    const RunSnapshot &snapshot = *m_snapshot;
    int bins = kDefaultStalenessBins;
    for (const auto &worker : snapshot.workers)
        if (!worker.stalenessHistogram.empty())
            bins = int(worker.stalenessHistogram.size());
    const std::vector<ModePeriod> periods = modePeriods(snapshot, bins);

    if (m_figure == Figure::StalenessHistogram) {
        // Shares rather than counts, so that periods of different lengths
        // compare: per mode period (all workers) when the mode changed, per
        // worker otherwise.
        const auto share = [](std::vector<double> values) {
            double total = 0;
            for (const double v : values)
                total += v;
            if (total > 0)
                for (double &v : values)
                    v = 100 * v / total;
            return values;
        };
        if (periods.size() > 1) {
            for (const auto &period : periods) {
                std::vector<double> values(size_t(bins), 0);
                for (const auto &[index, figures] : period.workers)
                    for (size_t i = 0; i < figures.staleness.size() && i < values.size(); ++i)
                        values[i] += double(figures.staleness[i]);
                result.sets.emplace_back(period.label(), share(std::move(values)));
            }
            result.periodSets = int(periods.size());
        } else if (snapshot.workers.size() > kWorkersDrawnApartAtMost) {
            // 16 workers' bars side by side in 16 bins are 256 slivers
            // nobody can read; their staleness is alike (one ps's), so one
            // histogram of them all says it.
            std::vector<double> values(size_t(bins), 0);
            for (const auto &worker : snapshot.workers)
                for (size_t i = 0; i < worker.stalenessHistogram.size() && i < values.size(); ++i)
                    values[i] += double(worker.stalenessHistogram[i]);
            result.sets.emplace_back(tr("all %1 workers").arg(snapshot.workers.size()), share(std::move(values)));
        } else {
            for (const auto &worker : snapshot.workers) {
                std::vector<double> values(size_t(bins), 0);
                for (size_t i = 0; i < worker.stalenessHistogram.size() && i < values.size(); ++i)
                    values[i] = double(worker.stalenessHistogram[i]);
                result.sets.emplace_back(workerName(worker.index), share(std::move(values)));
            }
        }
        // Only as many bins as hold a visible share (at least 4): a
        // histogram of staleness 0-2 should not be squeezed by 13 bins of
        // 0.01 %. The last bin shown collects the rest.
        int used = 4;
        for (const auto &set : result.sets)
            for (int i = 0; i < bins; ++i)
                if (set.second[size_t(i)] >= 0.5)
                    used = std::max(used, i + 2);
        used = std::min(used, bins);
        for (auto &set : result.sets) {
            if (used < bins) {
                // The last shown bin collects everything beyond it.
                for (int i = used; i < bins; ++i)
                    set.second[size_t(used - 1)] += set.second[size_t(i)];
                set.second.resize(size_t(used));
            }
        }
        for (int i = 0; i < used; ++i)
            result.categories.append(i == used - 1 ? QStringLiteral("\u2265%1").arg(i) : QString::number(i));
        return result;
    }

    for (const auto &worker : snapshot.workers)
        result.categories.append(workerName(worker.index));
    std::vector<double> overall;
    for (const auto &worker : snapshot.workers) {
        switch (m_figure) {
        case Figure::StepsPerSecond: overall.push_back(worker.stepsPerSecond); break;
        case Figure::WaitFraction: overall.push_back(worker.waitFraction); break;
        default: overall.push_back(double(worker.dropped)); break;
        }
    }
    // "Now" means nothing for a finished run, where every rate is 0.
    if (std::any_of(overall.begin(), overall.end(), [](double v) { return v > 0; }) || periods.empty())
        result.sets.emplace_back(m_figure == Figure::StepsPerSecond ? tr("now (last 2 s)") : tr("whole run"),
                                 std::move(overall));
    for (const auto &period : periods) {
        std::vector<double> values;
        for (const auto &worker : snapshot.workers) {
            const auto it = period.workers.find(worker.index);
            if (it == period.workers.end()) {
                values.push_back(0);
                continue;
            }
            const ModePeriod::Worker &figures = it->second;
            switch (m_figure) {
            case Figure::StepsPerSecond:
                values.push_back(period.seconds > 0 ? double(figures.steps) / period.seconds : 0);
                break;
            case Figure::WaitFraction:
                values.push_back(figures.busyUs > 0 ? double(figures.waitUs) / double(figures.busyUs) : 0);
                break;
            default: values.push_back(double(figures.dropped)); break;
            }
        }
        result.sets.emplace_back(period.label(), std::move(values));
    }
    result.periodSets = int(periods.size());
    return result;
}

void WorkerBarChart::rebuild()
{
    const Table data = table();
    showData(!data.sets.empty());
    m_periodSets = data.periodSets;
    if (data.sets.empty())
        return;

    // Bar sets are few; rebuilding them keeps the series simple. Reuse when
    // the shape is unchanged so the chart does not flicker.
    const QList<QBarSet *> existing = m_bars->barSets();
    bool sameShape = existing.size() == qsizetype(data.sets.size()) && m_categoryAxis->categories() == data.categories;
    for (qsizetype i = 0; sameShape && i < existing.size(); ++i)
        sameShape = existing[i]->label() == data.sets[size_t(i)].first;
    if (!sameShape) {
        m_bars->clear();
        m_categoryAxis->clear();
        m_categoryAxis->append(data.categories);
        for (size_t i = 0; i < data.sets.size(); ++i) {
            // Sets before the mode periods are the overall figure (grey) or,
            // in the histogram, one per worker (the worker's colour).
            const size_t overallSets = data.sets.size() - size_t(data.periodSets);
            const bool histogram = m_figure == Figure::StalenessHistogram;
            QColor color = periodColor(int(i - std::min(i, overallSets)));
            if (i < overallSets)
                color = histogram && i < m_snapshot->workers.size() ? workerColor(m_snapshot->workers[i].index)
                                                                    : QColor(0x60, 0x7d, 0x8b);
            m_bars->append(newBarSet(data.sets[i].first, color, data.sets[i].second));
        }
    } else {
        for (qsizetype i = 0; i < existing.size(); ++i) {
            const auto &values = data.sets[size_t(i)].second;
            for (size_t j = 0; j < values.size(); ++j)
                existing[i]->replace(qsizetype(j), values[j]);
        }
    }
    double maxValue = 0;
    for (const auto &set : data.sets)
        for (const double v : set.second)
            maxValue = std::max(maxValue, v);
    if (m_figure == Figure::WaitFraction)
        m_valueAxis->setRange(0, std::max(0.05, std::min(1.0, maxValue * 1.1)));
    else if (m_figure == Figure::StalenessHistogram)
        m_valueAxis->setRange(0, 100);
    else if (m_figure == Figure::DroppedGradients) {
        // Counts: whole-number ticks (0, 1, 2, not 0, 0.5, 1 printed as 0, 1, 1).
        setRoundRange(m_valueAxis, 0, std::max(1.0, std::ceil(maxValue * 1.1)), 5);
        m_valueAxis->setTickInterval(std::max(1.0, m_valueAxis->tickInterval()));
    } else
        m_valueAxis->setRange(0, std::max(1.0, maxValue * 1.1));
    if (m_figure != Figure::DroppedGradients)
        m_valueAxis->applyNiceNumbers();
}

CsvTable WorkerBarChart::csv() const
{
    CsvTable result;
    result.header = {QStringLiteral("series"),
                     m_figure == Figure::StalenessHistogram ? QStringLiteral("staleness") : QStringLiteral("worker"),
                     QStringLiteral("value")};
    const Table data = table();
    for (const auto &[name, values] : data.sets)
        for (size_t i = 0; i < values.size() && i < size_t(data.categories.size()); ++i)
            result.rows.push_back({name, data.categories[qsizetype(i)], QString::number(values[i], 'g', 8)});
    return result;
}

int WorkerBarChart::pointCount() const
{
    return barCount(m_bars);
}

WorkerStatsView::WorkerStatsView(QWidget *parent) : QWidget(parent), m_stalenessCost(new StalenessCostChart(this))
{
    // The pace on top, three abreast; below, staleness: how much of it there
    // is, and (twice as wide, it has two scales) what it costs.
    auto *grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    const WorkerBarChart::Figure figures[]
        = {WorkerBarChart::Figure::StepsPerSecond, WorkerBarChart::Figure::WaitFraction,
           WorkerBarChart::Figure::DroppedGradients, WorkerBarChart::Figure::StalenessHistogram};
    for (int i = 0; i < 4; ++i) {
        auto *chart = new WorkerBarChart(figures[i], this);
        grid->addWidget(chart, i / 3, i % 3);
        m_bars.push_back(chart);
        m_charts.push_back(chart);
    }
    grid->addWidget(m_stalenessCost, 1, 1, 1, 2);
    m_charts.push_back(m_stalenessCost);
}

void WorkerStatsView::setSnapshot(const std::shared_ptr<const RunSnapshot> &snapshot)
{
    for (WorkerBarChart *chart : m_bars)
        chart->setSnapshot(snapshot);
    m_stalenessCost->setSnapshot(snapshot);
}

} // namespace parasync::ui
