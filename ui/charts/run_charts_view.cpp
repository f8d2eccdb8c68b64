#include "ui/charts/run_charts_view.h"

#include "ui/charts/chart_exporter.h"
#include "ui/charts/convergence_chart.h"
#include "ui/charts/embedding_tables_view.h"
#include "ui/charts/loss_chart.h"
#include "ui/charts/parameter_path_chart.h"
#include "ui/charts/step_timeline_painter.h"
#include "ui/charts/step_timeline_view.h"
#include "ui/charts/variable_summary_chart.h"
#include "ui/charts/worker_stats_view.h"
#include "ui/models/series_math.h"

#include <QPainter>
#include <QSplitter>
#include <QStackedWidget>

#include <algorithm>
#include <ctime>

namespace parasync::ui {

namespace {

// The timeline over every recent step, whatever the screen is zoomed to:
// the export a headless run or a report wants next to the zoomed view.
class StepTimelineOverview : public ExportableChart
{
public:
    explicit StepTimelineOverview(StepTimelineChart *chart) : m_chart(chart) {}
    QString exportName() const override { return QStringLiteral("step_timeline_overview"); }
    QString title() const override { return QObject::tr("Step interleaving, all recent steps"); }
    QSize exportSize() const override { return QSize(1600, 600); }
    void renderTo(QPainter *painter, const QRectF &target) override
    {
        m_chart->ensureUpToDate();
        painter->fillRect(target, Qt::white);
        const StepTimelineView *view = m_chart->view();
        StepTimelinePainter(view->snapshot(), view->lanes()).paint(painter, target, view->fittedRange());
    }
    CsvTable csv() const override { return m_chart->csv(); }
    int modeMarkerCount() const override { return m_chart->modeMarkerCount(); }
    int pointCount() const override { return m_chart->pointCount(); }

private:
    StepTimelineChart *m_chart;
};

} // namespace

RunChartsView::RunChartsView(QWidget *parent)
    : QTabWidget(parent)
    , m_timeline(new StepTimelineChart(this))
    , m_loss(new LossChart(this))
    , m_convergence(new ConvergenceChart(this))
    , m_path(new ParameterPathChart(this))
    , m_variables{new VariableSummaryChart(VariableSummaryChart::Figure::Norm, this),
                  new VariableSummaryChart(VariableSummaryChart::Figure::DistanceFromStart, this),
                  new VariableSummaryChart(VariableSummaryChart::Figure::UpdatePerStep, this)}
    , m_parameters(new QStackedWidget(this))
    , m_stats(new WorkerStatsView(this))
    , m_tables(new EmbeddingTablesView(this))
    , m_timelineOverview(std::make_unique<StepTimelineOverview>(m_timeline))
{
    setDocumentMode(true);
    addTab(m_timeline, tr("Step interleaving"));
    addTab(m_loss, tr("Loss"));
    auto *values = new QSplitter(Qt::Horizontal, this);
    values->addWidget(m_convergence);
    values->addWidget(m_path);
    values->setStretchFactor(0, 1);
    values->setStretchFactor(1, 1);
    values->setSizes({800, 650});
    m_values = values;
    // The three figures side by side, over the same steps. Stacked, they had
    // a third of the tab's height each, too little for Qt Charts to print
    // the step labels (it elides them to "...") once the process panel
    // lists a few tasks.
    auto *movement = new QSplitter(Qt::Horizontal, this);
    for (VariableSummaryChart *chart : m_variables) {
        // A chart's own minimum (title, legend, axes) would make the three
        // wider than a 1600-pixel screen.
        chart->setMinimumWidth(320);
        movement->addWidget(chart);
    }
    m_movement = movement;
    m_parameters->addWidget(m_values);
    m_parameters->addWidget(m_movement);
    addTab(m_parameters, tr("w and b"));
    addTab(m_stats, tr("Workers"));
    addTab(m_tables, tr("Tables"));
    setTabVisible(indexOf(m_tables), false);

    m_redraw.setSingleShot(true);
    m_redraw.setInterval(kMinRedrawIntervalMs);
    connect(&m_redraw, &QTimer::timeout, this, &RunChartsView::redraw);
}

RunChartsView::~RunChartsView() = default;

void RunChartsView::setSnapshot(const RunSnapshot &snapshot)
{
    setSnapshot(std::make_shared<const RunSnapshot>(snapshot));
}

void RunChartsView::setSnapshot(std::shared_ptr<const RunSnapshot> snapshot)
{
    m_latest = std::move(snapshot);
    m_pending = true;
    // One redraw per tick however many snapshots arrive meanwhile.
    if (!m_redraw.isActive())
        m_redraw.start();
}

void RunChartsView::clear()
{
    setSnapshot(std::make_shared<const RunSnapshot>());
    flush();
    m_tables->clear();
    setTabVisible(indexOf(m_tables), false);
}

void RunChartsView::setTables(const EmbeddingTablesSnapshot &tables)
{
    m_tables->setTables(std::make_shared<const EmbeddingTablesSnapshot>(tables));
    if (!tables.empty())
        setTabVisible(indexOf(m_tables), true);
}

bool RunChartsView::showsTables() const
{
    return isTabVisible(indexOf(m_tables));
}

void RunChartsView::showTablesOf(const RunSnapshot &snapshot)
{
    if (snapshot.signature.tables_size() > 0 && !showsTables())
        setTabVisible(indexOf(m_tables), true);
}

void RunChartsView::flush()
{
    m_redraw.stop();
    redraw();
}

void RunChartsView::redraw()
{
    if (!m_pending)
        return;
    m_pending = false;
    ++m_redraws;
    adaptRedrawInterval();
    m_timeline->setSnapshot(m_latest);
    m_loss->setSnapshot(m_latest);
    m_convergence->setSnapshot(m_latest);
    m_path->setSnapshot(m_latest);
    for (VariableSummaryChart *chart : m_variables)
        chart->setSnapshot(m_latest);
    if (m_latest) {
        showParametersOf(*m_latest);
        showTablesOf(*m_latest);
    }
    m_stats->setSnapshot(m_latest);
    Q_EMIT redrawn();
}

void RunChartsView::adaptRedrawInterval()
{
    // Everything the GUI thread did since the last redraw is mostly that
    // redraw's rebuilding and painting. With 64 workers that is tens of ms
    // a time, and at 20 redraws a second the thread is busy a third of the
    // time; on a machine whose cores the cluster fills, a click then waits
    // behind a redraw that the scheduler stretches. Spacing redraws so that
    // they take at most a sixth of the thread keeps it free for the user;
    // a small cluster still gets every 50 ms tick.
    timespec now{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0)
        return;
    const double cpuMs = double(now.tv_sec) * 1e3 + double(now.tv_nsec) / 1e6;
    if (m_cpuAtLastRedrawMs >= 0) {
        const double cost = cpuMs - m_cpuAtLastRedrawMs;
        m_costPerRedrawMs = m_costPerRedrawMs == 0 ? cost : 0.7 * m_costPerRedrawMs + 0.3 * cost;
        constexpr double kShareOfThread = 1.0 / 6;
        m_redraw.setInterval(std::clamp(int(m_costPerRedrawMs / kShareOfThread), kMinRedrawIntervalMs, 1000));
    }
    m_cpuAtLastRedrawMs = cpuMs;
}

bool RunChartsView::showsParameterValues() const
{
    return m_parameters->currentWidget() == m_values;
}

void RunChartsView::showParametersOf(const RunSnapshot &snapshot)
{
    const bool values = drawsParameterValues(snapshot);
    m_parameters->setCurrentWidget(values ? m_values : m_movement);
    setTabText(indexOf(m_parameters), values ? tr("w and b") : tr("Parameters"));
}

QList<ExportableChart *> RunChartsView::charts() const
{
    QList<ExportableChart *> list = {m_timeline, m_timelineOverview.get(), m_loss};
    if (showsParameterValues())
        list << m_convergence << m_path;
    else
        for (VariableSummaryChart *chart : m_variables)
            list << chart;
    for (ChartWidget *chart : m_stats->charts())
        list.append(chart);
    if (showsTables())
        for (ChartWidget *chart : m_tables->charts())
            list.append(chart);
    return list;
}

bool RunChartsView::exportAll(const QString &directory, QStringList *written, QString *error, const QString &runName)
{
    flush();
    return ChartExporter::exportAll(charts(), directory, m_latest.get(), written, error, ChartExporter::AllFormats,
                                    runName);
}

} // namespace parasync::ui
