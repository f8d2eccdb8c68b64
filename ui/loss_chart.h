#pragma once

// Loss against the global step: each worker's batch loss (raw min/max
// envelope, faint, and TensorBoard's debiased EMA, solid) and the chief's
// full-shard loss, with a log-scale toggle, a smoothing slider and a marker
// at every mode change.

#include "orchestration/run_state.h"
#include "ui/chart_widget.h"

#include <map>
#include <memory>

class QChart;
class QChartView;
class QCheckBox;
class QLabel;
class QLineSeries;
class QLogValueAxis;
class QSlider;
class QValueAxis;

namespace parasync::ui {

class ChartAnnotations;

class LossChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit LossChart(QWidget *parent = nullptr);
    ~LossChart() override;

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);

    void setLogScale(bool on);
    bool logScale() const;
    // EMA weight in [0, 0.99], as TensorBoard's slider.
    void setSmoothing(double smoothing);
    double smoothing() const { return m_smoothing; }

    QString exportName() const override { return QStringLiteral("loss"); }
    QString title() const override;
    void renderTo(QPainter *painter, const QRectF &target) override;
    CsvTable csv() const override;
    int modeMarkerCount() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    struct WorkerSeries
    {
        QLineSeries *raw = nullptr;
        QLineSeries *smoothed = nullptr;
    };
    WorkerSeries &seriesFor(int worker);
    void attach(QLineSeries *series);

    std::shared_ptr<const RunSnapshot> m_snapshot;
    double m_smoothing = 0.6;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_linearY;
    QLogValueAxis *m_logY;
    QLineSeries *m_fullLoss;
    std::map<int, WorkerSeries> m_workers;
    std::unique_ptr<ChartAnnotations> m_markers;
    QCheckBox *m_logToggle;
    QSlider *m_smoothingSlider;
    QLabel *m_smoothingLabel;
};

} // namespace parasync::ui
