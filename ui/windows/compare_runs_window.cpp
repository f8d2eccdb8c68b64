#include "ui/windows/compare_runs_window.h"

#include "ui/charts/chart_annotations.h"
#include "ui/charts/chart_exporter.h"
#include "ui/charts/chart_setup.h"
#include "ui/models/chart_style.h"
#include "ui/models/series_math.h"

#include <QAction>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLineSeries>
#include <QListWidget>
#include <QLogValueAxis>
#include <QMessageBox>
#include <QPixmap>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QToolBar>
#include <QValueAxis>

#include <algorithm>
#include <limits>

namespace parasync::ui {

ComparisonChart::ComparisonChart(Quantity quantity, Axis axis, QWidget *parent)
    : ChartWidget(parent)
    , m_quantity(quantity)
    , m_axis(axis)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_xAxis(new QValueAxis)
    , m_yAxis(new QLogValueAxis)
{
    styleChart(m_chart, title());
    m_xAxis->setTitleText(axis == Axis::GlobalStep ? tr("global step") : tr("wall time (seconds since start)"));
    if (axis == Axis::GlobalStep)
        m_xAxis->setLabelFormat(QStringLiteral("%.0f"));
    m_yAxis->setTitleText(quantity == Quantity::Loss ? tr("loss (log scale)") : tr("distance to (2, 10) (log scale)"));
    m_yAxis->setLabelFormat(QStringLiteral("%.3g"));
    addAxes(m_chart, m_xAxis, m_yAxis);
    m_markers = std::make_unique<ChartAnnotations>(m_chart, m_xAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view);
}

ComparisonChart::~ComparisonChart()
{
    m_markers.reset();
}

QString ComparisonChart::exportName() const
{
    return QStringLiteral("compare_%1_by_%2")
        .arg(m_quantity == Quantity::Loss ? QStringLiteral("loss") : QStringLiteral("distance"),
             m_axis == Axis::GlobalStep ? QStringLiteral("step") : QStringLiteral("time"));
}

QString ComparisonChart::title() const
{
    const QString what = m_quantity == Quantity::Loss ? tr("Loss") : tr("Distance to the true (w, b)");
    return m_axis == Axis::GlobalStep ? tr("%1 by global step").arg(what) : tr("%1 by wall time").arg(what);
}

void ComparisonChart::setRuns(const std::vector<ComparedRun> &runs)
{
    m_runs = runs;
    markDirty();
}

QList<QPointF> ComparisonChart::pointsOf(const RunSnapshot &run) const
{
    QList<QPointF> byStep;
    QList<QPointF> points;
    if (m_quantity == Quantity::Loss) {
        if (!run.fullLoss.isEmpty()) {
            // The chief's full-shard loss is the comparable one; by time it
            // has its own series.
            if (m_axis == Axis::WallTime && !run.fullLossByTime.isEmpty())
                return meanPoints(run.fullLossByTime);
            byStep = meanPoints(run.fullLoss);
        } else if (!run.batchLossByWorker.empty()) {
            // No full-loss evaluations (e.g. a run replayed from metrics.csv):
            // the chief's batch loss, smoothed, is the next best thing.
            const auto &series = run.batchLossByWorker.begin()->second;
            const std::vector<double> ema = debiasedEma(series.buckets(), 0.6);
            for (size_t i = 0; i < ema.size(); ++i)
                byStep.append(QPointF(series.buckets()[i].x, ema[i]));
        }
    } else {
        const ParameterPath path = parameterPath(run);
        for (size_t i = 0; i < path.steps.size(); ++i)
            byStep.append(QPointF(path.steps[i], distanceToTruth(path.w[i], path.b[i])));
    }
    if (m_axis == Axis::GlobalStep)
        return byStep;
    const StepClock clock(run);
    if (clock.isEmpty())
        return points;
    for (const QPointF &p : byStep)
        points.append(QPointF(clock.secondsAt(p.x()), p.y()));
    return points;
}

void ComparisonChart::rebuild()
{
    while (m_lines.size() < m_runs.size()) {
        auto *line = new QLineSeries;
        addSeries(m_chart, line, m_xAxis, m_yAxis);
        m_lines.push_back(line);
    }
    while (m_lines.size() > m_runs.size()) {
        m_chart->removeSeries(m_lines.back());
        delete m_lines.back();
        m_lines.pop_back();
    }
    double xMin = std::numeric_limits<double>::max(), xMax = std::numeric_limits<double>::lowest();
    double yMin = std::numeric_limits<double>::max(), yMax = std::numeric_limits<double>::lowest();
    std::vector<ChartAnnotations::Annotation> markers;
    for (size_t i = 0; i < m_runs.size(); ++i) {
        const RunSnapshot &run = *m_runs[i].snapshot;
        QList<QPointF> points = pointsOf(run);
        points.removeIf([](const QPointF &p) { return !(p.y() > 0); }); // log axis
        for (const QPointF &p : points) {
            xMin = std::min(xMin, p.x());
            xMax = std::max(xMax, p.x());
            yMin = std::min(yMin, p.y());
            yMax = std::max(yMax, p.y());
        }
        m_lines[i]->setName(m_runs[i].name);
        m_lines[i]->setPen(QPen(runColor(int(i)), 2));
        m_lines[i]->replace(points);
        for (const auto &change : run.modeChanges) {
            const double x
                = m_axis == Axis::GlobalStep ? double(change.globalStep) : change.wallTime - run.startWallTime;
            markers.push_back({x, std::numeric_limits<double>::quiet_NaN(),
                               QStringLiteral("%1 \u2192 %2").arg(m_runs[i].name, shortModeLabel(change.current)),
                               runColor(int(i)).darker(115)});
        }
    }
    if (xMin <= xMax) {
        setRoundRange(m_xAxis, xMin, std::max(xMax, xMin + (m_axis == Axis::GlobalStep ? 1 : 0.01)));
        setLogRange(m_yAxis, yMin / 1.5, yMax * 1.5);
    }
    m_markers->setAnnotations(std::move(markers));
}

CsvTable ComparisonChart::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("run"),
                    m_axis == Axis::GlobalStep ? QStringLiteral("global_step") : QStringLiteral("seconds_since_start"),
                    m_quantity == Quantity::Loss ? QStringLiteral("loss") : QStringLiteral("distance_to_true_wb"),
                    QStringLiteral("directory")};
    for (const ComparedRun &run : m_runs)
        for (const QPointF &p : pointsOf(*run.snapshot))
            table.rows.push_back(
                {run.name, QString::number(p.x(), 'g', 12), QString::number(p.y(), 'g', 8), run.directory});
    return table;
}

int ComparisonChart::modeMarkerCount() const
{
    return m_markers->count();
}

int ComparisonChart::pointCount() const
{
    int count = 0;
    for (const QLineSeries *line : m_lines)
        count += int(line->count());
    return count;
}

CompareRunsWindow::CompareRunsWindow(QWidget *parent)
    : QMainWindow(parent)
    , m_loader(new RunLoader(this))
    , m_list(new QListWidget(this))
{
    setWindowTitle(tr("Compare runs \u2014 Parasync"));
    setAttribute(Qt::WA_DeleteOnClose);
    auto *toolbar = addToolBar(tr("Runs"));
    toolbar->setObjectName(QStringLiteral("compareToolbar"));
    QAction *add = toolbar->addAction(tr("Add run directory..."), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Add a run directory (--logdir)"));
        if (!dir.isEmpty())
            addRunDirectory(dir);
    });
    add->setShortcut(QKeySequence::Open);
    toolbar->addAction(tr("Remove"), this, &CompareRunsWindow::removeSelected);
    toolbar->addSeparator();
    toolbar->addAction(tr("Export all..."), this, &CompareRunsWindow::exportAllInteractive);

    auto *grid = new QWidget(this);
    auto *gridLayout = new QGridLayout(grid);
    gridLayout->setContentsMargins(0, 0, 0, 0);
    const std::pair<ComparisonChart::Quantity, ComparisonChart::Axis> kinds[] = {
        {ComparisonChart::Quantity::Loss, ComparisonChart::Axis::GlobalStep},
        {ComparisonChart::Quantity::Loss, ComparisonChart::Axis::WallTime},
        {ComparisonChart::Quantity::Distance, ComparisonChart::Axis::GlobalStep},
        {ComparisonChart::Quantity::Distance, ComparisonChart::Axis::WallTime},
    };
    for (int i = 0; i < 4; ++i) {
        auto *chart = new ComparisonChart(kinds[i].first, kinds[i].second, grid);
        gridLayout->addWidget(chart, i / 2, i % 2);
        m_charts.push_back(chart);
    }
    m_list->setMaximumWidth(260);
    m_list->setToolTip(tr("The runs compared; each has its colour in every chart"));
    auto *splitter = new QSplitter(Qt::Horizontal, this);
    splitter->addWidget(m_list);
    splitter->addWidget(grid);
    splitter->setStretchFactor(1, 1);
    setCentralWidget(splitter);
    statusBar()->showMessage(tr("Add run directories (the --logdir of finished runs) to compare them."));
    connect(m_loader, &RunLoader::loaded, this, &CompareRunsWindow::onLoaded);
    resize(1400, 900);
}

void CompareRunsWindow::addRunDirectory(const QString &directory)
{
    ++m_loading;
    statusBar()->showMessage(tr("Reading %1...").arg(directory));
    m_loader->load(directory);
}

void CompareRunsWindow::onLoaded(const LoadedRun &run)
{
    --m_loading;
    if (!run.snapshot) {
        statusBar()->showMessage(run.error);
        auto *box
            = new QMessageBox(QMessageBox::Warning, tr("Cannot compare this run"), run.error, QMessageBox::Ok, this);
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->open();
    } else {
        ComparedRun compared;
        compared.directory = run.directory;
        compared.name = QFileInfo(run.directory).fileName();
        compared.snapshot = run.snapshot;
        m_runs.push_back(compared);
        QPixmap swatch(12, 12);
        swatch.fill(runColor(int(m_runs.size()) - 1));
        auto *item = new QListWidgetItem(QIcon(swatch), compared.name, m_list);
        item->setToolTip(tr("%1\n%2 records, global step %3")
                             .arg(run.directory)
                             .arg(run.info.records)
                             .arg(run.snapshot->globalStep));
        statusBar()->showMessage(tr("%1: %2 records read").arg(run.directory).arg(run.info.records));
        updateCharts();
    }
    if (m_loading == 0)
        Q_EMIT runsLoaded();
}

void CompareRunsWindow::removeSelected()
{
    const int row = m_list->currentRow();
    if (row < 0 || size_t(row) >= m_runs.size())
        return;
    m_runs.erase(m_runs.begin() + row);
    delete m_list->takeItem(row);
    // Colours follow the position: repaint the swatches.
    for (int i = 0; i < m_list->count(); ++i) {
        QPixmap swatch(12, 12);
        swatch.fill(runColor(i));
        m_list->item(i)->setIcon(QIcon(swatch));
    }
    updateCharts();
}

void CompareRunsWindow::updateCharts()
{
    for (ComparisonChart *chart : m_charts)
        chart->setRuns(m_runs);
}

QList<ExportableChart *> CompareRunsWindow::charts() const
{
    QList<ExportableChart *> list;
    for (ComparisonChart *chart : m_charts)
        list.append(chart);
    return list;
}

bool CompareRunsWindow::exportAll(const QString &directory, QStringList *written, QString *error)
{
    return ChartExporter::exportAll(charts(), directory, nullptr, written, error);
}

void CompareRunsWindow::exportAllInteractive()
{
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Export the comparison into"));
    if (dir.isEmpty())
        return;
    QStringList written;
    QString error;
    if (exportAll(dir, &written, &error))
        statusBar()->showMessage(tr("Wrote %1 files into %2").arg(written.size()).arg(dir));
    else
        QMessageBox::warning(this, tr("Export failed"), error);
}

} // namespace parasync::ui
