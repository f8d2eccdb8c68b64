#pragma once

// w and b against the global step, with the true values 2 and 10 as dashed
// reference lines and a marker at every mode change: the seeds' "w and b
// converge" as a picture.

#include "orchestration/run_state.h"
#include "ui/charts/chart_widget.h"

#include <memory>
#include <vector>

class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;

namespace parasync::ui {

class ChartAnnotations;

class ConvergenceChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit ConvergenceChart(QWidget *parent = nullptr);
    ~ConvergenceChart() override;

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);

    QString exportName() const override { return QStringLiteral("parameters"); }
    QString title() const override;
    CsvTable csv() const override;
    int modeMarkerCount() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    QLineSeries *seriesFor(size_t parameter);

    std::shared_ptr<const RunSnapshot> m_snapshot;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_yAxis;
    std::vector<QLineSeries *> m_parameters;
    QLineSeries *m_trueW;
    QLineSeries *m_trueB;
    std::unique_ptr<ChartAnnotations> m_markers;
};

} // namespace parasync::ui
