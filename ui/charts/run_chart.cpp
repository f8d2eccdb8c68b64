#include "ui/charts/run_chart.h"

#include "ui/charts/chart_setup.h"

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

void RunChart::markRunChanges()
{
    if (m_markers && m_snapshot)
        m_markers->setAnnotations(runMarkerLines(*m_snapshot));
}

int RunChart::modeMarkerCount() const
{
    return m_markers ? m_markers->count() : 0;
}

} // namespace parasync::ui
