#include "orchestration/cluster_launcher.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/cluster_file.h"
#include "formats/task_state_line.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/logging.h"
#include "orchestration/task_log.h"
#include "orchestration/task_runner.h"
#include "wire/cluster_token.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTimer>

#include <charconv>
#include <deque>
#include <set>
#include <utility>

namespace parasync {

namespace {

constexpr int kMaxOutputLines = 2000;
constexpr int kWorkerStartFallbackMs = 3000; // start workers even if a ps never says it listens
constexpr int kWatcherWaitMs = 10000;        // ... and even if the watcher never connects
constexpr int kStopEscalationMs = 5000;      // stopTask: SIGKILL if SIGTERM did not end it
constexpr int kStopAllGraceMs = 3000;
constexpr int kAbandonMs = 4000; // a remote task's ssh that outlives a KILL by this is ended

bool isFinal(TaskState state)
{
    return state == TaskState::Finished || state == TaskState::Stopped || state == TaskState::Dead;
}

bool isExecutable(const QString &path)
{
    const QFileInfo info(path);
    return info.isFile() && info.isExecutable();
}

// Where a program of a worker command is: a path (relative ones from this
// process's working directory, as QProcess starts it) or a name on PATH.
// Empty when it is not there to run.
QString resolveProgram(const QString &program)
{
    if (program.contains(QLatin1Char('/')))
        return isExecutable(program) ? program : QString();
    return QStandardPaths::findExecutable(program);
}

// The Python package `parasync` for workers this app starts: in a build tree
// it is assembled in build/<preset>/python, beside app/parasync/ (target
// parasync_python), and not on python3's path; installed, it is in Debian's
// dist-packages, where python3 finds it unaided. Empty when not in a build tree.
QString buildTreePythonPackageParent()
{
    if (!QCoreApplication::instance())
        return {};
    const QDir candidate(QCoreApplication::applicationDirPath() + QStringLiteral("/../../python"));
    return QFileInfo::exists(candidate.filePath(QStringLiteral("parasync/__init__.py"))) ? candidate.canonicalPath()
                                                                                         : QString();
}

// "03:24:23.442 worker:0 joined ..." -> "worker:0 joined ...".
QString withoutTimestamp(const QString &line)
{
    static const QRegularExpression stamp(QStringLiteral("^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} "));
    const auto match = stamp.match(line);
    return match.hasMatch() ? line.mid(match.capturedLength()) : line;
}

// "... , retrying in 0.4 s" is the back-off's pacing, not part of the state.
QString withoutRetry(const QString &text)
{
    const qsizetype at = text.lastIndexOf(QLatin1String(", retrying in "));
    return at >= 0 ? text.left(at) : text;
}

} // namespace

QString taskStateName(TaskState state)
{
    switch (state) {
    case TaskState::NotStarted: return QStringLiteral("not started");
    case TaskState::Starting: return QStringLiteral("starting");
    case TaskState::WaitingFor: return QStringLiteral("waiting for");
    case TaskState::Training: return QStringLiteral("training");
    case TaskState::BlockedBySync: return QStringLiteral("blocked by sync");
    case TaskState::BlockedByStaleness: return QStringLiteral("blocked by staleness");
    case TaskState::Serving: return QStringLiteral("serving");
    case TaskState::Finished: return QStringLiteral("finished");
    case TaskState::Stopped: return QStringLiteral("stopped");
    case TaskState::Dead: return QStringLiteral("dead");
    }
    return {};
}

// ---------------------------------------------------------------------------
// ClusterLauncher
// ---------------------------------------------------------------------------

struct ClusterLauncher::Process
{
    std::unique_ptr<TaskRunner> runner; // local child or ssh
    QProcess *process = nullptr;        // a child of the launcher; replaced on restart
    std::deque<QString> lines;          // the last kMaxOutputLines lines of output
    QString partial;                    // output after the last newline
    QString lastError;                  // the last line that reads as an error
    QString lastLine;
    bool listening = false; // a ps task reported a state: it serves its address
    bool stopRequested = false;
    bool killRequested = false;
    bool restartRequested = false;
    std::unique_ptr<TaskLog> log; // its output on disk, when the plan has a run directory
};

ClusterLauncher::ClusterLauncher(QObject *parent) : QObject(parent) {}

ClusterLauncher::~ClusterLauncher()
{
    // The owner is going away (often mid-destruction itself): no signals to it.
    blockSignals(true);
    stopAll();
    for (auto &p : m_processes)
        if (p->process)
            p->process->disconnect(this);
}

void ClusterLauncher::setNodeBinary(const QString &path)
{
    m_nodeBinary = path;
}

QString ClusterLauncher::nodeBinary() const
{
    if (!m_nodeBinary.isEmpty())
        return m_nodeBinary;
    if (QCoreApplication::instance()) {
        const QDir appDir(QCoreApplication::applicationDirPath());
        // Installed: side by side. Build tree: app/parasync/ next to app/parasync-node/.
        for (const QString &candidate : {appDir.filePath(QStringLiteral("parasync-node")),
                                         appDir.filePath(QStringLiteral("../parasync-node/parasync-node"))}) {
            if (isExecutable(candidate))
                return QFileInfo(candidate).canonicalFilePath();
        }
    }
    const QString fromEnvironment = qEnvironmentVariable("PARASYNC_NODE");
    if (!fromEnvironment.isEmpty())
        return fromEnvironment;
    const QString onPath = QStandardPaths::findExecutable(QStringLiteral("parasync-node"));
    return onPath.isEmpty() ? QStringLiteral("parasync-node") : onPath;
}

bool ClusterLauncher::launch(const ClusterPlan &plan, QString *error)
{
    const auto fail = [error](const QString &message) {
        if (error)
            *error = message;
        return false;
    };
    if (anyRunning())
        return fail(tr("tasks of the cluster launched before are still running: stop them first"));
    try {
        plan.cluster.validate();
    } catch (const InputError &e) {
        return fail(tr("the cluster spec is not valid: %1").arg(qs(e.what())));
    }
    bool anyLocalNode = false;
    for (const auto &task : plan.tasks()) {
        if (plan.remoteHost(task))
            continue; // the pre-flight check looks there
        if (task.isPs() || plan.commandOf(task.index).empty()) {
            anyLocalNode = true;
            continue;
        }
        const QString program = qs(plan.commandOf(task.index).front());
        if (resolveProgram(program).isEmpty())
            return fail(tr("cannot run %1's command: %2 is not there to run: %3")
                            .arg(qs(task.toString()), program, workerProgramMissingAdvice(program)));
    }
    const QString binary = nodeBinary();
    const QString resolved = QFileInfo(binary).isAbsolute() || binary.contains(QLatin1Char('/'))
                                 ? binary
                                 : QStandardPaths::findExecutable(binary);
    if (anyLocalNode && (resolved.isEmpty() || !isExecutable(resolved)))
        return fail(tr("cannot find the parasync-node program (looked for %1): install it next to this app, "
                       "put it on PATH, or set PARASYNC_NODE to its path")
                        .arg(binary));
    const auto conflicts = checkPorts(plan);
    if (!conflicts.empty()) {
        QStringList lines;
        for (const auto &c : conflicts) {
            QString line = tr("%1's address %2 is taken").arg(qs(c.task.toString()), qs(c.address.toString()));
            if (!c.holder.isEmpty())
                line += tr(" by %1").arg(c.holder);
            if (c.suggestedPort != 0)
                line += tr("; port %1 is free").arg(c.suggestedPort);
            lines << line;
        }
        return fail(lines.join(QStringLiteral("\n"))
                    + tr("\nStop the process holding the port, or use the free ports suggested."));
    }

    // Tasks of an earlier launch have all exited: their objects can go.
    for (auto &p : m_processes) {
        if (p->process) {
            p->process->disconnect(this);
            p->process->deleteLater();
        }
    }
    m_plan = plan;
    m_infos.clear();
    m_processes.clear();
    m_portMovesOfAddedWorkers.clear();
    for (const auto &task : plan.tasks())
        appendTask(task);
    const int generation = ++m_launchGeneration;
    m_workersPending = true;
    m_psReady = false;
    m_watcherReady = m_gateWatcher.isNull();
    for (int row = 0; row < int(m_infos.size()); ++row) {
        // A ps task's backup starts with it: it follows the pair's state
        // from the first update.
        if (m_infos[size_t(row)].task.isPs())
            startTask(row);
        else
            setState(row, TaskState::NotStarted,
                     m_watcherReady ? tr("starts once the ps tasks listen")
                                    : tr("starts once the ps tasks listen and the app watches ps:0"));
    }
    QTimer::singleShot(kWorkerStartFallbackMs, this, [this, generation] {
        if (generation != m_launchGeneration)
            return;
        m_psReady = true;
        updatePendingWorkers();
    });
    if (!m_watcherReady) {
        QTimer::singleShot(kWatcherWaitMs, this, [this, generation] {
            if (generation != m_launchGeneration)
                return;
            m_watcherReady = true;
            updatePendingWorkers();
        });
    }
    return true;
}

void ClusterLauncher::holdWorkersUntilWatched(ClusterWatcher *watcher)
{
    disconnect(m_gateConnection);
    m_gateWatcher = watcher;
    if (!watcher)
        return;
    m_gateConnection = connect(watcher, &ClusterWatcher::connectionStateChanged, this, [this](bool connected) {
        if (!connected || !m_workersPending || m_watcherReady || !m_gateWatcher || m_plan.cluster.ps.empty())
            return;
        // Only a watcher of this launch's ps:0 counts.
        if (m_gateWatcher->address() != qs(m_plan.cluster.ps.front().toString()))
            return;
        m_watcherReady = true;
        updatePendingWorkers();
    });
}

void ClusterLauncher::updatePendingWorkers()
{
    if (m_workersPending && m_psReady && m_watcherReady)
        startPendingWorkers();
}

void ClusterLauncher::startPendingWorkers()
{
    if (!m_workersPending)
        return;
    m_workersPending = false;
    // Non-chief workers first: they are ready when the chief initialises the
    // variables, so every worker takes part from the first step.
    for (int row = int(m_infos.size()) - 1; row >= 0; --row)
        if (m_infos[size_t(row)].task.job == JobName::Worker && !isRunning(row))
            startTask(row);
}

int ClusterLauncher::appendTask(const TaskId &task)
{
    TaskInfo info;
    info.task = task;
    info.address = m_plan.cluster.address(task);
    // The process panel's Straggler column starts from the plan's.
    if (task.job == JobName::Worker)
        info.stragglerDelayMs = m_plan.paceOf(task.index).stragglerMs;
    auto process = std::make_unique<Process>();
    const RemoteHost *remote = m_plan.remoteHost(task);
    process->runner = remote ? makeSshRunner(*remote) : makeLocalRunner();
    info.host = process->runner->where();
    m_infos.push_back(info);
    m_processes.push_back(std::move(process));
    return int(m_infos.size()) - 1;
}

void ClusterLauncher::startTask(int row)
{
    if (row < 0 || size_t(row) >= m_processes.size())
        return;
    Process &p = *m_processes[size_t(row)];
    if (p.process) {
        p.process->disconnect(this);
        p.process->deleteLater();
        p.lines.push_back(QStringLiteral("--- restarted ---"));
    }
    p.partial.clear();
    p.lastError.clear();
    p.lastLine.clear();
    p.listening = false;
    p.stopRequested = p.killRequested = p.restartRequested = false;

    auto *process = new QProcess(this);
    p.process = process;
    process->setProcessChannelMode(QProcess::MergedChannels);
    connect(process, &QProcess::started, this, [this, row, process] {
        if (m_processes[size_t(row)]->runner->isRemote()) {
            // The remote pid arrives with the task's first line.
            setState(row, TaskState::Starting, tr("connecting to %1").arg(m_infos[size_t(row)].host));
            return;
        }
        m_infos[size_t(row)].pid = process->processId();
        setState(row, TaskState::Starting, tr("pid %1").arg(process->processId()));
    });
    connect(process, &QProcess::readyReadStandardOutput, this, [this, row] { onOutput(row); });
    connect(process, &QProcess::finished, this,
            [this, row](int exitCode, QProcess::ExitStatus status) { onFinished(row, exitCode, status); });
    connect(process, &QProcess::errorOccurred, this, [this, row](QProcess::ProcessError error) {
        if (error == QProcess::FailedToStart)
            onFailedToStart(row);
    });

    TaskInfo &info = m_infos[size_t(row)];
    info.pid = 0;
    info.exitCode = 0;
    info.stepsPerSecond = 0;
    setState(row, TaskState::Starting, tr("starting"));
    const TaskCommand command = taskCommand(row);
    qCDebug(lcLauncher).noquote() << "starting" << qs(info.task.toString()) << "on" << info.host << "at"
                                  << qs(info.address.toString()) << "as" << command.program
                                  << command.arguments.join(QLatin1Char(' '));
    if (!m_plan.training.logdir.empty()) {
        if (!p.log)
            p.log = std::make_unique<TaskLog>(qs(m_plan.training.logdir), info.task);
        if (!p.log->started(command.program + QLatin1Char(' ') + command.arguments.join(QLatin1Char(' '))))
            Q_EMIT outputAppended(row, QStringLiteral("parasync: %1\n").arg(p.log->error()));
    }
    p.runner->start(*process, command, m_clusterToken);
}

TaskCommand ClusterLauncher::taskCommand(int row) const
{
    const TaskId &task = m_infos[size_t(row)].task;
    const TaskRunner &runner = *m_processes[size_t(row)]->runner;
    TaskCommand command;
    const std::vector<std::string> &own
        = task.job == JobName::Worker ? m_plan.commandOf(task.index) : std::vector<std::string>();
    if (own.empty()) {
        command.program = runner.program(nodeBinary());
        command.arguments = m_plan.arguments(task);
        command.whenMissing = runner.isRemote() ? tr("install parasync-node there, or give its path as \"node\" in "
                                                     "the cluster file's \"hosts\" entry")
                                                : tr("install it next to this app, put it on PATH, or set "
                                                     "PARASYNC_NODE to its path");
        return command;
    }
    // The command as given, then the cluster: a Python worker takes no
    // training flag (the ps tasks own those), and over ssh it runs on the
    // host as written, relative paths from the login's home.
    command.program = qs(own.front());
    for (size_t i = 1; i < own.size(); ++i)
        command.arguments << qs(own[i]);
    command.arguments << m_plan.commandArguments(task);
    command.whenMissing = workerProgramMissingAdvice(command.program);
    if (const QString package = buildTreePythonPackageParent(); !package.isEmpty()) {
        const QString inherited = qEnvironmentVariable("PYTHONPATH");
        command.localEnvironment.emplace_back(QStringLiteral("PYTHONPATH"),
                                              inherited.isEmpty() ? package : package + QLatin1Char(':') + inherited);
    }
    return command;
}

bool ClusterLauncher::isRunning(int row) const
{
    const Process &p = *m_processes[size_t(row)];
    return p.process && p.process->state() != QProcess::NotRunning;
}

bool ClusterLauncher::anyRunning() const
{
    for (int row = 0; row < int(m_processes.size()); ++row)
        if (isRunning(row))
            return true;
    return false;
}

int ClusterLauncher::taskRow(const TaskId &task) const
{
    for (int row = 0; row < int(m_infos.size()); ++row)
        if (m_infos[size_t(row)].task == task)
            return row;
    return -1;
}

QString ClusterLauncher::output(int row) const
{
    if (row < 0 || size_t(row) >= m_processes.size())
        return {};
    const Process &p = *m_processes[size_t(row)];
    QString text;
    for (const auto &line : p.lines)
        text += line + QLatin1Char('\n');
    return text + p.partial;
}

void ClusterLauncher::setState(int row, TaskState state, const QString &detail)
{
    TaskInfo &info = m_infos[size_t(row)];
    if (info.state == state && info.detail == detail)
        return;
    info.state = state;
    info.detail = detail;
    Q_EMIT taskChanged(row);
}

void ClusterLauncher::onOutput(int row)
{
    Process &p = *m_processes[size_t(row)];
    if (!p.process)
        return;
    p.partial += QString::fromUtf8(p.process->readAllStandardOutput());
    const qsizetype end = p.partial.lastIndexOf(QLatin1Char('\n'));
    if (end < 0)
        return;
    const QString complete = p.partial.left(end + 1);
    p.partial.remove(0, end + 1);
    takeLines(row, complete);
}

void ClusterLauncher::takeLines(int row, const QString &text)
{
    Process &p = *m_processes[size_t(row)];
    QString taskOutput; // without the runner's own lines
    for (const QString &line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
        if (qint64 pid = 0; p.runner->consumeLine(line, &pid)) {
            m_infos[size_t(row)].pid = pid;
            setState(row, m_infos[size_t(row)].state, tr("pid %1 on %2").arg(pid).arg(m_infos[size_t(row)].host));
            continue;
        }
        taskOutput += line + QLatin1Char('\n');
        p.lines.push_back(line);
        if (p.lines.size() > size_t(kMaxOutputLines))
            p.lines.pop_front();
        interpretLine(row, line);
    }
    if (!taskOutput.isEmpty()) {
        if (p.log)
            p.log->write(taskOutput);
        Q_EMIT outputAppended(row, taskOutput);
    }
}

void ClusterLauncher::interpretLine(int row, const QString &rawLine)
{
    Process &p = *m_processes[size_t(row)];
    const QString line = withoutTimestamp(rawLine).trimmed();
    if (line.isEmpty())
        return;
    p.lastLine = line;
    // parasync-node prints its fatal errors as "parasync-node: ...", the
    // remote wrapper (ssh_command.cpp) its own as "parasync-remote: ...".
    if (line.startsWith(QLatin1String("parasync-node:")) || line.startsWith(QLatin1String("parasync-remote:"))
        || line.contains(QLatin1String("error")))
        p.lastError = line;

    TaskInfo &info = m_infos[size_t(row)];
    if (isFinal(info.state))
        return;
    // The state comes from the task's state lines (task_state_line.h) only;
    // everything else it prints is prose for a person.
    const auto report = parseTaskStateLine(line.toStdString());
    if (!report || !(report->task == info.task))
        return;
    const QString detail = withoutRetry(qs(report->detail));
    switch (report->phase) {
    case TaskPhase::Listening: setState(row, TaskState::Starting, tr("listening; %1").arg(detail)); break;
    case TaskPhase::Waiting: setState(row, TaskState::WaitingFor, detail); break;
    case TaskPhase::Training: setState(row, TaskState::Training, QString()); break;
    case TaskPhase::Serving: setState(row, TaskState::Serving, detail.section(QLatin1Char(';'), 0, 0)); break;
    case TaskPhase::Finished:
    case TaskPhase::Stopped:
        // The exit code decides between finished and dead; the words stay.
        setState(row, info.state, detail);
        break;
    }
    // A ps that reports anything serves its address: the workers may start
    // once every ps does.
    if (info.task.job == JobName::Ps && !p.listening) {
        p.listening = true;
        bool allListening = true;
        for (int r = 0; r < int(m_infos.size()); ++r)
            if (m_infos[size_t(r)].task.job == JobName::Ps && !m_processes[size_t(r)]->listening)
                allListening = false;
        if (allListening) {
            m_psReady = true;
            updatePendingWorkers();
        }
    }
}

void ClusterLauncher::onFinished(int row, int exitCode, QProcess::ExitStatus status)
{
    Process &p = *m_processes[size_t(row)];
    // What the process printed last, even without a final newline.
    if (p.process)
        p.partial += QString::fromUtf8(p.process->readAllStandardOutput());
    takeLines(row, std::exchange(p.partial, QString()));

    QString recent;
    for (auto it = p.lines.size() > 5 ? p.lines.end() - 5 : p.lines.begin(); it != p.lines.end(); ++it)
        recent += *it + QLatin1Char('\n');
    const TaskExit ended = p.runner->interpretExit(exitCode, status, recent);
    exitCode = ended.code;
    TaskInfo &info = m_infos[size_t(row)];
    info.exitCode = exitCode;
    info.stepsPerSecond = 0;
    if (p.restartRequested) {
        qCDebug(lcLauncher).noquote() << qs(info.task.toString()) << "exited (code" << exitCode << ") to restart";
        if (p.log)
            p.log->ended(tr("exited (code %1) to be started again").arg(exitCode));
        startTask(row);
        return;
    }
    if (!p.stopRequested && !p.killRequested && ended.failure.isEmpty() && !ended.crashed
        && moveOffTakenPort(row, recent)) {
        startTask(row);
        return;
    }
    const bool crashed = ended.crashed;
    const QString why = !p.lastError.isEmpty() ? p.lastError : p.lastLine;
    if (!ended.failure.isEmpty() && !p.stopRequested && !p.killRequested) {
        setState(row, TaskState::Dead, ended.failure);
    } else if (p.killRequested) {
        setState(row, TaskState::Dead, tr("killed (SIGKILL) on request"));
    } else if (p.stopRequested) {
        setState(row, TaskState::Stopped,
                 crashed         ? tr("stopped: did not exit on SIGTERM, killed")
                 : exitCode == 0 ? tr("stopped on request")
                                 : tr("stopped on request (exit code %1)").arg(exitCode));
    } else if (crashed) {
        // A signal comes from outside (a user, the OOM killer, a cluster
        // manager) or from a crash: the last line printed is no cause, only
        // where the task was. An error line it printed may be one.
        const QString signal = QString::fromLocal8Bit(::sigabbrev_np(exitCode));
        setState(row, TaskState::Dead,
                 tr("killed by signal %1%2")
                         .arg(exitCode)
                         .arg(signal.isEmpty() ? QString() : QStringLiteral(" (SIG%1)").arg(signal))
                     + (!p.lastError.isEmpty()  ? QStringLiteral(": ") + p.lastError
                        : !p.lastLine.isEmpty() ? tr("; its last line: %1").arg(p.lastLine)
                                                : QString()));
    } else if (exitCode == 0) {
        setState(row, TaskState::Finished, info.detail.isEmpty() ? tr("exited normally") : info.detail);
    } else {
        setState(row, TaskState::Dead,
                 tr("exit code %1").arg(exitCode) + (why.isEmpty() ? QString() : QStringLiteral(": ") + why));
    }

    if (info.state == TaskState::Dead && !p.killRequested)
        qCWarning(lcLauncher).noquote() << qs(info.task.toString()) << "died:" << info.detail;
    else
        qCDebug(lcLauncher).noquote() << qs(info.task.toString()) << "exited," << (crashed ? "signal" : "exit code")
                                      << exitCode << "->"
                                      << taskStateName(info.state) + QStringLiteral(": ") + info.detail;
    if (p.log)
        p.log->ended(taskStateName(info.state) + QStringLiteral(": ") + info.detail);

    // A ps task that exits before it listens leaves the workers nothing to join.
    if (m_workersPending && info.task.job == JobName::Ps) {
        bool anyPsRunning = false;
        for (int r = 0; r < int(m_infos.size()); ++r)
            if (m_infos[size_t(r)].task.job == JobName::Ps && isRunning(r))
                anyPsRunning = true;
        if (!anyPsRunning) {
            m_workersPending = false;
            for (int r = 0; r < int(m_infos.size()); ++r)
                if (m_infos[size_t(r)].task.job == JobName::Worker)
                    setState(r, TaskState::NotStarted, tr("not started: %1 exited").arg(qs(info.task.toString())));
        }
    }
    emitAllExitedIfDone();
}

void ClusterLauncher::onFailedToStart(int row)
{
    Process &p = *m_processes[size_t(row)];
    const TaskCommand command = taskCommand(row);
    setState(row, TaskState::Dead,
             tr("cannot start %1: %2")
                     .arg(p.runner->isRemote() ? QStringLiteral("ssh (the OpenSSH client; install openssh-client)")
                                               : command.program,
                          p.process ? p.process->errorString() : QString())
                 + (p.runner->isRemote() ? QString() : QStringLiteral(": ") + command.whenMissing));
    qCWarning(lcLauncher).noquote() << qs(m_infos[size_t(row)].task.toString()) << m_infos[size_t(row)].detail;
    if (p.log)
        p.log->ended(m_infos[size_t(row)].detail);
    emitAllExitedIfDone();
}

void ClusterLauncher::emitAllExitedIfDone()
{
    if (!m_workersPending && !anyRunning())
        Q_EMIT allExited();
}

void ClusterLauncher::stopTask(int row)
{
    if (row < 0 || size_t(row) >= m_processes.size() || !isRunning(row))
        return;
    Process &p = *m_processes[size_t(row)];
    p.stopRequested = true;
    qCDebug(lcLauncher).noquote() << "stopping" << qs(m_infos[size_t(row)].task.toString()) << "(SIGTERM)";
    p.runner->terminate(*p.process);
    setState(row, m_infos[size_t(row)].state, tr("stopping (SIGTERM sent)"));
    // A task that ignores SIGTERM (or hangs) still goes: the process panel
    // promised a stop.
    QProcess *process = p.process;
    TaskRunner *runner = p.runner.get();
    // The timers die with the process object (a restart replaces it).
    QTimer::singleShot(kStopEscalationMs, process, [process, runner] {
        if (process->state() != QProcess::NotRunning)
            runner->kill(*process);
    });
    QTimer::singleShot(kStopEscalationMs + kAbandonMs, process, [process, runner] {
        if (process->state() != QProcess::NotRunning)
            runner->abandon(*process);
    });
}

void ClusterLauncher::killTask(int row)
{
    if (row < 0 || size_t(row) >= m_processes.size() || !isRunning(row))
        return;
    Process &p = *m_processes[size_t(row)];
    p.killRequested = true;
    qCDebug(lcLauncher).noquote() << "killing" << qs(m_infos[size_t(row)].task.toString()) << "(SIGKILL)";
    p.runner->kill(*p.process);
    QProcess *process = p.process;
    TaskRunner *runner = p.runner.get();
    QTimer::singleShot(kAbandonMs, process, [process, runner] {
        if (process->state() != QProcess::NotRunning)
            runner->abandon(*process);
    });
}

void ClusterLauncher::restartTask(int row)
{
    if (row < 0 || size_t(row) >= m_processes.size())
        return;
    if (isRunning(row)) {
        stopTask(row);
        m_processes[size_t(row)]->restartRequested = true;
        return;
    }
    startTask(row);
}

void ClusterLauncher::stopAll()
{
    if (anyRunning())
        qCDebug(lcLauncher) << "stopping every task";
    m_workersPending = false;
    ++m_launchGeneration;
    for (int row = 0; row < int(m_processes.size()); ++row) {
        Process &p = *m_processes[size_t(row)];
        p.restartRequested = false;
        if (isRunning(row)) {
            p.stopRequested = true;
            p.runner->terminate(*p.process);
        }
    }
    // All got SIGTERM at once, so waiting on one lets the others finish too.
    const QDeadlineTimer deadline(kStopAllGraceMs);
    for (int row = 0; row < int(m_processes.size()); ++row) {
        while (isRunning(row) && !deadline.hasExpired())
            m_processes[size_t(row)]->process->waitForFinished(int(std::min<qint64>(deadline.remainingTime(), 100)));
    }
    for (int row = 0; row < int(m_processes.size()); ++row)
        if (isRunning(row))
            m_processes[size_t(row)]->runner->kill(*m_processes[size_t(row)]->process);
    // A remote task's SIGKILL travels over ssh: its client ends once it did.
    const QDeadlineTimer killDeadline(kAbandonMs);
    for (int row = 0; row < int(m_processes.size()); ++row) {
        while (isRunning(row) && !killDeadline.hasExpired())
            m_processes[size_t(row)]->process->waitForFinished(
                int(std::min<qint64>(killDeadline.remainingTime(), 100)));
    }
    // An ssh connection that no longer answers: ending the client closes the
    // remote side's control channel, which stops the task there (if the host
    // can still be reached at all).
    for (int row = 0; row < int(m_processes.size()); ++row) {
        if (isRunning(row)) {
            QProcess *process = m_processes[size_t(row)]->process;
            m_processes[size_t(row)]->runner->abandon(*process);
            process->waitForFinished(2000);
        }
    }
}

void ClusterLauncher::updateFromStatus(const TaskId &task, TaskState state, const QString &detail,
                                       double stepsPerSecond)
{
    const int row = taskRow(task);
    if (row < 0)
        return;
    TaskInfo &info = m_infos[size_t(row)];
    const Process &p = *m_processes[size_t(row)];
    const double rate = isRunning(row) ? stepsPerSecond : 0;
    const bool rateChanged = info.stepsPerSecond != rate;
    info.stepsPerSecond = rate;
    // Process-level states are the launcher's to say: ps:0's view of a
    // worker that exited (or was just restarted and has not joined) lags,
    // and "finished" there means "left", not "exited".
    const bool takeState = isRunning(row) && !isFinal(state) && state != TaskState::NotStarted
                           && info.state != TaskState::Starting && !p.stopRequested && !p.killRequested
                           && !p.restartRequested;
    if (takeState && (info.state != state || info.detail != detail))
        setState(row, state, detail);
    else if (rateChanged)
        Q_EMIT taskChanged(row);
}

void ClusterLauncher::updateFromSnapshot(const RunSnapshot &snapshot)
{
    for (const auto &figures : snapshot.workers) {
        TaskState state;
        QString detail;
        switch (figures.phase) {
        case proto::WAITING_FOR_CHIEF:
            state = TaskState::WaitingFor;
            detail = tr("waiting for the chief worker:0 to initialise the variables");
            break;
        case proto::TRAINING: state = TaskState::Training; break;
        case proto::REJOINING:
            state = TaskState::WaitingFor;
            detail = tr("waiting for ps:0's new primary: rejoining after a failover");
            break;
        case proto::BLOCKED_BY_SYNC:
        case proto::BLOCKED_BY_STALENESS:
            state = figures.phase == proto::BLOCKED_BY_SYNC ? TaskState::BlockedBySync : TaskState::BlockedByStaleness;
            if (!figures.waitingFor.empty())
                detail = tr("waiting for %1").arg(qs(figures.waitingFor));
            break;
        default:
            state = TaskState::NotStarted; // keeps the process-level state, updates steps/s
            break;
        }
        if (figures.straggler)
            detail += (detail.isEmpty() ? QString() : QStringLiteral("; "))
                      + tr("a straggler, %1 s a step").arg(figures.secondsPerStep, 0, 'f', 3);
        updateFromStatus(TaskId{JobName::Worker, figures.index}, state, detail, figures.stepsPerSecond);
    }
    // With a backup, the process of ps:0's pair that serves now: after a
    // failover, the backup's row.
    TaskId serving{JobName::Ps, 0};
    if (m_plan.cluster.replicated() && snapshot.psReplica.role() == proto::REPLICA_PRIMARY
        && snapshot.psReplica.address() == m_plan.cluster.psBackups.front().toString())
        serving = TaskId{JobName::PsBackup, 0};
    if (snapshot.initialized && !snapshot.finished)
        updateFromStatus(serving, TaskState::Serving,
                         tr("global step %1, mode %2").arg(snapshot.globalStep).arg(qs(describeMode(snapshot.mode))),
                         0);
}

void ClusterLauncher::setStragglerDelay(const TaskId &task, int delayMs)
{
    const int row = taskRow(task);
    if (row < 0 || m_infos[size_t(row)].stragglerDelayMs == delayMs)
        return;
    m_infos[size_t(row)].stragglerDelayMs = delayMs;
    Q_EMIT taskChanged(row);
}

} // namespace parasync
