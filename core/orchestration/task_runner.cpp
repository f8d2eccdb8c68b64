#include "orchestration/task_runner.h"

#include "config/cluster_file.h"
#include "orchestration/logging.h"
#include "orchestration/ssh_command.h"
#include "wire/cluster_token.h"

#include <QObject>
#include <QProcessEnvironment>

#include <csignal>
#include <cstdio>
#include <sys/prctl.h>
#include <unistd.h>
#include <utility>

namespace parasync {

TaskExit TaskRunner::interpretExit(int exitCode, QProcess::ExitStatus status, const QString &) const
{
    return TaskExit{status == QProcess::CrashExit, exitCode, {}};
}

QString workerProgramMissingAdvice(const QString &program)
{
    return QObject::tr("install it, or give its full path as the first word of \"worker_command\" in the cluster "
                       "file (%1)")
        .arg(program.contains(QLatin1Char('/'))
                 ? QObject::tr("a relative path starts from the app's working directory, or over ssh from the "
                               "login's home")
                 : QObject::tr("a bare name is looked up on PATH"));
}

QString TaskRunner::where() const
{
    return QStringLiteral("this machine");
}

namespace {

// How much lower than the app's own the CPU priority of a task it runs on
// this machine is (nice(2)'s increment). A local cluster takes every core
// it can: 64 workers at full speed on 2 cores left the window's thread one
// runnable thread among ~70, so a click waited up to a second (nice 10:
// still 100-200 ms; 19: under 50 ms, BENCHMARKS.md table 6). Niced, the
// tasks still take every core nothing else wants; they only yield.
// PARASYNC_TASK_NICE=0..19 chooses another (0: the app's own priority).
constexpr int kDefaultTaskNiceIncrement = 19;

int taskNiceIncrement()
{
    const QByteArray text = qgetenv("PARASYNC_TASK_NICE");
    if (text.isEmpty())
        return kDefaultTaskNiceIncrement;
    bool ok = false;
    const int increment = text.toInt(&ok);
    if (ok && increment >= 0 && increment <= 19)
        return increment;
    static bool told = false;
    if (!std::exchange(told, true))
        std::fprintf(stderr,
                     "parasync: PARASYNC_TASK_NICE=%s is not a niceness increment from 0 to 19; local tasks run at "
                     "nice +%d (unset it, or give e.g. PARASYNC_TASK_NICE=0 for the app's own priority)\n",
                     text.constData(), kDefaultTaskNiceIncrement);
    return kDefaultTaskNiceIncrement;
}

// A child of this process: signals go to it directly.
class LocalRunner final : public TaskRunner
{
public:
    void start(QProcess &process, const TaskCommand &command, const std::string &clusterToken) override
    {
        // Should the app itself die (a crash, kill -9), its tasks are told to
        // stop cleanly rather than left holding their ports. Between fork and
        // exec only async-signal-safe calls: prctl and nice are system calls.
        process.setChildProcessModifier([increment = taskNiceIncrement()] {
            ::prctl(PR_SET_PDEATHSIG, SIGTERM);
            // Failing (it cannot when lowering) leaves the app's priority.
            if (increment > 0) {
                [[maybe_unused]] const int niceness = ::nice(increment);
            }
        });
        if (!clusterToken.empty() || !command.localEnvironment.empty()) {
            QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
            for (const auto &[name, value] : command.localEnvironment)
                environment.insert(name, value);
            if (!clusterToken.empty())
                environment.insert(QLatin1String(kTokenEnvironmentVariable), QString::fromStdString(clusterToken));
            process.setProcessEnvironment(environment);
        }
        process.start(command.program, command.arguments);
    }
    void terminate(QProcess &process) override { process.terminate(); }
    void kill(QProcess &process) override { process.kill(); }
};

// `ssh host remoteTaskCommand(...)`: the local process is the ssh client,
// its stdin the remote task's control channel (token, then TERM / KILL).
class SshRunner final : public TaskRunner
{
public:
    explicit SshRunner(RemoteHost host) : m_host(std::move(host)) {}

    void start(QProcess &process, const TaskCommand &command, const std::string &clusterToken) override
    {
        m_sessionStarted = false;
        // The ssh client dies with the app; its closed channel then stops
        // the remote task (see remoteTaskCommand).
        process.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
        const QStringList arguments
            = sshArguments(m_host, remoteTaskCommand(command.program, command.arguments, command.whenMissing));
        qCDebug(lcRemote).noquote() << sshProgram() << arguments.join(QLatin1Char(' '));
        process.start(sshProgram(), arguments);
        // The first line the remote side reads: the token, or an empty line.
        // Written before ssh even connects; the pipe keeps it.
        process.write(QByteArray::fromStdString(clusterToken) + '\n');
    }
    void terminate(QProcess &process) override { control(process, "TERM\n"); }
    void kill(QProcess &process) override { control(process, "KILL\n"); }

    bool consumeLine(const QString &line, qint64 *pid) override
    {
        const qsizetype at = line.indexOf(QLatin1String(kRemotePidPrefix));
        if (at < 0)
            return false;
        bool ok = false;
        const qint64 remotePid = line.mid(at + qsizetype(qstrlen(kRemotePidPrefix))).trimmed().toLongLong(&ok);
        if (ok && pid)
            *pid = remotePid;
        if (ok)
            qCDebug(lcRemote).noquote() << "the task on" << describeSshTarget(m_host) << "runs as pid" << remotePid;
        m_sessionStarted = m_sessionStarted || ok;
        return ok;
    }

    TaskExit interpretExit(int exitCode, QProcess::ExitStatus status, const QString &lastLines) const override
    {
        qCDebug(lcRemote).noquote() << "ssh to" << describeSshTarget(m_host)
                                    << "ended:" << (status == QProcess::CrashExit ? "killed" : "exit code") << exitCode;
        if (status == QProcess::CrashExit) // the ssh client itself was killed
            return TaskExit{true, exitCode,
                            QStringLiteral("the ssh client to %1 was killed").arg(describeSshTarget(m_host))};
        if (exitCode == 255 && m_sessionStarted) {
            // The task ran, then ssh gave up on the connection (ServerAlive).
            return TaskExit{false, exitCode,
                            QStringLiteral("lost the ssh connection to %1: it did not answer for 15 s (the host or the "
                                           "network to it went away). The task there stops when its host notices; "
                                           "check the host and the link, then restart the task")
                                .arg(describeSshTarget(m_host))};
        }
        if (exitCode == 255) {
            // ssh's own failure: it could not connect, log in, or lost the connection.
            QString sshError;
            for (const QString &line : lastLines.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
                if (line.contains(QLatin1String("ssh")) || line.contains(QLatin1String("denied"))
                    || line.contains(QLatin1String("Host key")) || line.contains(QLatin1String("Connection")))
                    sshError = line.trimmed();
            return TaskExit{false, exitCode,
                            QStringLiteral("ssh to %1 failed%2: %3")
                                .arg(describeSshTarget(m_host),
                                     sshError.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(sshError),
                                     sshFailureAdvice(sshError, m_host))};
        }
        // The remote shell reports a task ended by signal N as 128 + N.
        if (exitCode > 128 && exitCode < 128 + 65)
            return TaskExit{true, exitCode - 128, {}};
        return TaskExit{false, exitCode, {}};
    }

    QString program(const QString &) const override { return QString::fromStdString(m_host.nodeProgram()); }
    bool isRemote() const override { return true; }
    QString where() const override { return describeSshTarget(m_host) + QStringLiteral(" (ssh)"); }

private:
    static void control(QProcess &process, const char *line)
    {
        if (process.state() != QProcess::NotRunning)
            process.write(line);
    }
    RemoteHost m_host;
    bool m_sessionStarted = false; // the remote side reported the task's pid
};

} // namespace

std::unique_ptr<TaskRunner> makeLocalRunner()
{
    return std::make_unique<LocalRunner>();
}

std::unique_ptr<TaskRunner> makeSshRunner(const RemoteHost &host)
{
    return std::make_unique<SshRunner>(host);
}

} // namespace parasync
