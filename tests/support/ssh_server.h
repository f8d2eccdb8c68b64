#pragma once

// A real OpenSSH server for tests: Debian's sshd, started by the test on a
// free port with a host key and a client key generated into a temporary
// directory, accepting only that client key, running as the current user.
// Tests reach it through the system's ssh client (RemoteHost() says how),
// exactly as the launcher reaches a remote machine.

#include "config/cluster_file.h"
#include "config/cluster_spec.h"

#include <QProcess>
#include <QString>
#include <QTemporaryDir>

#include <memory>

namespace parasync::testing {

class SshServer
{
public:
    // `listenAddress` is where sshd listens (a network namespace's address
    // when `netns` is set: sshd then runs inside it, via `ip netns exec`).
    explicit SshServer(QString listenAddress = QStringLiteral("127.0.0.1"), QString netns = {});
    ~SshServer(); // stops this sshd (only it, by its pid)

    // Generates the keys and starts sshd; false with the reason in
    // `whyNot` (no sshd installed, it cannot run here, ...).
    bool start(QString *whyNot);
    // How the launcher reaches this server as host `name` (the name the
    // cluster's addresses use), with the generated key and known_hosts.
    RemoteHost remoteHost(const std::string &name) const;
    // The same host but with a key this server does not accept.
    RemoteHost remoteHostWithWrongKey(const std::string &name) const;
    uint16_t port() const { return m_port; }
    qint64 pid() const;
    QString log() const; // sshd's own log (-E)

private:
    QString m_listenAddress;
    QString m_netns;
    QTemporaryDir m_dir;
    uint16_t m_port = 0;
    std::unique_ptr<QProcess> m_sshd;
};

// The sshd binary (Debian's openssh-server), or empty.
QString sshdBinary();

} // namespace parasync::testing
