#pragma once

// w and b against the global step, with the true values 2 and 10 as dashed
// reference lines and a marker at every mode change: the seeds' "w and b
// converge" as a picture.

#include "orchestration/run_state.h"
#include "ui/charts/run_chart.h"

#include <vector>

class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;

namespace parasync::ui {

class ConvergenceChart : public RunChart
{
    Q_OBJECT

public:
    explicit ConvergenceChart(QWidget *parent = nullptr);

    QString exportName() const override { return QStringLiteral("parameters"); }
    QString title() const override;
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    QLineSeries *seriesFor(size_t parameter);

    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_yAxis;
    std::vector<QLineSeries *> m_parameters;
    QLineSeries *m_trueW;
    QLineSeries *m_trueB;
};

} // namespace parasync::ui
