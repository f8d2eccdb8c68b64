#include "ui/headless/headless_runner.h"

#include "base/error.h"
#include "config/task_options.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/connect_request.h"
#include "orchestration/launch_sequence.h"
#include "orchestration/preflight_check.h"
#include "ui/charts/chart_exporter.h"
#include "ui/charts/run_charts_view.h"
#include "ui/headless/console.h"
#include "ui/models/chart_style.h"
#include "ui/models/recent_paths.h"
#include "ui/models/run_loader.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

#include <cstdio>

namespace parasync::ui {

namespace {
QString hostList(const std::vector<HostPort> &hosts)
{
    QStringList list;
    for (const HostPort &host : hosts)
        list.append(QString::fromStdString(host.toString()));
    return list.join(QLatin1Char(','));
}

// "waiting for the chief worker:0 to initialise the variables", "serving
// (holds its variables)", "training": the state, and the detail where it
// says more than the state's name and the pid already shown.
QString stateInWords(const TaskInfo &task)
{
    const QString state = taskStateName(task.state);
    const QString &detail = task.detail;
    if (detail.isEmpty() || task.state == TaskState::Training || detail.startsWith(QStringLiteral("pid "))
        || detail.compare(state, Qt::CaseInsensitive) == 0)
        return state;
    if (detail.startsWith(state, Qt::CaseInsensitive))
        return detail;
    return state + QStringLiteral(" (") + detail + QLatin1Char(')');
}

// The last lines of a task's output, for an error message.
QString tail(const QString &text, int lines)
{
    QStringList all = text.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    if (all.size() > lines)
        all = all.mid(all.size() - lines);
    return QStringLiteral("    ") + all.join(QStringLiteral("\n    "));
}
} // namespace

HeadlessRunner::HeadlessRunner(ClusterLauncher *launcher, ClusterWatcher *watcher, HeadlessOptions options,
                               QObject *parent)
    : QObject(parent)
    , m_launcher(launcher)
    , m_watcher(watcher)
    , m_options(std::move(options))
    , m_charts(std::make_unique<RunChartsView>())
    , m_launch(std::make_unique<LaunchSequence>(launcher, watcher))
{
    m_launch->setPreflight(m_options.preflightOnly   ? LaunchSequence::Preflight::Always
                           : m_options.skipPreflight ? LaunchSequence::Preflight::Never
                                                     : LaunchSequence::Preflight::RemoteHosts);
    connect(m_launch.get(), &LaunchSequence::preflightStarted, this, [this] {
        say(tr("Pre-flight check of %1: ssh, parasync-node, ports, routes to the ps tasks")
                .arg(PreflightCheck::describeHosts(m_launch->plan())));
    });
    connect(m_launch.get(), &LaunchSequence::preflightFinished, this, &HeadlessRunner::onPreflightFinished);
    connect(m_launch.get(), &LaunchSequence::portsTaken, this, &HeadlessRunner::onPortsTaken);
    connect(m_launch.get(), &LaunchSequence::failed, this,
            [this](const QString &error) { finishWith(CouldNotStart, error); });
    connect(m_launch.get(), &LaunchSequence::launched, this, &HeadlessRunner::onLaunched);
    // Never shown: it is only the charts' owner and the exporter's source.
    m_charts->resize(1400, 800);
    // A line every few seconds: enough to see a paced run move, few enough to read.
    m_progress.setInterval(3000);
    m_tourTimer.setSingleShot(true);
    connect(&m_tourTimer, &QTimer::timeout, this, &HeadlessRunner::nextTourStop);
    connect(&m_progress, &QTimer::timeout, this, &HeadlessRunner::printProgress);
    m_timeout.setSingleShot(true);
    connect(&m_timeout, &QTimer::timeout, this, &HeadlessRunner::onTimeout);
    m_grace.setSingleShot(true);
    connect(&m_grace, &QTimer::timeout, this, [this] {
        if (m_backend) {
            say(tr("ps:0 reported the end, but %1 is still there: stopping it.").arg(m_backend->jobName()));
            m_backend->stop(); // ended follows
            return;
        }
        if (m_clusterFinished && m_launcher->anyRunning()) {
            say(tr("ps:0 reported the end, but tasks are still running: stopping them."));
            m_launcher->stopAll();
        }
        onAllExited();
    });
}

HeadlessRunner::~HeadlessRunner() = default;

void HeadlessRunner::start()
{
    m_clock.start();
    if (m_options.backend && !m_options.jobScriptOnly.isEmpty()) {
        const std::unique_ptr<ClusterBackend> backend = m_options.backend();
        QString error;
        ClusterPlan plan = m_options.plan;
        if (plan.training.logdir.empty())
            plan.training.logdir = QDir(backend->outputDirectory()).filePath(QStringLiteral("run")).toStdString();
        if (!backend->writeJobScript(plan, m_options.jobScriptOnly, &error)) {
            finishWith(CouldNotStart, error);
            return;
        }
        finishWith(Success, tr("wrote the %1 job script %2: submit it by hand (see its first lines)")
                                .arg(backend->name(), m_options.jobScriptOnly));
        return;
    }
    if (m_options.exportDirectory.isEmpty() && !m_options.preflightOnly) {
        finishWith(CouldNotStart, tr("--headless needs --export=DIR: the folder the charts are written to."));
        return;
    }
    if (m_options.source == HeadlessOptions::Source::Open) {
        say(tr("Reading the run directory %1").arg(m_options.runDirectory));
        const LoadedRun run = RunLoader::loadNow(m_options.runDirectory);
        if (!run.snapshot) {
            finishWith(CouldNotStart, run.error);
            return;
        }
        say(tr("%1 records (%2 skipped), global step %3, %4 mode change(s)")
                .arg(run.info.records)
                .arg(run.info.skippedLines)
                .arg(run.snapshot->globalStep)
                .arg(run.snapshot->modeChanges.size()));
        if (!run.info.recordsNote.empty())
            say(QString::fromStdString(run.info.recordsNote));
        m_latest = run.snapshot;
        finishWith(exportCharts() ? Success : RunFailed, QString());
        return;
    }

    connect(m_watcher, &ClusterWatcher::snapshotReady, this, &HeadlessRunner::onSnapshot);
    connect(m_watcher, &ClusterWatcher::connectionStateChanged, this,
            [](bool, const QString &message) { say(message); });
    connect(m_watcher, &ClusterWatcher::modeChanged, this, [](const proto::ModeConfig &mode, qint64 step) {
        say(tr("mode: %1 from global step %2").arg(QString::fromStdString(describeMode(mode))).arg(step));
    });
    connect(m_watcher, &ClusterWatcher::clusterFinished, this, &HeadlessRunner::onClusterFinished);
    m_timeout.start(m_options.timeoutSeconds * 1000);
    m_progress.start();

    if (m_options.source == HeadlessOptions::Source::Connect) {
        RpcSettings settings;
        try {
            settings = m_options.connect.rpcSettings();
        } catch (const InputError &e) {
            finishWith(CouldNotStart, QString::fromStdString(e.what()));
            return;
        }
        say(tr("Watching the cluster of ps:0 at %1 until it finishes").arg(m_options.connect.address));
        m_watcher->setHistory(m_options.connect.runDirectory, true);
        m_watcher->connectTo(m_options.connect.address, settings);
        return;
    }
    if (m_options.backend) {
        startBackend();
        return;
    }
    // The run directory is chosen when the launch is sure: after a check
    // that passed, if there is one.
    if (m_launch->checksFirst(m_options.plan))
        m_launch->start(m_options.plan);
    else
        m_launch->start(withRunDirectory(m_options.plan));
}

void HeadlessRunner::startBackend()
{
    m_backend = m_options.backend();
    m_backend->setWatcher(m_watcher);
    m_backend->setCheckFirst(!m_options.skipPreflight);
    connect(m_backend.get(), &ClusterBackend::said, this, [](const QString &line) { say(line); });
    connect(m_backend.get(), &ClusterBackend::checked, this, [this](bool passed, const QString &report) {
        std::fputs(qPrintable(report), stdout);
        std::fflush(stdout);
        if (m_options.preflightOnly)
            finishWith(passed ? Success : CouldNotStart,
                       passed ? tr("Pre-flight: every check passed.")
                              : tr("Pre-flight: some checks failed (see the fixes above)."));
        else if (!passed)
            finishWith(CouldNotStart, tr("Not submitted: the pre-flight check failed. Fix what it says above (or "
                                         "submit anyway with --skip_preflight)."));
    });
    connect(m_backend.get(), &ClusterBackend::taskOutput, this,
            [](const QString &task, const QString &line) { say(task + QStringLiteral(" | ") + line); });
    connect(m_backend.get(), &ClusterBackend::failed, this, [this](const QString &message) {
        if (m_backend->jobName().isEmpty())
            finishWith(CouldNotStart, message);
        else
            complain(message);
    });
    connect(m_backend.get(), &ClusterBackend::ended, this, &HeadlessRunner::onBackendEnded);
    if (m_options.preflightOnly) {
        m_backend->check(m_options.plan);
        return;
    }
    // The nodes write the run directory: an absolute path, on the shared file system.
    ClusterPlan plan = withRunDirectory(m_options.plan);
    plan.training.logdir = QFileInfo(m_runDirectory).absoluteFilePath().toStdString();
    m_runDirectory = QString::fromStdString(plan.training.logdir);
    RecentPaths::runs().add(m_runDirectory);
    ConnectRequest access; // the token (file, else environment) and the plan's TLS files
    access.tokenFile = m_options.tokenFile;
    access.connection = plan.connection;
    RpcSettings rpc;
    try {
        rpc = access.rpcSettings();
    } catch (const InputError &e) {
        finishWith(CouldNotStart, QString::fromStdString(e.what()));
        return;
    }
    say(tr("mode %1, %2, run directory %3")
            .arg(QString::fromStdString(describeMode(plan.training.mode)))
            .arg(plan.training.lastStep > 0 ? tr("last step %1").arg(plan.training.lastStep) : tr("no last step"))
            .arg(m_runDirectory));
    m_backend->start(plan, rpc);
}

void HeadlessRunner::onBackendEnded(ClusterBackend::Outcome outcome, const QString &summary)
{
    if (m_done)
        return;
    m_grace.stop();
    if (outcome != ClusterBackend::Outcome::Failed)
        say(summary);
    // Snapshots already queued behind this signal still count.
    QTimer::singleShot(300, this, [this, outcome, summary] {
        if (m_done)
            return;
        m_watcher->disconnectFromCluster();
        const bool exported = exportCharts();
        if (!exported)
            finishWith(RunFailed, QString());
        else if (outcome == ClusterBackend::Outcome::Failed)
            finishWith(RunFailed, summary);
        else
            finishWith(Success, QString());
    });
}

void HeadlessRunner::onPreflightFinished(bool passed, const QString &report)
{
    std::fputs(qPrintable(report), stdout);
    std::fflush(stdout);
    if (m_options.preflightOnly) {
        finishWith(passed ? Success : CouldNotStart, passed
                                                         ? tr("Pre-flight: every check passed.")
                                                         : tr("Pre-flight: some checks failed (see the fixes above)."));
        return;
    }
    if (!passed) {
        finishWith(CouldNotStart, tr("Not launched: the pre-flight check failed. Fix what it says above (or "
                                     "launch anyway with --skip_preflight)."));
        return;
    }
    m_launch->proceed(withRunDirectory(m_launch->plan()));
}

ClusterPlan HeadlessRunner::withRunDirectory(ClusterPlan plan)
{
    // The run directory is the complete record: the export is drawn from it,
    // so a run that ends before the telemetry stream is up is still whole.
    if (plan.training.logdir.empty()) {
        // A fresh directory: an old one would make the chief restore its
        // checkpoint and continue that run.
        const QDir exportDir(m_options.exportDirectory);
        QString candidate = exportDir.filePath(QStringLiteral("run"));
        for (int n = 2; QFileInfo::exists(candidate); ++n)
            candidate = exportDir.filePath(QStringLiteral("run-%1").arg(n));
        plan.training.logdir = candidate.toStdString();
    } else if (QDir(QString::fromStdString(plan.training.logdir)).exists(QStringLiteral("steps.jsonl"))) {
        say(tr("%1 holds an earlier run: the chief restores its newest checkpoint and the run continues")
                .arg(QString::fromStdString(plan.training.logdir)));
    }
    m_runDirectory = QString::fromStdString(plan.training.logdir);
    return plan;
}

void HeadlessRunner::onPortsTaken(const std::vector<PortConflict> &conflicts)
{
    QString message = tr("The cluster cannot start, ports are taken:\n");
    for (const PortConflict &conflict : conflicts)
        message += tr("  %1 wants %2, taken%3\n")
                       .arg(QString::fromStdString(conflict.task.toString()),
                            QString::fromStdString(conflict.address.toString()),
                            conflict.holder.isEmpty() ? QString() : tr(" by %1").arg(conflict.holder));
    const ClusterPlan free = ClusterLauncher::withSuggestedPorts(m_launch->plan(), conflicts);
    // The user's own command, on free ports.
    QStringList command;
    for (const QString &argument : QCoreApplication::arguments())
        if (!argument.startsWith(QStringLiteral("--ps_hosts"))
            && !argument.startsWith(QStringLiteral("--worker_hosts")))
            command.append(argument);
    command.append(QStringLiteral("--ps_hosts=") + hostList(free.cluster.ps));
    command.append(QStringLiteral("--worker_hosts=") + hostList(free.cluster.workers));
    message += tr("Stop the process holding the port (an old run?), or run on free ports:\n  %1")
                   .arg(command.join(QLatin1Char(' ')));
    finishWith(CouldNotStart, message);
}

void HeadlessRunner::onLaunched(const ClusterPlan &plan)
{
    // The window's Runs -> Recent runs offers it later (scripts/demo.sh's
    // run among them).
    RecentPaths::runs().add(m_runDirectory);
    connect(m_launcher, &ClusterLauncher::allExited, this, &HeadlessRunner::onAllExited);
    connect(m_launcher, &ClusterLauncher::taskChanged, this, &HeadlessRunner::onTaskChanged);
    for (int row = 0; row < int(m_launcher->tasks().size()); ++row)
        onTaskChanged(row);
    say(tr("mode %1, %2, run directory %3")
            .arg(QString::fromStdString(describeMode(plan.training.mode)))
            .arg(plan.training.lastStep > 0 ? tr("last step %1").arg(plan.training.lastStep) : tr("no last step"))
            .arg(m_runDirectory));
}

void HeadlessRunner::onTaskChanged(int row)
{
    if (row < 0 || size_t(row) >= m_launcher->tasks().size())
        return;
    const TaskInfo &task = m_launcher->tasks()[size_t(row)];
    // One line per change of state (or pid), not per status refresh; the
    // pid once there is one.
    const QString line
        = tr("%1 on %2%3: %4")
              .arg(QString::fromStdString(task.task.toString()), QString::fromStdString(task.address.toString()),
                   task.pid > 0 ? tr(" (pid %1)").arg(task.pid) : QString(), stateInWords(task));
    // Keyed on the state and pid: a detail that counts (ps:0's "global step
    // 371") changes with every refresh.
    const QString key = taskStateName(task.state) + QString::number(task.pid);
    if (m_taskLines.value(row) == key)
        return;
    m_taskLines[row] = key;
    say(line);
}

void HeadlessRunner::onSnapshot(const RunSnapshot &snapshot)
{
    m_latest = std::make_shared<const RunSnapshot>(snapshot);
    // The tour's clock starts at the first step, not at the launch: building
    // the processes' connections must not eat into the first mode's time.
    if (!m_tourStarted && !m_options.tour.empty() && snapshot.globalStep > 0) {
        m_tourStarted = true;
        const auto &first = m_options.tour.front();
        say(tr("%1 for %2 s").arg(QString::fromStdString(describeMode(first.mode))).arg(first.seconds));
        m_tourTimer.start(first.seconds * 1000);
    }
}

void HeadlessRunner::nextTourStop()
{
    if (m_done)
        return;
    if (++m_tourStop < m_options.tour.size()) {
        const auto &stop = m_options.tour[m_tourStop];
        say(tr("switching to %1 for %2 s").arg(QString::fromStdString(describeMode(stop.mode))).arg(stop.seconds));
        m_watcher->setMode(stop.mode);
        m_tourTimer.start(stop.seconds * 1000);
        return;
    }
    sayStalenessCost();
    say(tr("the tour is over: stopping the cluster"));
    m_watcher->disconnectFromCluster();
    if (m_backend) {
        m_backend->stop(); // ended follows once every task is gone
        return;
    }
    m_launcher->stopAll(); // allExited follows: the charts are exported from the run directory
}

void HeadlessRunner::sayStalenessCost()
{
    if (!m_latest || m_latest->stalenessCost.empty())
        return;
    // The pace of each mode was on every line; what the stale gradients were
    // worth is the other half of the trade.
    QStringList buckets;
    for (const StalenessCostFigures &bucket : m_latest->stalenessCost)
        buckets << tr("%1 steps apart %2 (%3)")
                       .arg(QString::fromStdString(bucket.label))
                       .arg(double(bucket.medianCosine), 0, 'f', 3)
                       .arg(bucket.count);
    say(tr("what a stale gradient was worth (%1 probes; median cosine with the fresh gradient of the same batch, "
           "1 = as good as fresh): %2")
            .arg(m_latest->stalenessProbes)
            .arg(buckets.join(QStringLiteral(", "))));
    say(tr("what staleness costs in what the model learns: parasync --headless --compare_modes "
           "--workload=staleness --export=DIR (about seven minutes: five contenders over three seeds)"));
}

void HeadlessRunner::printProgress()
{
    if (!m_latest)
        return;
    if (m_latest->recordsProblem != m_saidRecordsProblem) {
        m_saidRecordsProblem = m_latest->recordsProblem;
        if (!m_saidRecordsProblem.empty())
            say(tr("ps:0 %1").arg(QString::fromStdString(m_saidRecordsProblem)));
    }
    if (m_latest->globalStep == m_printedStep)
        return;
    m_printedStep = m_latest->globalStep;
    QStringList perWorker;
    for (const WorkerFigures &worker : m_latest->workers) {
        perWorker << tr("worker:%1 %2 steps/s, waiting %3%")
                         .arg(worker.index)
                         .arg(worker.stepsPerSecond, 0, 'f', 1)
                         .arg(worker.waitFraction * 100, 0, 'f', 0);
    }
    QString model;
    if (!m_latest->fullLoss.isEmpty())
        model += tr(", loss %1").arg(double(m_latest->fullLoss.buckets().back().last), 0, 'g', 3);
    for (const QString &metric : latestMetricTexts(*m_latest))
        model += QStringLiteral(", ") + metric;
    for (size_t i = 0; i < m_latest->parameterNames.size() && i < m_latest->parameterSeries.size(); ++i)
        if (!m_latest->parameterSeries[i].isEmpty())
            model += QStringLiteral(", %1 %2")
                         .arg(QString::fromStdString(m_latest->parameterNames[i]))
                         .arg(double(m_latest->parameterSeries[i].buckets().back().last), 0, 'f', 3);
    // The mode's short name: its numbers were said when it began.
    // Both rates, named by their units: in sync a global step takes several
    // workers' gradients, so the two differ by the number it aggregates.
    say(tr("global step %1%2, %3, %4 global steps/s, %5 gradients/s%6 (%7)")
            .arg(m_latest->globalStep)
            .arg(m_latest->lastStep > 0 ? QStringLiteral("/%1").arg(m_latest->lastStep) : QString())
            .arg(QString::fromStdString(updateModeName(m_latest->mode.mode())))
            .arg(m_latest->globalStepsPerSecond, 0, 'f', 1)
            .arg(m_latest->gradientsPerSecond, 0, 'f', 1)
            .arg(model, perWorker.join(QStringLiteral("; "))));
}

void HeadlessRunner::onClusterFinished()
{
    m_clusterFinished = true;
    say(tr("ps:0 reports the cluster finished"));
    if (m_options.source == HeadlessOptions::Source::Connect) {
        // Give the last snapshot a moment to arrive.
        m_grace.start(500);
        return;
    }
    // The tasks exit by themselves; stop them if they do not.
    m_grace.start(m_backend ? 30000 : 15000);
}

void HeadlessRunner::onAllExited()
{
    if (m_done)
        return;
    m_grace.stop();
    // Snapshots already queued behind this signal still count.
    QTimer::singleShot(300, this, [this] {
        if (m_done)
            return;
        const QString failures = taskFailures();
        if (!exportCharts()) {
            finishWith(RunFailed, QString());
            return;
        }
        if (!failures.isEmpty())
            finishWith(RunFailed, tr("The run did not finish cleanly:\n%1").arg(failures));
        else
            finishWith(Success, QString());
    });
}

QString HeadlessRunner::taskFailures() const
{
    QString report;
    for (size_t i = 0; i < m_launcher->tasks().size(); ++i) {
        const TaskInfo &task = m_launcher->tasks()[i];
        if (task.state != TaskState::Dead)
            continue;
        report
            += tr("  %1 (%2, pid %3): %4\n%5\n")
                   .arg(QString::fromStdString(task.task.toString()), QString::fromStdString(task.address.toString()))
                   .arg(task.pid)
                   .arg(task.detail, tail(m_launcher->output(int(i)), 6));
    }
    return report;
}

void HeadlessRunner::onTimeout()
{
    if (m_done)
        return;
    const bool watching = m_options.source == HeadlessOptions::Source::Connect;
    const QString where
        = m_latest ? tr("at global step %1").arg(m_latest->globalStep) : tr("before any telemetry came");
    // A cluster we only watch is not ours to stop.
    complain(watching ? tr("Timed out after %1 s %2; exporting what there is (the cluster keeps running).")
                            .arg(m_options.timeoutSeconds)
                            .arg(where)
                      : tr("Timed out after %1 s %2; stopping the cluster and exporting what there is.")
                            .arg(m_options.timeoutSeconds)
                            .arg(where));
    m_watcher->disconnectFromCluster();
    if (m_backend && !m_backend->stopAndWait(30000))
        complain(tr("%1 did not end within 30 s of being stopped: check it with %2's own tools")
                     .arg(m_backend->jobName(), m_backend->name()));
    else if (!watching)
        m_launcher->stopAll();
    exportCharts();
    finishWith(TimedOut,
               watching ? tr("Raise --timeout to watch longer.") : tr("Raise --timeout or lower --last_step."));
}

bool HeadlessRunner::exportCharts()
{
    if (!m_runDirectory.isEmpty()) {
        const LoadedRun run = RunLoader::loadNow(m_runDirectory);
        if (run.snapshot) {
            say(tr("charts drawn from the run directory %1 (%2 records)").arg(m_runDirectory).arg(run.info.records));
            m_latest = run.snapshot;
        } else {
            complain(tr("Could not read the run directory (%1); exporting what the telemetry showed.").arg(run.error));
        }
    }
    if (!m_latest) {
        complain(tr("No telemetry arrived from ps:0: nothing to export. Check the tasks' output above."));
        return false;
    }
    m_charts->setSnapshot(m_latest);
    m_charts->flush();
    QString error;
    // The run report names what it reports on.
    const QString runName = !m_runDirectory.isEmpty()           ? m_runDirectory
                            : !m_options.runDirectory.isEmpty() ? m_options.runDirectory
                            : m_options.connect.address.isEmpty()
                                ? QString()
                                : tr("the cluster of ps:0 at %1").arg(m_options.connect.address);
    const bool ok = m_charts->exportAll(m_options.exportDirectory, &m_written, &error, runName);
    for (const QString &path : std::as_const(m_written))
        say(tr("wrote %1").arg(QDir::toNativeSeparators(path)));
    if (!ok)
        complain(error);
    return ok;
}

void HeadlessRunner::finishWith(int exitCode, const QString &message)
{
    if (m_done)
        return;
    m_done = true;
    // Launched or not: the watcher is not pointed at ps:0 from here on.
    m_launch->cancel();
    m_progress.stop();
    m_timeout.stop();
    m_grace.stop();
    if (!message.isEmpty())
        (exitCode == Success ? say : complain)(message);
    if (exitCode == Success && m_latest) {
        // The held-out score, where there is one: what the run learnt.
        const QStringList metrics = latestMetricTexts(*m_latest);
        say(tr("done: global step %1%2, %3 files in %4")
                .arg(m_latest->globalStep)
                .arg(metrics.isEmpty() ? QString() : QStringLiteral(", ") + metrics.join(QStringLiteral(", ")))
                .arg(m_written.size())
                .arg(QDir::toNativeSeparators(m_options.exportDirectory)));
    }
    Q_EMIT finished(exitCode);
}

} // namespace parasync::ui
