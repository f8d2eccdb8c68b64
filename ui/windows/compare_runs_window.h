#pragma once

// Several finished runs side by side (a sync run against an async run):
// loss and distance to the true (w, b) by global step and by wall time, one
// line per run, each run's mode changes marked in its colour.

#include "ui/charts/chart_widget.h"
#include "ui/models/run_loader.h"

#include <QMainWindow>

#include <memory>
#include <vector>

class QChart;
class QChartView;
class QListWidget;
class QLogValueAxis;
class QLineSeries;
class QValueAxis;

namespace parasync::ui {

class ChartAnnotations;

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
    enum class Quantity { Loss, Distance };
    enum class Axis { GlobalStep, WallTime };

    ComparisonChart(Quantity quantity, Axis axis, QWidget *parent = nullptr);
    ~ComparisonChart() override;

    void setRuns(const std::vector<ComparedRun> &runs);

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
    Quantity m_quantity;
    Axis m_axis;
    std::vector<ComparedRun> m_runs;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QLogValueAxis *m_yAxis;
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

Q_SIGNALS:
    // Every requested directory has been loaded (or failed).
    void runsLoaded();

private:
    void onLoaded(const LoadedRun &run);
    void removeSelected();
    void updateCharts();
    void exportAllInteractive();

    RunLoader *m_loader;
    std::vector<ComparedRun> m_runs;
    int m_loading = 0;
    QListWidget *m_list;
    std::vector<ComparisonChart *> m_charts;
};

} // namespace parasync::ui
