#include "ui/windows/mode_comparison_window.h"

#include "config/update_modes.h"
#include "config/workloads.h"
#include "ui/charts/mode_comparison_view.h"
#include "ui/models/chart_style.h"
#include "ui/windows/compare_runs_window.h"

#include <QAction>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QStandardPaths>
#include <QStatusBar>
#include <QToolBar>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace parasync::ui {

ModeComparisonWindow::ModeComparisonWindow(QWidget *parent)
    : QMainWindow(parent)
    , m_comparison(new ModeComparison(this))
    , m_view(new ModeComparisonView(this))
    , m_status(new QLabel(this))
    , m_progressBar(new QProgressBar(this))
    , m_cancel(new QPushButton(tr("Cancel"), this))
{
    setWindowTitle(tr("Compare modes \u2014 Parasync"));
    setObjectName(QStringLiteral("modeComparisonWindow"));
    setAttribute(Qt::WA_DeleteOnClose);

    auto *toolbar = addToolBar(tr("Comparison"));
    toolbar->setObjectName(QStringLiteral("modeComparisonToolbar"));
    m_export = toolbar->addAction(tr("Export..."), this, &ModeComparisonWindow::askExport);
    m_export->setObjectName(QStringLiteral("exportModeComparison"));
    m_export->setToolTip(tr("The figure as PNG, SVG and PDF, and its numbers as CSV"));
    m_compareRuns
        = toolbar->addAction(tr("Open the runs in Compare runs"), this, &ModeComparisonWindow::openInCompareRuns);
    m_export->setEnabled(false);
    m_compareRuns->setEnabled(false);
    // Held-out loss by default (it keeps telling modes apart after accuracy
    // saturates); accuracy is one choice away.
    toolbar->addSeparator();
    toolbar->addWidget(new QLabel(tr("Held-out: "), toolbar));
    m_heldOutMetric = new QComboBox(toolbar);
    m_heldOutMetric->setObjectName(QStringLiteral("heldOutMetric"));
    m_heldOutMetric->setToolTip(tr("The held-out metric the two 'held-out data' panels draw"));
    m_heldOutMetric->setEnabled(false);
    m_heldOutMetric->setSizeAdjustPolicy(QComboBox::AdjustToContents); // "held-out accuracy" whole
    toolbar->addWidget(m_heldOutMetric);
    connect(m_heldOutMetric, &QComboBox::activated, this,
            [this] { m_view->setHeldOutMetric(m_heldOutMetric->currentData().toString()); });

    m_status->setObjectName(QStringLiteral("modeComparisonStatus"));
    m_status->setWordWrap(true);
    m_progressBar->setRange(0, 1000);
    // Says which run and how far, so that the bar reads at a glance even
    // while the first of several runs has filled only a sliver of it.
    m_progressBar->setTextVisible(true);
    m_progressBar->setFormat(tr("starting"));
    m_progressBar->setMaximumWidth(260);
    m_cancel->setObjectName(QStringLiteral("cancelModeComparison"));
    m_cancel->setToolTip(tr("Stop the run in progress and show the runs made so far"));
    connect(m_cancel, &QPushButton::clicked, m_comparison, &ModeComparison::cancel);

    auto *band = new QWidget(this);
    auto *bandLayout = new QHBoxLayout(band);
    bandLayout->setContentsMargins(8, 6, 8, 6);
    bandLayout->addWidget(m_status, 1);
    bandLayout->addWidget(m_progressBar);
    bandLayout->addWidget(m_cancel);
    band->setStyleSheet(
        QStringLiteral("QWidget#modeComparisonBand { background: #eef3f8; border-bottom: 1px solid #c8d4e0; }"));
    band->setObjectName(QStringLiteral("modeComparisonBand"));

    auto *central = new QWidget(this);
    auto *layout = new QVBoxLayout(central);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addWidget(band);
    layout->addWidget(m_view, 1);
    setCentralWidget(central);

    connect(m_comparison, &ModeComparison::progress, this, &ModeComparisonWindow::onProgress);
    connect(m_comparison, &ModeComparison::line, this,
            [this](const QString &line) { statusBar()->showMessage(line.trimmed(), 10000); });
    connect(m_comparison, &ModeComparison::runEnded, this,
            [this](int, const QString &name, const QString &reason, const QString &failure) {
                if (!failure.isEmpty())
                    warn(tr("The %1 run failed").arg(name),
                         tr("%1\n\nThe comparison goes on with the other modes; the figure shows what this run "
                            "recorded.")
                             .arg(failure));
                else
                    statusBar()->showMessage(tr("%1: %2").arg(name, reason), 10000);
            });
    // Each run joins the figure as it ends, while the next one trains.
    connect(m_comparison, &ModeComparison::runsSummarized, this, [this](const ModeComparisonSummary &summary) {
        m_view->setSummary(summary);
        offerHeldOutMetrics(summary);
    });
    connect(m_comparison, &ModeComparison::finished, this, &ModeComparisonWindow::onFinished);
    resize(1500, 950);
}

ModeComparisonWindow::~ModeComparisonWindow()
{
    // The comparison (a child) outlives this part of the window: nothing it
    // says while stopping may reach it.
    disconnect(m_comparison, nullptr, this, nullptr);
    disconnect(m_comparison, nullptr, m_view, nullptr);
}

void ModeComparisonWindow::warn(const QString &title, const QString &text)
{
    // Not exec(): the comparison goes on while the message is up.
    auto *box = new QMessageBox(QMessageBox::Warning, title, text, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

ModeComparisonOptions ModeComparisonWindow::defaultOptions(const ClusterPlan &plan)
{
    ModeComparisonOptions options;
    options.plan = withComparisonDefaults(plan);
    options.modes = comparedModes(plan.training.mode.staleness());
    options.targetLoss = defaultTargetLoss(options.plan);
    options.outputDirectory = QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation)
                              + QStringLiteral("/runs/compare-")
                              + QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
    return options;
}

ModeComparisonOptions ModeComparisonWindow::workloadOptions(const std::string &name)
{
    const Workload named = workload(name);
    ModeComparisonOptions options = defaultOptions(named.plan);
    options.modes = parseModeSpecList(named.contenders);
    options.targetLoss = named.targetLoss;
    options.runSeconds = named.compareSeconds;
    options.stopAtTarget = named.stopAtTarget;
    options.seeds = named.seeds;
    return options;
}

ModeComparisonWindow *ModeComparisonWindow::open(QWidget *parent, ModeComparisonOptions options,
                                                 const QString &nodeBinary)
{
    if (options.outputDirectory.isEmpty())
        options.outputDirectory = defaultOptions(options.plan).outputDirectory;
    auto *window = new ModeComparisonWindow(parent);
    window->setWindowFlag(Qt::Window);
    window->show();
    window->start(options, nodeBinary);
    return window;
}

bool ModeComparisonWindow::start(const ModeComparisonOptions &options, const QString &nodeBinary)
{
    if (!nodeBinary.isEmpty())
        m_comparison->setNodeBinary(nodeBinary);
    m_view->setSetting(describeComparisonSetting(options.plan, options.seeds));
    QString error;
    if (!m_comparison->start(options, &error)) {
        m_status->setText(tr("The comparison cannot start: %1").arg(error));
        m_cancel->setEnabled(false);
        warn(tr("Compare modes"), tr("The comparison cannot start: %1").arg(error));
        return false;
    }
    QStringList modes;
    for (const proto::ModeConfig &mode : options.modes)
        modes << QString::fromStdString(describeMode(mode));
    if (options.seeds.size() > 1) {
        QStringList seeds;
        for (const uint64_t seed : options.seeds)
            seeds << QString::number(seed);
        modes.last() += tr(", each with seeds %1").arg(seeds.join(QStringLiteral(", ")));
    }
    if (options.stopAtTarget)
        m_status->setText(tr("Starting: %1, one after the other, each until the chief's full loss stays at or below "
                             "%2 (at most %3 s)")
                              .arg(modes.join(QStringLiteral(", ")))
                              .arg(options.targetLoss, 0, 'g', 3)
                              .arg(options.runSeconds));
    else
        m_status->setText(tr("Starting: %1, one after the other, each for %2 s, timed to a full loss of %3")
                              .arg(modes.join(QStringLiteral(", ")))
                              .arg(options.runSeconds)
                              .arg(options.targetLoss, 0, 'g', 3));
    return true;
}

void ModeComparisonWindow::onProgress(const ModeRunProgress &progress)
{
    const ModeComparisonOptions &options = m_comparison->options();
    const double share = std::min(1.0, progress.seconds / std::max(1, options.runSeconds));
    m_progressBar->setValue(int(1000 * (progress.index + share) / std::max(1, progress.count)));
    m_progressBar->setFormat(
        tr("run %1 of %2: %3 s").arg(progress.index + 1).arg(progress.count).arg(progress.seconds, 0, 'f', 0));
    m_status->setText(tr("Run %1 of %2: %3 \u2014 global step %4, %5 s of at most %6, full loss %7 (target %8)")
                          .arg(progress.index + 1)
                          .arg(progress.count)
                          .arg(progress.name)
                          .arg(progress.globalStep)
                          .arg(progress.seconds, 0, 'f', 0)
                          .arg(options.runSeconds)
                          .arg(std::isfinite(progress.latestLoss) ? QString::number(progress.latestLoss, 'g', 3)
                                                                  : tr("not logged yet"))
                          .arg(options.targetLoss, 0, 'g', 3));
}

void ModeComparisonWindow::onFinished(const ModeComparisonSummary &summary)
{
    m_done = true;
    m_view->setSummary(summary);
    offerHeldOutMetrics(summary);
    m_progressBar->setValue(m_progressBar->maximum());
    m_progressBar->setFormat(tr("done"));
    m_cancel->setEnabled(false);
    m_export->setEnabled(true);
    m_compareRuns->setEnabled(!summary.runs.empty());
    // The comparison's folder gets the figure and its numbers beside the
    // runs, as headless mode leaves it.
    const QString folder = m_comparison->options().outputDirectory;
    QStringList written;
    QString error;
    const bool saved = exportTo(folder, &written, &error);
    m_status->setText(modeComparisonVerdict(summary) + QLatin1Char(' ')
                      + (saved ? tr("Runs, figure and comparison.csv are in %1.").arg(QDir::toNativeSeparators(folder))
                               : tr("The figure could not be saved beside the runs: %1").arg(error)));
    Q_EMIT comparisonFinished();
}

void ModeComparisonWindow::offerHeldOutMetrics(const ModeComparisonSummary &summary)
{
    const QStringList names = heldOutMetricNames(summary);
    QStringList offered;
    for (int i = 0; i < m_heldOutMetric->count(); ++i)
        offered << m_heldOutMetric->itemData(i).toString();
    if (offered == names)
        return;
    const QString chosen = m_heldOutMetric->currentData().toString();
    m_heldOutMetric->clear();
    for (const QString &name : names)
        m_heldOutMetric->addItem(metricText(name), name);
    const QString shown = names.contains(chosen) ? chosen : heldOutMetric(summary);
    m_heldOutMetric->setCurrentIndex(std::max(0, int(names.indexOf(shown))));
    m_heldOutMetric->setEnabled(names.size() > 1);
}

bool ModeComparisonWindow::exportTo(const QString &directory, QStringList *written, QString *error)
{
    return exportModeComparison(m_view, directory, written, error);
}

void ModeComparisonWindow::askExport()
{
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Export the comparison into"));
    if (dir.isEmpty())
        return;
    QStringList written;
    QString error;
    if (exportTo(dir, &written, &error))
        statusBar()->showMessage(tr("Wrote %1 files into %2").arg(written.size()).arg(dir), 10000);
    else
        warn(tr("Export failed"), error);
}

void ModeComparisonWindow::openInCompareRuns()
{
    const auto summary = m_view->summary();
    if (!summary)
        return;
    auto *window = new CompareRunsWindow(this);
    window->setWindowFlag(Qt::Window);
    for (const ModeRunSummary &run : summary->runs)
        window->addRunDirectory(run.directory);
    window->show();
}

void ModeComparisonWindow::closeEvent(QCloseEvent *event)
{
    // Closing is cancelling: the tasks go with the window.
    m_comparison->cancel();
    event->accept();
}

} // namespace parasync::ui
