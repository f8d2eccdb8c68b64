// The launcher starts tasks on "remote" hosts through the system's ssh
// client and a real sshd that this test starts on a free loopback port with
// keys it generates: the three-task demo, every task over ssh, must train,
// stop on request and when the launcher goes, and leave no process behind.
// Workers with a command of their own (Python) run over ssh as written, get
// the cluster token from the wrapper, and a program missing there is named.
#include "base/port_holder.h"
#include "config/cluster_file.h"
#include "node/network_probe.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/ssh_command.h"
#include "support/cluster_harness.h"
#include "support/ssh_server.h"
#include "wire/cluster_token.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cerrno>
#include <csignal>
#include <memory>
#include <set>

using namespace parasync;
using namespace parasync::testing;

namespace {

constexpr int kTimeoutMs = 90000;

ClusterPlan demoOverSsh(const SshServer &server, int64_t lastStep, const QString &logdir)
{
    ClusterPlan plan = ClusterPlan::demo();
    for (auto *list : {&plan.cluster.ps, &plan.cluster.workers})
        for (auto &address : *list)
            address.port = pickFreePort();
    plan.training.lastStep = lastStep;
    plan.training.logdir = logdir.toStdString();
    RemoteHost host = server.remoteHost("127.0.0.1");
    host.node = nodeBinary().toStdString();
    plan.hosts = {host};
    return plan;
}

bool processExists(qint64 pid)
{
    return pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno != ESRCH);
}

QByteArray procFile(qint64 pid, const char *name)
{
    QFile file(QStringLiteral("/proc/%1/%2").arg(pid).arg(QLatin1String(name)));
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// Every process on this machine whose command line holds `text`.
QList<qint64> processesWith(const QByteArray &text)
{
    QList<qint64> found;
    const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    for (const QString &entry : entries) {
        bool ok = false;
        const qint64 pid = entry.toLongLong(&ok);
        if (ok && pid != ::getpid() && procFile(pid, "cmdline").contains(text))
            found << pid;
    }
    return found;
}

QString describe(const ClusterLauncher &launcher)
{
    QString text;
    for (int row = 0; row < int(launcher.tasks().size()); ++row) {
        const auto &info = launcher.tasks()[size_t(row)];
        text += QString::fromStdString(info.task.toString()) + QStringLiteral(" on ") + info.host + QStringLiteral(": ")
                + taskStateName(info.state) + QStringLiteral(" (") + info.detail + QStringLiteral(")\n")
                + launcher.output(row).right(800) + QLatin1Char('\n');
    }
    return text;
}

bool allTraining(const ClusterLauncher &launcher)
{
    for (const auto &info : launcher.tasks())
        if (info.pid <= 0 || (info.task.job == JobName::Worker && info.state != TaskState::Training))
            return false;
    return true;
}

} // namespace

class TestRemoteLaunch : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<SshServer> m_server;

private Q_SLOTS:
    void initTestCase()
    {
        m_server = std::make_unique<SshServer>();
        QString whyNot;
        if (!m_server->start(&whyNot)) {
            m_server.reset();
            QSKIP(qPrintable(QStringLiteral("no sshd to test against: ") + whyNot));
        }
    }

    void cleanupTestCase() { m_server.reset(); }

    void remoteCommandQuotesEveryWord()
    {
        QCOMPARE(shellQuote(QStringLiteral("it's")), QStringLiteral("'it'\\''s'"));
        QCOMPARE(shellQuote(QStringLiteral("~/bin/parasync-node")), QStringLiteral("\"$HOME\"/'bin/parasync-node'"));
        RemoteHost host;
        host.name = "10.0.0.2";
        host.user = "alice";
        host.sshPort = 2200;
        const QStringList args = sshArguments(host, QStringLiteral("true"));
        QVERIFY(args.contains(QStringLiteral("BatchMode=yes")));
        QVERIFY(args.join(QLatin1Char(' ')).contains(QLatin1String("ConnectTimeout=")));
        QCOMPARE(args.mid(args.size() - 3),
                 (QStringList{QStringLiteral("--"), QStringLiteral("10.0.0.2"), QStringLiteral("true")}));
    }

    void demoOverSshConverges()
    {
        QTemporaryDir dir;
        const QString logdir = dir.filePath(QStringLiteral("run"));
        const ClusterPlan plan = demoOverSsh(*m_server, 4000, logdir);
        const std::string token = generateClusterToken();
        ClusterLauncher launcher;
        launcher.setClusterToken(token);
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QSignalSpy output(&launcher, &ClusterLauncher::outputAppended);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        for (const auto &info : launcher.tasks())
            QVERIFY2(info.host.contains(QLatin1String("(ssh)")), qPrintable(info.host));

        QTRY_VERIFY2_WITH_TIMEOUT(allExited.count() == 1, qPrintable(describe(launcher)), kTimeoutMs);
        for (const auto &info : launcher.tasks()) {
            QVERIFY2(info.state == TaskState::Finished, qPrintable(describe(launcher)));
            QCOMPARE(info.exitCode, 0);
        }
        // The remote tasks' output streamed into the launcher, as the process panel shows it.
        QVERIFY2(
            launcher.output(launcher.taskRow(TaskId{JobName::Worker, 0})).contains(QLatin1String("joined the cluster")),
            qPrintable(describe(launcher)));
        // The wrapper's own line (the remote pid) is the launcher's, not the task's log.
        for (const auto &emitted : output)
            QVERIFY(!emitted.at(1).toString().contains(QLatin1String(kRemotePidPrefix)));

        const auto metrics = readMetrics(logdir);
        QVERIFY(!metrics.rows.empty());
        const double w = metrics.rows.back().at(metrics.column(QStringLiteral("w"))).toDouble();
        const double b = metrics.rows.back().at(metrics.column(QStringLiteral("b"))).toDouble();
        QVERIFY2(std::abs(w - 2.0) < 0.15 && std::abs(b - 10.0) < 0.3,
                 qPrintable(QStringLiteral("w %1 b %2").arg(w).arg(b)));
    }

    void stopEndsTheRemoteTasksAndFreesTheirPorts()
    {
        QTemporaryDir dir;
        ClusterPlan plan = demoOverSsh(*m_server, 100000000, dir.filePath(QStringLiteral("run")));
        plan.training.maxWorkers = 3; // room for one worker added below
        QList<qint64> pids;
        HostPort addedAddress;
        const std::string token = generateClusterToken();
        {
            ClusterLauncher launcher;
            launcher.setClusterToken(token);
            QString error;
            QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
            QTRY_VERIFY2_WITH_TIMEOUT(allTraining(launcher), qPrintable(describe(launcher)), kTimeoutMs);
            for (const auto &info : launcher.tasks())
                pids << info.pid;

            // Each task is a real process (same machine, so its remote pid is
            // visible here) whose environment holds the token, and whose
            // command line -- like every process's -- does not.
            QVERIFY2(processesWith(QByteArray::fromStdString(token)).isEmpty(), "the token is on a command line");
            for (qint64 pid : pids) {
                QVERIFY(procFile(pid, "cmdline").contains("parasync-node"));
                QVERIFY(procFile(pid, "environ")
                            .contains(QByteArray(QByteArray(kTokenEnvironmentVariable) + '='
                                                 + QByteArray::fromStdString(token))));
            }

            // An elastic cluster grows over ssh too: Add worker starts
            // worker:2 on the workers' remote host, where it joins and trains.
            // The port the launcher picks there (the first above the last
            // worker's that the plan does not use) is taken: the launcher,
            // which chose it, moves worker:2 on rather than leave it dead.
            std::set<int> planned;
            for (const TaskId &task : plan.tasks())
                planned.insert(plan.cluster.address(task).port);
            HostPort picked = plan.cluster.workers.back();
            do
                ++picked.port;
            while (planned.count(picked.port));
            const PortBinding taken = bindPort(picked.host, uint16_t(picked.port), /*listen=*/true);
            QVERIFY2(taken.bound() || !isPortFree(picked.host, uint16_t(picked.port)), taken.why().c_str());
            const int added = launcher.addWorker(&error);
            QVERIFY2(added >= 0, qPrintable(error));
            QVERIFY2(launcher.tasks()[size_t(added)].host.contains(QLatin1String("(ssh)")),
                     qPrintable(launcher.tasks()[size_t(added)].host));
            QTRY_VERIFY2_WITH_TIMEOUT(launcher.tasks()[size_t(added)].state == TaskState::Training
                                          && launcher.output(added).contains(QLatin1String("joined the cluster")),
                                      qPrintable(describe(launcher)), kTimeoutMs);
            addedAddress = launcher.tasks()[size_t(added)].address;
            QVERIFY2(addedAddress.port != picked.port, qPrintable(describe(launcher)));
            QVERIFY2(launcher.output(added).contains(QLatin1String("is taken on")), qPrintable(launcher.output(added)));

            // One task stopped from the process panel: SIGTERM reaches it over ssh.
            const int row = launcher.taskRow(TaskId{JobName::Worker, 1});
            launcher.stopTask(row);
            QTRY_VERIFY2_WITH_TIMEOUT(launcher.tasks()[size_t(row)].state == TaskState::Stopped,
                                      qPrintable(describe(launcher)), kTimeoutMs);
            QTRY_VERIFY_WITH_TIMEOUT(!processExists(pids[row]), 10000);

            // Restart it: a new remote process with the same flags.
            launcher.restartTask(row);
            QTRY_VERIFY2_WITH_TIMEOUT(launcher.tasks()[size_t(row)].pid != pids[row]
                                          && launcher.tasks()[size_t(row)].state == TaskState::Training,
                                      qPrintable(describe(launcher)), kTimeoutMs);
            pids[row] = launcher.tasks()[size_t(row)].pid;
            pids << launcher.tasks()[size_t(added)].pid;
            // The launcher goes (the app quits) with every task running.
        }
        for (qint64 pid : pids)
            QVERIFY2(!processExists(pid), qPrintable(QStringLiteral("remote task pid %1 survived").arg(pid)));
        // Nor any wrapper or client of this cluster (its ps address is unique to it).
        const QByteArray marker = "--ps_hosts=" + QByteArray::fromStdString(plan.cluster.ps.front().toString());
        QTRY_VERIFY2_WITH_TIMEOUT(processesWith(marker).isEmpty(),
                                  qPrintable(QStringLiteral("left: %1").arg(processesWith(marker).size())), 10000);
        for (const auto &address : plan.cluster.ps)
            QTRY_VERIFY_WITH_TIMEOUT(isPortFree(address.host, address.port), 10000);
        for (const auto &address : plan.cluster.workers)
            QTRY_VERIFY_WITH_TIMEOUT(isPortFree(address.host, address.port), 10000);
        QTRY_VERIFY_WITH_TIMEOUT(isPortFree(addedAddress.host, addedAddress.port), 10000);
    }

    void killedSshClientStopsItsRemoteTask()
    {
        // The app dying (or its ssh connection dropping) closes the remote
        // side's control channel: the task there stops by itself.
        QTemporaryDir dir;
        const ClusterPlan plan = demoOverSsh(*m_server, 100000000, dir.filePath(QStringLiteral("run")));
        ClusterLauncher launcher;
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        QTRY_VERIFY2_WITH_TIMEOUT(allTraining(launcher), qPrintable(describe(launcher)), kTimeoutMs);
        const int row = launcher.taskRow(TaskId{JobName::Worker, 1});
        const qint64 workerPid = launcher.tasks()[size_t(row)].pid;
        // worker:1's ssh client: a child of this process running ssh for it.
        QList<qint64> clients;
        for (qint64 pid : processesWith(QByteArray("--task_index=1"))) {
            const QString stat = QString::fromUtf8(procFile(pid, "stat"));
            if (procFile(pid, "comm").trimmed() == "ssh" && procFile(pid, "cmdline").contains("--job_name=worker")
                && stat.section(QLatin1Char(' '), 3, 3).toLongLong() == ::getpid())
                clients << pid;
        }
        QCOMPARE(clients.size(), 1);
        QVERIFY(processExists(workerPid));
        ::kill(pid_t(clients.front()), SIGKILL);
        // SIGTERM on the closed channel: the task leaves cleanly, well within 10 s.
        QTRY_VERIFY2_WITH_TIMEOUT(!processExists(workerPid), "the remote task outlived its ssh session", 10000);
        QTRY_COMPARE_WITH_TIMEOUT(launcher.tasks()[size_t(row)].state, TaskState::Dead, 10000);
        QVERIFY2(launcher.tasks()[size_t(row)].detail.contains(QLatin1String("ssh")), qPrintable(describe(launcher)));
    }

    void pythonWorkersOverSshTrainWithTheToken()
    {
        QProcess probe;
        probe.start(QStringLiteral("/usr/bin/python3"),
                    {QStringLiteral("-c"), QStringLiteral("import torch, sklearn")});
        if (!probe.waitForFinished(60000) || probe.exitCode() != 0)
            QSKIP("needs Debian's python3-torch and python3-sklearn (scripts/setup.sh installs them)");
        QTemporaryDir dir;
        ClusterPlan plan = demoOverSsh(*m_server, 300, dir.filePath(QStringLiteral("run")));
        plan.training.optimizer = "adam";
        plan.training.learningRate = 0.005f;
        // A remote host gets no PYTHONPATH from the app: the command says it.
        plan.workerCommand = {"env", "PYTHONPATH=" PARASYNC_PYTHON_DIR, "/usr/bin/python3",
                              PARASYNC_SOURCE_DIR "/python/examples/torch_digits_mlp.py", "--batch_size=64"};
        ClusterLauncher launcher;
        launcher.setClusterToken(generateClusterToken());
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        QTRY_VERIFY2_WITH_TIMEOUT(allExited.count() == 1, qPrintable(describe(launcher)), 3 * kTimeoutMs);
        for (const auto &info : launcher.tasks()) {
            QVERIFY2(info.state == TaskState::Finished && info.exitCode == 0, qPrintable(describe(launcher)));
            QVERIFY2(info.host.contains(QLatin1String("(ssh)")), qPrintable(info.host));
        }
        // The chief is the Python script: it scores its MLP at the last step.
        QVERIFY2(
            launcher.output(launcher.taskRow(TaskId{JobName::Worker, 0})).contains(QLatin1String("held-out accuracy")),
            qPrintable(describe(launcher)));
    }

    void aWorkerProgramMissingOverSshIsNamed()
    {
        QTemporaryDir dir;
        ClusterPlan plan = demoOverSsh(*m_server, 100, dir.filePath(QStringLiteral("run")));
        plan.workerCommands[1] = {"/nonexistent/python3", "train.py"};
        ClusterLauncher launcher;
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        const int row = launcher.taskRow(TaskId{JobName::Worker, 1});
        QTRY_VERIFY2_WITH_TIMEOUT(launcher.tasks()[size_t(row)].state == TaskState::Dead,
                                  qPrintable(describe(launcher)), kTimeoutMs);
        const QString detail = launcher.tasks()[size_t(row)].detail;
        for (const QString &said :
             {QStringLiteral("/nonexistent/python3 not found on"), QStringLiteral("first word of \"worker_command\"")})
            QVERIFY2(detail.contains(said), qPrintable(describe(launcher)));
        launcher.stopAll();
    }

    void sshFailuresSayWhatToDo_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("expected");
        QTest::newRow("host does not resolve")
            << QStringLiteral("unresolvable") << QStringLiteral("check the host name");
        QTest::newRow("key not accepted") << QStringLiteral("wrong key") << QStringLiteral("authorized_keys");
        QTest::newRow("no parasync-node there") << QStringLiteral("missing binary") << QStringLiteral("not found on");
        QTest::newRow("no ssh server") << QStringLiteral("no sshd") << QStringLiteral("no ssh server answers");
    }

    void sshFailuresSayWhatToDo()
    {
        QFETCH(QString, kind);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        ClusterPlan plan = demoOverSsh(*m_server, 100, dir.filePath(QStringLiteral("run")));
        RemoteHost &host = plan.hosts.front();
        if (kind == QLatin1String("unresolvable"))
            host.sshHost = "no-such-host.invalid";
        else if (kind == QLatin1String("wrong key"))
            host = [&] {
                RemoteHost h = m_server->remoteHostWithWrongKey("127.0.0.1");
                h.node = host.node;
                return h;
            }();
        else if (kind == QLatin1String("missing binary"))
            host.node = "/nonexistent/parasync-node";
        else
            host.sshPort = pickFreePort();
        ClusterLauncher launcher;
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        // ps:0 fails; the workers are never started (nothing to join).
        QTRY_VERIFY2_WITH_TIMEOUT(allExited.count() >= 1, qPrintable(describe(launcher)), 30000);
        const TaskInfo &ps = launcher.tasks().front();
        QCOMPARE(ps.state, TaskState::Dead);
        QVERIFY2(ps.detail.contains(expected), qPrintable(describe(launcher)));
    }
};

QTEST_GUILESS_MAIN(TestRemoteLaunch)
#include "tst_remote_launch.moc"
