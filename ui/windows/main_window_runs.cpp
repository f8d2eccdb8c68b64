// MainWindow: runs and cluster files on disk -- a run directory opened and
// replayed, runs compared, the cluster designer, cluster files, and the
// menus of recent runs and recent cluster files.

#include "ui/windows/main_window.h"

#include "base/error.h"
#include "config/cluster_file.h"
#include "config/cluster_plan_file.h"
#include "ui/charts/run_charts_view.h"
#include "ui/dialogs/cluster_designer_dialog.h"
#include "ui/models/recent_paths.h"
#include "ui/models/run_loader.h"
#include "ui/windows/compare_runs_window.h"
#include "ui/windows/run_replay_window.h"
#include "ui/windows/window_logging.h"

#include <QFileDialog>
#include <QMenu>
#include <QSettings>
#include <QStatusBar>

#include <functional>

namespace parasync::ui {

namespace {

const QString kRunDirKey = QStringLiteral("lastRunDirectory");

// A "recent" submenu: its entries newest first (each named `entryName`,
// its path the action's data), then Clear. Filled again each time it opens,
// so that a run deleted meanwhile is not offered.
void fillRecentMenu(QMenu *menu, RecentPaths recent, const QString &entryName, const QString &emptyText,
                    const std::function<void(const QString &)> &open, const std::function<void()> &refill)
{
    // Later, not at once: the action being triggered may be among them.
    for (QAction *action : menu->actions()) {
        menu->removeAction(action);
        action->deleteLater();
    }
    const QStringList paths = recent.paths();
    for (qsizetype i = 0; i < paths.size(); ++i) {
        const QString &path = paths[i];
        // &1 ... &9, as desktop applications number their recent files.
        const QString text = i < 9 ? QStringLiteral("&%1 %2").arg(i + 1).arg(RecentPaths::menuText(path))
                                   : RecentPaths::menuText(path);
        QAction *action = menu->addAction(text, menu, [open, path] { open(path); });
        action->setObjectName(entryName);
        action->setData(path);
        action->setToolTip(path);
    }
    if (paths.isEmpty())
        menu->addAction(emptyText)->setEnabled(false);
    menu->addSeparator();
    QAction *clear = menu->addAction(QObject::tr("Clear"), menu, [recent, refill]() mutable {
        recent.clear();
        refill();
    });
    clear->setObjectName(entryName + QStringLiteral("Clear"));
    clear->setEnabled(!paths.isEmpty());
}

} // namespace

void MainWindow::openRunDirectory(const QString &directory)
{
    qCDebug(lcUi) << "opening the run directory" << directory;
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
    addRecentRun(run.directory);
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

void MainWindow::setUpRecentMenus()
{
    // The demo's runs from before the list existed are its first entries.
    RecentPaths::runs().seedOnce(demoRuns());
    m_recentRunsMenu->setObjectName(QStringLiteral("recentRuns"));
    m_recentMenu->setObjectName(QStringLiteral("recentClusterFiles"));
    connect(m_recentRunsMenu, &QMenu::aboutToShow, this, &MainWindow::updateRecentRunsMenu);
    connect(m_recentMenu, &QMenu::aboutToShow, this, &MainWindow::updateRecentMenu);
    updateRecentRunsMenu();
    updateRecentMenu();
}

void MainWindow::addRecentRun(const QString &directory)
{
    if (directory.isEmpty())
        return;
    RecentPaths::runs().add(directory);
    updateRecentRunsMenu();
}

void MainWindow::updateRecentRunsMenu()
{
    fillRecentMenu(
        m_recentRunsMenu, RecentPaths::runs(), QStringLiteral("recentRun"),
        tr("No runs yet: start the demo, or open a run directory"),
        [this](const QString &directory) {
            qCDebug(lcUi) << "recent run chosen:" << directory;
            openRunDirectory(directory);
        },
        [this] { updateRecentRunsMenu(); });
}

void MainWindow::addRecentClusterFile(const QString &path)
{
    RecentPaths::clusterFiles().add(path);
    updateRecentMenu();
}

void MainWindow::updateRecentMenu()
{
    fillRecentMenu(
        m_recentMenu, RecentPaths::clusterFiles(), QStringLiteral("recentClusterFile"), tr("No cluster files yet"),
        [this](const QString &path) { openClusterFile(path); }, [this] { updateRecentMenu(); });
}

} // namespace parasync::ui
