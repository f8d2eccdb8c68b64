#include "ui/charts/run_chart.h"

namespace parasync::ui {

RunChart::RunChart(QWidget *parent) : ChartWidget(parent) {}

RunChart::~RunChart()
{
    m_markers.reset();
}

void RunChart::setSnapshot(std::shared_ptr<const RunSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    markDirty();
}

int RunChart::modeMarkerCount() const
{
    return m_markers ? m_markers->count() : 0;
}

} // namespace parasync::ui
