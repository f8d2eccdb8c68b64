#pragma once

// The figure of "Compare modes": one run per update mode, side by side --
// the panels of mode_comparison_charts.h (loss by wall time and by global
// step, held-out loss by both, staleness, time to target, each worker's pace
// and waiting) and the numbers in a table. The view paints them all as one
// exportable figure (PNG, SVG, PDF), and the numbers go to comparison.csv. GUI thread only. It shows a
// ModeComparisonSummary (read from the run directories by core's summarizeModeComparison) and does no work of its own.

#include "orchestration/mode_comparison.h"
#include "ui/charts/chart_widget.h"
#include "ui/charts/mode_comparison_charts.h"

#include <QWidget>

#include <memory>
#include <vector>

class QLabel;

namespace parasync::ui {

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
    // The held-out metric the two held-out panels draw ("heldout_accuracy");
    // empty: held-out loss where there is one.
    void setHeldOutMetric(const QString &metric);
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
    ModeHeldOutChart *m_heldOutByStep;
    ModeStalenessChart *m_staleness;
    ModeBarChart *m_timeToTarget;
    ModeBarChart *m_stepsPerSecond;
    ModeBarChart *m_waitFraction;
    ModeSummaryTable *m_table;
};

// The plan a comparison ran, in a line: workers, their pace, learning rate,
// seed (or `seeds`, where the comparison repeats over them).
QString describeComparisonSetting(const ClusterPlan &plan, const std::vector<uint64_t> &seeds = {});

// comparison.csv: one row per run -- mode, target, time_to_target_s (empty
// when not reached), final_loss, global_steps_per_s, then per worker
// worker<i>_steps_per_s and worker<i>_wait_fraction, then the staleness
// bound, the global step at the target, the run's length, how it ended and
// its directory, the staleness figures, the final held-out metrics, and the
// run's seed.
CsvTable modeComparisonTable(const ModeComparisonSummary &summary);
// comparison_spread.csv, for a comparison over seeds: one row per contender
// -- mode, mode_spec, runs, seeds (space-separated), reached_target (runs),
// then for each figure (time_to_target_s, global_step_at_target, final_loss,
// global_steps_per_s, staleness_median, final_<metric>...) its _median,
// _min and _max over the seeds (empty where no run has it).
CsvTable contenderSpreadCsv(const ModeComparisonSummary &summary);

// Writes into `directory` (creating it): mode_comparison.png, .svg and .pdf
// (the figure), comparison.csv and mode_comparison_series.csv (every loss
// point), and over seeds comparison_spread.csv. Appends the paths to `written`; false with `error` naming the
// file that could not be written.
bool exportModeComparison(ModeComparisonView *view, const QString &directory, QStringList *written, QString *error);

// Who reached the target first, in words drawn from the data: "ssp s=10
// reached a full loss of 0.149 first (4.1 s), then async (5.0 s); sync did
// not reach it within its 30 s." Over seeds, each figure's medians and
// ranges, and a difference named only where every seed of one contender
// beat every seed of the other.
QString modeComparisonVerdict(const ModeComparisonSummary &summary);

} // namespace parasync::ui
