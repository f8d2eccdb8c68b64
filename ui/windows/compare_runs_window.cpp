#include "ui/windows/compare_runs_window.h"

#include "ui/charts/chart_annotations.h"
#include "ui/charts/chart_exporter.h"
#include "ui/charts/chart_setup.h"
#include "ui/models/chart_style.h"
#include "ui/models/run_settings_model.h"
#include "ui/models/series_math.h"

#include <QAction>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QListWidget>
#include <QLogValueAxis>
#include <QMessageBox>
#include <QPixmap>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <limits>

namespace parasync::ui {

ComparisonChart::ComparisonChart(QWidget *parent)
    : ChartWidget(parent)
    , m_chart(new QChart)
    , m_view(new QChartView(m_chart, this))
    , m_xAxis(new QValueAxis)
    , m_linearAxis(new QValueAxis)
    , m_logAxis(new QLogValueAxis)
{
    styleChart(m_chart, title());
    m_linearAxis->setLabelFormat(QStringLiteral("%.3g"));
    m_logAxis->setLabelFormat(QStringLiteral("%.3g"));
    // Both y axes stay in the chart; the metric decides which one its lines
    // use and shows.
    addAxes(m_chart, m_xAxis, m_linearAxis);
    m_chart->addAxis(m_logAxis, Qt::AlignLeft);
    m_markers = std::make_unique<ChartAnnotations>(m_chart, m_xAxis);
    m_view->setRubberBand(QChartView::RectangleRubberBand);
    setChartView(m_view, new QLabel(tr("None of the runs recorded this metric: add run directories, or pick "
                                       "another metric"),
                                    this));
    setAxis(m_axis);
    setMetric(m_metric);
}

ComparisonChart::~ComparisonChart()
{
    m_markers.reset();
}

void ComparisonChart::setMetric(ComparedMetric metric)
{
    m_metric = metric;
    const bool log = comparedMetricIsLogScale(metric);
    m_logAxis->setVisible(log);
    m_linearAxis->setVisible(!log);
    (log ? static_cast<QAbstractAxis *>(m_logAxis) : m_linearAxis)->setTitleText(comparedMetricAxisTitle(metric));
    // The lines belong to one y axis: make them anew on the other.
    for (QLineSeries *line : m_lines) {
        m_chart->removeSeries(line);
        delete line;
    }
    m_lines.clear();
    m_chart->setTitle(title());
    markDirty();
}

void ComparisonChart::setAxis(Axis axis)
{
    m_axis = axis;
    m_xAxis->setTitleText(axis == Axis::GlobalStep ? tr("global step") : tr("wall time (seconds since start)"));
    m_xAxis->setLabelFormat(axis == Axis::GlobalStep ? QStringLiteral("%.0f") : QStringLiteral("%.3g"));
    m_chart->setTitle(title());
    markDirty();
}

QString ComparisonChart::yAxisTitle() const
{
    return comparedMetricIsLogScale(m_metric) ? m_logAxis->titleText() : m_linearAxis->titleText();
}

QString ComparisonChart::exportName() const
{
    return QStringLiteral("compare_%1_by_%2")
        .arg(comparedMetricKey(m_metric), m_axis == Axis::GlobalStep ? QStringLiteral("step") : QStringLiteral("time"));
}

QString ComparisonChart::title() const
{
    const QString what = comparedMetricName(m_metric);
    return m_axis == Axis::GlobalStep ? tr("%1 by global step").arg(what) : tr("%1 by wall time").arg(what);
}

void ComparisonChart::setRuns(const std::vector<ComparedRun> &runs)
{
    m_runs = runs;
    markDirty();
}

QList<QPointF> ComparisonChart::pointsOf(const RunSnapshot &run) const
{
    // The chief's full-shard loss by time has its own series.
    if (m_metric == ComparedMetric::FullLoss && m_axis == Axis::WallTime && !run.fullLossByTime.isEmpty())
        return meanPoints(run.fullLossByTime);
    QList<QPointF> byStep = comparedMetricPoints(run, m_metric);
    if (m_axis == Axis::GlobalStep)
        return byStep;
    QList<QPointF> points;
    const StepClock clock(run);
    if (clock.isEmpty())
        return points;
    for (const QPointF &p : byStep)
        points.append(QPointF(clock.secondsAt(p.x()), p.y()));
    return points;
}

void ComparisonChart::rebuild()
{
    const bool log = comparedMetricIsLogScale(m_metric);
    QAbstractAxis *yAxis = log ? static_cast<QAbstractAxis *>(m_logAxis) : m_linearAxis;
    while (m_lines.size() < m_runs.size()) {
        auto *line = new QLineSeries;
        addSeries(m_chart, line, m_xAxis, yAxis);
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
        if (log)
            points.removeIf([](const QPointF &p) { return !(p.y() > 0); });
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
    showData(xMin <= xMax);
    if (xMin <= xMax) {
        setRoundRange(m_xAxis, xMin, std::max(xMax, xMin + (m_axis == Axis::GlobalStep ? 1 : 0.01)));
        if (log)
            setLogRange(m_logAxis, yMin / 1.5, yMax * 1.5);
        else if (m_metric == ComparedMetric::HeldOutAccuracy)
            setRoundRange(m_linearAxis, 0, 1); // a fraction: its whole scale
        else
            setPaddedRange(m_linearAxis, yMin, yMax, std::max(1e-3, 0.05 * std::abs(yMax)), 0.0);
    }
    m_markers->setAnnotations(std::move(markers));
}

CsvTable ComparisonChart::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("run"),
                    m_axis == Axis::GlobalStep ? QStringLiteral("global_step") : QStringLiteral("seconds_since_start"),
                    comparedMetricKey(m_metric), QStringLiteral("directory")};
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
    , m_chart(new ComparisonChart(this))
    , m_metricPicker(new QComboBox(this))
    , m_axisPicker(new QComboBox(this))
    , m_settingsModel(new RunSettingsModel(this))
    , m_settingsView(new QTableView(this))
    , m_settingsCaption(new QLabel(this))
    , m_showShared(new QCheckBox(tr("Show the settings all runs share"), this))
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
    toolbar->addWidget(new QLabel(tr(" Metric: "), toolbar));
    m_metricPicker->setToolTip(tr("What to draw of each run: only what at least one of the runs recorded"));
    m_metricPicker->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    toolbar->addWidget(m_metricPicker);
    toolbar->addWidget(new QLabel(tr("  by: "), toolbar));
    m_axisPicker->addItem(tr("global step"), int(ComparisonChart::Axis::GlobalStep));
    m_axisPicker->addItem(tr("wall time"), int(ComparisonChart::Axis::WallTime));
    toolbar->addWidget(m_axisPicker);
    toolbar->addSeparator();
    toolbar->addAction(tr("Export..."), this, &CompareRunsWindow::exportAllInteractive);
    connect(m_metricPicker, &QComboBox::currentIndexChanged, this, [this] {
        if (m_metricPicker->currentIndex() >= 0)
            m_chart->setMetric(ComparedMetric(m_metricPicker->currentData().toInt()));
    });
    connect(m_axisPicker, &QComboBox::currentIndexChanged, this,
            [this] { m_chart->setAxis(ComparisonChart::Axis(m_axisPicker->currentData().toInt())); });

    m_list->setMaximumWidth(260);
    m_list->setToolTip(tr("The runs compared; each has its colour in the chart and the table"));
    auto *right = new QSplitter(Qt::Vertical, this);
    right->addWidget(makeSettingsPanel());
    right->addWidget(m_chart);
    right->setStretchFactor(1, 3);
    // A few differing settings need a few rows; the chart takes the rest.
    right->setSizes({180, 720});
    auto *splitter = new QSplitter(Qt::Horizontal, this);
    splitter->addWidget(m_list);
    splitter->addWidget(right);
    splitter->setStretchFactor(1, 1);
    setCentralWidget(splitter);
    statusBar()->showMessage(tr("Add run directories (the --logdir of finished runs) to compare them."));
    connect(m_loader, &RunLoader::loaded, this, &CompareRunsWindow::onLoaded);
    updateRuns();
    resize(1400, 900);
}

QWidget *CompareRunsWindow::makeSettingsPanel()
{
    auto *panel = new QWidget(this);
    auto *layout = new QVBoxLayout(panel);
    layout->setContentsMargins(4, 4, 4, 0);
    auto *caption = new QHBoxLayout;
    auto *heading = new QLabel(tr("<b>Settings that differ</b> (cluster.json)"), panel);
    caption->addWidget(heading);
    caption->addWidget(m_settingsCaption, 1);
    caption->addWidget(m_showShared);
    layout->addLayout(caption);
    m_settingsView->setModel(m_settingsModel);
    m_settingsView->setObjectName(QStringLiteral("settingsTable"));
    m_settingsView->verticalHeader()->hide();
    m_settingsView->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_settingsView->horizontalHeader()->setStretchLastSection(true);
    m_settingsView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_settingsView->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_settingsView->setAlternatingRowColors(true);
    layout->addWidget(m_settingsView);
    connect(m_showShared, &QCheckBox::toggled, m_settingsModel, &RunSettingsModel::setShowShared);
    return panel;
}

void CompareRunsWindow::addRunDirectory(const QString &directory)
{
    m_pending.emplace_back(directory, std::nullopt);
    statusBar()->showMessage(tr("Reading %1...").arg(directory));
    m_loader->load(directory);
}

void CompareRunsWindow::onLoaded(const LoadedRun &run)
{
    // The first request of this directory still waiting (one directory may
    // be added twice).
    for (auto &[directory, loaded] : m_pending)
        if (directory == run.directory && !loaded) {
            loaded = run;
            break;
        }
    while (!m_pending.empty() && m_pending.front().second) {
        const LoadedRun next = std::move(*m_pending.front().second);
        m_pending.pop_front();
        showRun(next);
    }
    if (m_pending.empty())
        Q_EMIT runsLoaded();
}

void CompareRunsWindow::showRun(const LoadedRun &run)
{
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
        // A small file read beside the step log the loader read.
        m_settings.push_back(readRunSettings(run.directory));
        m_settings.back().run = compared.name;
        QPixmap swatch(12, 12);
        swatch.fill(runColor(int(m_runs.size()) - 1));
        auto *item = new QListWidgetItem(QIcon(swatch), compared.name, m_list);
        item->setToolTip(tr("%1\n%2 records, global step %3")
                             .arg(run.directory)
                             .arg(run.info.records)
                             .arg(run.snapshot->globalStep));
        statusBar()->showMessage(tr("%1: %2 records read").arg(run.directory).arg(run.info.records));
        updateRuns();
    }
}

void CompareRunsWindow::removeSelected()
{
    const int row = m_list->currentRow();
    if (row < 0 || size_t(row) >= m_runs.size())
        return;
    m_runs.erase(m_runs.begin() + row);
    m_settings.erase(m_settings.begin() + row);
    delete m_list->takeItem(row);
    // Colours follow the position: repaint the swatches.
    for (int i = 0; i < m_list->count(); ++i) {
        QPixmap swatch(12, 12);
        swatch.fill(runColor(i));
        m_list->item(i)->setIcon(QIcon(swatch));
    }
    updateRuns();
}

void CompareRunsWindow::updateRuns()
{
    m_settingsModel->setComparison(compareRunSettings(m_settings));
    m_settingsCaption->setText(m_settingsModel->summary());
    updateMetricPicker();
    m_chart->setRuns(m_runs);
}

void CompareRunsWindow::updateMetricPicker()
{
    std::vector<const RunSnapshot *> snapshots;
    for (const ComparedRun &run : m_runs)
        snapshots.push_back(run.snapshot.get());
    const std::vector<ComparedMetric> present = metricsPresent(snapshots);
    // Keep the user's pick while the runs still have it; else the first
    // present, held-out accuracy when any run measured it.
    const QVariant picked = m_metricPicker->currentData();
    {
        const QSignalBlocker quiet(m_metricPicker);
        m_metricPicker->clear();
        for (ComparedMetric metric : present)
            m_metricPicker->addItem(comparedMetricName(metric), int(metric));
        m_metricPicker->setEnabled(!present.empty());
        const int again = picked.isValid() ? m_metricPicker->findData(picked) : -1;
        m_metricPicker->setCurrentIndex(again >= 0 ? again : (present.empty() ? -1 : 0));
    }
    if (m_metricPicker->currentIndex() >= 0)
        m_chart->setMetric(ComparedMetric(m_metricPicker->currentData().toInt()));
}

QList<ExportableChart *> CompareRunsWindow::charts() const
{
    return {m_chart};
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
