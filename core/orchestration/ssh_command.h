#pragma once

// Command lines for the system's OpenSSH client: how the launcher and the
// pre-flight check reach a remote host. Always non-interactive (BatchMode:
// a key or the agent, never a password prompt that would hang a launch) and
// bounded (ConnectTimeout, ServerAlive*), so a host that does not answer is
// an error within seconds, not a silent wait.

#include "config/cluster_file.h"
#include "config/cluster_spec.h"

#include <QString>
#include <QStringList>

namespace parasync {

// Seconds ssh waits for a host to answer before giving up.
inline constexpr int kSshConnectTimeoutSeconds = 8;

// The ssh program: $PARASYNC_SSH if set, else "ssh" on PATH.
QString sshProgram();

// ssh's arguments to run `remoteCommand` (a shell command line) on `host`.
QStringList sshArguments(const RemoteHost &host, const QString &remoteCommand);

// "alice@10.0.0.2:2200", as messages name a host.
QString describeSshTarget(const RemoteHost &host);

// `word` quoted for a POSIX shell ('...'), so the remote shell sees it as one
// word, whatever it holds. A leading "~/" is kept expandable ("$HOME"/...).
QString shellQuote(const QString &word);

// The remote command that runs one task: reads the cluster token from the
// first line of its stdin into PARASYNC_CLUSTER_TOKEN (never a command line),
// starts `program arguments` under setsid (its own process group), prints
// "parasync-remote: pid N" and then forwards "TERM" / "KILL" lines from stdin
// to that whole group. When stdin closes -- the app quit or died, or its ssh
// connection went -- it stops the group (SIGTERM, SIGKILL 5 s later), so a
// remote task never outlives the session that started it. Exits with the
// task's exit code (128 + N when a signal N ended it). When `program` is not
// there it says so, followed by `whenMissing` (what to do), and exits 127.
QString remoteTaskCommand(const QString &program, const QStringList &arguments, const QString &whenMissing);

// The line remoteTaskCommand prints with the task's remote pid (= its pgid).
inline constexpr const char *kRemotePidPrefix = "parasync-remote: pid ";

// What to try when ssh failed (exit code 255) with `sshError` on its stderr:
// "check the host name", "install your public key there", ...
QString sshFailureAdvice(const QString &sshError, const RemoteHost &host);

} // namespace parasync
