#pragma once

// The figure of "Compare modes": one run per update mode, side by side --
// the chief's full-shard loss by wall time and by global step with the
// target marked, a held-out metric by global step and the staleness of the
// applied gradients (what the pace costs), the time each mode took to reach
// the target, and per
// worker its steps per second and the share of its step time spent waiting,
// with the numbers in a table. Each panel is a chart of its own; the view
// paints them all as one exportable figure (PNG, SVG, PDF), and the numbers
// go to comparison.csv. GUI thread only. It shows a ModeComparisonSummary
// (read from the run directories by core's summarizeModeComparison) and does
// no work of its own.

#include "orchestration/mode_comparison.h"
#include "ui/chart_widget.h"

#include <QWidget>

#include <memory>
#include <vector>

class QBarCategoryAxis;
class QAbstractBarSeries;
class QChart;
class QChartView;
class QLabel;
class QLineSeries;
class QLogValueAxis;
class QScatterSeries;
class QValueAxis;

namespace parasync::ui {

// "async", "sync", "ssp s=10": a run's mode as the figure names it.
QString modeRunLabel(const ModeRunSummary &run);

// Past this many workers, the tables give the workers' spread instead of a
// row (or column) each: 16 workers' 32 rows do not read.
constexpr size_t kWorkersNamedAtMost = 4;
// "16.2-48.8": the slowest and the fastest worker's steps per second.
QString workerRateSpread(const ModeRunSummary &run);
// "49 %": the median worker's share of its step time spent waiting.
QString medianWaitingText(const ModeRunSummary &run);

// The chief's full-shard loss of every run by wall time or by global step,
// a dashed line at the target and a dot where each run first reached it.
class ModeLossChart : public ChartWidget
{
    Q_OBJECT

public:
    enum class Axis { WallTime, GlobalStep };

    explicit ModeLossChart(Axis axis, QWidget *parent = nullptr);
    void setSummary(std::shared_ptr<const ModeComparisonSummary> summary);

    QString exportName() const override;
    QString title() const override;
    CsvTable csv() const override;
    int modeMarkerCount() const override { return 0; } // each run stays in one mode
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    Axis m_axis;
    std::shared_ptr<const ModeComparisonSummary> m_summary;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QLogValueAxis *m_yAxis;
    QLineSeries *m_target;
    std::vector<QLineSeries *> m_lines;
    std::vector<QScatterSeries *> m_reached;
};

// What each run's model learned: a held-out metric by wall time (held-out
// loss where the model logs it, else accuracy; log scale) -- the price of a
// mode's staleness, where the loss charts show its pace. Says how to get
// held-out data when no run has any.
class ModeHeldOutChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit ModeHeldOutChart(QWidget *parent = nullptr);
    void setSummary(std::shared_ptr<const ModeComparisonSummary> summary);
    // The metric drawn ("heldout_loss"); empty when no run logged one.
    QString metric() const;

    QString exportName() const override { return QStringLiteral("mode_heldout_by_time"); }
    QString title() const override;
    CsvTable csv() const override;
    int modeMarkerCount() const override { return 0; }
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    std::shared_ptr<const ModeComparisonSummary> m_summary;
    QChart *m_chart;
    QChartView *m_view;
    QLabel *m_placeholder;
    QValueAxis *m_xAxis;
    QLogValueAxis *m_yAxis;
    std::vector<QLineSeries *> m_lines;
};

// How stale each run's applied gradients were: the share of them at or below
// each staleness (a cumulative distribution). sync is a step at 0, ssp stops
// at its bound, async's tail grows with the workers.
class ModeStalenessChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit ModeStalenessChart(QWidget *parent = nullptr);
    void setSummary(std::shared_ptr<const ModeComparisonSummary> summary);

    QString exportName() const override { return QStringLiteral("mode_staleness"); }
    QString title() const override;
    CsvTable csv() const override;
    int modeMarkerCount() const override { return 0; }
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    std::shared_ptr<const ModeComparisonSummary> m_summary;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_yAxis;
    std::vector<QLineSeries *> m_lines;
};

// Bars: the time to the target by mode, or by worker (one bar per mode) its
// steps per second or its waiting share.
class ModeBarChart : public ChartWidget
{
    Q_OBJECT

public:
    enum class Figure { TimeToTarget, WorkerStepsPerSecond, WorkerWaitFraction };

    explicit ModeBarChart(Figure figure, QWidget *parent = nullptr);
    void setSummary(std::shared_ptr<const ModeComparisonSummary> summary);

    QString exportName() const override;
    QString title() const override;
    CsvTable csv() const override;
    int modeMarkerCount() const override { return 0; }
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    struct Table
    {
        QStringList categories;
        std::vector<std::pair<QString, std::vector<double>>> sets; // one per run, in run order
    };
    Table table() const;

    Figure m_figure;
    std::shared_ptr<const ModeComparisonSummary> m_summary;
    QChart *m_chart;
    QChartView *m_view;
    QBarCategoryAxis *m_categoryAxis;
    QValueAxis *m_valueAxis;
    QAbstractBarSeries *m_bars = nullptr;
};

// The numbers of every run as a table, painted (so that it exports as the
// charts do).
class ModeSummaryTable : public QWidget, public ExportableChart
{
    Q_OBJECT

public:
    explicit ModeSummaryTable(QWidget *parent = nullptr);
    void setSummary(std::shared_ptr<const ModeComparisonSummary> summary);

    QString exportName() const override { return QStringLiteral("mode_comparison_table"); }
    QString title() const override;
    void renderTo(QPainter *painter, const QRectF &target) override;
    CsvTable csv() const override;
    int modeMarkerCount() const override { return 0; }
    int pointCount() const override;

protected:
    void paintEvent(QPaintEvent *event) override;

private:
    std::shared_ptr<const ModeComparisonSummary> m_summary;
};

// All panels in a grid three wide under a title naming the setting;
// exported as one figure.
class ModeComparisonView : public QWidget, public ExportableChart
{
    Q_OBJECT

public:
    explicit ModeComparisonView(QWidget *parent = nullptr);

    void setSummary(const ModeComparisonSummary &summary);
    std::shared_ptr<const ModeComparisonSummary> summary() const { return m_summary; }
    // What was compared, for the figure's subtitle ("2 workers, worker:1
    // three times slower, ..."); see describeComparisonSetting.
    void setSetting(const QString &setting);
    QList<ExportableChart *> panels() const;

    QString exportName() const override { return QStringLiteral("mode_comparison"); }
    QString title() const override;
    QSize exportSize() const override { return QSize(1800, 1500); }
    void renderTo(QPainter *painter, const QRectF &target) override;
    // Every loss point of every run, long format.
    CsvTable csv() const override;
    int modeMarkerCount() const override { return 0; }
    int pointCount() const override;

private:
    std::shared_ptr<const ModeComparisonSummary> m_summary;
    QString m_setting;
    QLabel *m_heading;
    ModeLossChart *m_byTime;
    ModeLossChart *m_byStep;
    ModeHeldOutChart *m_heldOut;
    ModeStalenessChart *m_staleness;
    ModeBarChart *m_timeToTarget;
    ModeBarChart *m_stepsPerSecond;
    ModeBarChart *m_waitFraction;
    ModeSummaryTable *m_table;
};

// The plan a comparison ran, in a line: workers, their pace, learning rate,
// seed.
QString describeComparisonSetting(const ClusterPlan &plan);

// comparison.csv: one row per mode -- mode, target, time_to_target_s (empty
// when not reached), final_loss, global_steps_per_s, then per worker
// worker<i>_steps_per_s and worker<i>_wait_fraction, then the staleness
// bound, the global step at the target, the run's length, how it ended and
// its directory.
CsvTable modeComparisonTable(const ModeComparisonSummary &summary);

// Writes into `directory` (creating it): mode_comparison.png, .svg and .pdf
// (the figure), comparison.csv and mode_comparison_series.csv (every loss
// point). Appends the paths to `written`; false with `error` naming the
// file that could not be written.
bool exportModeComparison(ModeComparisonView *view, const QString &directory, QStringList *written, QString *error);

// Who reached the target first, in words drawn from the data: "ssp s=10
// reached a full loss of 0.149 first (4.1 s), then async (5.0 s); sync did
// not reach it within its 30 s."
QString modeComparisonVerdict(const ModeComparisonSummary &summary);

} // namespace parasync::ui
