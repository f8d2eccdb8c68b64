#pragma once

// How each variable of a model moves, for the models whose parameters are
// too many to draw one by one (a softmax, an MLP a Python worker declared):
// one chart per figure the chief measures every --display_step — the
// variables' norms, their distance from where the run started, and their
// update per global step (log scale: it falls by orders of magnitude as
// training settles). One line per variable, mode changes marked.

#include "orchestration/run_state.h"
#include "ui/charts/run_chart.h"

#include <vector>

class QAbstractAxis;
class QChart;
class QChartView;
class QLineSeries;
class QLogValueAxis;
class QValueAxis;

namespace parasync::ui {

class VariableSummaryChart : public RunChart
{
    Q_OBJECT

public:
    enum class Figure {
        Norm,
        DistanceFromStart,
        UpdatePerStep,
    };

    explicit VariableSummaryChart(Figure figure, QWidget *parent = nullptr);

    Figure figure() const { return m_figure; }

    QString exportName() const override;
    QString title() const override;
    CsvTable csv() const override;
    int pointCount() const override;

protected:
    void rebuild() override;

private:
    const DecimatedSeries &seriesOf(const VariableSeries &variable) const;
    QLineSeries *lineFor(size_t variable);
    QAbstractAxis *yAxis() const;

    Figure m_figure;
    QChart *m_chart;
    QChartView *m_view;
    QValueAxis *m_xAxis;
    QValueAxis *m_linearY = nullptr; // norm, distance
    QLogValueAxis *m_logY = nullptr; // update per step
    std::vector<QLineSeries *> m_lines;
};

} // namespace parasync::ui
