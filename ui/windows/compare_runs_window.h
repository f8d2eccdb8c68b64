#pragma once

// Several finished runs side by side (a sync run against an async run): the
// settings that differ between them (from each run's cluster.json) above one
// chart of the metric the user picks -- held-out accuracy or loss, full or
// batch loss, throughput, staleness: whichever the runs have, for any model
// -- by global step or by wall time, one line per run, each run's mode
// changes marked in its colour.

#include "orchestration/run_settings.h"
#include "ui/charts/chart_widget.h"
#include "ui/models/compared_metrics.h"
#include "ui/models/run_loader.h"

#include <QMainWindow>

#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

class QCheckBox;
class QChart;
class QChartView;
class QComboBox;
class QLabel;
class QListWidget;
class QLogValueAxis;
class QLineSeries;
class QTableView;
class QValueAxis;

namespace parasync::ui {

class ChartAnnotations;
class RunSettingsModel;

struct ComparedRun
{
    QString name; // the directory's name
    QString directory;
    std::shared_ptr<const RunSnapshot> snapshot;
};

class ComparisonChart : public ChartWidget
{
    Q_OBJECT

public:
    enum class Axis { GlobalStep, WallTime };

    explicit ComparisonChart(QWidget *parent = nullptr);
    ~ComparisonChart() override;

    void setRuns(const std::vector<ComparedRun> &runs);
    void setMetric(ComparedMetric metric);
    void setAxis(Axis axis);
    ComparedMetric metric() const { return m_metric; }
    Axis axis() const { return m_axis; }
    // The y axis drawn now (a log axis for losses).
    QString yAxisTitle() const;

    QString exportName() const override;
    QString title() const override;
    CsvTable csv() const override;
    int modeMarkerCount() const override;
    int pointCount() const override;

    // The points of one run's line (x by this chart's axis), shared with the CSV.
    QList<QPointF> pointsOf(const RunSnapshot &run) const;

protected:
    void rebuild() override;

private:
    ComparedMetric m_metric = ComparedMetric::FullLoss;
    Axis m_axis = Axis::GlobalStep;
    std::vector<ComparedRun> m_runs;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_linearAxis;
    QLogValueAxis *m_logAxis;
    std::vector<QLineSeries *> m_lines;
    std::unique_ptr<ChartAnnotations> m_markers;
};

class CompareRunsWindow : public QMainWindow
{
    Q_OBJECT

public:
    explicit CompareRunsWindow(QWidget *parent = nullptr);

    void addRunDirectory(const QString &directory);
    const std::vector<ComparedRun> &runs() const { return m_runs; }
    QList<ExportableChart *> charts() const;
    bool exportAll(const QString &directory, QStringList *written, QString *error);

    // The parts a test drives as a user would.
    ComparisonChart *chart() const { return m_chart; }
    QComboBox *metricPicker() const { return m_metricPicker; }
    QComboBox *axisPicker() const { return m_axisPicker; }
    QTableView *settingsView() const { return m_settingsView; }
    QCheckBox *sharedSettingsToggle() const { return m_showShared; }

Q_SIGNALS:
    // Every requested directory has been loaded (or failed).
    void runsLoaded();

private:
    QWidget *makeSettingsPanel();
    void onLoaded(const LoadedRun &run);
    void showRun(const LoadedRun &run);
    void removeSelected();
    void updateRuns();
    void updateMetricPicker();
    void exportAllInteractive();

    RunLoader *m_loader;
    std::vector<ComparedRun> m_runs;
    std::vector<RunSettings> m_settings; // each run's, in the order of m_runs
    // Directories asked for and not shown yet, in the order they were
    // added, each with its run once read: each is read on a thread of its
    // own, and a run is shown -- its column, colour and place in the list --
    // only after every run added before it, however the threads finish.
    std::deque<std::pair<QString, std::optional<LoadedRun>>> m_pending;
    QListWidget *m_list;
    ComparisonChart *m_chart;
    QComboBox *m_metricPicker;
    QComboBox *m_axisPicker;
    RunSettingsModel *m_settingsModel;
    QTableView *m_settingsView;
    QLabel *m_settingsCaption;
    QCheckBox *m_showShared;
};

} // namespace parasync::ui
