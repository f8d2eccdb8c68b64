#pragma once

// Loss against the global step: each worker's batch loss (raw min/max
// envelope, faint, and TensorBoard's debiased EMA, solid), the chief's
// full-shard loss and the reported metrics (the held-out loss beside the
// losses; an accuracy on a 0-1 axis on the right), with a log-scale toggle,
// a smoothing slider and a marker at every mode change.

#include "orchestration/run_state.h"
#include "ui/charts/run_chart.h"

#include <map>

class QChart;
class QChartView;
class QCheckBox;
class QLabel;
class QLineSeries;
class QLogValueAxis;
class QSlider;
class QValueAxis;

namespace parasync::ui {

class LossChart : public RunChart
{
    Q_OBJECT

public:
    explicit LossChart(QWidget *parent = nullptr);

    void setLogScale(bool on);
    bool logScale() const;
    // EMA weight in [0, 0.99], as TensorBoard's slider.
    void setSmoothing(double smoothing);
    double smoothing() const { return m_smoothing; }

    QString exportName() const override { return QStringLiteral("loss"); }
    QString title() const override;
    void renderTo(QPainter *painter, const QRectF &target) override;
    CsvTable csv() const override;
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
    QLineSeries *metricLine(const std::string &name, size_t index);
    void attach(QLineSeries *series);

    double m_smoothing = 0.6;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_linearY;
    QLogValueAxis *m_logY;
    QLineSeries *m_fullLoss;
    QValueAxis *m_accuracyY; // on the right, shown once an accuracy is reported
    std::map<int, WorkerSeries> m_workers;
    std::map<std::string, QLineSeries *> m_metrics; // by metric name
    QCheckBox *m_logToggle;
    QSlider *m_smoothingSlider;
    QLabel *m_smoothingLabel;
};

} // namespace parasync::ui
