#include "support/slurm_cluster.h"

#include "base/port_holder.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRandomGenerator>
#include <QStandardPaths>
#include <QThread>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace parasync::testing {

namespace {

QString daemonBinary(const QString &name)
{
    // The daemons live in sbin, which a test's PATH may lack.
    return QStandardPaths::findExecutable(
        name, {QStringLiteral("/usr/sbin"), QStringLiteral("/usr/local/sbin"), QStringLiteral("/sbin")});
}

bool resolves(const QString &host)
{
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    const int rc = ::getaddrinfo(host.toLocal8Bit().constData(), nullptr, &hints, &found);
    if (found)
        ::freeaddrinfo(found);
    return rc == 0;
}

bool writeFile(const QString &path, const QByteArray &content, QFileDevice::Permissions permissions)
{
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(content) != content.size())
        return false;
    file.close();
    return file.setPermissions(permissions);
}

} // namespace

SlurmCluster::SlurmCluster() = default;

SlurmCluster::~SlurmCluster()
{
    if (!m_daemons.empty() && m_daemons.back()->state() == QProcess::Running) {
        // Jobs first, so that no task outlives the node that ran it.
        run(QStringLiteral("scancel"), {QStringLiteral("--full"), QStringLiteral("--partition=") + partition()});
        const QDeadlineTimer deadline(20000);
        while (!idle() && !deadline.hasExpired())
            QThread::msleep(200);
    }
    // slurmd, slurmctld, munged: the reverse of their start.
    for (auto it = m_daemons.rbegin(); it != m_daemons.rend(); ++it) {
        QProcess &daemon = **it;
        if (daemon.state() == QProcess::NotRunning)
            continue;
        daemon.terminate();
        if (!daemon.waitForFinished(10000)) {
            daemon.kill();
            daemon.waitForFinished(3000);
        }
    }
    if (m_previousSlurmConf.isNull())
        qunsetenv("SLURM_CONF");
    else
        qputenv("SLURM_CONF", m_previousSlurmConf);
}

QString SlurmCluster::confPath() const
{
    return m_dir.filePath(QStringLiteral("slurm.conf"));
}

bool SlurmCluster::startDaemon(const QString &program, const QStringList &arguments, const QString &name,
                               QString *whyNot)
{
    auto daemon = std::make_unique<QProcess>();
    daemon->setProcessChannelMode(QProcess::MergedChannels);
    daemon->setStandardOutputFile(m_dir.filePath(name + QStringLiteral(".out")));
    daemon->start(program, arguments);
    if (!daemon->waitForStarted(10000)) {
        *whyNot = QStringLiteral("%1 did not start: %2").arg(program, daemon->errorString());
        return false;
    }
    m_daemons.push_back(std::move(daemon));
    m_daemonNames.push_back(name);
    return true;
}

bool SlurmCluster::start(QString *whyNot)
{
    const auto fail = [whyNot](const QString &message) {
        *whyNot = message;
        return false;
    };
    if (::geteuid() != 0)
        return fail(QStringLiteral("slurmd runs jobs only as root (it starts them as their user): run as root"));
    const QString munged = daemonBinary(QStringLiteral("munged"));
    const QString slurmctld = daemonBinary(QStringLiteral("slurmctld"));
    const QString slurmd = daemonBinary(QStringLiteral("slurmd"));
    if (munged.isEmpty() || slurmctld.isEmpty() || slurmd.isEmpty())
        return fail(QStringLiteral("munged, slurmctld or slurmd is not installed (Debian: munge slurm-wlm)"));
    for (const char *client : {"sbatch", "squeue", "scancel", "srun", "scontrol", "sinfo"})
        if (QStandardPaths::findExecutable(QString::fromLatin1(client)).isEmpty())
            return fail(QStringLiteral("%1 is not on PATH (Debian: slurm-client)").arg(QLatin1String(client)));
    if (!m_dir.isValid())
        return fail(QStringLiteral("cannot create a temporary directory"));
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    m_nodeName = QString::fromLocal8Bit(host).section(QLatin1Char('.'), 0, 0);
    // The tasks listen on the node's name, as on a real cluster.
    if (m_nodeName.isEmpty() || !resolves(m_nodeName))
        return fail(QStringLiteral("this machine's host name '%1' does not resolve: the tasks could not bind it")
                        .arg(m_nodeName));

    // munged wants its socket's directory reachable by all, its key private.
    const QDir dir(m_dir.path());
    QFile::setPermissions(dir.path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner
                                          | QFileDevice::ReadGroup | QFileDevice::ExeGroup | QFileDevice::ReadOther
                                          | QFileDevice::ExeOther);
    for (const char *sub : {"munge", "state", "spool", "log"})
        dir.mkdir(QString::fromLatin1(sub));
    QFile::setPermissions(dir.filePath(QStringLiteral("munge")),
                          QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
    QByteArray key(1024, '\0');
    QRandomGenerator::system()->fillRange(reinterpret_cast<quint32 *>(key.data()), key.size() / 4);
    const QString keyFile = dir.filePath(QStringLiteral("munge/munge.key"));
    if (!writeFile(keyFile, key, QFileDevice::ReadOwner))
        return fail(QStringLiteral("cannot write the munge key"));
    const QString socket = dir.filePath(QStringLiteral("munge.socket"));
    if (!startDaemon(munged,
                     {QStringLiteral("--foreground"), QStringLiteral("--force"),
                      QStringLiteral("--key-file=") + keyFile, QStringLiteral("--socket=") + socket,
                      QStringLiteral("--pid-file=") + dir.filePath(QStringLiteral("munged.pid")),
                      QStringLiteral("--log-file=") + dir.filePath(QStringLiteral("log/munged.log")),
                      QStringLiteral("--seed-file=") + dir.filePath(QStringLiteral("munge/munged.seed"))},
                     QStringLiteral("munged"), whyNot))
        return false;
    for (const QDeadlineTimer deadline(10000); !QFileInfo::exists(socket); QThread::msleep(50))
        if (deadline.hasExpired() || m_daemons.back()->state() != QProcess::Running)
            return fail(QStringLiteral("munged did not create its socket:\n") + logs());

    const uint16_t ctldPort = pickFreePort();
    uint16_t slurmdPort = pickFreePort();
    while (slurmdPort == ctldPort)
        slurmdPort = pickFreePort();
    const QString conf = QStringLiteral("ClusterName=parasynctest\n"
                                        "SlurmctldHost=%1(127.0.0.1)\n"
                                        "SlurmctldPort=%2\n"
                                        "SlurmdPort=%3\n"
                                        "SlurmUser=root\n"
                                        "SlurmdUser=root\n"
                                        "AuthType=auth/munge\n"
                                        "CredType=cred/munge\n"
                                        "AuthInfo=socket=%4\n"
                                        "StateSaveLocation=%5/state\n"
                                        "SlurmdSpoolDir=%5/spool\n"
                                        "SlurmctldPidFile=%5/slurmctld.pid\n"
                                        "SlurmdPidFile=%5/slurmd.pid\n"
                                        "SlurmctldLogFile=%5/log/slurmctld.log\n"
                                        "SlurmdLogFile=%5/log/slurmd.log\n"
                                        "ProctrackType=proctrack/linuxproc\n"
                                        "TaskPlugin=task/none\n"
                                        "SlurmdParameters=config_overrides\n"
                                        "SchedulerType=sched/builtin\n"
                                        "SelectType=select/cons_tres\n"
                                        "SelectTypeParameters=CR_CPU\n"
                                        "ReturnToService=2\n"
                                        "MpiDefault=none\n"
                                        "KillWait=5\n"
                                        "JobAcctGatherType=jobacct_gather/none\n"
                                        "AccountingStorageType=accounting_storage/none\n"
                                        "NodeName=%1 NodeAddr=127.0.0.1 CPUs=%6 State=UNKNOWN\n"
                                        "PartitionName=%7 Nodes=%1 Default=YES MaxTime=INFINITE State=UP\n")
                             .arg(m_nodeName)
                             .arg(ctldPort)
                             .arg(slurmdPort)
                             .arg(socket, dir.path())
                             .arg(cpus())
                             .arg(partition());
    if (!writeFile(confPath(), conf.toUtf8(),
                   QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ReadGroup | QFileDevice::ReadOther))
        return fail(QStringLiteral("cannot write slurm.conf"));
    m_previousSlurmConf = qgetenv("SLURM_CONF");
    qputenv("SLURM_CONF", confPath().toLocal8Bit());

    if (!startDaemon(slurmctld, {QStringLiteral("-D"), QStringLiteral("-i"), QStringLiteral("-f"), confPath()},
                     QStringLiteral("slurmctld"), whyNot)
        || !startDaemon(slurmd, {QStringLiteral("-D"), QStringLiteral("-f"), confPath()}, QStringLiteral("slurmd"),
                        whyNot))
        return false;
    // Ready when the controller knows the node and the node is idle.
    for (const QDeadlineTimer deadline(30000);; QThread::msleep(200)) {
        const QString state = run(QStringLiteral("sinfo"), {QStringLiteral("--noheader"), QStringLiteral("--format=%T"),
                                                            QStringLiteral("--nodes=") + m_nodeName})
                                  .trimmed();
        if (state == QLatin1String("idle"))
            return true;
        for (const auto &daemon : m_daemons)
            if (daemon->state() != QProcess::Running)
                return fail(QStringLiteral("a Slurm daemon exited:\n") + logs());
        if (deadline.hasExpired())
            return fail(QStringLiteral("the node did not become idle within 30 s (sinfo: '%1'):\n").arg(state)
                        + logs());
    }
}

QString SlurmCluster::logs() const
{
    QString text;
    for (const QString &name :
         {QStringLiteral("munged.out"), QStringLiteral("slurmctld.out"), QStringLiteral("slurmd.out"),
          QStringLiteral("log/slurmctld.log"), QStringLiteral("log/slurmd.log")}) {
        QFile file(m_dir.filePath(name));
        if (!file.open(QIODevice::ReadOnly))
            continue;
        QStringList lines = QString::fromLocal8Bit(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        if (lines.size() > 15)
            lines = lines.mid(lines.size() - 15);
        text += QStringLiteral("--- %1\n%2\n").arg(name, lines.join(QLatin1Char('\n')));
    }
    return text;
}

QString SlurmCluster::run(const QString &program, const QStringList &arguments, int *exitCode) const
{
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(program, arguments);
    process.waitForFinished(30000);
    if (exitCode)
        *exitCode = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    return QString::fromLocal8Bit(process.readAll());
}

bool SlurmCluster::idle() const
{
    int jobsCode = 0;
    int stepsCode = 0;
    const QString jobs = run(QStringLiteral("squeue"), {QStringLiteral("--noheader")}, &jobsCode);
    const QString steps
        = run(QStringLiteral("squeue"), {QStringLiteral("--noheader"), QStringLiteral("--steps")}, &stepsCode);
    return jobsCode == 0 && stepsCode == 0 && jobs.trimmed().isEmpty() && steps.trimmed().isEmpty();
}

uint16_t freePortBase(int count)
{
    for (int attempt = 0; attempt < 50; ++attempt) {
        const uint16_t base = pickFreePort();
        if (base == 0 || int(base) + count > 65535)
            continue;
        bool allFree = true;
        for (int i = 0; i < count && allFree; ++i)
            allFree = isPortFree("127.0.0.1", uint16_t(base + i));
        if (allFree)
            return base;
    }
    return 0;
}

QStringList nodeProcessesWith(const QString &needle)
{
    QStringList found;
    for (const QString &pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        bool numeric = false;
        pid.toInt(&numeric);
        if (!numeric)
            continue;
        QFile file(QStringLiteral("/proc/") + pid + QStringLiteral("/cmdline"));
        if (!file.open(QIODevice::ReadOnly))
            continue;
        const QByteArray raw = file.readAll();
        // The tasks themselves, not the srun that started them with the same arguments.
        const QString program = QString::fromLocal8Bit(raw.left(raw.indexOf('\0')));
        const QString command = QString::fromLocal8Bit(raw).replace(QChar(u'\0'), QChar(u' '));
        if (command.contains(needle) && program.endsWith(QStringLiteral("parasync-node")))
            found << pid + QStringLiteral(": ") + command;
    }
    return found;
}

} // namespace parasync::testing
