#include "support/ssh_server.h"

#include "base/port_holder.h"
#include "config/cluster_file.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QStandardPaths>
#include <QThread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace parasync::testing {

namespace {

bool run(const QString &program, const QStringList &args, QString *output)
{
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(program, args);
    const bool ok
        = process.waitForFinished(30000) && process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0;
    if (output)
        *output = QString::fromUtf8(process.readAll());
    return ok;
}

bool writeFile(const QString &path, const QByteArray &content)
{
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return false;
    file.write(content);
    file.close();
    return file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner);
}

QByteArray readFile(const QString &path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

QString userName()
{
    const passwd *entry = ::getpwuid(::getuid());
    return entry ? QString::fromLocal8Bit(entry->pw_name) : qEnvironmentVariable("USER");
}

} // namespace

QString sshdBinary()
{
    // sshd insists on being started by its absolute path (it re-executes itself).
    for (const QString &path : {QStringLiteral("/usr/sbin/sshd"), QStringLiteral("/usr/local/sbin/sshd")})
        if (QFileInfo(path).isExecutable())
            return path;
    return QStandardPaths::findExecutable(QStringLiteral("sshd"),
                                          {QStringLiteral("/usr/sbin"), QStringLiteral("/sbin")});
}

SshServer::SshServer(QString listenAddress, QString netns)
    : m_listenAddress(std::move(listenAddress))
    , m_netns(std::move(netns))
{
}

SshServer::~SshServer()
{
    if (m_sshd && m_sshd->state() != QProcess::NotRunning) {
        m_sshd->terminate();
        if (!m_sshd->waitForFinished(5000)) {
            m_sshd->kill();
            m_sshd->waitForFinished(2000);
        }
    }
}

qint64 SshServer::pid() const
{
    return m_sshd ? m_sshd->processId() : 0;
}

QString SshServer::log() const
{
    return QString::fromUtf8(readFile(m_dir.filePath(QStringLiteral("sshd.log"))));
}

bool SshServer::start(QString *whyNot)
{
    const auto fail = [whyNot](const QString &message) {
        if (whyNot)
            *whyNot = message;
        return false;
    };
    const QString sshd = sshdBinary();
    if (sshd.isEmpty())
        return fail(
            QStringLiteral("sshd is not installed (Debian: apt-get install openssh-server; scripts/setup.sh does)"));
    const QString keygen = QStandardPaths::findExecutable(QStringLiteral("ssh-keygen"));
    if (keygen.isEmpty() || QStandardPaths::findExecutable(QStringLiteral("ssh")).isEmpty())
        return fail(
            QStringLiteral("the OpenSSH client (ssh, ssh-keygen) is not installed: apt-get install openssh-client"));
    if (!m_dir.isValid())
        return fail(QStringLiteral("cannot create a temporary directory"));

    QString output;
    for (const char *name : {"host_key", "client_key", "wrong_key"}) {
        const QString path = m_dir.filePath(QLatin1String(name));
        if (!run(keygen,
                 {QStringLiteral("-q"), QStringLiteral("-t"), QStringLiteral("ed25519"), QStringLiteral("-N"),
                  QString(), QStringLiteral("-C"), QStringLiteral("parasync-test"), QStringLiteral("-f"), path},
                 &output))
            return fail(QStringLiteral("ssh-keygen failed: ") + output);
    }
    writeFile(m_dir.filePath(QStringLiteral("authorized_keys")),
              readFile(m_dir.filePath(QStringLiteral("client_key.pub"))));

    // With privilege separation, sshd run as root wants this directory.
    if (::getuid() == 0)
        QDir().mkpath(QStringLiteral("/run/sshd"));

    m_port = m_netns.isEmpty() ? pickFreePort(m_listenAddress.toStdString()) : uint16_t(2200);
    const QByteArray hostPublic = readFile(m_dir.filePath(QStringLiteral("host_key.pub"))).trimmed();
    writeFile(m_dir.filePath(QStringLiteral("known_hosts")),
              QStringLiteral("[%1]:%2 ").arg(m_listenAddress).arg(m_port).toUtf8() + hostPublic + '\n');

    const QString config = QStringLiteral("Port %1\n"
                                          "ListenAddress %2\n"
                                          "HostKey %3/host_key\n"
                                          "AuthorizedKeysFile %3/authorized_keys\n"
                                          "PidFile %3/sshd.pid\n"
                                          // The temporary directory is not laid out as ~/.ssh is.
                                          "StrictModes no\n"
                                          "UsePAM no\n"
                                          "PasswordAuthentication no\n"
                                          "KbdInteractiveAuthentication no\n"
                                          "PubkeyAuthentication yes\n"
                                          "PermitRootLogin prohibit-password\n"
                                          "AllowUsers %4\n"
                                          "PrintMotd no\n"
                                          // The sanitizer presets' options (TSan's suppressions for the
                                          // uninstrumented gRPC, say) reach the tasks started over ssh too.
                                          "AcceptEnv TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS\n"
                                          "MaxStartups 50\n"
                                          "MaxSessions 50\n"
                                          "LogLevel VERBOSE\n")
                               .arg(m_port)
                               .arg(m_listenAddress, m_dir.path(), userName());
    const QString configPath = m_dir.filePath(QStringLiteral("sshd_config"));
    writeFile(configPath, config.toUtf8());
    // Check the configuration first: its error is the reason to report.
    if (!run(sshd, {QStringLiteral("-t"), QStringLiteral("-f"), configPath}, &output))
        return fail(QStringLiteral("sshd rejects its test configuration: ") + output.trimmed());

    m_sshd = std::make_unique<QProcess>();
    m_sshd->setProcessChannelMode(QProcess::MergedChannels);
    const QStringList sshdArgs{QStringLiteral("-D"), QStringLiteral("-f"), configPath, QStringLiteral("-E"),
                               m_dir.filePath(QStringLiteral("sshd.log"))};
    if (m_netns.isEmpty())
        m_sshd->start(sshd, sshdArgs);
    else
        m_sshd->start(QStringLiteral("ip"),
                      QStringList{QStringLiteral("netns"), QStringLiteral("exec"), m_netns, sshd} + sshdArgs);
    if (!m_sshd->waitForStarted(10000))
        return fail(QStringLiteral("cannot start sshd: ") + m_sshd->errorString());

    // Ready once it accepts a connection (from inside its namespace, for a
    // namespaced one: probe with ssh-keyscan there).
    const QDeadlineTimer deadline(15000);
    while (!deadline.hasExpired()) {
        if (m_sshd->state() == QProcess::NotRunning)
            return fail(QStringLiteral("sshd exited at once: ") + QString::fromUtf8(m_sshd->readAll()) + log());
        if (m_netns.isEmpty()) {
            const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in addr{};
            addr.sin_family = AF_INET;
            addr.sin_port = htons(m_port);
            ::inet_pton(AF_INET, m_listenAddress.toLatin1().constData(), &addr.sin_addr);
            const bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
            ::close(fd);
            if (ok)
                return true;
        } else if (log().contains(QLatin1String("Server listening"))) {
            return true;
        }
        QThread::msleep(50); // polling a server's start-up; no signal tells it
    }
    return fail(
        QStringLiteral("sshd did not listen on %1:%2 within 15 s: %3").arg(m_listenAddress).arg(m_port).arg(log()));
}

RemoteHost SshServer::remoteHost(const std::string &name) const
{
    RemoteHost host;
    host.name = name;
    host.sshHost = m_listenAddress.toStdString();
    host.sshPort = m_port;
    host.user = userName().toStdString();
    host.identityFile = m_dir.filePath(QStringLiteral("client_key")).toStdString();
    host.sshOptions = {"UserKnownHostsFile=" + m_dir.filePath(QStringLiteral("known_hosts")).toStdString(),
                       "StrictHostKeyChecking=yes", "GlobalKnownHostsFile=/dev/null",
                       "SendEnv=TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS"};
    return host;
}

RemoteHost SshServer::remoteHostWithWrongKey(const std::string &name) const
{
    RemoteHost host = remoteHost(name);
    host.identityFile = m_dir.filePath(QStringLiteral("wrong_key")).toStdString();
    return host;
}

} // namespace parasync::testing
