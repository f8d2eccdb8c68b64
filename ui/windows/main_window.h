#pragma once

// The desktop app's window: actions to start the demo cluster, design /
// open / save cluster files, connect to a running cluster, replay and
// compare run directories and export; the mode controls; the charts of the
// live run above the process panel. It only wires widgets to the launcher,
// the watcher and the launch sequence (whose choices it puts to the user):
// no sockets, no engine locks.

#include "orchestration/cluster_backend.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/run_state.h"
#include "slurm/slurm_batch_script.h"
#include "ui/dialogs/connect_dialog.h"

#include <QMainWindow>

#include <memory>
#include <optional>

class QAction;
class QDockWidget;
class QPlainTextEdit;
class QLabel;
class QMenu;

namespace parasync {
class ClusterWatcher;
class LaunchSequence;
} // namespace parasync

namespace parasync::ui {

class ModeControls;
class PaceControl;
class ProcessPanel;
class RunChartsView;
class RunLoader;
struct LoadedRun;

class MainWindow : public QMainWindow
{
    Q_OBJECT

public:
    MainWindow(ClusterLauncher *launcher, ClusterWatcher *watcher, QWidget *parent = nullptr);
    ~MainWindow() override;

    // The demo cluster's plan: ClusterPlan::demo(), with its ports replaced by
    // PARASYNC_DEMO_PORTS ("ps,worker0,worker1") or by setDemoPlan (tests).
    ClusterPlan demoPlan() const;
    void setDemoPlan(const ClusterPlan &plan);

    // Launches `plan` and starts watching ps:0, through the pre-flight
    // dialog first for remote hosts and asking about taken ports. Returns
    // once the user has answered (modal dialogs): false when it did not
    // start; the user has been told why.
    bool startCluster(const ClusterPlan &plan);
    // Starts demoPlan() with a run directory among the app's data (unless the
    // plan names one), from which the charts are completed when it ends.
    void startDemo();
    // Watches the cluster of ps:0 at `address`. The charts start from the
    // run's history: `runDirectory`'s step log if given, else ps:0's own
    // --logdir when this machine can read it; then continue live.
    void connectToCluster(const QString &address, const QString &runDirectory = {});
    // The same with a token and TLS files (the Connect dialog's request);
    // remembers the request, except a pasted token.
    void connectToCluster(const ConnectRequest &request);
    // Runs `plan` as a job of a cluster manager: the back end's pre-flight
    // check (its report shown when it fails), then the job; its state and
    // every task's output go to the job panel, and the charts follow ps:0
    // once it runs. Stop stops it; quitting does when the back end's
    // stopOnQuit(). Returns at once; false when a job is still running.
    bool runAsJob(std::unique_ptr<ClusterBackend> backend, const ClusterPlan &plan);
    // runAsJob on the user's Slurm (scancel on quit when `cancelOnQuit`).
    bool submitToSlurm(const ClusterPlan &plan, const SlurmSettings &settings, bool cancelOnQuit);
    // The job's back end (the last one started), else nullptr.
    ClusterBackend *clusterBackend() const { return m_backend.get(); }
    // What the job panel says.
    QString jobLog() const;
    void openRunDirectory(const QString &directory);
    void compareRuns(const QStringList &directories);
    void openClusterFile(const QString &path);
    // Writes every chart in every format into `directory`.
    bool exportAllTo(const QString &directory, QStringList *written, QString *error);
    // Grabs each tab of the window into `directory` (for looking at it).
    QStringList saveScreenshots(const QString &directory);
    // The same, and a picture of every other window shown (a replay, a
    // comparison, a modal dialog such as the pre-flight), each closed once
    // taken so that none keeps the app from quitting. Returns the files
    // written, those windows' first.
    QStringList saveScreenshotsOfEveryWindow(const QString &directory);

    RunChartsView *charts() const { return m_charts; }
    ProcessPanel *processes() const { return m_processes; }
    ModeControls *modeControls() const { return m_modes; }
    PaceControl *paceControl() const { return m_pace; }
    QString connectionText() const;

    // Quits as the Quit action does, without the question a training
    // cluster asks first: for the app's own ends (a termination signal, the
    // screenshots taken).
    void quitWithoutAsking();

protected:
    // Quitting stops what this window started. While a cluster it started
    // trains (or a job it would stop on quit runs), the user is asked first
    // ("quitQuestion": Stop and quit, or Cancel).
    void closeEvent(QCloseEvent *event) override;

private:
    // With no cluster training, the Pace control shows the demo's pace.
    void showDemoPace();
    void createActions();
    // Whether quitting now would stop training: the launcher's tasks, or a
    // job to be stopped on quit.
    bool quittingStopsTraining() const;
    void askBeforeQuitting();
    void showAbout();
    // Where the window was and how its bars were, as the user left them;
    // a first size that fits the screen (a 1366x768 laptop included).
    void restoreWindowLayout();
    void saveWindowLayout() const;
    void onSnapshotReady(const RunSnapshot &snapshot);
    void onRedrawn();
    void onConnectionState(bool connected, const QString &message);
    void onModeChanged(const proto::ModeConfig &mode, qint64 globalStep);
    void onControlFinished(bool ok, const QString &message);
    // Sends the speed control's pace to every worker of the cluster watched.
    void setWorkersPace(int computeMs);
    void onClusterFinished();
    void onTaskChanged(int row);
    void onRunLoaded(const LoadedRun &run);
    void showError(const QString &title, const QString &text);
    void designCluster(const ClusterPlan &plan, const QString &path);
    void askConnect();
    void askRunOnSlurm();
    bool jobIsLive() const;
    void showJobPanel(const QString &title);
    void logJob(const QString &line);
    void askOpenRun();
    void askCompareRuns();
    void askOpenClusterFile();
    void askExportAll();
    void askExportReport();
    void askExportTrace();
    void exportOneChart(int index);
    void stopCluster();
    // The launch sequence's questions and outcomes.
    void showPreflight();
    void askAboutTakenPorts(const std::vector<PortConflict> &conflicts);
    void onLaunched(const ClusterPlan &plan);
    void addRecentClusterFile(const QString &path);
    void updateRecentMenu();
    // Runs -> Recent runs: the run directories launched, connected to (given
    // one), replayed or opened here, the demo's among them.
    void setUpRecentMenus();
    void addRecentRun(const QString &directory);
    void updateRecentRunsMenu();
    void updateActions();

    ClusterLauncher *m_launcher;
    ClusterWatcher *m_watcher;
    LaunchSequence *m_launch;
    RunLoader *m_loader;
    RunChartsView *m_charts;
    ProcessPanel *m_processes;
    ModeControls *m_modes;
    PaceControl *m_pace;
    QLabel *m_connectionLabel;
    QLabel *m_stepLabel;
    QLabel *m_alert; // above the charts: a hang ps:0's watchdog reports
    QLabel *m_rateLabel;
    QMenu *m_recentMenu = nullptr;
    QMenu *m_recentRunsMenu = nullptr;
    QMenu *m_exportChartMenu = nullptr;
    QAction *m_startDemo = nullptr;
    QAction *m_stopCluster = nullptr;
    QAction *m_exportAll = nullptr;
    std::optional<ClusterPlan> m_demoPlanOverride;
    std::optional<ClusterPlan> m_currentPlan;
    QString m_currentClusterFile;
    bool m_connected = false;
    QString m_runDirectory; // --logdir of the cluster started here
    QString m_finalReplay;  // run directory being read to complete the charts
    int64_t m_lastReportedModeStep = 0;
    qint64 m_redrawsAtLastRate = 0;
    qint64 m_rateTimerStart = 0;
    std::vector<TaskState> m_lastStates; // to notice a task dying
    // A cluster run as a cluster manager's job (runAsJob), and its panel.
    std::unique_ptr<ClusterBackend> m_backend;
    SlurmSettings m_slurmSettings; // the Slurm dialog's last answers
    QDockWidget *m_jobDock = nullptr;
    QPlainTextEdit *m_jobLog = nullptr;
    bool m_quitConfirmed = false; // the quit question answered "Stop and quit"
};

} // namespace parasync::ui
