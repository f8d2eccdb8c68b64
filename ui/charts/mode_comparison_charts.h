#pragma once

// The panels of the "Compare modes" figure (mode_comparison_view.h puts
// them together), each a chart of one ModeComparisonSummary, and the words
// and numbers they and the figure's table share. GUI thread only.

#include "orchestration/comparison_spread.h"
#include "orchestration/mode_comparison.h"
#include "ui/charts/chart_widget.h"

#include <QColor>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

class QBarCategoryAxis;
class QAbstractBarSeries;
class QAreaSeries;
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
// The same for a contender (its runs over seeds are one line, one bar).
QString contenderLabel(const ModeComparisonSummary &summary, const ContenderSpread &contender);

// A run's colour in every panel: its mode's colour from the table of modes,
// a darker or lighter shade for a second or third contender of one mode
// (sync:15/16 beside sync, ssp:10 beside ssp:3), so that a colour means a
// mode across figures; a run of no known mode gets the run palette's.
QColor modeRunColor(const std::vector<ModeRunSummary> &runs, size_t run);

// "12 s", "0.9 s"; "0.13", "–" for NaN: the figure's times and losses.
QString secondsText(double value);
QString lossText(double value);
// "0.93 (0.91–0.95)": a figure's median and its range over seeds, with
// " (in 2 of 3)" when a run lacks it; "–" when none has it.
QString spreadText(const Spread &spread, int digits, char format = 'f');
// "0.9 s", "not reached", "failed": when a run reached the target.
QString timeToTargetText(const ModeRunSummary &run);
// Every worker index any run has, in order; a run's figures of one worker
// (nullptr when it has none).
std::vector<int> workerIndices(const ModeComparisonSummary &summary);
const WorkerStepFigures *workerOf(const ModeRunSummary &run, int index);

// The held-out metrics any run logged, in name order.
QStringList heldOutMetricNames(const ModeComparisonSummary &summary);
// The one the figure and the verdict speak of: held-out loss where a run
// logged it, else accuracy, else the first there is; empty when none.
QString heldOutMetric(const ModeComparisonSummary &summary);
// Whether a larger value of the metric is the better one (accuracy, AUC).
bool higherIsBetter(const QString &metric);
// "heldout_loss" as a person reads it: "held-out loss".
QString metricText(const QString &metric);

// Past this many workers, the tables give the workers' spread instead of a
// row (or column) each: 16 workers' 32 rows do not read.
constexpr size_t kWorkersNamedAtMost = 4;
// "16.2-48.8": the slowest and the fastest worker's steps per second.
QString workerRateSpread(const ModeRunSummary &run);
// "49 %": the median worker's share of its step time spent waiting.
QString medianWaitingText(const ModeRunSummary &run);

// A chart of a mode comparison's runs, drawn from its summary when shown or
// exported. Each run stays in one mode: no mode markers.
class ModeComparisonChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit ModeComparisonChart(QWidget *parent = nullptr);
    void setSummary(std::shared_ptr<const ModeComparisonSummary> summary);
    int modeMarkerCount() const override { return 0; }

protected:
    // A new summary arrived (before the redraw): a chart whose title speaks
    // of the runs sets it here.
    virtual void summaryChanged() {}

    std::shared_ptr<const ModeComparisonSummary> m_summary; // null before any
};

// The chief's full-shard loss of every run by wall time or by global step,
// a dashed line at the target and a dot where each run first reached it.
// A contender run over seeds is its median line over a band of its range.
class ModeLossChart : public ModeComparisonChart
{
    Q_OBJECT

public:
    enum class Axis { WallTime, GlobalStep };

    explicit ModeLossChart(Axis axis, QWidget *parent = nullptr);

    QString exportName() const override;
    QString title() const override;
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    Axis m_axis;
    QString m_chosen;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QLogValueAxis *m_yAxis;
    QLineSeries *m_target;
    std::vector<QLineSeries *> m_lines; // one per contender
    std::vector<QAreaSeries *> m_bands; // a contender's range over seeds
    std::vector<QScatterSeries *> m_reached;
};

// What each run's model learned: a held-out metric by wall time or by
// global step (held-out loss where the model logs it, else accuracy; log
// scale) -- the price of a mode's staleness, where the loss charts show its
// pace. By time, what a mode learned in the time it had; by step, what an
// update of it was worth (a sync step averages many gradients). Says how to
// get held-out data when no run has any.
class ModeHeldOutChart : public ModeComparisonChart
{
    Q_OBJECT

public:
    enum class Axis { WallTime, GlobalStep };

    explicit ModeHeldOutChart(Axis axis = Axis::WallTime, QWidget *parent = nullptr);
    // The metric drawn ("heldout_loss"): the one chosen where a run logged
    // it, else heldOutMetric(); empty when no run logged one.
    QString metric() const;
    // Draws `metric` ("heldout_accuracy"); empty: the default.
    void setMetric(const QString &metric);

    QString exportName() const override
    {
        return m_axis == Axis::WallTime ? QStringLiteral("mode_heldout_by_time")
                                        : QStringLiteral("mode_heldout_by_step");
    }
    QString title() const override;
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    Axis m_axis;
    QString m_chosen;
    QChart *m_chart;
    QChartView *m_view;
    QLabel *m_placeholder;
    QValueAxis *m_xAxis;
    QLogValueAxis *m_yAxis;
    std::vector<QLineSeries *> m_lines; // one per contender
    std::vector<QAreaSeries *> m_bands; // a contender's range over seeds
};

// How stale each run's applied gradients were: the share of them at or below
// each staleness (a cumulative distribution). sync is a step at 0, ssp stops
// at its bound, async's tail grows with the workers.
class ModeStalenessChart : public ModeComparisonChart
{
    Q_OBJECT

public:
    explicit ModeStalenessChart(QWidget *parent = nullptr);

    QString exportName() const override { return QStringLiteral("mode_staleness"); }
    QString title() const override;
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_yAxis;
    std::vector<QLineSeries *> m_lines;
};

// Bars: the time to the target by mode, or by worker (one bar per mode) its
// steps per second or its waiting share.
class ModeBarChart : public ModeComparisonChart
{
    Q_OBJECT

public:
    enum class Figure { TimeToTarget, WorkerStepsPerSecond, WorkerWaitFraction };

    explicit ModeBarChart(Figure figure, QWidget *parent = nullptr);

    QString exportName() const override;
    QString title() const override;
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;
    void summaryChanged() override;

private:
    struct Table
    {
        QStringList categories;
        std::vector<std::pair<QString, std::vector<double>>> sets; // one per contender, in run order
        std::vector<QColor> colors;                                // of each set
    };
    Table table() const;

    Figure m_figure;
    QChart *m_chart;
    QChartView *m_view;
    QBarCategoryAxis *m_categoryAxis;
    QValueAxis *m_valueAxis;
    QAbstractBarSeries *m_bars = nullptr;
};

} // namespace parasync::ui
