#pragma once

// `parasync --headless`: the same orchestration as the window (launch or
// connect, watch, wait for the end) without showing one, then every chart
// exported through ChartExporter. It drives the launch sequence the window
// drives, and answers its questions from the flags: a failed pre-flight or a
// taken port ends the run with what to do. Prints what it does and what it
// wrote; finishes with an exit code a script can test.

#include "orchestration/cluster_backend.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/connect_request.h"
#include "orchestration/run_state.h"

#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QStringList>
#include <QTimer>

#include <functional>
#include <memory>
#include <optional>

namespace parasync {
class ClusterWatcher;
class LaunchSequence;
} // namespace parasync

namespace parasync::ui {

class RunChartsView;

struct HeadlessOptions
{
    enum class Source { Launch, Connect, Open };
    Source source = Source::Launch;
    ClusterPlan plan;         // Launch; without --logdir, the run directory goes to <export>/run
    ConnectRequest connect;   // Connect: ps:0's address, its run directory (for the history), token, TLS
    QString runDirectory;     // Open
    QString exportDirectory;  // required
    int timeoutSeconds = 600; // give up (stop the cluster, export what there is)
    // Launch: a plan with remote hosts is checked first (PreflightCheck) and
    // not launched when a check fails. preflightOnly: check, print, exit.
    bool skipPreflight = false;
    bool preflightOnly = false;
    // Launch: a tour of modes, for a cluster that trains until stopped
    // (--last_step=0): each stop's mode for its seconds, counted from the
    // first step; then the cluster is stopped and the charts exported. The
    // first stop's mode should be the plan's. Empty: run to --last_step.
    struct TourStop
    {
        proto::ModeConfig mode;
        int seconds = 20;
    };
    std::vector<TourStop> tour;
    // Launch as a job of a cluster manager instead (--slurm: SlurmBackend),
    // made by this factory when the run starts: checked first unless
    // skipPreflight, started, followed, and stopped when the tour ends or
    // the run times out. The token comes from tokenFile, else
    // $PARASYNC_CLUSTER_TOKEN, else a new one.
    std::function<std::unique_ptr<ClusterBackend>()> backend;
    QString tokenFile;
    // With a back end: only write its job script to this path, for a person
    // to submit by hand, and exit.
    QString jobScriptOnly;
};

class HeadlessRunner : public QObject
{
    Q_OBJECT

public:
    enum ExitCode { Success = 0, RunFailed = 1, CouldNotStart = 2, TimedOut = 3 };

    HeadlessRunner(ClusterLauncher *launcher, ClusterWatcher *watcher, HeadlessOptions options,
                   QObject *parent = nullptr);
    ~HeadlessRunner() override;

    // Begins; `finished` follows (possibly at once).
    void start();
    QStringList written() const { return m_written; }
    RunChartsView *charts() const { return m_charts.get(); }

Q_SIGNALS:
    void finished(int exitCode);

private:
    // `plan` with the run directory the export is drawn from (a fresh one in
    // the export folder unless it names one).
    ClusterPlan withRunDirectory(ClusterPlan plan);
    void onPreflightFinished(bool passed, const QString &report);
    void onPortsTaken(const std::vector<PortConflict> &conflicts);
    void onLaunched(const ClusterPlan &plan);
    void onTaskChanged(int row);
    void onSnapshot(const RunSnapshot &snapshot);
    void onAllExited();
    void onClusterFinished();
    void onTimeout();
    void printProgress();
    // Moves the tour on: the next stop's mode, or the end of the run.
    void nextTourStop();
    // At the tour's end: the run's staleness probes by steps apart, and where
    // to see what staleness costs in what the model learns.
    void sayStalenessCost();
    void finishWith(int exitCode, const QString &message);
    bool exportCharts();
    QString taskFailures() const;
    // A cluster manager's job: check, start, follow, end.
    void startBackend();
    void onBackendEnded(ClusterBackend::Outcome outcome, const QString &summary);

    ClusterLauncher *m_launcher;
    ClusterWatcher *m_watcher;
    HeadlessOptions m_options;
    std::unique_ptr<RunChartsView> m_charts;
    std::unique_ptr<LaunchSequence> m_launch;
    std::unique_ptr<ClusterBackend> m_backend;
    std::shared_ptr<const RunSnapshot> m_latest;
    QTimer m_progress;
    QTimer m_timeout;
    QTimer m_grace;
    QElapsedTimer m_clock;
    QStringList m_written;
    bool m_done = false;
    bool m_clusterFinished = false;
    QString m_runDirectory; // the launched run's --logdir, replayed for the export
    int64_t m_printedStep = -1;
    std::string m_saidRecordsProblem; // ps:0's, as last said
    QHash<int, QString> m_taskLines;  // per task: the state and pid last printed
    QTimer m_tourTimer;
    size_t m_tourStop = 0; // index into m_options.tour of the stop in force
    bool m_tourStarted = false;
};

} // namespace parasync::ui
