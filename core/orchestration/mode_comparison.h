#pragma once

// "Compare modes": the experiment of the SSP paper (Ho et al., NIPS 2013) on
// this machine. One cluster plan -- same seed, same data, same worker pace
// and straggler -- is run once per update mode (async, sync, ssp with a
// staleness bound), one run after the other, each into its own run directory
// <out>/<mode>. A run ends when the chief's full-shard loss has stayed at or
// below a target loss for a moment, at a time limit, or at the plan's last
// step. The summary is then computed from the run directories, not from the
// live telemetry (which may have lost events): loss by wall time and by
// global step, time to the target, global steps per second, and per worker
// steps per second and the fraction of its step time spent waiting.
//
// Qt Core only, no widgets: the window and the headless mode both drive it.
// ModeComparison lives on its owner's thread (which runs an event loop) and
// never blocks it: each run is started by a LaunchSequence, as the window
// starts a cluster (so the two cannot drift apart), its processes go through
// a ClusterLauncher, progress comes from a ClusterWatcher, the summary is
// read on a thread of its own.
// summarizeModeRun / summarizeModeComparison are pure functions of the run
// directories, callable from any thread.

#include "orchestration/cluster_launcher.h"
#include "orchestration/run_state.h"
#include "proto/parasync.pb.h"

#include <QElapsedTimer>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace parasync {

class ClusterWatcher;
class LaunchSequence;

// What a comparison runs, and when a run has seen enough.
struct ModeComparisonOptions
{
    // Every run gets this plan with only the mode and --logdir changed (and
    // ports, where a port of the plan is taken).
    ClusterPlan plan;
    std::vector<proto::ModeConfig> modes; // compared, in this order
    double targetLoss = 0;                // the chief's full-shard loss to reach
    int runSeconds = 25;                  // per run, from its first step
    double holdSeconds = 1.5;             // at/below the target this long ends a run
    // false: every run trains its whole runSeconds, past the target (still
    // timed), so that what the runs learned compares at one wall time.
    bool stopAtTarget = true;
    int startSeconds = 30; // no first step by then: the run failed
    // Each contender once per seed (the plan's own seed, once, when empty):
    // one run's figures may be luck, a spread over seeds is evidence
    // (comparison_spread.h). The runs go seed by seed, every contender of
    // one seed before the next, so that an early stop still compares all.
    std::vector<uint64_t> seeds;
    // <out>/<mode> for each run; <out>/seed-<seed>/<mode> with two seeds or more.
    QString outputDirectory;
};

// Where a comparison's contender `name` runs for `seed` under `out`:
// out/name, or out/seed-<seed>/name when `options` repeat over seeds.
QString modeRunDirectory(const ModeComparisonOptions &options, const QString &name, uint64_t seed);

// The modes of the paper, in the order the seeds tell them: async, sync over
// all live workers, ssp with `staleness`. Other contenders (sync with backup
// workers, ssp at two bounds) come from parseModeSpecList.
std::vector<proto::ModeConfig> comparedModes(int staleness);
// The run directory's name of each contender: the mode's name ("async"), or,
// where two contenders share a mode, its spec as a file name ("sync",
// "sync-3of4"; "ssp-3", "ssp-30").
QStringList modeRunNames(const std::vector<proto::ModeConfig> &modes);
// The comparison's defaults on top of `plan`: the pace, the straggler, the
// loss logging interval and no last step (the reasons are in the definition).
ClusterPlan withComparisonDefaults(ClusterPlan plan);
// The lowest full-shard loss the chief can reach: for the linear model, the
// least-squares fit on the chief's shard of the plan's data; for a matrix
// factorization of a lowrank dataset, the true matrix's loss there (the
// noise). NaN for models without a known answer, or data that cannot be
// loaded here.
double chiefLossFloor(const ClusterPlan &plan);
// The default target: 1.2 x that floor (the reason is in the definition);
// NaN when there is no floor, and a target must be given.
double defaultTargetLoss(const ClusterPlan &plan);

// One run's figures, read back from its run directory.
struct LossPoint
{
    double seconds = 0; // since the run's first step
    int64_t globalStep = 0;
    double loss = 0; // the chief's full-shard loss
};

// A held-out metric the chief evaluated ("heldout_loss", "heldout_accuracy").
struct MetricPoint
{
    double seconds = 0; // since the run's first step
    int64_t globalStep = 0;
    double value = 0;
};

// How stale the gradients that reached the model were: the global step when
// applied minus the step each was computed from, over every applied or
// aggregated gradient (a dropped one never reached the model). What the
// modes trade for their pace: async's staleness grows with the workers,
// ssp's is bounded, sync's is 0.
struct StalenessFigures
{
    std::map<int64_t, int64_t> counts; // staleness -> gradients
    int64_t gradients = 0;
    double mean = 0;
    int64_t max = 0;
    // The smallest staleness s with at least a fraction q of the gradients at
    // s or below (q in [0, 1]); 0 when there are none.
    int64_t quantile(double q) const;
};

struct WorkerStepFigures
{
    int worker = 0;
    int64_t steps = 0; // gradients it pushed (applied, aggregated or dropped)
    int64_t dropped = 0;
    double stepsPerSecond = 0; // steps over the run's duration
    // Wait time / (compute + push + wait) over its step records: the share
    // of its step time spent held by the sync barrier or the staleness bound.
    double waitFraction = 0;
};

struct ModeRunSummary
{
    QString name; // the run directory's name ("async"): the contender
    QString directory;
    proto::ModeConfig mode; // from cluster.json (unspecified when it has none)
    uint64_t seed = 0;      // the plan's --seed, from cluster.json (0 when it has none)
    int modeChanges = 0;    // switches recorded in the step log (0 in a clean comparison)
    // The chief's full-shard loss of every applied or aggregated step that
    // carries one, in log order: the comparable loss of the run.
    std::vector<LossPoint> loss;
    // First time (seconds since the run's first step) the full loss was at or
    // below the target; none when it never was.
    std::optional<double> secondsToTarget;
    int64_t globalStepAtTarget = -1;
    double finalLoss = 0;    // NaN when no full loss was logged
    int64_t globalSteps = 0; // global step advance over the run
    double seconds = 0;      // the run's first step to its last record
    double globalStepsPerSecond = 0;
    std::vector<WorkerStepFigures> workers; // by worker index
    StalenessFigures staleness;
    // What its stale gradients were worth: the workers' probes
    // (--staleness_probe_every) by steps apart; empty when none probed.
    StalenessCostTable stalenessCost;
    // The held-out metrics the chief logged, by name, in log order; empty
    // when the run had no held-out data (--eval_fraction, --eval_dataset).
    std::map<QString, std::vector<MetricPoint>> metrics;
    // A metric's last value, NaN when the run has none.
    double finalMetric(const QString &name) const;
    // Filled in by ModeComparison, empty when summarized on their own:
    QString stopReason;      // "target reached", "time limit", "last step", "cancelled", ...
    bool inProgress = false; // still training: drawn as far as it has come (stopReason "in progress")
    QString failure;         // what went wrong, when the run failed
};

struct ModeComparisonSummary
{
    double targetLoss = 0;
    std::vector<ModeRunSummary> runs; // in the order run
    bool cancelled = false;
    int runsToCome = 0;  // modes not run yet (a summary while the comparison runs)
    bool failed() const; // a run failed
};

// Reads one run directory: steps.jsonl (or, without one, metrics.csv, which
// has no worker timings) and cluster.json. The run's start is its first
// applied or aggregated step, the first row of metrics.csv. Throws
// InputError, naming the directory, when it holds neither file.
ModeRunSummary summarizeModeRun(const QString &directory, double targetLoss);
// Every directory in turn; one that cannot be read gives a run whose
// failure says why.
ModeComparisonSummary summarizeModeComparison(const QStringList &directories, double targetLoss);

// Where a comparison is, about once a second.
struct ModeRunProgress
{
    int index = 0; // of the run, 0-based
    int count = 0; // runs in the comparison (contenders times seeds)
    QString name;  // "ssp", "ssp, seed 2"
    int64_t globalStep = 0;
    double seconds = 0;    // since the run's first step (0 before it)
    double latestLoss = 0; // NaN before the chief's first evaluation
};

class ModeComparison : public QObject
{
    Q_OBJECT

public:
    explicit ModeComparison(QObject *parent = nullptr);
    // Stops a run in progress (its launcher stops every task) and waits for
    // the summary thread.
    ~ModeComparison() override;

    // The parasync-node binary (see ClusterLauncher::setNodeBinary).
    void setNodeBinary(const QString &path);
    // Checks `options` -- false with `error` saying what to fix: no modes, a
    // target that is not a positive number, a non-positive time limit, no
    // output folder, or one whose <mode> directories already hold a run --
    // then starts the first run. Does not block; `finished` follows.
    bool start(const ModeComparisonOptions &options, QString *error);
    // Stops the run in progress and starts no other; `finished` follows with
    // the runs made so far.
    void cancel();
    bool isRunning() const { return m_running; }
    const ModeComparisonOptions &options() const { return m_options; }
    // The tasks of the run in progress.
    ClusterLauncher *launcher() const { return m_launcher; }

Q_SIGNALS:
    void runStarted(int index, const QString &name, const QString &directory);
    void progress(const parasync::ModeRunProgress &progress);
    // `failure` is empty when the run went as planned.
    void runEnded(int index, const QString &name, const QString &stopReason, const QString &failure);
    // A line for a person following along (what headless mode prints).
    void line(const QString &text);
    // The runs made so far, read from their directories, after each run
    // but the last (runsToCome > 0), while the next one trains.
    void runsSummarized(const parasync::ModeComparisonSummary &summary);
    void finished(const parasync::ModeComparisonSummary &summary);

private:
    void startNextRun();
    void onLaunched();
    void onLaunchFailed(const QString &error);
    void onSnapshot(const RunSnapshot &snapshot);
    void onTaskChanged(int row);
    void onClusterFinished();
    void onAllExited();
    void onTick();
    void stopRun(const QString &reason, const QString &failure = {});
    void finishComparison();
    // Reads the runs made so far on m_summaryThread; emits runsSummarized,
    // or with `final`, finished.
    void summarize(bool final);
    QString taskFailure(int row) const;

    // One run of the comparison: a contender for a seed.
    struct Trial
    {
        proto::ModeConfig mode;
        std::optional<uint64_t> seed; // none: the plan's
        QString label;                // "async", or "async, seed 2" where seeds repeat
        QString directory;
    };
    std::vector<Trial> plannedTrials(const ModeComparisonOptions &options) const;

    ClusterLauncher *m_launcher;
    ClusterWatcher *m_watcher;
    // Starts each run on the two above (so declared after them); not a
    // child, so it goes before them, never watching a launcher half gone.
    std::unique_ptr<LaunchSequence> m_launch;
    ModeComparisonOptions m_options;
    QTimer m_tick;
    QTimer m_grace; // tasks asked to stop (or told the run is over) that have not exited yet
    bool m_running = false;
    bool m_cancelled = false;
    // The run in progress.
    int m_index = -1;
    bool m_runActive = false;
    bool m_stopping = false;
    std::vector<Trial> m_trials; // every run, in the order they run
    QStringList m_directories;   // of every run started
    std::vector<QString> m_stopReasons;
    std::vector<QString> m_failures;
    QElapsedTimer m_sinceLaunch;
    QElapsedTimer m_sinceFirstStep; // invalid until the first step is seen
    QElapsedTimer m_belowTarget;    // invalid while the loss is above the target
    QElapsedTimer m_sinceLine;
    int64_t m_globalStep = 0;
    double m_latestLoss = 0;
    bool m_finishing = false;
    std::thread m_summaryThread;
    uint64_t m_summaryGeneration = 0; // owner's thread only
    bool m_summaryBusy = false;       // a reader is at work (owner's thread only)
    QElapsedTimer m_sinceLiveSummary; // the figure's last redraw during a run
};

} // namespace parasync

Q_DECLARE_METATYPE(parasync::ModeRunProgress)
Q_DECLARE_METATYPE(parasync::ModeComparisonSummary)
