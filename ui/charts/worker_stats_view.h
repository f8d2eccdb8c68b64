#pragma once

// Per-worker figures as bar charts: steps per second, fraction of time
// waiting, dropped gradients and the staleness histogram. Each is shown for
// the whole run (or "now") and once per update-mode period, so that the bars
// of a mode change sit side by side. Beside the histogram, what staleness
// costs (StalenessCostChart).

#include "orchestration/run_state.h"
#include "ui/charts/run_chart.h"

#include <memory>
#include <vector>

class QBarCategoryAxis;
class QBarSeries;
class QChart;
class QChartView;
class QValueAxis;

namespace parasync::ui {

class WorkerBarChart : public RunChart
{
    Q_OBJECT

public:
    enum class Figure { StepsPerSecond, WaitFraction, DroppedGradients, StalenessHistogram };

    explicit WorkerBarChart(Figure figure, QWidget *parent = nullptr);

    QString exportName() const override;
    QString title() const override;
    QSize exportSize() const override { return QSize(1000, 650); }
    CsvTable csv() const override;
    // One bar set per mode period after the first: each stands for a change.
    int modeMarkerCount() const override { return m_periodSets > 0 ? m_periodSets - 1 : 0; }
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    struct Table
    {
        QStringList categories;
        std::vector<std::pair<QString, std::vector<double>>> sets;
        int periodSets = 0;
    };
    Table table() const;

    Figure m_figure;
    QChart *m_chart;
    QChartView *m_view;
    QBarCategoryAxis *m_categoryAxis;
    QValueAxis *m_valueAxis;
    QBarSeries *m_bars;
    int m_periodSets = 0;
};

class StalenessCostChart;

class WorkerStatsView : public QWidget
{
    Q_OBJECT

public:
    explicit WorkerStatsView(QWidget *parent = nullptr);
    void setSnapshot(const std::shared_ptr<const RunSnapshot> &snapshot);
    // The four bar charts, then the staleness cost.
    const std::vector<ChartWidget *> &charts() const { return m_charts; }

private:
    std::vector<ChartWidget *> m_charts;
    std::vector<WorkerBarChart *> m_bars;
    StalenessCostChart *m_stalenessCost;
};

} // namespace parasync::ui
