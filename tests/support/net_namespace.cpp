#include "support/net_namespace.h"

#include <QDeadlineTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QThread>

#include <csignal>
#include <unistd.h>

namespace parasync::testing {

NetNamespace::NetNamespace(int subnet)
    : m_subnet(subnet)
    // Unique per test process; interface names have at most 15 characters.
    , m_name(QStringLiteral("psync%1n%2").arg(::getpid()).arg(subnet))
    , m_hostLink(QStringLiteral("ph%1n%2").arg(::getpid()).arg(subnet))
    , m_nsLink(QStringLiteral("pn%1n%2").arg(::getpid()).arg(subnet))
{
}

NetNamespace::~NetNamespace()
{
    destroy();
}

bool NetNamespace::run(const QStringList &args, QString *output)
{
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(QStringLiteral("ip"), args);
    const bool ok
        = process.waitForFinished(10000) && process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0;
    if (output)
        *output = QString::fromUtf8(process.readAll()).trimmed();
    return ok;
}

QString NetNamespace::address() const
{
    return QStringLiteral("10.231.%1.2").arg(m_subnet);
}

QString NetNamespace::hostAddress() const
{
    return QStringLiteral("10.231.%1.1").arg(m_subnet);
}

void NetNamespace::removeLeftovers()
{
    // A test process killed by its timeout never ran its destructors: its
    // namespace of this subnet, with its processes and its link's
    // 10.231.<subnet>.1, would make this one's routes ambiguous.
    QString names;
    run({QStringLiteral("netns"), QStringLiteral("list")}, &names);
    const QRegularExpression leftover(QStringLiteral("^psync(\\d+)n%1\\b").arg(m_subnet));
    for (const QString &line : names.split(QLatin1Char('\n'))) {
        const auto match = leftover.match(line.trimmed());
        if (!match.hasMatch())
            continue;
        const pid_t owner = pid_t(match.captured(1).toLongLong());
        if (owner == ::getpid() || ::kill(owner, 0) == 0)
            continue; // another test process's, alive
        const QString name = QStringLiteral("psync%1n%2").arg(owner).arg(m_subnet);
        QString pids;
        run({QStringLiteral("netns"), QStringLiteral("pids"), name}, &pids);
        for (const QString &pid : pids.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            ::kill(pid_t(pid.toLongLong()), SIGKILL);
        // Removing the namespace removes its end of the link, and so the pair.
        run({QStringLiteral("netns"), QStringLiteral("del"), name});
    }
}

bool NetNamespace::create(QString *whyNot)
{
    const auto fail = [this, whyNot](const QString &what, const QString &output) {
        if (whyNot)
            *whyNot = what + QStringLiteral(": ") + output;
        destroy();
        return false;
    };
    if (::geteuid() != 0)
        return fail(QStringLiteral("network namespaces need root (CAP_NET_ADMIN)"),
                    QStringLiteral("running as uid %1").arg(::geteuid()));
    removeLeftovers();
    QString output;
    if (!run({QStringLiteral("netns"), QStringLiteral("add"), m_name}, &output))
        return fail(QStringLiteral("`ip netns add` failed (iproute2 missing, or no privilege here)"), output);
    m_created = true;
    const QString prefix = QStringLiteral("/24");
    const QList<QStringList> steps = {
        {QStringLiteral("link"), QStringLiteral("add"), m_hostLink, QStringLiteral("type"), QStringLiteral("veth"),
         QStringLiteral("peer"), QStringLiteral("name"), m_nsLink},
        {QStringLiteral("link"), QStringLiteral("set"), m_nsLink, QStringLiteral("netns"), m_name},
        {QStringLiteral("addr"), QStringLiteral("add"), hostAddress() + prefix, QStringLiteral("dev"), m_hostLink},
        {QStringLiteral("link"), QStringLiteral("set"), m_hostLink, QStringLiteral("up")},
        {QStringLiteral("-n"), m_name, QStringLiteral("addr"), QStringLiteral("add"), address() + prefix,
         QStringLiteral("dev"), m_nsLink},
        {QStringLiteral("-n"), m_name, QStringLiteral("link"), QStringLiteral("set"), m_nsLink, QStringLiteral("up")},
        {QStringLiteral("-n"), m_name, QStringLiteral("link"), QStringLiteral("set"), QStringLiteral("lo"),
         QStringLiteral("up")},
    };
    for (const QStringList &step : steps)
        if (!run(step, &output))
            return fail(QStringLiteral("`ip %1` failed").arg(step.join(QLatin1Char(' '))), output);
    return true;
}

bool NetNamespace::setLinkUp(bool up)
{
    return run({QStringLiteral("link"), QStringLiteral("set"), m_hostLink,
                up ? QStringLiteral("up") : QStringLiteral("down")});
}

bool NetNamespace::addRoute(const QString &route)
{
    return run(QStringList{QStringLiteral("-n"), m_name, QStringLiteral("route"), QStringLiteral("add")}
               + route.split(QLatin1Char(' ')));
}

bool NetNamespace::addHostAddress(const QString &cidr)
{
    return run({QStringLiteral("addr"), QStringLiteral("add"), cidr, QStringLiteral("dev"), m_hostLink});
}

void NetNamespace::destroy()
{
    if (!m_created)
        return;
    m_created = false;
    // Whatever still runs in it (tasks, sshd, shells) goes first: a
    // namespace with processes would outlive `ip netns del`.
    QString pids;
    for (int sig : {SIGTERM, SIGKILL}) {
        run({QStringLiteral("netns"), QStringLiteral("pids"), m_name}, &pids);
        for (const QString &pid : pids.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            ::kill(pid_t(pid.toLongLong()), sig);
        const QDeadlineTimer deadline(3000);
        while (!deadline.hasExpired() && run({QStringLiteral("netns"), QStringLiteral("pids"), m_name}, &pids)
               && !pids.isEmpty())
            QThread::msleep(50); // waiting for processes to exit; nothing signals it
    }
    run({QStringLiteral("link"), QStringLiteral("del"), m_hostLink});
    run({QStringLiteral("netns"), QStringLiteral("del"), m_name});
}

} // namespace parasync::testing
