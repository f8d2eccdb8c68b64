#include "orchestration/ssh_command.h"

#include "base/qt_text.h"
#include "config/cluster_file.h"

#include <QStandardPaths>

namespace parasync {

namespace {

// Run by the remote user's shell as `sh -c SCRIPT parasync-task WHEN-MISSING PROGRAM ARGS...`.
// POSIX sh (dash) only. Background jobs of a non-interactive shell get
// /dev/null as stdin, hence the control channel's copy on fd 3. `setsid` from
// a non-leader does not fork, so $! is the session's (and group's) leader.
// The watcher's output goes to /dev/null: holding the ssh channel open would
// keep the session (and the app's ssh process) alive after the task ended.
constexpr const char *kRemoteTaskScript = R"SH(IFS= read -r t || exit 96
if [ -n "$t" ]; then PARASYNC_CLUSTER_TOKEN=$t; export PARASYNC_CLUSTER_TOKEN; fi
t=
h=$(hostname 2>/dev/null || echo this host)
command -v setsid >/dev/null 2>&1 || { echo "parasync-remote: setsid is missing on $h: install util-linux there" >&2; exit 125; }
command -v "$2" >/dev/null 2>&1 || { echo "parasync-remote: $2 not found on $h: $1" >&2; exit 127; }
shift
exec 3<&0
setsid "$@" </dev/null 2>&1 &
p=$!
echo "parasync-remote: pid $p"
{ while IFS= read -r c <&3; do case $c in TERM) kill -TERM -$p;; KILL) kill -KILL -$p;; esac; done
  kill -TERM -$p; sleep 5; kill -KILL -$p; } >/dev/null 2>&1 &
r=$!
wait $p; s=$?
kill $r 2>/dev/null
exit $s)SH";

} // namespace

QString sshProgram()
{
    const QString fromEnvironment = qEnvironmentVariable("PARASYNC_SSH");
    if (!fromEnvironment.isEmpty())
        return fromEnvironment;
    const QString onPath = QStandardPaths::findExecutable(QStringLiteral("ssh"));
    return onPath.isEmpty() ? QStringLiteral("ssh") : onPath;
}

QStringList sshArguments(const RemoteHost &host, const QString &remoteCommand)
{
    QStringList args{QStringLiteral("-T"), // no terminal: stdin is the task's control channel
                     QStringLiteral("-o"), QStringLiteral("BatchMode=yes"), QStringLiteral("-o"),
                     QStringLiteral("ConnectTimeout=%1").arg(kSshConnectTimeoutSeconds),
                     // A connection that silently died (a cut link) ends within ~15 s.
                     QStringLiteral("-o"), QStringLiteral("ServerAliveInterval=5"), QStringLiteral("-o"),
                     QStringLiteral("ServerAliveCountMax=3"), QStringLiteral("-o"), QStringLiteral("LogLevel=ERROR")};
    if (host.sshPort != 0)
        args << QStringLiteral("-p") << QString::number(host.sshPort);
    if (!host.user.empty())
        args << QStringLiteral("-l") << qs(host.user);
    if (!host.identityFile.empty())
        args << QStringLiteral("-i") << qs(host.identityFile) << QStringLiteral("-o")
             << QStringLiteral("IdentitiesOnly=yes");
    for (const std::string &option : host.sshOptions)
        args << QStringLiteral("-o") << qs(option);
    // "--": a host name can never be taken for an option.
    args << QStringLiteral("--") << qs(host.connectHost()) << remoteCommand;
    return args;
}

QString describeSshTarget(const RemoteHost &host)
{
    QString text = qs(host.connectHost());
    if (!host.user.empty())
        text = qs(host.user) + QLatin1Char('@') + text;
    if (host.sshPort != 0)
        text += QLatin1Char(':') + QString::number(host.sshPort);
    return text;
}

QString shellQuote(const QString &word)
{
    if (word.startsWith(QLatin1String("~/")))
        return QStringLiteral("\"$HOME\"/") + shellQuote(word.mid(2));
    QString quoted = word;
    quoted.replace(QLatin1Char('\''), QLatin1String("'\\''"));
    return QLatin1Char('\'') + quoted + QLatin1Char('\'');
}

QString remoteTaskCommand(const QString &program, const QStringList &arguments, const QString &whenMissing)
{
    QStringList words{QStringLiteral("exec sh -c"), shellQuote(QLatin1String(kRemoteTaskScript)),
                      QStringLiteral("parasync-task"), shellQuote(whenMissing), shellQuote(program)};
    for (const QString &argument : arguments)
        words << shellQuote(argument);
    return words.join(QLatin1Char(' '));
}

QString sshFailureAdvice(const QString &sshError, const RemoteHost &host)
{
    const QString target = describeSshTarget(host);
    const QString e = sshError.toLower();
    if (e.contains(QLatin1String("could not resolve hostname"))
        || e.contains(QLatin1String("name or service not known")))
        return QStringLiteral("check the host name %1 (DNS, /etc/hosts), or give its address as \"ssh_host\"")
            .arg(qs(host.connectHost()));
    if (e.contains(QLatin1String("permission denied")))
        return QStringLiteral(
                   "install your public key in %1's ~/.ssh/authorized_keys (ssh-copy-id %1), give the key as "
                   "\"identity_file\", or add it to your ssh-agent; passwords are not used")
            .arg(target);
    if (e.contains(QLatin1String("host key verification failed")))
        return QStringLiteral("%1's host key is not known here: connect once with `ssh %1` to check and accept it, or "
                              "add it to ~/.ssh/known_hosts (ssh-keyscan)")
            .arg(target);
    if (e.contains(QLatin1String("remote host identification has changed")))
        return QStringLiteral("%1's host key changed: make sure it is the right machine, then remove the old key "
                              "with ssh-keygen -R")
            .arg(target);
    if (e.contains(QLatin1String("connection refused")))
        return QStringLiteral("no ssh server answers on %1: start sshd there, or give its port as \"port\"")
            .arg(target);
    if (e.contains(QLatin1String("timed out")) || e.contains(QLatin1String("no route to host"))
        || e.contains(QLatin1String("network is unreachable")))
        return QStringLiteral("%1 does not answer: check that it is up, the address, and that a firewall lets ssh "
                              "(port %2) through")
            .arg(target)
            .arg(host.sshPort != 0 ? host.sshPort : 22);
    QString command = QStringLiteral("ssh");
    if (host.sshPort != 0)
        command += QStringLiteral(" -p %1").arg(host.sshPort);
    if (!host.identityFile.empty())
        command += QStringLiteral(" -i ") + qs(host.identityFile);
    command += QLatin1Char(' ') + (host.user.empty() ? QString() : qs(host.user) + QLatin1Char('@'))
               + qs(host.connectHost());
    return QStringLiteral("check that `%1 true` works from a terminal without asking anything").arg(command);
}

} // namespace parasync
