#include "orchestration/mode_comparison.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/task_options.h"
#include "config/update_modes.h"
#include "engine/dataset.h"
#include "engine/low_rank.h"
#include "engine/model.h"
#include "formats/run_log.h"
#include "formats/step_log_reader.h"
#include "formats/step_records.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/launch_sequence.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace parasync {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A progress line (for headless mode) at most this often.
constexpr qint64 kLineIntervalMs = 5000;
// How often the figure is redrawn from the run in progress: its step log is
// read again each time (a minute's run is read in tens of milliseconds).
constexpr qint64 kLiveSummaryMs = 2000;
// Tasks told to stop (or a cluster that reported its end) that have not all
// exited by then are stopped the hard way.
constexpr int kExitGraceMs = 8000;

struct WorkerTotals
{
    int64_t steps = 0, dropped = 0;
    int64_t computeUs = 0, pushUs = 0, waitUs = 0;
};

// One run's figures, from its step log's records or metrics.csv's rows.
class RunAccumulator : public StepLogVisitor
{
public:
    explicit RunAccumulator(double target) : m_target(target) {}

    void metricNames(const std::vector<std::string> &names) override { m_metricNames = names; }
    void modeChange(const ModeMarker &) override { ++m_modeChanges; }
    void step(const StepRecord &step) override
    {
        WorkerTotals &w = m_workers[step.worker];
        ++w.steps;
        w.dropped += step.outcome == proto::DROPPED_STALE ? 1 : 0;
        w.computeUs += step.computeUs;
        w.pushUs += step.pushUs;
        w.waitUs += step.waitUs;
        if (!step.counted())
            return;
        if (!m_started) {
            // The run's clock starts at its first update, as metrics.csv's
            // first row: launching and joining are not the mode's doing.
            m_started = true;
            m_start = step.wallTime;
            m_firstStep = step.globalStep;
        }
        m_last = std::max(m_last, step.wallTime);
        m_lastStep = std::max(m_lastStep, step.globalStep);
        if (std::isfinite(step.fullLoss))
            m_loss.push_back({step.wallTime - m_start, step.globalStep, double(step.fullLoss)});
        // NaN: not evaluated at this step.
        for (size_t i = 0; i < step.metrics.size() && i < m_metricNames.size(); ++i)
            if (std::isfinite(step.metrics[i]))
                m_metrics[qs(m_metricNames[i])].push_back(
                    {step.wallTime - m_start, step.globalStep, double(step.metrics[i])});
        if (step.staleness >= 0) // -1: metrics.csv does not know it
            ++m_staleness[step.staleness];
        if (step.probe)
            m_stalenessCost.add(step.probe->freshStep - step.probe->staleStep, step.probe->cosine,
                                step.probe->relativeError);
    }

    void finishInto(ModeRunSummary *run) const
    {
        run->modeChanges = m_modeChanges;
        run->loss = m_loss;
        run->finalLoss = m_loss.empty() ? kNaN : m_loss.back().loss;
        for (const LossPoint &point : m_loss) {
            if (point.loss <= m_target) {
                run->secondsToTarget = point.seconds;
                run->globalStepAtTarget = point.globalStep;
                break;
            }
        }
        run->globalSteps = m_started ? m_lastStep : 0;
        run->seconds = m_started ? m_last - m_start : 0;
        run->globalStepsPerSecond = run->seconds > 0 ? double(m_lastStep - m_firstStep) / run->seconds : 0;
        for (const auto &[index, totals] : m_workers) {
            WorkerStepFigures figures;
            figures.worker = index;
            figures.steps = totals.steps;
            figures.dropped = totals.dropped;
            figures.stepsPerSecond = run->seconds > 0 ? double(totals.steps) / run->seconds : 0;
            const double busy = double(totals.computeUs + totals.pushUs + totals.waitUs);
            figures.waitFraction = busy > 0 ? double(totals.waitUs) / busy : 0;
            run->workers.push_back(figures);
        }
        run->metrics = m_metrics;
        StalenessFigures &staleness = run->staleness;
        staleness.counts = m_staleness;
        double sum = 0;
        for (const auto &[value, count] : m_staleness) {
            staleness.gradients += count;
            sum += double(value) * double(count);
            staleness.max = std::max(staleness.max, value);
        }
        staleness.mean = staleness.gradients > 0 ? sum / double(staleness.gradients) : 0;
        run->stalenessCost = m_stalenessCost;
    }

private:
    double m_target;
    std::vector<std::string> m_metricNames;
    int m_modeChanges = 0;
    bool m_started = false;
    double m_start = 0;
    double m_last = 0;
    int64_t m_firstStep = 0;
    int64_t m_lastStep = 0;
    std::vector<LossPoint> m_loss;
    std::map<QString, std::vector<MetricPoint>> m_metrics;
    std::map<int64_t, int64_t> m_staleness;
    StalenessCostTable m_stalenessCost;
    std::map<int, WorkerTotals> m_workers;
};

// A matrix factorization's floor is known: the true low-rank matrix's
// mean squared error on the chief's entries, the noise they were seen with
// (the same shard drawn without noise gives the true entries).
double lowRankNoiseLoss(DatasetOptions options, const Dataset &noisy)
{
    if (options.spec.rfind("lowrank", 0) != 0)
        return kNaN; // a factorization of the user's own data: no known answer
    const LowRankSpec spec = parseLowRankSpec(options.spec);
    options.spec = "lowrank:" + std::to_string(spec.rows) + ":" + std::to_string(spec.cols) + ":"
                   + std::to_string(spec.rank) + ":0";
    const Dataset clean = loadDataset(options);
    if (clean.size() != noisy.size())
        return kNaN;
    return (noisy.targets - clean.targets).cast<double>().squaredNorm() / double(noisy.size());
}

} // namespace

std::vector<proto::ModeConfig> comparedModes(int staleness)
{
    // Each mode of the table with its numbers at their defaults: sync's
    // replicas_to_aggregate 0 is every live worker.
    std::vector<proto::ModeConfig> modes;
    for (const UpdateModeInfo &info : updateModes()) {
        proto::ModeConfig &mode = modes.emplace_back();
        mode.set_mode(info.mode);
        if (info.knobs.staleness)
            mode.set_staleness(staleness);
    }
    return modes;
}

QStringList modeRunNames(const std::vector<proto::ModeConfig> &modes)
{
    QStringList names;
    for (const proto::ModeConfig &mode : modes) {
        const auto shared = std::count_if(modes.begin(), modes.end(), [&mode](const proto::ModeConfig &other) {
            return other.mode() == mode.mode();
        });
        QString name = qs(shared > 1 ? modeSpec(mode) : updateModeName(mode.mode()));
        // "sync:3/4" as a directory name: no ':' (Windows, scp), no '/'.
        name.replace(QLatin1String(kStalenessRuleSuffix), QLatin1String("-lr-by-staleness"));
        name.replace(QLatin1Char(':'), QLatin1Char('-')).replace(QLatin1Char('/'), QLatin1String("of"));
        names << name;
    }
    return names;
}

QString modeRunDirectory(const ModeComparisonOptions &options, const QString &name, uint64_t seed)
{
    const QDir out(options.outputDirectory);
    return options.seeds.size() > 1 ? out.absoluteFilePath(QStringLiteral("seed-%1/%2").arg(seed).arg(name))
                                    : out.absoluteFilePath(name);
}

std::vector<ModeComparison::Trial> ModeComparison::plannedTrials(const ModeComparisonOptions &options) const
{
    const QStringList names = modeRunNames(options.modes);
    std::vector<std::optional<uint64_t>> seeds(options.seeds.begin(), options.seeds.end());
    if (seeds.empty())
        seeds.emplace_back(); // the plan's own
    std::vector<Trial> trials;
    for (const std::optional<uint64_t> &seed : seeds) {
        for (size_t i = 0; i < options.modes.size(); ++i) {
            Trial &trial = trials.emplace_back();
            trial.mode = options.modes[i];
            trial.seed = seed;
            const bool repeated = options.seeds.size() > 1;
            trial.label = repeated ? tr("%1, seed %2").arg(names[qsizetype(i)]).arg(*seed) : names[qsizetype(i)];
            trial.directory = modeRunDirectory(options, names[qsizetype(i)], seed.value_or(0));
        }
    }
    return trials;
}

int64_t StalenessFigures::quantile(double q) const
{
    if (gradients == 0)
        return 0;
    // At least ceil(q n) gradients, and at least one: the tolerance keeps
    // 0.9 x 10 from counting as a little over 9.
    const auto wanted = std::max<int64_t>(1, int64_t(std::ceil(std::clamp(q, 0.0, 1.0) * double(gradients) - 1e-9)));
    int64_t seen = 0;
    for (const auto &[staleness, count] : counts) {
        seen += count;
        if (seen >= wanted)
            return staleness;
    }
    return max;
}

double ModeRunSummary::finalMetric(const QString &name) const
{
    const auto it = metrics.find(name);
    return it == metrics.end() || it->second.empty() ? kNaN : it->second.back().value;
}

ClusterPlan withComparisonDefaults(ClusterPlan plan)
{
    // The pace, chosen by running the demo's linear model (learning rate
    // 0.01) on a two-core machine and looking at the numbers:
    // - ~20 ms of simulated compute a step with jitter 0.5: a few dozen
    //   steps a second, so the target takes some 300 updates -- 5 s in
    //   async, 9 s in ssp, 19 s in sync -- long enough for the waits to add
    //   up, short enough for the three runs to take well under a minute;
    // - worker:1 a straggler with three times the compute time, a ratio at
    //   which the sync barrier holds worker:0 for two thirds of its time.
    //   Its slowness is compute time, not --straggler_ms, which the step
    //   log does not count: every waiting share is then of the whole step;
    // - the chief logs its full-shard loss every 5 of its steps (not 100):
    //   the time to the target is read to a fraction of a second.
    plan.training.pace.computeMs = 20;
    plan.training.pace.computeJitter = 0.5f;
    plan.training.pace.stragglerMs = 0;
    plan.workerPace.clear();
    if (plan.cluster.numWorkers() > 1) {
        WorkerPace straggler = plan.training.pace;
        straggler.computeMs = 3 * plan.training.pace.computeMs;
        plan.workerPace[1] = straggler;
    }
    plan.training.displayStep = 5;
    // Runs end at the target or the time limit, not at a step count
    // (--last_step=0: until stopped).
    plan.training.lastStep = 0;
    return plan;
}

double chiefLossFloor(const ClusterPlan &plan)
{
    const bool factorization = isMatrixFactorizationName(plan.training.model);
    if (plan.training.model != "linear" && !factorization)
        return kNaN;
    DatasetOptions options; // as the chief, worker:0, loads its shard
    options.spec = plan.training.dataset.empty() ? defaultDatasetFor(plan.training.model) : plan.training.dataset;
    options.shardIndex = 0;
    options.numShards = std::max(1, plan.cluster.numWorkers());
    options.samplesPerShard = plan.training.samplesPerShard;
    options.seed = plan.training.seed;
    options.evalFraction = plan.training.evalFraction; // the chief's shard lacks the held-out rows
    Dataset data;
    try {
        data = loadDataset(options);
    } catch (const InputError &) {
        return kNaN; // a file only the workers' hosts have
    }
    if (data.size() == 0 || data.targets.cols() != 1)
        return kNaN;
    if (factorization)
        return lowRankNoiseLoss(options, data);
    // y ~ x w + b: least squares on [x, 1], the mean squared residual as the
    // model's loss computes it.
    Eigen::MatrixXd design(data.size(), data.featureDim() + 1);
    design.leftCols(data.featureDim()) = data.features.cast<double>();
    design.rightCols(1).setOnes();
    const Eigen::VectorXd y = data.targets.col(0).cast<double>();
    const Eigen::VectorXd fit = design.colPivHouseholderQr().solve(y);
    return (design * fit - y).squaredNorm() / double(data.size());
}

double defaultTargetLoss(const ClusterPlan &plan)
{
    // A fifth above the best loss there is: reaching it means w and b have
    // all but converged, and no mode's gradient noise keeps it above (the
    // chief's loss settles within a few percent of the floor at the demo's
    // learning rates). A target relative to the data's own floor stays
    // reachable whatever the noise of the data.
    return 1.2 * chiefLossFloor(plan);
}

bool ModeComparisonSummary::failed() const
{
    for (const ModeRunSummary &run : runs)
        if (!run.failure.isEmpty())
            return true;
    return false;
}

ModeRunSummary summarizeModeRun(const QString &directory, double targetLoss)
{
    ModeRunSummary run;
    run.directory = directory;
    run.name = QFileInfo(directory).fileName();
    const QDir dir(directory);
    QFile cluster(dir.filePath(QLatin1String(run_files::kCluster)));
    if (cluster.open(QIODevice::ReadOnly)) {
        const QJsonObject root = QJsonDocument::fromJson(cluster.readAll()).object();
        const QJsonObject training = root.value(QStringLiteral("training")).toObject();
        run.mode = modeFromJson(training);
        // protobuf's JSON writes a 64-bit number as a string.
        run.seed = training.value(QStringLiteral("seed")).toVariant().toULongLong();
    }
    RunAccumulator accumulator(targetLoss);
    StepLogReader stepLog(dir.path());
    const QString metrics = dir.filePath(QLatin1String(run_files::kMetrics));
    if (stepLog.exists()) {
        readStepLog(stepLog, accumulator);
    } else if (QFile::exists(metrics)) {
        // No timings, staleness or mode changes: the fallback.
        const MetricsCsv csv = readMetricsCsv(metrics);
        accumulator.metricNames(csv.metricNames);
        for (const StepRecord &step : csv.steps)
            accumulator.step(step);
    } else {
        throw InputError("cannot read the run directory " + directory.toStdString()
                         + ": it has no steps.jsonl or metrics.csv (did the run's ps:0 start?)");
    }
    accumulator.finishInto(&run);
    return run;
}

ModeComparisonSummary summarizeModeComparison(const QStringList &directories, double targetLoss)
{
    ModeComparisonSummary summary;
    summary.targetLoss = targetLoss;
    for (const QString &directory : directories) {
        try {
            summary.runs.push_back(summarizeModeRun(directory, targetLoss));
        } catch (const InputError &e) {
            ModeRunSummary run;
            run.directory = directory;
            run.name = QFileInfo(directory).fileName();
            run.finalLoss = kNaN;
            run.failure = qs(e.what());
            summary.runs.push_back(run);
        }
    }
    return summary;
}

ModeComparison::ModeComparison(QObject *parent)
    : QObject(parent)
    , m_launcher(new ClusterLauncher(this))
    , m_watcher(new ClusterWatcher(this))
    , m_launch(std::make_unique<LaunchSequence>(m_launcher, m_watcher))
{
    qRegisterMetaType<parasync::RunSnapshot>();
    qRegisterMetaType<parasync::ModeRunProgress>();
    qRegisterMetaType<parasync::ModeComparisonSummary>();
    // A few snapshots a second are plenty to follow the loss.
    m_watcher->setSnapshotInterval(200);
    m_tick.setInterval(250);
    connect(&m_tick, &QTimer::timeout, this, &ModeComparison::onTick);
    m_grace.setSingleShot(true);
    connect(&m_grace, &QTimer::timeout, this, [this] {
        if (!m_runActive)
            return;
        Q_EMIT line(tr("%1: tasks still running %2 s after the run ended: stopping them")
                        .arg(m_trials[size_t(m_index)].label)
                        .arg(kExitGraceMs / 1000));
        m_launcher->stopAll(); // blocks a few seconds at most
        onAllExited();
    });
    // Local runs: no pre-flight (a local task says itself what is wrong).
    // The workers wait for the watcher, so that a run is followed from its
    // first step.
    m_launch->setPreflight(LaunchSequence::Preflight::Never);
    m_launch->setHoldWorkersUntilWatched(true);
    // Same ports as the plan where free, others where not (a demo running
    // in the window, the last run's port not yet let go): no one to ask.
    connect(m_launch.get(), &LaunchSequence::portsTaken, this, [this] { m_launch->useSuggestedPorts(); });
    connect(m_launch.get(), &LaunchSequence::launched, this, &ModeComparison::onLaunched);
    connect(m_launch.get(), &LaunchSequence::failed, this, &ModeComparison::onLaunchFailed);
    connect(m_watcher, &ClusterWatcher::snapshotReady, this, &ModeComparison::onSnapshot);
    connect(m_watcher, &ClusterWatcher::clusterFinished, this, &ModeComparison::onClusterFinished);
    connect(m_launcher, &ClusterLauncher::taskChanged, this, &ModeComparison::onTaskChanged);
    connect(m_launcher, &ClusterLauncher::allExited, this, &ModeComparison::onAllExited);
}

ModeComparison::~ModeComparison()
{
    // Nothing of a run that ends now is reported: the receivers may be
    // going away with this object's owner.
    disconnect(m_launch.get(), nullptr, this, nullptr);
    disconnect(m_launcher, nullptr, this, nullptr);
    disconnect(m_watcher, nullptr, this, nullptr);
    m_tick.stop();
    m_grace.stop();
    m_watcher->disconnectFromCluster();
    m_launcher->stopAll();
    if (m_summaryThread.joinable())
        m_summaryThread.join();
}

void ModeComparison::setNodeBinary(const QString &path)
{
    m_launcher->setNodeBinary(path);
}

bool ModeComparison::start(const ModeComparisonOptions &options, QString *error)
{
    const auto fail = [error](const QString &message) {
        if (error)
            *error = message;
        return false;
    };
    if (m_running)
        return fail(tr("a mode comparison is already running: wait for it or cancel it"));
    if (options.modes.empty())
        return fail(tr("no update modes to compare"));
    if (!(options.targetLoss > 0) || !std::isfinite(options.targetLoss))
        return fail(tr("the target loss must be a positive number, got %1").arg(options.targetLoss));
    if (options.runSeconds < 1)
        return fail(tr("the time per mode must be at least 1 second, got %1").arg(options.runSeconds));
    if (options.outputDirectory.isEmpty())
        return fail(tr("no output folder for the runs and the figure"));
    const QStringList names = modeRunNames(options.modes);
    for (const QString &name : names)
        if (names.count(name) > 1)
            return fail(tr("%1 is compared twice: each contender runs once").arg(name));
    for (const uint64_t seed : options.seeds)
        if (std::count(options.seeds.begin(), options.seeds.end(), seed) > 1)
            return fail(tr("seed %1 is given twice: each seed runs once").arg(seed));
    const std::vector<Trial> trials = plannedTrials(options);
    for (const Trial &trial : trials) {
        // A run directory with a checkpoint would make the chief restore it
        // and continue that run: the comparison would not start from scratch.
        const QDir runDir(trial.directory);
        if (runDir.exists() && !runDir.isEmpty())
            return fail(tr("%1 already holds a run: choose a new folder for the comparison, or delete that one")
                            .arg(QDir::toNativeSeparators(runDir.path())));
    }
    if (!QDir().mkpath(options.outputDirectory))
        return fail(tr("cannot create the folder %1: check the path and its permissions")
                        .arg(QDir::toNativeSeparators(options.outputDirectory)));

    m_options = options;
    m_trials = trials;
    m_running = true;
    m_finishing = false;
    m_cancelled = false;
    m_index = -1;
    m_directories.clear();
    m_stopReasons.clear();
    m_failures.clear();
    const QString until
        = options.stopAtTarget
              ? tr("each run until the chief's full loss stays at or below %1, at most %2 s")
                    .arg(options.targetLoss)
                    .arg(options.runSeconds)
              : tr("each run for %1 s, timed to a full loss of %2").arg(options.runSeconds).arg(options.targetLoss);
    QStringList seeds;
    for (const uint64_t seed : options.seeds)
        seeds << QString::number(seed);
    const QString same = options.seeds.size() > 1
                             ? tr("each with seeds %1 and the same data and pace").arg(seeds.join(QStringLiteral(", ")))
                             : tr("with the same seed, data and pace");
    Q_EMIT line(tr("Comparing %1 %2; %3; runs in %4")
                    .arg(names.join(QStringLiteral(", ")), same, until,
                         QDir::toNativeSeparators(QDir(options.outputDirectory).absolutePath())));
    QTimer::singleShot(0, this, &ModeComparison::startNextRun);
    return true;
}

void ModeComparison::cancel()
{
    if (!m_running || m_cancelled)
        return;
    m_cancelled = true;
    if (m_runActive)
        stopRun(tr("cancelled"));
    // Otherwise startNextRun, queued, sees the flag and finishes.
}

void ModeComparison::startNextRun()
{
    if (m_cancelled || m_index + 1 >= int(m_trials.size())) {
        finishComparison();
        return;
    }
    ++m_index;
    const Trial &trial = m_trials[size_t(m_index)];
    const QString &name = trial.label;
    const QString &directory = trial.directory;
    const proto::ModeConfig &mode = trial.mode;
    ClusterPlan plan = m_options.plan;
    plan.training.mode = mode;
    if (trial.seed)
        plan.training.seed = *trial.seed;
    plan.training.logdir = directory.toStdString();

    m_directories << directory;
    m_stopReasons.emplace_back();
    m_failures.emplace_back();
    m_globalStep = 0;
    m_latestLoss = kNaN;
    m_stopping = false;
    m_sinceFirstStep.invalidate();
    m_belowTarget.invalidate();
    m_sinceLaunch.start();
    m_sinceLine.start();
    m_sinceLiveSummary.start();

    Q_EMIT runStarted(m_index, name, directory);
    Q_EMIT line(tr("[%1/%2] %3%4: starting %5 task(s), run directory %6")
                    .arg(m_index + 1)
                    .arg(m_trials.size())
                    .arg(qs(describeMode(mode)))
                    .arg(trial.seed && m_options.seeds.size() > 1 ? tr(", seed %1").arg(*trial.seed) : QString())
                    .arg(plan.tasks().size())
                    .arg(QDir::toNativeSeparators(directory)));
    // launched or failed follows before this returns: the plan is local,
    // and taken ports are answered at once.
    m_launch->start(plan);
}

void ModeComparison::onLaunched()
{
    // The watcher is already pointed at ps:0; the workers start once it follows.
    m_runActive = true;
    m_tick.start();
}

void ModeComparison::onLaunchFailed(const QString &error)
{
    // What stops one launch (no binary, a bad plan) stops them all.
    const QString name = m_trials[size_t(m_index)].label;
    m_failures.back() = tr("could not start: %1").arg(error);
    m_stopReasons.back() = tr("not started");
    Q_EMIT runEnded(m_index, name, m_stopReasons.back(), m_failures.back());
    Q_EMIT line(tr("%1 could not start: %2").arg(name, error));
    m_cancelled = true;
    QTimer::singleShot(0, this, &ModeComparison::startNextRun);
}

void ModeComparison::onSnapshot(const RunSnapshot &snapshot)
{
    if (!m_runActive || m_stopping)
        return;
    m_globalStep = snapshot.globalStep;
    if (!m_sinceFirstStep.isValid() && snapshot.stepEvents > 0)
        m_sinceFirstStep.start();
    if (snapshot.fullLoss.isEmpty())
        return;
    m_latestLoss = snapshot.fullLoss.buckets().back().last;
    if (!m_options.stopAtTarget)
        return; // the time limit ends the run; the summary times the target
    if (m_latestLoss > m_options.targetLoss) {
        m_belowTarget.invalidate();
        return;
    }
    // One evaluation below the target may be noise: it has to stay there.
    if (!m_belowTarget.isValid())
        m_belowTarget.start();
    else if (double(m_belowTarget.elapsed()) >= 1000 * m_options.holdSeconds)
        stopRun(tr("target reached"));
}

void ModeComparison::onTick()
{
    if (!m_runActive)
        return;
    const QString name = m_trials[size_t(m_index)].label;
    const double seconds = m_sinceFirstStep.isValid() ? double(m_sinceFirstStep.elapsed()) / 1000 : 0;
    ModeRunProgress now;
    now.index = m_index;
    now.count = int(m_trials.size());
    now.name = name;
    now.globalStep = m_globalStep;
    now.seconds = seconds;
    now.latestLoss = m_latestLoss;
    Q_EMIT progress(now);
    if (m_stopping)
        return;
    if (m_sinceLine.elapsed() >= kLineIntervalMs) {
        m_sinceLine.start();
        Q_EMIT line(
            tr("  %1: %2 s, global step %3, full loss %4")
                .arg(name)
                .arg(seconds, 0, 'f', 0)
                .arg(m_globalStep)
                .arg(std::isfinite(m_latestLoss) ? QString::number(m_latestLoss, 'g', 4) : tr("not logged yet")));
    }
    // The figure follows the run in progress, not only the runs that ended.
    if (m_sinceFirstStep.isValid() && !m_summaryBusy && m_sinceLiveSummary.elapsed() >= kLiveSummaryMs) {
        m_sinceLiveSummary.start();
        summarize(false);
    }
    if (m_sinceFirstStep.isValid() && seconds >= m_options.runSeconds) {
        stopRun(tr("time limit"));
    } else if (!m_sinceFirstStep.isValid() && m_sinceLaunch.elapsed() >= qint64(m_options.startSeconds) * 1000) {
        stopRun(
            tr("no step"),
            tr("no training step within %1 s of the launch; the tasks' output says why").arg(m_options.startSeconds));
    }
}

QString ModeComparison::taskFailure(int row) const
{
    const TaskInfo &task = m_launcher->tasks()[size_t(row)];
    QStringList lines = m_launcher->output(row).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    if (lines.size() > 4)
        lines = lines.mid(lines.size() - 4);
    QString text = tr("%1 died: %2").arg(qs(task.task.toString()), task.detail);
    if (!lines.isEmpty())
        text += QStringLiteral("\n    ") + lines.join(QStringLiteral("\n    "));
    return text;
}

void ModeComparison::onTaskChanged(int row)
{
    if (!m_runActive || m_stopping || row < 0 || size_t(row) >= m_launcher->tasks().size())
        return;
    if (m_launcher->tasks()[size_t(row)].state == TaskState::Dead)
        stopRun(tr("a task died"), taskFailure(row));
}

void ModeComparison::onClusterFinished()
{
    if (!m_runActive || m_stopping)
        return;
    // The plan's last step: the tasks exit by themselves.
    m_stopping = true;
    m_stopReasons[size_t(m_index)] = tr("last step");
    m_grace.start(kExitGraceMs);
}

void ModeComparison::stopRun(const QString &reason, const QString &failure)
{
    if (!m_runActive || m_stopping)
        return;
    m_stopping = true;
    m_stopReasons[size_t(m_index)] = reason;
    m_failures[size_t(m_index)] = failure;
    if (!m_sinceFirstStep.isValid()) {
        // Workers may still be held back until the watcher follows:
        // stopAll also cancels those (it blocks until the few tasks exited).
        m_launcher->stopAll();
        onAllExited();
        return;
    }
    for (int row = 0; row < int(m_launcher->tasks().size()); ++row)
        m_launcher->stopTask(row); // SIGTERM: ps:0 writes out its run log
    m_grace.start(kExitGraceMs);
}

void ModeComparison::onAllExited()
{
    if (!m_runActive)
        return;
    m_runActive = false;
    m_tick.stop();
    m_grace.stop();
    m_watcher->disconnectFromCluster();
    const QString name = m_trials[size_t(m_index)].label;
    QString &reason = m_stopReasons[size_t(m_index)];
    QString &failure = m_failures[size_t(m_index)];
    if (reason.isEmpty()) {
        // Every task ended without being asked: ps:0 must have gone.
        reason = tr("the cluster ended");
        for (int row = 0; row < int(m_launcher->tasks().size()) && failure.isEmpty(); ++row)
            if (m_launcher->tasks()[size_t(row)].state == TaskState::Dead)
                failure = taskFailure(row);
    }
    Q_EMIT runEnded(m_index, name, reason, failure);
    Q_EMIT line(failure.isEmpty() ? tr("  %1: stopped at global step %2 (%3)").arg(name).arg(m_globalStep).arg(reason)
                                  : tr("  %1 failed: %2").arg(name, failure));
    // The figure can show this run while the next one trains.
    if (!m_cancelled && m_index + 1 < int(m_trials.size()))
        summarize(false);
    // Queued: this may run inside the launcher's own signal.
    QTimer::singleShot(0, this, &ModeComparison::startNextRun);
}

void ModeComparison::finishComparison()
{
    if (!m_running || m_finishing)
        return;
    m_finishing = true;
    Q_EMIT line(tr("Reading the %1 run directories...").arg(m_directories.size()));
    summarize(true);
}

void ModeComparison::summarize(bool final)
{
    // One reader at a time. A partial summary reads the runs made so far,
    // which is done long before the next run ends.
    if (m_summaryThread.joinable())
        m_summaryThread.join();
    const uint64_t generation = ++m_summaryGeneration;
    m_summaryBusy = true;
    const int runsToCome = final ? 0 : int(m_trials.size()) - int(m_directories.size());
    // A run still training is drawn as far as it has come, and says so.
    std::vector<QString> reasons = m_stopReasons;
    const bool inProgress = !final && m_runActive && !reasons.empty() && reasons.back().isEmpty();
    if (inProgress)
        reasons.back() = tr("in progress");
    // Step logs of long runs take a while to read: not on the owner's thread.
    m_summaryThread
        = std::thread([this, generation, final, runsToCome, directories = m_directories, target = m_options.targetLoss,
                       reasons, inProgress, failures = m_failures, cancelled = m_cancelled] {
              ModeComparisonSummary summary = summarizeModeComparison(directories, target);
              summary.cancelled = cancelled;
              summary.runsToCome = runsToCome;
              if (inProgress && !summary.runs.empty())
                  summary.runs.back().inProgress = true;
              for (size_t i = 0; i < summary.runs.size() && i < reasons.size(); ++i) {
                  summary.runs[i].stopReason = reasons[i];
                  if (!failures[i].isEmpty())
                      summary.runs[i].failure = failures[i];
              }
              QMetaObject::invokeMethod(
                  this,
                  [this, generation, final, summary] {
                      // A newer reader started since: it has (or will) say more.
                      if (generation != m_summaryGeneration)
                          return;
                      m_summaryThread.join();
                      m_summaryBusy = false;
                      if (!final) {
                          Q_EMIT runsSummarized(summary);
                          return;
                      }
                      m_running = false;
                      m_finishing = false;
                      Q_EMIT finished(summary);
                  },
                  Qt::QueuedConnection);
          });
}

} // namespace parasync
