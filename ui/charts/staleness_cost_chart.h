#pragma once

// What a stale gradient is worth, live: the workers' staleness probes
// (--staleness_probe_every) by how many global steps lay between the
// parameters a gradient was computed at and the fresh ones -- bars of the
// median cosine with the fresh gradient (1: as good as fresh, 0: no better
// than a random direction) and a line of the median relative error. Beside
// the staleness histogram, it says what the histogram's tail costs.

#include "orchestration/run_state.h"
#include "ui/charts/run_chart.h"

#include <memory>

class QBarCategoryAxis;
class QBarSeries;
class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;

namespace parasync::ui {

class StalenessCostChart : public RunChart
{
    Q_OBJECT

public:
    explicit StalenessCostChart(QWidget *parent = nullptr);

    QString exportName() const override { return QStringLiteral("staleness_cost"); }
    QString title() const override;
    QSize exportSize() const override { return QSize(1000, 650); }
    // One row per bucket: steps_apart, probes, median_cosine, median_relative_error.
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    QChart *m_chart;
    QChartView *m_view;
    QBarCategoryAxis *m_categoryAxis;
    QValueAxis *m_cosineAxis;
    QValueAxis *m_errorAxis;
    QBarSeries *m_cosines;
    QLineSeries *m_errors;
};

} // namespace parasync::ui
