#pragma once

// A chart of one run, drawn from its RunSnapshot: the snapshot kept and
// redrawn when shown or exported, and for most, markers where the run
// changed mode, failed over or saved a checkpoint (ChartAnnotations).

#include "orchestration/run_state.h"
#include "ui/charts/chart_annotations.h"
#include "ui/charts/chart_widget.h"

#include <memory>

namespace parasync::ui {

class RunChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit RunChart(QWidget *parent = nullptr);
    // Drops the markers, whose items belong to the chart, before it goes.
    ~RunChart() override;

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);
    // The markers drawn; 0 for a chart without them.
    int modeMarkerCount() const override;

protected:
    // The markers at the snapshot's mode changes and failovers
    // (runMarkerLines), for a chart whose x axis is the global step.
    void markRunChanges();

    // What the derived chart draws from, in rebuild(); null before any.
    std::shared_ptr<const RunSnapshot> m_snapshot;
    // Made by the derived chart over its own chart and axes, if it has them.
    std::unique_ptr<ChartAnnotations> m_markers;
};

} // namespace parasync::ui
