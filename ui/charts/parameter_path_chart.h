#pragma once

// The path (w, b) took, drawn over iso-lines of the linear demo's loss
// surface MSE(w, b) = (w - 2)^2 / 3 + (b - 10)^2 + 0.33^2, with the point
// where each mode change happened marked on the path.

#include "orchestration/run_state.h"
#include "ui/charts/chart_widget.h"

#include <memory>
#include <vector>

class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace parasync::ui {

class ChartAnnotations;

class ParameterPathChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit ParameterPathChart(QWidget *parent = nullptr);
    ~ParameterPathChart() override;

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);

    QString exportName() const override { return QStringLiteral("parameter_path"); }
    QString title() const override;
    QSize exportSize() const override { return QSize(900, 800); }
    CsvTable csv() const override;
    int modeMarkerCount() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    static constexpr int kContours = 8;

    std::shared_ptr<const RunSnapshot> m_snapshot;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_wAxis;
    QValueAxis *m_bAxis;
    std::vector<QLineSeries *> m_contours;
    QLineSeries *m_path;
    QScatterSeries *m_start;
    QScatterSeries *m_current;
    QScatterSeries *m_truth;
    std::unique_ptr<ChartAnnotations> m_markers;
    std::vector<double> m_levels;
};

} // namespace parasync::ui
