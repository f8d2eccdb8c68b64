// MainWindow: runs and cluster files on disk -- a run directory opened and
// replayed, runs compared, the cluster designer, cluster files and the
// recent-files menu.

#include "ui/windows/main_window.h"

#include "base/error.h"
#include "config/cluster_file.h"
#include "config/cluster_plan_file.h"
#include "ui/charts/run_charts_view.h"
#include "ui/dialogs/cluster_designer_dialog.h"
#include "ui/models/run_loader.h"
#include "ui/windows/compare_runs_window.h"
#include "ui/windows/run_replay_window.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QSettings>
#include <QStatusBar>

namespace parasync::ui {

namespace {

constexpr int kMaxRecentFiles = 8;
const QString kRecentKey = QStringLiteral("recentClusterFiles");
const QString kRunDirKey = QStringLiteral("lastRunDirectory");
} // namespace

void MainWindow::openRunDirectory(const QString &directory)
{
    QSettings().setValue(kRunDirKey, directory);
    statusBar()->showMessage(tr("Reading %1...").arg(directory));
    m_loader->load(directory);
}

void MainWindow::onRunLoaded(const LoadedRun &run)
{
    if (!m_finalReplay.isEmpty() && run.directory == m_finalReplay) {
        m_finalReplay.clear();
        if (run.snapshot && !m_launcher->anyRunning()) {
            m_charts->setSnapshot(run.snapshot);
            statusBar()->showMessage(tr("The run finished; the charts show all of it, from its run directory %1 "
                                        "(%2 records).")
                                         .arg(run.directory)
                                         .arg(run.info.records),
                                     20000);
        }
        return;
    }
    if (!run.snapshot) {
        showError(tr("Cannot open the run"), run.error);
        statusBar()->showMessage(run.error, 15000);
        return;
    }
    auto *window = new RunReplayWindow(run, this);
    window->setWindowFlag(Qt::Window);
    window->show();
    statusBar()->showMessage(tr("Opened %1").arg(run.directory), 8000);
}

void MainWindow::askOpenRun()
{
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a run directory (--logdir)"),
                                                          QSettings().value(kRunDirKey).toString());
    if (!dir.isEmpty())
        openRunDirectory(dir);
}

void MainWindow::compareRuns(const QStringList &directories)
{
    auto *window = new CompareRunsWindow(this);
    window->setWindowFlag(Qt::Window);
    for (const QString &dir : directories)
        window->addRunDirectory(dir);
    window->show();
}

void MainWindow::askCompareRuns()
{
    // Directories are added one by one in the comparison window; start it with one.
    const QString dir = QFileDialog::getExistingDirectory(this, tr("First run directory to compare"),
                                                          QSettings().value(kRunDirKey).toString());
    if (dir.isEmpty())
        return;
    compareRuns({dir});
}

void MainWindow::designCluster(const ClusterPlan &plan, const QString &path)
{
    ClusterDesignerDialog dialog(plan, path, this);
    connect(&dialog, &ClusterDesignerDialog::saved, this, [this](const QString &saved) {
        m_currentClusterFile = saved;
        addRecentClusterFile(saved);
        statusBar()->showMessage(tr("Saved %1").arg(saved), 8000);
    });
    if (dialog.exec() != QDialog::Accepted)
        return;
    ClusterPlan designed;
    QString error;
    if (!dialog.plan(&designed, &error)) {
        showError(tr("The cluster is not valid"), error);
        return;
    }
    m_currentClusterFile = dialog.filePath();
    startCluster(designed);
}

void MainWindow::openClusterFile(const QString &path)
{
    ClusterPlan plan;
    try {
        plan = planFromClusterFile(readClusterFile(path.toStdString()));
    } catch (const InputError &e) {
        showError(tr("Cannot open the cluster file"), QString::fromStdString(e.what()));
        return;
    }
    addRecentClusterFile(path);
    m_currentClusterFile = path;
    designCluster(plan, path);
}

void MainWindow::askOpenClusterFile()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a cluster file"), m_currentClusterFile,
                                                      tr("Cluster files (*.json);;All files (*)"));
    if (!path.isEmpty())
        openClusterFile(path);
}

void MainWindow::addRecentClusterFile(const QString &path)
{
    QSettings settings;
    QStringList recent = settings.value(kRecentKey).toStringList();
    const QString absolute = QFileInfo(path).absoluteFilePath();
    recent.removeAll(absolute);
    recent.prepend(absolute);
    while (recent.size() > kMaxRecentFiles)
        recent.removeLast();
    settings.setValue(kRecentKey, recent);
    updateRecentMenu();
}

void MainWindow::updateRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = QSettings().value(kRecentKey).toStringList();
    for (const QString &path : recent)
        m_recentMenu->addAction(path, this, [this, path] { openClusterFile(path); });
    m_recentMenu->setEnabled(!recent.isEmpty());
}

} // namespace parasync::ui
