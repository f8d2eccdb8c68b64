#pragma once

// Every chart of one run, in tabs: step interleaving, loss, w and b, worker
// figures, and for a sparse model its embedding tables on the ps tasks. Snapshots arriving faster than the eye needs
// are coalesced: the newest one is kept and the charts are redrawn at most every ~50 ms (as PlotJuggler batches its
// redraws), and only the visible tab does the work.

#include "orchestration/embedding_tables.h"
#include "orchestration/run_state.h"
#include "ui/charts/exportable_chart.h"

#include <QTabWidget>
#include <QTimer>

#include <array>

class QStackedWidget;

#include <memory>

namespace parasync::ui {

class ConvergenceChart;
class EmbeddingTablesView;
class LossChart;
class VariableSummaryChart;
class ParameterPathChart;
class StepTimelineChart;
class WorkerStatsView;

class RunChartsView : public QTabWidget
{
    Q_OBJECT

public:
    explicit RunChartsView(QWidget *parent = nullptr);
    ~RunChartsView() override;

    // Keeps the newest snapshot; the charts get it on the next redraw tick.
    void setSnapshot(const RunSnapshot &snapshot);
    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);
    // Hands any pending snapshot to the charts now (before exporting).
    void flush();
    std::shared_ptr<const RunSnapshot> snapshot() const { return m_latest; }
    void clear();
    // The ps tasks' tables (about once a second from the watcher): shown at
    // once in the Tables tab, which is there while the run's model has
    // tables (its signature says so, or the ps tasks report some).
    void setTables(const EmbeddingTablesSnapshot &tables);
    EmbeddingTablesView *tables() const { return m_tables; }
    bool showsTables() const;

    // Redraws come at most every 50 ms, and less often while they cost the
    // GUI thread more than a sixth of its time (see redraw()).
    int redrawIntervalMs() const { return m_redraw.interval(); }
    // How many times the charts were handed a snapshot (for tests and the
    // status bar's refresh rate).
    qint64 redrawCount() const { return m_redraws; }

    // Every exportable chart of this run's model, in the order "Export all"
    // writes them: w and b for the linear demo, the variable summaries for
    // a model with more parameters.
    QList<ExportableChart *> charts() const;
    // Writes each chart in every format into `directory` (see ChartExporter);
    // `runName` heads the run report.
    bool exportAll(const QString &directory, QStringList *written, QString *error, const QString &runName = {});

    StepTimelineChart *timeline() const { return m_timeline; }
    LossChart *loss() const { return m_loss; }
    ConvergenceChart *convergence() const { return m_convergence; }
    ParameterPathChart *parameterPath() const { return m_path; }
    const std::array<VariableSummaryChart *, 3> &variableSummaries() const { return m_variables; }
    // The parameters tab shows w and b (true) or the variable summaries.
    bool showsParameterValues() const;
    WorkerStatsView *workerStats() const { return m_stats; }

Q_SIGNALS:
    void redrawn();

private:
    void redraw();
    void adaptRedrawInterval();
    // Shows w and b or the variable summaries, as the run's model asks.
    void showParametersOf(const RunSnapshot &snapshot);
    // Shows the Tables tab when the run's model has tables.
    void showTablesOf(const RunSnapshot &snapshot);

    std::shared_ptr<const RunSnapshot> m_latest;
    bool m_pending = false;
    QTimer m_redraw;
    qint64 m_redraws = 0;
    // The GUI thread's CPU time at the last redraw, and its smoothed cost
    // per redraw (the redraw itself and the painting it causes), in ms.
    static constexpr int kMinRedrawIntervalMs = 50;
    double m_cpuAtLastRedrawMs = -1;
    double m_costPerRedrawMs = 0;
    StepTimelineChart *m_timeline;
    LossChart *m_loss;
    ConvergenceChart *m_convergence;
    ParameterPathChart *m_path;
    std::array<VariableSummaryChart *, 3> m_variables;
    QStackedWidget *m_parameters;
    QWidget *m_values;   // w and b: their values and their path
    QWidget *m_movement; // the variable summaries
    WorkerStatsView *m_stats;
    EmbeddingTablesView *m_tables;
    std::unique_ptr<ExportableChart> m_timelineOverview;
};

} // namespace parasync::ui
