#include "ui/windows/main_window.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "base/version.h"
#include "config/cluster_file.h"
#include "config/cluster_plan_file.h"
#include "config/plan_from_flags.h"
#include "config/workloads.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/launch_sequence.h"
#include "ui/charts/run_charts_view.h"
#include "ui/dialogs/preflight_dialog.h"
#include "ui/models/recent_paths.h"
#include "ui/models/run_loader.h"
#include "ui/windows/mode_comparison_window.h"
#include "ui/windows/mode_controls.h"
#include "ui/windows/pace_control.h"
#include "ui/windows/process_panel.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

namespace parasync::ui {

namespace {

// ps:0's pair, for the status line: whether a backup holds every
// acknowledged update, and how often it took over. Empty without a backup.
QString psPairText(const proto::ReplicaStatus &replica, size_t failovers)
{
    if (replica.role() == proto::REPLICA_ROLE_UNSPECIFIED)
        return {};
    QString text
        = replica.role() == proto::REPLICA_PRIMARY
              ? (replica.peer_attached()
                     ? QObject::tr(" \u00b7 ps:0 at %1, its backup at %2 follows")
                     : QObject::tr(" \u00b7 ps:0 at %1 serves without its backup (%2 does not follow: "
                                   "its state has no copy)"))
                    .arg(QString::fromStdString(replica.address()), QString::fromStdString(replica.peer()))
              : QObject::tr(" \u00b7 watching ps:0's backup at %1").arg(QString::fromStdString(replica.address()));
    // A primary cut off from both its voters: the cluster waits on it, and
    // why. (Epoch 0: a node without leases, or one from before them.)
    if (replica.role() == proto::REPLICA_PRIMARY && replica.epoch() > 0 && !replica.lease_held())
        text += QObject::tr(" \u00b7 it does not hold its lease (epoch %1) and acknowledges nothing: %2")
                    .arg(replica.epoch())
                    .arg(QString::fromStdString(replica.lease_problem()));
    if (failovers == 1)
        text += QObject::tr(" \u00b7 1 failover");
    else if (failovers > 1)
        text += QObject::tr(" \u00b7 %1 failovers").arg(failovers);
    return text;
}

} // namespace

MainWindow::MainWindow(ClusterLauncher *launcher, ClusterWatcher *watcher, QWidget *parent)
    : QMainWindow(parent)
    , m_launcher(launcher)
    , m_watcher(watcher)
    , m_launch(new LaunchSequence(launcher, watcher, this))
    , m_loader(new RunLoader(this))
    , m_charts(new RunChartsView(this))
    , m_processes(new ProcessPanel(launcher, watcher, this))
    , m_modes(new ModeControls(this))
    , m_pace(new PaceControl(this))
    , m_connectionLabel(new QLabel(this))
    , m_stepLabel(new QLabel(this))
    , m_alert(new QLabel(this))
    , m_rateLabel(new QLabel(this))
{
    qRegisterMetaType<parasync::RunSnapshot>();
    qRegisterMetaType<parasync::proto::ModeConfig>();
    setWindowTitle(tr("Parasync"));
    setObjectName(QStringLiteral("mainWindow"));

    auto *splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(m_charts);
    splitter->addWidget(m_processes);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({620, 280}); // room for the table and a readable log
    m_alert->setObjectName(QStringLiteral("stallAlert"));
    m_alert->setWordWrap(true);
    m_alert->setStyleSheet(QStringLiteral("QLabel { background: #fff3cd; color: #5c4400; border: 1px solid #e0c060; "
                                          "padding: 6px; }"));
    m_alert->hide();
    auto *central = new QWidget(this);
    auto *centralLayout = new QVBoxLayout(central);
    centralLayout->setContentsMargins(0, 0, 0, 0);
    centralLayout->addWidget(m_alert);
    centralLayout->addWidget(splitter, 1);
    setCentralWidget(central);

    createActions();

    m_connectionLabel->setObjectName(QStringLiteral("connectionState"));
    m_connectionLabel->setText(tr("Not connected"));
    m_stepLabel->setMinimumWidth(160);
    m_rateLabel->setToolTip(tr("Chart refreshes per second"));
    statusBar()->addPermanentWidget(m_stepLabel);
    statusBar()->addPermanentWidget(m_rateLabel);
    statusBar()->addWidget(m_connectionLabel, 1);
    statusBar()->showMessage(tr("Start the demo cluster (Ctrl+D), design one, connect to a running cluster, or open "
                                "a run directory."),
                             15000);

    connect(m_watcher, &ClusterWatcher::snapshotReady, this, &MainWindow::onSnapshotReady);
    // About once a second, and small: straight to the Tables tab.
    connect(m_watcher, &ClusterWatcher::tablesReady, m_charts, &RunChartsView::setTables);
    connect(m_watcher, &ClusterWatcher::connectionStateChanged, this, &MainWindow::onConnectionState);
    connect(m_watcher, &ClusterWatcher::modeChanged, this, &MainWindow::onModeChanged);
    connect(m_watcher, &ClusterWatcher::controlFinished, this, &MainWindow::onControlFinished);
    connect(m_watcher, &ClusterWatcher::clusterFinished, this, &MainWindow::onClusterFinished);
    connect(m_launcher, &ClusterLauncher::taskChanged, this, &MainWindow::onTaskChanged);
    // The sequence's questions come while startCluster runs: the dialogs are modal.
    connect(m_launch, &LaunchSequence::preflightStarted, this, &MainWindow::showPreflight);
    connect(m_launch, &LaunchSequence::portsTaken, this, &MainWindow::askAboutTakenPorts);
    connect(m_launch, &LaunchSequence::launched, this, &MainWindow::onLaunched);
    connect(m_launch, &LaunchSequence::failed, this, [this](const QString &error) {
        showError(tr("The cluster did not start"),
                  error + tr("\n\nThe node binary in use is %1.").arg(m_launcher->nodeBinary()));
    });
    connect(m_launcher, &ClusterLauncher::allExited, this, [this] {
        statusBar()->showMessage(tr("Every task of the cluster has exited."), 10000);
        updateActions();
        // The run directory holds every step, also those the live telemetry
        // missed (a short run, a slow watcher): complete the charts from it.
        if (!m_runDirectory.isEmpty() && QDir(m_runDirectory).exists(QStringLiteral("steps.jsonl"))) {
            m_finalReplay = QDir(m_runDirectory).absolutePath();
            m_loader->load(m_runDirectory);
        }
    });
    connect(m_charts, &RunChartsView::redrawn, this, &MainWindow::onRedrawn);
    connect(m_modes, &ModeControls::modeRequested, this, [this](const proto::ModeConfig &mode) {
        statusBar()->showMessage(
            tr("Asking ps:0 at %1 for %2...").arg(m_watcher->address(), QString::fromStdString(describeMode(mode))),
            5000);
        m_watcher->setMode(mode);
    });
    connect(m_pace, &PaceControl::paceRequested, this, &MainWindow::setWorkersPace);
    connect(m_watcher, &ClusterWatcher::paceChanged, this, [this](const QString &, int computeMs) {
        m_pace->setComputeMs(computeMs);
        statusBar()->showMessage(tr("Workers' pace: %1").arg(PaceControl::describe(computeMs)), 5000);
    });
    connect(m_processes, &ProcessPanel::statusMessage, this,
            [this](const QString &message) { statusBar()->showMessage(message, 8000); });
    connect(m_loader, &RunLoader::loaded, this, &MainWindow::onRunLoaded);

    // Refresh rate, once a second: the redraw batching at work.
    auto *rate = new QTimer(this);
    connect(rate, &QTimer::timeout, this, [this] {
        const qint64 now = m_charts->redrawCount();
        m_rateLabel->setText(m_connected ? tr("%1 refreshes/s").arg(now - m_redrawsAtLastRate) : QString());
        m_redrawsAtLastRate = now;
    });
    rate->start(1000);
    updateActions();
    restoreWindowLayout();
}

MainWindow::~MainWindow() = default;

void MainWindow::createActions()
{
    QMenu *cluster = menuBar()->addMenu(tr("&Cluster"));
    QToolBar *toolbar = addToolBar(tr("Cluster"));
    toolbar->setObjectName(QStringLiteral("clusterToolbar"));
    toolbar->setToolButtonStyle(Qt::ToolButtonTextOnly);

    m_startDemo = new QAction(tr("Start demo cluster"), this);
    m_startDemo->setObjectName(QStringLiteral("startDemo"));
    m_startDemo->setShortcut(QKeySequence(tr("Ctrl+D")));
    m_startDemo->setToolTip(tr("ps on 127.0.0.1:2222, workers on :2223 and :2224, linear regression y = 2x + 10"));
    connect(m_startDemo, &QAction::triggered, this, &MainWindow::startDemo);

    auto *newCluster = new QAction(tr("New cluster..."), this);
    newCluster->setObjectName(QStringLiteral("newCluster"));
    newCluster->setShortcut(QKeySequence::New);
    connect(newCluster, &QAction::triggered, this, [this] { designCluster(demoPlan(), QString()); });

    auto *openCluster = new QAction(tr("Open cluster file..."), this);
    openCluster->setObjectName(QStringLiteral("openClusterFile"));
    connect(openCluster, &QAction::triggered, this, &MainWindow::askOpenClusterFile);

    auto *saveCluster = new QAction(tr("Save cluster file..."), this);
    saveCluster->setObjectName(QStringLiteral("saveClusterFile"));
    saveCluster->setShortcut(QKeySequence::Save);
    connect(saveCluster, &QAction::triggered, this,
            [this] { designCluster(m_currentPlan ? *m_currentPlan : demoPlan(), m_currentClusterFile); });

    auto *connectAction = new QAction(tr("Connect..."), this);
    connectAction->setObjectName(QStringLiteral("connectCluster"));
    connectAction->setToolTip(tr("Watch a cluster that is already running, by ps:0's address (Ctrl+K)"));
    connectAction->setShortcut(QKeySequence(tr("Ctrl+K")));
    connect(connectAction, &QAction::triggered, this, &MainWindow::askConnect);

    m_stopCluster = new QAction(tr("Stop cluster"), this);
    m_stopCluster->setObjectName(QStringLiteral("stopCluster"));
    m_stopCluster->setToolTip(tr("Stop every task this app started (Ctrl+.)"));
    m_stopCluster->setShortcut(QKeySequence(tr("Ctrl+.")));
    connect(m_stopCluster, &QAction::triggered, this, &MainWindow::stopCluster);

    auto *runOnSlurm = new QAction(tr("Run on Slurm..."), this);
    runOnSlurm->setObjectName(QStringLiteral("runOnSlurm"));
    runOnSlurm->setToolTip(tr("Submit the cluster designed (or the demo) as one job of your Slurm, and watch it"));
    connect(runOnSlurm, &QAction::triggered, this, &MainWindow::askRunOnSlurm);

    auto *openRun = new QAction(tr("Open run..."), this);
    openRun->setObjectName(QStringLiteral("openRun"));
    openRun->setShortcut(QKeySequence::Open);
    openRun->setToolTip(tr("Replay a finished run from its run directory (--logdir)"));
    connect(openRun, &QAction::triggered, this, &MainWindow::askOpenRun);

    auto *compare = new QAction(tr("Compare runs..."), this);
    compare->setObjectName(QStringLiteral("compareRuns"));
    connect(compare, &QAction::triggered, this, &MainWindow::askCompareRuns);

    // One click: the demo once per update mode, side by side (its own
    // window, launcher and watcher; the cluster shown here is left alone).
    auto *compareModes = new QAction(tr("Compare modes..."), this);
    compareModes->setObjectName(QStringLiteral("compareModes"));
    compareModes->setToolTip(tr("Run the demo once in each update mode (async, sync, ssp) with a straggler, and show "
                                "the runs side by side"));
    connect(compareModes, &QAction::triggered, this, [this] {
        ModeComparisonWindow::open(this, ModeComparisonWindow::defaultOptions(demoPlan()), m_launcher->nodeBinary());
    });

    // The same, one click away, on each problem where the modes' staleness
    // costs the model (what a newcomer should see next to the pace):
    // "compareModesStaleness", "compareModesMlp".
    std::vector<QAction *> compareWorkloads;
    for (const std::string &name : workloadNames()) {
        const Workload w = workload(name);
        auto *action = new QAction(tr("Compare modes: %1...").arg(qs(w.title)), this);
        QString objectName = qs(name);
        objectName[0] = objectName[0].toUpper();
        action->setObjectName(QStringLiteral("compareModes") + objectName);
        action->setToolTip(qs(w.description));
        connect(action, &QAction::triggered, this, [this, name] {
            ModeComparisonWindow::open(this, ModeComparisonWindow::workloadOptions(name), m_launcher->nodeBinary());
        });
        compareWorkloads.push_back(action);
    }

    m_exportAll = new QAction(tr("Export all..."), this);
    m_exportAll->setObjectName(QStringLiteral("exportAll"));
    m_exportAll->setShortcut(QKeySequence(tr("Ctrl+E")));
    m_exportAll->setToolTip(tr("Every chart as PNG, SVG and CSV into a new folder"));
    connect(m_exportAll, &QAction::triggered, this, &MainWindow::askExportAll);

    auto *quit = new QAction(tr("Quit"), this);
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);

    cluster->addAction(m_startDemo);
    cluster->addAction(newCluster);
    cluster->addAction(openCluster);
    m_recentMenu = cluster->addMenu(tr("Recent cluster files"));
    cluster->addAction(saveCluster);
    cluster->addSeparator();
    cluster->addAction(connectAction);
    cluster->addAction(runOnSlurm);
    cluster->addAction(m_stopCluster);
    cluster->addSeparator();
    cluster->addAction(quit);
    QMenu *runs = menuBar()->addMenu(tr("&Runs"));
    runs->addAction(openRun);
    m_recentRunsMenu = runs->addMenu(tr("Recent runs"));
    runs->addAction(compare);
    runs->addAction(compareModes);
    for (QAction *action : compareWorkloads)
        runs->addAction(action);
    QMenu *exportMenu = menuBar()->addMenu(tr("&Export"));
    exportMenu->addAction(m_exportAll);
    exportMenu->addAction(tr("Run report (PDF)..."), this, &MainWindow::askExportReport);
    exportMenu->addAction(tr("Step timeline as Chrome trace (JSON)..."), this, &MainWindow::askExportTrace);
    m_exportChartMenu = exportMenu->addMenu(tr("Export one chart"));
    const auto charts = m_charts->charts();
    for (int i = 0; i < charts.size(); ++i)
        m_exportChartMenu->addAction(charts[i]->title() + QStringLiteral("..."), this,
                                     [this, i] { exportOneChart(i); });
    // Help last, where desktop users look for it.
    QMenu *help = menuBar()->addMenu(tr("&Help"));
    QAction *about = help->addAction(tr("About Parasync"), this, &MainWindow::showAbout);
    about->setObjectName(QStringLiteral("aboutParasync"));
    help->addAction(tr("About Qt"), qApp, &QApplication::aboutQt);

    toolbar->addAction(m_startDemo);
    toolbar->addAction(newCluster);
    toolbar->addAction(openCluster);
    toolbar->addAction(connectAction);
    toolbar->addAction(m_stopCluster);
    toolbar->addSeparator();
    toolbar->addAction(openRun);
    toolbar->addAction(compare);
    toolbar->addAction(m_exportAll);

    // The mode controls get a row of their own: they are what a user
    // watches while training runs.
    addToolBarBreak();
    QToolBar *modes = addToolBar(tr("Update mode"));
    modes->setObjectName(QStringLiteral("modeToolbar"));
    modes->addWidget(m_modes);
    // The pace in the first row, which has room: the mode row's status text
    // grows with a sync mode's numbers and would push it out of sight.
    toolbar->addSeparator();
    toolbar->addWidget(m_pace);
    showDemoPace();
    setUpRecentMenus();
}

ClusterPlan MainWindow::demoPlan() const
{
    return m_demoPlanOverride ? *m_demoPlanOverride : demoPlanFromEnvironment();
}

void MainWindow::setDemoPlan(const ClusterPlan &plan)
{
    m_demoPlanOverride = plan;
    if (!m_launcher->anyRunning() && !m_connected)
        showDemoPace();
}

void MainWindow::showDemoPace()
{
    m_pace->setPlanned(demoPlan().training.pace.computeMs, tr("the demo's pace"));
}

void MainWindow::startDemo()
{
    ClusterPlan plan = demoPlan();
    // The demo keeps its run directory among the app's data: the charts are
    // completed from it when the run ends, and it can be replayed later. The
    // step log takes ~1 kB per step, so only for runs of sensible length,
    // and only the newest few are kept.
    constexpr int64_t kMaxAutoLoggedSteps = 200000;
    constexpr int kKeptDemoRuns = 10;
    if (plan.training.logdir.empty() && plan.training.lastStep <= kMaxAutoLoggedSteps) {
        QDir runs(demoRunsDirectory());
        const QStringList old = runs.entryList({QStringLiteral("demo-*")}, QDir::Dirs, QDir::Name | QDir::Reversed);
        for (qsizetype i = kKeptDemoRuns - 1; i < old.size(); ++i)
            QDir(runs.filePath(old[i])).removeRecursively();
        plan.training.logdir
            = runs.filePath(QStringLiteral("demo-")
                            + QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz")))
                  .toStdString();
    }
    if (!startCluster(plan))
        return;
    if (plan.training.logdir.empty())
        statusBar()->showMessage(tr("This run has no run directory (more than %1 steps): the charts show what the "
                                    "live telemetry delivers. Set one in New cluster... to keep the whole run.")
                                     .arg(kMaxAutoLoggedSteps),
                                 15000);
}

bool MainWindow::startCluster(const ClusterPlan &plan)
{
    if (m_launcher->anyRunning()) {
        const auto answer = QMessageBox::question(
            this, tr("A cluster is running"),
            tr("The cluster this app started is still running. Stop it and start the new one?"));
        if (answer != QMessageBox::Yes)
            return false;
        m_watcher->disconnectFromCluster();
        m_launcher->stopAll();
    }
    // Runs to the launch, or to where the user said no, through the slots
    // below (their dialogs are modal).
    m_launch->start(plan);
    return m_launch->stage() == LaunchSequence::Stage::Launched || m_launch->stage() == LaunchSequence::Stage::Watching;
}

void MainWindow::showPreflight()
{
    // Remote hosts: check ssh, the binaries, ports and routes first, on
    // each host, rather than learn of each problem from a dead task.
    PreflightDialog preflight(m_launch->preflight(), m_launch->plan(), this);
    if (preflight.exec() != QDialog::Accepted) {
        m_launch->cancel();
        statusBar()->showMessage(tr("Not started (pre-flight check)."), 10000);
        return;
    }
    const ClusterPlan plan = preflight.plan();
    if (preflight.portsRewritten() && !m_currentClusterFile.isEmpty()) {
        try {
            writeClusterFile(m_currentClusterFile.toStdString(), clusterFileFromPlan(plan));
            statusBar()->showMessage(tr("%1 now uses the free ports the pre-flight found").arg(m_currentClusterFile),
                                     10000);
        } catch (const InputError &e) {
            showError(tr("Cannot update the cluster file"), QString::fromStdString(e.what()));
        }
    }
    m_launch->proceed(plan);
}

void MainWindow::askAboutTakenPorts(const std::vector<PortConflict> &conflicts)
{
    QString details;
    QStringList suggested;
    for (const PortConflict &conflict : conflicts) {
        details += tr("\u2022 %1 wants %2, which is taken%3.\n")
                       .arg(QString::fromStdString(conflict.task.toString()),
                            QString::fromStdString(conflict.address.toString()),
                            conflict.holder.isEmpty() ? QString() : tr(" by %1").arg(conflict.holder));
        suggested.append(QString::number(conflict.suggestedPort));
    }
    QMessageBox box(QMessageBox::Warning, tr("Ports are taken"),
                    tr("The cluster cannot start on these addresses:\n\n%1\nAn old process may still hold a "
                       "port (stop it, e.g. kill <pid>), or the cluster can use free ports instead.")
                        .arg(details),
                    QMessageBox::Cancel, this);
    QPushButton *useFree
        = box.addButton(tr("Use free ports (%1)").arg(suggested.join(QStringLiteral(", "))), QMessageBox::AcceptRole);
    box.setDefaultButton(useFree);
    box.exec();
    if (box.clickedButton() != useFree) {
        m_launch->cancel();
        statusBar()->showMessage(tr("Not started: ports are taken."), 10000);
        return;
    }
    m_launch->useSuggestedPorts();
}

void MainWindow::onLaunched(const ClusterPlan &plan)
{
    m_currentPlan = plan;
    m_pace->setComputeMs(plan.training.pace.computeMs);
    m_lastStates.clear();
    m_processes->reset();
    m_charts->clear();
    m_runDirectory = QString::fromStdString(plan.training.logdir);
    addRecentRun(m_runDirectory);
    for (int row = 0; row < int(m_launcher->tasks().size()); ++row)
        onTaskChanged(row);
    statusBar()->showMessage(tr("Started %1 ps and %2 workers (%3); watching ps:0 at %4")
                                 .arg(plan.cluster.numPs())
                                 .arg(plan.cluster.numWorkers())
                                 .arg(QString::fromStdString(describeMode(plan.training.mode)),
                                      QString::fromStdString(plan.cluster.ps.front().toString())),
                             10000);
    updateActions();
}

void MainWindow::connectToCluster(const QString &address, const QString &runDirectory)
{
    ConnectRequest request;
    request.address = address; // the token, if any, from $PARASYNC_CLUSTER_TOKEN
    request.runDirectory = runDirectory;
    connectToCluster(request);
}

void MainWindow::connectToCluster(const ConnectRequest &request)
{
    const QString address = request.address.trimmed();
    try {
        parseHostPort(address.toStdString());
    } catch (const InputError &e) {
        showError(tr("Not an address"), tr("'%1': %2. Give ps:0's address as host:port, e.g. 10.0.0.5:2222.")
                                            .arg(address, QString::fromStdString(e.what())));
        return;
    }
    RpcSettings settings;
    try {
        settings = request.rpcSettings();
    } catch (const InputError &e) {
        showError(tr("Cannot connect"), QString::fromStdString(e.what()));
        return;
    }
    ConnectDialog::remember(request);
    addRecentRun(request.runDirectory);
    // A cluster launched here is no longer followed.
    m_launch->cancel();
    m_runDirectory.clear();
    m_processes->reset();
    m_charts->clear();
    m_watcher->setHistory(request.runDirectory, true);
    m_watcher->connectTo(address, settings);
    m_pace->setUnknown(); // not started here: its pace is the workers' own
    statusBar()->showMessage(tr("Connecting to ps:0 at %1...").arg(address), 10000);
}

void MainWindow::askConnect()
{
    ConnectDialog dialog(this);
    dialog.setRequest(ConnectDialog::remembered());
    if (dialog.exec() == QDialog::Accepted)
        connectToCluster(dialog.request());
}

void MainWindow::setWorkersPace(int computeMs)
{
    // The workers of the cluster watched, as ps:0 describes them; before
    // its first answer, as started here.
    QStringList workers;
    if (const auto snapshot = m_charts->snapshot()) {
        for (const std::string &address : snapshot->workerHosts)
            workers << QString::fromStdString(address);
    }
    if (workers.isEmpty() && m_currentPlan && m_launcher->anyRunning()) {
        for (const HostPort &address : m_currentPlan->cluster.workers)
            workers << QString::fromStdString(address.toString());
    }
    if (workers.isEmpty() || !m_connected) {
        // The slider goes back to the pace that will run, not the one asked for.
        showDemoPace();
        statusBar()->showMessage(tr("No cluster is training: the pace applies to the workers of a running cluster."),
                                 8000);
        return;
    }
    statusBar()->showMessage(
        tr("Asking %1 workers for %2...").arg(workers.size()).arg(PaceControl::describe(computeMs)), 5000);
    for (const QString &worker : std::as_const(workers))
        m_watcher->setPace(worker, computeMs);
}

void MainWindow::stopCluster()
{
    if (jobIsLive())
        m_backend->stop(); // says what it does; ended follows
    statusBar()->showMessage(tr("Stopping the cluster..."));
    // A launch of the last seconds may still be about to point the watcher
    // at ps:0; the cluster it would watch is going away.
    m_launch->cancel();
    m_launcher->stopAll();
    statusBar()->showMessage(tr("The cluster's tasks were stopped."), 10000);
    updateActions();
}

void MainWindow::onSnapshotReady(const RunSnapshot &snapshot)
{
    // Only kept here; the charts take it on their next redraw tick.
    m_charts->setSnapshot(snapshot);
}

void MainWindow::onRedrawn()
{
    const auto snapshot = m_charts->snapshot();
    if (!snapshot)
        return;
    // Snapshots no more often than the charts take them: each is a copy of
    // the run's series, made by the watcher and again on this thread.
    m_watcher->setSnapshotInterval(m_charts->redrawIntervalMs());
    // ps:0's view of each worker goes into the launcher's task states.
    if (!m_launcher->tasks().empty())
        m_launcher->updateFromSnapshot(*snapshot);
    m_processes->setSnapshot(snapshot);
    if (snapshot->mode.mode() != proto::UPDATE_MODE_UNSPECIFIED) {
        const int64_t since = snapshot->modeChanges.empty() ? 0 : snapshot->modeChanges.back().globalStep;
        m_modes->setReportedMode(snapshot->mode, std::max(since, m_lastReportedModeStep));
    }
    QString step = tr("global step %1").arg(snapshot->globalStep);
    if (snapshot->lastStep > 0)
        step += tr(" / %1").arg(snapshot->lastStep);
    if (snapshot->lostEvents > 0)
        step += tr(" \u00b7 %1 events lost").arg(snapshot->lostEvents);
    if (snapshot->actingChief != 0)
        step += tr(" \u00b7 worker:%1 acting chief").arg(snapshot->actingChief);
    step += psPairText(snapshot->psReplica, snapshot->failovers.size());
    m_stepLabel->setText(step);
    // ps:0's hang watchdog, in plain sight while it lasts.
    const bool stalled = m_connected && snapshot->stallSeconds > 0 && !snapshot->finished;
    QStringList alerts;
    if (stalled)
        alerts << tr("No progress for %1 s at global step %2. ps:0 is waiting for %3.")
                      .arg(qRound(snapshot->stallSeconds))
                      .arg(snapshot->globalStep)
                      .arg(QString::fromStdString(snapshot->stallWaitingFor));
    // A straggler costs every mode something: said while ps:0 flags it.
    if (m_connected)
        if (const std::string stragglers = describeStragglers(*snapshot); !stragglers.empty())
            alerts << QString::fromStdString(stragglers);
    // Records that stopped being written are as urgent: the run goes on,
    // but what a replay or comparison reads later is being lost.
    if (m_connected && !snapshot->recordsProblem.empty())
        alerts << tr("ps:0 %1").arg(QString::fromStdString(snapshot->recordsProblem));
    m_alert->setText(alerts.join(QLatin1Char('\n')));
    m_alert->setVisible(!alerts.isEmpty());
}

void MainWindow::onConnectionState(bool connected, const QString &message)
{
    m_connected = connected;
    m_connectionLabel->setText(message);
    m_modes->setConnected(connected);
    updateActions();
}

void MainWindow::onModeChanged(const proto::ModeConfig &mode, qint64 globalStep)
{
    m_lastReportedModeStep = globalStep;
    m_modes->setReportedMode(mode, globalStep);
    statusBar()->showMessage(
        tr("ps:0 switched to %1 at step %2").arg(QString::fromStdString(describeMode(mode))).arg(globalStep), 8000);
}

void MainWindow::onControlFinished(bool ok, const QString &message)
{
    if (ok) {
        if (!message.isEmpty())
            statusBar()->showMessage(message, 8000);
        return;
    }
    m_modes->requestFailed(message);
    statusBar()->showMessage(message, 15000);
    showError(tr("The cluster did not do it"), message);
}

void MainWindow::onClusterFinished()
{
    const auto snapshot = m_charts->snapshot();
    statusBar()->showMessage(tr("The cluster finished at global step %1.").arg(snapshot ? snapshot->globalStep : 0),
                             20000);
    m_modes->setConnected(false);
}

void MainWindow::onTaskChanged(int row)
{
    const auto &tasks = m_launcher->tasks();
    if (row < 0 || size_t(row) >= tasks.size())
        return;
    if (m_lastStates.size() < tasks.size())
        m_lastStates.resize(tasks.size(), TaskState::NotStarted);
    const TaskInfo &info = tasks[size_t(row)];
    const TaskState previous = m_lastStates[size_t(row)];
    m_lastStates[size_t(row)] = info.state;
    if (info.state == TaskState::Dead && previous != TaskState::Dead) {
        const QString task = QString::fromStdString(info.task.toString());
        const QString address = QString::fromStdString(info.address.toString());
        const QString text = tr("%1 (%2, pid %3) died: %4").arg(task, address).arg(info.pid).arg(info.detail);
        statusBar()->showMessage(text, 20000);
        // Without ps:0 nothing trains: say so, and where to look. One of a
        // pair (--ps_backup_hosts) is a failover, which the status line and
        // the charts show; its partner trains on.
        if (info.task.isPs() && !m_launcher->plan().cluster.replicated())
            showError(tr("%1 died").arg(task),
                      text
                          + tr("\n\nIts log is in the process panel (select the row). Restart it from there, or "
                               "stop the cluster and start again."));
    }
    updateActions();
}

QString MainWindow::connectionText() const
{
    return m_connectionLabel->text();
}

void MainWindow::showError(const QString &title, const QString &text)
{
    // Not modal to the event loop: the window keeps updating behind it.
    auto *box = new QMessageBox(QMessageBox::Warning, title, text, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::updateActions()
{
    m_stopCluster->setEnabled(m_launcher->anyRunning() || jobIsLive());
}

void MainWindow::showAbout()
{
    auto *box = new QMessageBox(QMessageBox::Information, tr("About Parasync"), QString(), QMessageBox::Ok, this);
    box->setObjectName(QStringLiteral("aboutBox"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setTextFormat(Qt::RichText);
    box->setText(tr("<h3>Parasync %1</h3>"
                    "<p>Runs parameter-server training (ps and worker tasks, as TensorFlow 1.x runs them) and "
                    "shows it train: who did which global step, the loss, and what each update mode "
                    "(async, sync, ssp) costs.</p>"
                    "<p>Protocol %2: an app and the parasync-node tasks it talks to must share it "
                    "(<code>parasync-node --version</code>).</p>"
                    "<p>Every flag: <code>parasync --help</code> and <code>parasync-node --help</code>; the guide "
                    "is the project's README.md.</p>"
                    "<p>Licensed under the Apache License 2.0.</p>")
                     .arg(QString::fromLatin1(version()))
                     .arg(kProtocolVersion));
    box->open();
}

bool MainWindow::quittingStopsTraining() const
{
    return m_launcher->anyRunning() || (jobIsLive() && m_backend->stopOnQuit());
}

void MainWindow::askBeforeQuitting()
{
    if (auto *open = findChild<QMessageBox *>(QStringLiteral("quitQuestion")); open && open->isVisible())
        return; // asked already
    auto *question = new QMessageBox(
        QMessageBox::Question, tr("Quit Parasync"),
        m_launcher->anyRunning()
            ? tr("The cluster this window started is training. Quitting stops its "
                 "tasks; its run directory keeps what they wrote.")
            : tr("%1 is running and was to be stopped on quit. Quitting stops it.").arg(m_backend->jobName()),
        QMessageBox::NoButton, this);
    question->setObjectName(QStringLiteral("quitQuestion"));
    question->setAttribute(Qt::WA_DeleteOnClose);
    QPushButton *stop = question->addButton(tr("Stop and quit"), QMessageBox::AcceptRole);
    stop->setObjectName(QStringLiteral("stopAndQuit"));
    question->addButton(QMessageBox::Cancel)->setObjectName(QStringLiteral("keepTraining"));
    question->setDefaultButton(QMessageBox::Cancel);
    connect(question, &QMessageBox::buttonClicked, this, [this, stop](QAbstractButton *clicked) {
        if (clicked == stop)
            quitWithoutAsking();
    });
    question->open();
}

void MainWindow::quitWithoutAsking()
{
    m_quitConfirmed = true;
    close();
}

void MainWindow::restoreWindowLayout()
{
    const QSettings settings;
    if (restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray())) {
        restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
        return;
    }
    // 1500 x 950 where there is room; nine tenths of a smaller screen.
    QSize size(1500, 950);
    if (const QScreen *screen = this->screen())
        size = size.boundedTo(screen->availableGeometry().size() * 0.9);
    resize(size);
}

void MainWindow::saveWindowLayout() const
{
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    if (!m_quitConfirmed && quittingStopsTraining()) {
        event->ignore();
        askBeforeQuitting();
        return;
    }
    m_quitConfirmed = false; // a window closed and shown again asks again
    saveWindowLayout();
    // Quitting stops what this app started: no orphans holding ports.
    m_watcher->disconnectFromCluster();
    if (m_launcher->anyRunning()) {
        statusBar()->showMessage(tr("Stopping the cluster's tasks..."));
        m_launcher->stopAll();
    }
    if (jobIsLive()) {
        // A job on a cluster may well outlive the laptop that sent it, unless asked otherwise.
        if (m_backend->stopOnQuit())
            m_backend->stopAndWait(15000);
        m_backend.reset();
    }
    QMainWindow::closeEvent(event);
}

} // namespace parasync::ui
