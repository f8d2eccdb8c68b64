#pragma once

// The path (w, b) took, drawn over iso-lines of the linear demo's loss
// surface MSE(w, b) = (w - 2)^2 / 3 + (b - 10)^2 + 0.33^2, with the point
// where each mode change happened marked on the path.

#include "orchestration/run_state.h"
#include "ui/charts/run_chart.h"

#include <vector>

class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace parasync::ui {

class ParameterPathChart : public RunChart
{
    Q_OBJECT

public:
    explicit ParameterPathChart(QWidget *parent = nullptr);

    QString exportName() const override { return QStringLiteral("parameter_path"); }
    QString title() const override;
    QSize exportSize() const override { return QSize(900, 800); }
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    static constexpr int kContours = 8;

    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_wAxis;
    QValueAxis *m_bAxis;
    std::vector<QLineSeries *> m_contours;
    QLineSeries *m_path;
    QScatterSeries *m_start;
    QScatterSeries *m_current;
    QScatterSeries *m_truth;
    std::vector<double> m_levels;
};

} // namespace parasync::ui
