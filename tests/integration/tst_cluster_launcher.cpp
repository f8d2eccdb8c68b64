// The launcher starts real parasync-node processes on free loopback ports,
// as the app's "start demo" button does, and must leave none behind.
#include "base/port_holder.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/task_log.h"
#include "support/demo_plan.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <netinet/in.h>
#include <set>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace parasync;
using parasync::testing::demoOnFreePorts;

namespace {

constexpr int kTimeoutMs = 60000;

bool processExists(qint64 pid)
{
    return pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno != ESRCH);
}

// A listening socket held by this test process, as a stale task would.
class Listener
{
public:
    Listener()
    {
        m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(m_fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
        ::listen(m_fd, 4);
        socklen_t length = sizeof addr;
        ::getsockname(m_fd, reinterpret_cast<sockaddr *>(&addr), &length);
        m_port = ntohs(addr.sin_port);
    }
    ~Listener() { ::close(m_fd); }
    uint16_t port() const { return m_port; }

private:
    int m_fd = -1;
    uint16_t m_port = 0;
};

QString describe(const ClusterLauncher &launcher)
{
    QString text;
    for (int row = 0; row < int(launcher.tasks().size()); ++row) {
        const auto &info = launcher.tasks()[size_t(row)];
        text += QString::fromStdString(info.task.toString()) + QStringLiteral(": ") + taskStateName(info.state)
                + QStringLiteral(" (") + info.detail + QStringLiteral(")\n") + launcher.output(row).right(600)
                + QLatin1Char('\n');
    }
    return text;
}

} // namespace

class TestClusterLauncher : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void argumentsAreTheFlagsAUserTypes()
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.training.mode.set_mode(proto::SSP);
        plan.training.mode.set_staleness(3);
        plan.training.learningRate = 0.1f;
        plan.training.lastStep = 500;
        plan.training.logdir = "/tmp/run";
        const QStringList args = plan.arguments(TaskId{JobName::Worker, 1});
        QCOMPARE(args.mid(0, 4), (QStringList{QStringLiteral("--ps_hosts=127.0.0.1:2222"),
                                              QStringLiteral("--worker_hosts=127.0.0.1:2223,127.0.0.1:2224"),
                                              QStringLiteral("--job_name=worker"), QStringLiteral("--task_index=1")}));
        for (const char *flag :
             {"--mode=ssp", "--staleness=3", "--learning_rate=0.1", "--last_step=500", "--logdir=/tmp/run"})
            QVERIFY2(args.contains(QLatin1String(flag)), flag);
        // Defaults are left out, as a user leaves them out.
        QVERIFY(!args.join(QLatin1Char(' ')).contains(QLatin1String("--batch_size")));
        QCOMPARE(ClusterPlan::demo().arguments(TaskId{JobName::Ps, 0}).last(), QStringLiteral("--mode=async"));
    }

    void eachWorkerGetsItsOwnPaceAndThePsTheCommonOne()
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.training.pace.computeMs = 40;
        plan.workerPace[1] = plan.training.pace;
        plan.workerPace[1].stragglerMs = 25;
        const QStringList ps = plan.arguments(TaskId{JobName::Ps, 0});
        const QStringList first = plan.arguments(TaskId{JobName::Worker, 0});
        const QStringList second = plan.arguments(TaskId{JobName::Worker, 1});
        // The ps only records the common pace (cluster.json, the run report).
        QVERIFY(ps.contains(QStringLiteral("--compute_ms=40")));
        QVERIFY2(!ps.join(u' ').contains(QStringLiteral("straggler_ms")), qPrintable(ps.join(u' ')));
        QVERIFY(first.contains(QStringLiteral("--compute_ms=40")));
        QVERIFY(!first.join(u' ').contains(QStringLiteral("straggler_ms")));
        QVERIFY(second.contains(QStringLiteral("--compute_ms=40")));
        QVERIFY(second.contains(QStringLiteral("--straggler_ms=25")));
    }

    void demoClusterRunsToTheEnd()
    {
        const ClusterPlan plan = demoOnFreePorts(1500);
        ClusterLauncher launcher;
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QSignalSpy output(&launcher, &ClusterLauncher::outputAppended);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        QCOMPARE(launcher.tasks().size(), size_t(3));
        QCOMPARE(launcher.taskRow(TaskId{JobName::Worker, 1}), 2);

        QTRY_VERIFY2_WITH_TIMEOUT(allExited.count() == 1, qPrintable(describe(launcher)), kTimeoutMs);
        for (const auto &info : launcher.tasks()) {
            QVERIFY2(info.state == TaskState::Finished, qPrintable(describe(launcher)));
            QVERIFY(info.pid > 0);
            QCOMPARE(info.exitCode, 0);
        }
        QVERIFY(!launcher.anyRunning());
        QVERIFY(output.count() > 0);
        // Both workers trained (ps first, then the workers once it listened).
        for (int worker : {1, 2}) {
            QVERIFY2(launcher.output(worker).contains(QLatin1String("joined the cluster at global step")),
                     qPrintable(launcher.output(worker)));
            QVERIFY2(launcher.output(worker).contains(QLatin1String("finished: global step 1500")),
                     qPrintable(launcher.output(worker)));
        }
        QVERIFY(launcher.output(0).contains(QLatin1String("all workers finished at global step 1500")));
        // The ports are usable again at once (connections in TIME_WAIT do not count).
        QVERIFY(launcher.checkPorts(plan).empty());
    }

    // Tasks started on this machine yield the cores to the window: +19 by
    // default, PARASYNC_TASK_NICE's increment when it is one (ctest gives
    // the other tests 0); every thread a task starts has it.
    void localTasksRunAtALowerPriorityThanTheApp_data()
    {
        QTest::addColumn<QByteArray>("setting");
        QTest::addColumn<int>("increment");
        QTest::newRow("unset") << QByteArray() << 19;
        QTest::newRow("chosen") << QByteArrayLiteral("5") << 5;
        QTest::newRow("not a number") << QByteArrayLiteral("low") << 19;
        QTest::newRow("out of range") << QByteArrayLiteral("-5") << 19;
    }
    void localTasksRunAtALowerPriorityThanTheApp()
    {
        QFETCH(QByteArray, setting);
        QFETCH(int, increment);
        const QByteArray saved = qgetenv("PARASYNC_TASK_NICE");
        const auto restore = qScopeGuard([&saved] { qputenv("PARASYNC_TASK_NICE", saved); });
        if (setting.isEmpty())
            qunsetenv("PARASYNC_TASK_NICE");
        else
            qputenv("PARASYNC_TASK_NICE", setting);
        errno = 0;
        const int own = ::getpriority(PRIO_PROCESS, 0);
        QCOMPARE(errno, 0);
        const int expected = std::min(19, own + increment);

        ClusterLauncher launcher;
        QString error;
        QVERIFY2(launcher.launch(demoOnFreePorts(1'000'000'000), &error), qPrintable(error));
        QTRY_VERIFY2_WITH_TIMEOUT(launcher.tasks()[2].state == TaskState::Training, qPrintable(describe(launcher)),
                                  kTimeoutMs);
        for (const auto &info : launcher.tasks()) {
            const QDir threads(QStringLiteral("/proc/%1/task").arg(info.pid));
            const QStringList tids = threads.entryList(QDir::Dirs | QDir::NoDotAndDotDot);
            QVERIFY2(tids.size() > 1, qPrintable(threads.path()));
            for (const QString &tid : tids) {
                QFile stat(threads.filePath(tid + QStringLiteral("/stat")));
                QVERIFY(stat.open(QIODevice::ReadOnly));
                // "pid (comm) state ppid ...": nice is the 19th field.
                const QByteArray text = stat.readAll();
                const QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
                QCOMPARE(fields.value(16).toInt(), expected);
            }
        }
        launcher.stopAll();
        QVERIFY(!launcher.anyRunning());
    }

    // A plan that backs ps:0 with a replica (the designer's "ps backups",
    // a cluster file's "ps_backup") starts the backup with ps:0 and gives
    // every task --ps_backup_hosts. Killing ps:0 from the process panel is a
    // failover: the watcher follows it, the workers train on, and ps:0
    // restarted from the panel follows the new primary.
    void aClusterWithABackupTrainsOnWhenPs0IsKilledFromThePanel()
    {
        ClusterPlan plan = demoOnFreePorts(0);
        plan.cluster.psBackups = {HostPort{"127.0.0.1", pickFreePort()}};
        plan.training.pace.computeMs = 2;
        const QString primary = QString::fromStdString(plan.cluster.ps[0].toString());
        const QString backup = QString::fromStdString(plan.cluster.psBackups[0].toString());
        QVERIFY(plan.arguments(TaskId{JobName::Worker, 1}).contains(QStringLiteral("--ps_backup_hosts=") + backup));

        ClusterLauncher launcher;
        ClusterWatcher watcher;
        launcher.holdWorkersUntilWatched(&watcher);
        RunSnapshot latest;
        connect(&watcher, &ClusterWatcher::snapshotReady, this, [&latest](const RunSnapshot &s) { latest = s; });
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        QCOMPARE(launcher.tasks().size(), size_t(4));
        const int ps0 = launcher.taskRow(TaskId{JobName::Ps, 0});
        const int backupRow = launcher.taskRow(TaskId{JobName::PsBackup, 0});
        QCOMPARE(backupRow, 1);
        watcher.connectTo(primary);
        QTRY_VERIFY2_WITH_TIMEOUT(latest.globalStep > 200 && latest.psReplica.peer_attached(),
                                  qPrintable(describe(launcher)), kTimeoutMs);
        QVERIFY2(launcher.output(backupRow).contains(QStringLiteral("follows its primary at ") + primary),
                 qPrintable(describe(launcher)));

        launcher.killTask(ps0);
        QTRY_VERIFY2_WITH_TIMEOUT(latest.failovers.size() == 1
                                      && latest.globalStep > latest.failovers.front().globalStep + 200,
                                  qPrintable(describe(launcher)), kTimeoutMs);
        QCOMPARE(launcher.tasks()[size_t(ps0)].state, TaskState::Dead);
        QVERIFY(launcher.tasks()[size_t(backupRow)].state != TaskState::Dead);
        QCOMPARE(QString::fromStdString(latest.psReplica.address()), backup);
        // The panel's backup row is the one that serves now, as the window shows it.
        launcher.updateFromSnapshot(latest);
        QVERIFY2(launcher.tasks()[size_t(backupRow)].detail.contains(
                     QStringLiteral("global step %1").arg(latest.globalStep)),
                 qPrintable(describe(launcher)));

        launcher.restartTask(ps0);
        QTRY_VERIFY2_WITH_TIMEOUT(latest.psReplica.peer_attached(), qPrintable(describe(launcher)), kTimeoutMs);
        QVERIFY2(launcher.output(ps0).contains(QStringLiteral("follows its primary at ") + backup),
                 qPrintable(describe(launcher)));

        launcher.stopAll();
        QTRY_VERIFY2_WITH_TIMEOUT(allExited.count() == 1, qPrintable(describe(launcher)), kTimeoutMs);
        QVERIFY(!launcher.anyRunning());
    }

    // An elastic cluster launched from the app (the designer's "Room for
    // workers"): Add worker starts worker:2 on a free port while it trains,
    // the watcher's snapshot (the timeline's lanes) grows by it, Stop takes
    // it away cleanly, and a cluster without room says why it cannot grow.
    void aWorkerAddedWhileTrainingJoinsAndLeavesCleanly()
    {
        ClusterPlan plan = demoOnFreePorts(0);
        plan.training.pace.computeMs = 2;
        plan.training.maxWorkers = 3;
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        launcher.holdWorkersUntilWatched(&watcher);
        RunSnapshot latest;
        connect(&watcher, &ClusterWatcher::snapshotReady, this, [&latest](const RunSnapshot &s) { latest = s; });
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QString why;
        QVERIFY(!launcher.canAddWorker(&why));
        QVERIFY2(why.contains(QStringLiteral("no cluster this app launched is running")), qPrintable(why));
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        watcher.connectTo(QString::fromStdString(plan.cluster.ps[0].toString()));
        QTRY_VERIFY2_WITH_TIMEOUT(latest.globalStep > 100, qPrintable(describe(launcher)), kTimeoutMs);
        QVERIFY2(launcher.canAddWorker(&why), qPrintable(why));

        const int row = launcher.addWorker(&error);
        QVERIFY2(row >= 0, qPrintable(error));
        const TaskInfo added = launcher.tasks()[size_t(row)];
        QCOMPARE(added.task.toString(), std::string("worker:2"));
        // ps:0's status (every 0.5 s) names it by the address it joined with.
        QTRY_VERIFY2_WITH_TIMEOUT(latest.workers.size() == 3 && latest.workers[2].applied > 20
                                      && latest.workerHosts.size() == 3,
                                  qPrintable(describe(launcher)), kTimeoutMs);
        QCOMPARE(latest.workerHosts[2], added.address.toString());
        QVERIFY(!launcher.canAddWorker(&why));
        QVERIFY2(why.contains(QStringLiteral("room for 3 workers")), qPrintable(why));

        launcher.stopTask(row);
        QTRY_VERIFY2_WITH_TIMEOUT(latest.workers.size() == 3 && latest.workers[2].phase == proto::STOPPED,
                                  qPrintable(describe(launcher)), kTimeoutMs);
        const int64_t left = latest.globalStep;
        QTRY_VERIFY2_WITH_TIMEOUT(latest.globalStep > left + 100, qPrintable(describe(launcher)), kTimeoutMs);
        QVERIFY(launcher.tasks()[size_t(row)].state != TaskState::Dead);
        launcher.stopAll();
        QTRY_VERIFY2_WITH_TIMEOUT(allExited.count() == 1, qPrintable(describe(launcher)), kTimeoutMs);
    }

    void aShortRunIsWatchedFromItsFirstStep()
    {
        // 200 steps take milliseconds: without holding the workers until the
        // watcher follows ps:0, the run would be over before it connected.
        const ClusterPlan plan = demoOnFreePorts(200);
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        launcher.holdWorkersUntilWatched(&watcher);
        RunSnapshot latest;
        connect(&watcher, &ClusterWatcher::snapshotReady, this, [&latest](const RunSnapshot &s) { latest = s; });
        QSignalSpy finished(&watcher, &ClusterWatcher::clusterFinished);
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        QCOMPARE(launcher.tasks()[1].state, TaskState::NotStarted);
        QVERIFY(launcher.tasks()[1].detail.contains(QLatin1String("watches ps:0")));
        watcher.connectTo(QString::fromStdString(plan.cluster.ps[0].toString()));

        QTRY_VERIFY2_WITH_TIMEOUT(finished.count() == 1 && allExited.count() == 1, qPrintable(describe(launcher)),
                                  kTimeoutMs);
        QCOMPARE(latest.globalStep, int64_t(200));
        QCOMPARE(latest.lostEvents, int64_t(0));
        QCOMPARE(latest.workers.at(0).applied + latest.workers.at(1).applied, int64_t(200));
        QCOMPARE(latest.recentSteps.front().globalStep, int64_t(1));
        for (const auto &info : launcher.tasks())
            QCOMPARE(info.state, TaskState::Finished);
    }

    void portConflictNamesTheHolderAndSuggestsAFreePort()
    {
        Listener stale;
        ClusterPlan plan = demoOnFreePorts(100);
        plan.cluster.ps[0].port = stale.port();

        ClusterLauncher launcher;
        const auto conflicts = launcher.checkPorts(plan);
        QCOMPARE(conflicts.size(), size_t(1));
        QCOMPARE(conflicts[0].task, (TaskId{JobName::Ps, 0}));
        QCOMPARE(conflicts[0].address.port, stale.port());
        QVERIFY2(conflicts[0].holder.contains(QStringLiteral("pid %1").arg(::getpid())),
                 qPrintable(conflicts[0].holder));
        QVERIFY(conflicts[0].suggestedPort != 0);
        QVERIFY(isPortFree("127.0.0.1", conflicts[0].suggestedPort));

        QString error;
        QVERIFY(!launcher.launch(plan, &error));
        QVERIFY2(error.contains(QStringLiteral("127.0.0.1:%1").arg(stale.port())), qPrintable(error));
        QVERIFY2(error.contains(QStringLiteral("pid %1").arg(::getpid())), qPrintable(error));
        QVERIFY2(error.contains(QRegularExpression(QStringLiteral("port \\d+ is free"))), qPrintable(error));
        QVERIFY(!launcher.anyRunning());

        const ClusterPlan fixed = ClusterLauncher::withSuggestedPorts(plan, conflicts);
        QCOMPARE(fixed.cluster.ps[0].port, conflicts[0].suggestedPort);
        QVERIFY(launcher.checkPorts(fixed).empty());
    }

    // A plan of many tasks on picked ports must never put two tasks on one
    // address: the kernel reuses a closed ephemeral port freely, and a CI run
    // once got the same port for worker:0 and worker:1.
    void freePortsPickedForAPlanAreDistinct()
    {
        std::set<uint16_t> seen;
        for (int i = 0; i < 3000; ++i) {
            const uint16_t port = pickFreePort();
            QVERIFY(port != 0);
            QVERIFY2(seen.insert(port).second, qPrintable(QStringLiteral("port %1 picked twice").arg(port)));
        }
    }

    void stopKillAndRestartATask()
    {
        // Long enough to outlive the test; stopAll ends it.
        const ClusterPlan plan = demoOnFreePorts(1'000'000'000);
        ClusterLauncher launcher;
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        const int worker1 = launcher.taskRow(TaskId{JobName::Worker, 1});
        const auto state = [&](int row) { return launcher.tasks()[size_t(row)].state; };
        QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Training, qPrintable(describe(launcher)), kTimeoutMs);
        QTRY_VERIFY2_WITH_TIMEOUT(state(0) == TaskState::Serving, qPrintable(describe(launcher)), kTimeoutMs);

        // Kill: a crash, as kill -9 would.
        const qint64 firstPid = launcher.tasks()[size_t(worker1)].pid;
        launcher.killTask(worker1);
        QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Dead, qPrintable(describe(launcher)), kTimeoutMs);
        QVERIFY(launcher.tasks()[size_t(worker1)].detail.contains(QLatin1String("SIGKILL")));
        QVERIFY(!processExists(firstPid));
        QVERIFY(launcher.anyRunning()); // the others go on

        // Restart: the same flags, a new process that joins again.
        launcher.restartTask(worker1);
        QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Training, qPrintable(describe(launcher)), kTimeoutMs);
        const qint64 secondPid = launcher.tasks()[size_t(worker1)].pid;
        QVERIFY(secondPid > 0 && secondPid != firstPid);
        QVERIFY(launcher.output(worker1).contains(QLatin1String("--- restarted ---")));

        // Restart while running: stops it, then starts it again.
        launcher.restartTask(worker1);
        QTRY_VERIFY2_WITH_TIMEOUT(launcher.tasks()[size_t(worker1)].pid != secondPid
                                      && state(worker1) == TaskState::Training,
                                  qPrintable(describe(launcher)), kTimeoutMs);
        QVERIFY(!processExists(secondPid));

        // Killed from outside (a user's kill -9, the OOM killer): the row
        // names the signal, and the last line the task printed is shown as
        // that, not as the cause.
        const qint64 thirdPid = launcher.tasks()[size_t(worker1)].pid;
        QCOMPARE(::kill(pid_t(thirdPid), SIGKILL), 0);
        QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Dead, qPrintable(describe(launcher)), kTimeoutMs);
        const QString detail = launcher.tasks()[size_t(worker1)].detail;
        QVERIFY2(detail.startsWith(QLatin1String("killed by signal 9 (SIGKILL); its last line: ")), qPrintable(detail));
        launcher.restartTask(worker1);
        QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Training, qPrintable(describe(launcher)), kTimeoutMs);

        // Stop: SIGTERM, a clean exit.
        launcher.stopTask(worker1);
        QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Stopped, qPrintable(describe(launcher)), kTimeoutMs);
        QCOMPARE(launcher.tasks()[size_t(worker1)].exitCode, 0);

        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        launcher.stopAll();
        QVERIFY(!launcher.anyRunning());
        QCOMPARE(allExited.count(), 1);
        for (const auto &info : launcher.tasks()) {
            QVERIFY2(info.state == TaskState::Stopped, qPrintable(describe(launcher)));
            QVERIFY(!processExists(info.pid));
        }
    }

    // Each task's output in the run directory's logs/, kept across a kill
    // and a restart of the task and after the launcher is gone.
    void eachTasksOutputIsKeptInTheRunDirectory()
    {
        QTemporaryDir logdir;
        ClusterPlan plan = demoOnFreePorts(1'000'000'000);
        plan.training.logdir = logdir.path().toStdString();
        const QString workerLog = logdir.filePath(QStringLiteral("logs/worker-1.log"));
        const auto read = [](const QString &path) {
            QFile file(path);
            return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll()) : QString();
        };
        {
            ClusterLauncher launcher;
            QString error;
            QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
            const int worker1 = launcher.taskRow(TaskId{JobName::Worker, 1});
            const auto state = [&](int row) { return launcher.tasks()[size_t(row)].state; };
            QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Training, qPrintable(describe(launcher)),
                                      kTimeoutMs);
            QTRY_VERIFY_WITH_TIMEOUT(read(workerLog).contains(QLatin1String("worker:1 state training")), kTimeoutMs);
            QVERIFY(read(workerLog).contains(QLatin1String(" started: ")));
            QVERIFY(read(workerLog).contains(QLatin1String("--job_name=worker --task_index=1")));
            QTRY_VERIFY_WITH_TIMEOUT(
                read(logdir.filePath(QStringLiteral("logs/ps-0.log"))).contains(QLatin1String("ps:0 listening on")),
                kTimeoutMs);

            launcher.killTask(worker1);
            QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Dead, qPrintable(describe(launcher)), kTimeoutMs);
            launcher.restartTask(worker1);
            QTRY_VERIFY2_WITH_TIMEOUT(state(worker1) == TaskState::Training, qPrintable(describe(launcher)),
                                      kTimeoutMs);
            QTRY_VERIFY_WITH_TIMEOUT(read(workerLog).count(QLatin1String("worker:1 state training")) >= 2, kTimeoutMs);
            const QString text = read(workerLog);
            QCOMPARE(text.count(QLatin1String(" started: ")), 2);
            QVERIFY2(text.contains(QLatin1String("dead: killed (SIGKILL) on request")), qPrintable(text.right(2000)));
            launcher.stopAll();
        }
        // The launcher is gone; the lines are not.
        const QString text = read(workerLog);
        QVERIFY2(text.contains(QLatin1String("stopped")), qPrintable(text.right(2000)));
    }

    // A log past TaskLog::kMaxBytes goes to .1 (and .1 to .2 ...), so a task
    // that talks for days takes bounded room; the newest lines stay in .log.
    void aLongLogIsRotated()
    {
        QTemporaryDir logdir;
        TaskLog log(logdir.path(), TaskId{JobName::Ps, 0});
        QVERIFY2(log.started(QStringLiteral("parasync-node --job_name=ps")), qPrintable(log.error()));
        const QString line = QString(1023, QLatin1Char('x')) + QLatin1Char('\n');
        QString chunk;
        for (int i = 0; i < 1024; ++i)
            chunk += line; // 1 MiB
        const int chunks = int(TaskLog::kMaxBytes / (1024 * 1024)) * (TaskLog::kKeptFiles + 2);
        for (int i = 0; i < chunks; ++i)
            log.write(chunk);
        log.write(QStringLiteral("the newest line\n"));
        QVERIFY(log.error().isEmpty());
        const QString path = log.path();
        QCOMPARE(path, logdir.filePath(QStringLiteral("logs/ps-0.log")));
        for (int i = 1; i <= TaskLog::kKeptFiles; ++i)
            QVERIFY2(QFileInfo(path + QStringLiteral(".%1").arg(i)).size() > 0, qPrintable(QString::number(i)));
        QVERIFY(!QFileInfo::exists(path + QStringLiteral(".%1").arg(TaskLog::kKeptFiles + 1)));
        for (const QString &file : QDir(logdir.filePath(QStringLiteral("logs"))).entryList(QDir::Files))
            QVERIFY2(QFileInfo(logdir.filePath(QStringLiteral("logs/") + file)).size() <= TaskLog::kMaxBytes,
                     qPrintable(file));
        QFile newest(path);
        QVERIFY(newest.open(QIODevice::ReadOnly));
        QVERIFY(newest.readAll().endsWith("the newest line\n"));
    }

    void destroyingTheLauncherLeavesNoProcess()
    {
        const ClusterPlan plan = demoOnFreePorts(1'000'000'000);
        auto launcher = std::make_unique<ClusterLauncher>();
        QString error;
        QVERIFY2(launcher->launch(plan, &error), qPrintable(error));
        QTRY_VERIFY2_WITH_TIMEOUT(launcher->tasks().back().state == TaskState::Training,
                                  qPrintable(describe(*launcher)), kTimeoutMs);
        std::vector<qint64> pids;
        for (const auto &info : launcher->tasks()) {
            QVERIFY(processExists(info.pid));
            pids.push_back(info.pid);
        }
        QElapsedTimer timer;
        timer.start();
        launcher.reset();
        QVERIFY2(timer.elapsed() < 6000, qPrintable(QString::number(timer.elapsed())));
        for (const qint64 pid : pids)
            QVERIFY2(!processExists(pid), qPrintable(QStringLiteral("pid %1 survived").arg(pid)));
        // ... and the ports are free for the next run.
        QVERIFY(ClusterLauncher().checkPorts(plan).empty());
    }

    void aTaskThatFailsIsDeadWithItsExitCodeAndError()
    {
        ClusterPlan plan = demoOnFreePorts(100);
        plan.training.optimizer = "adadelta"; // parasync-node refuses it
        ClusterLauncher launcher;
        QSignalSpy allExited(&launcher, &ClusterLauncher::allExited);
        QString error;
        QVERIFY2(launcher.launch(plan, &error), qPrintable(error));
        QTRY_VERIFY2_WITH_TIMEOUT(allExited.count() == 1, qPrintable(describe(launcher)), kTimeoutMs);
        const TaskInfo &ps = launcher.tasks()[0];
        QCOMPARE(ps.state, TaskState::Dead);
        QCOMPARE(ps.exitCode, 2);
        QVERIFY2(ps.detail.startsWith(QLatin1String("exit code 2: parasync-node:")), qPrintable(ps.detail));
        QVERIFY2(ps.detail.contains(QLatin1String("--optimizer=adadelta")), qPrintable(ps.detail));
        // No ps task came up, so the workers were not started to wait for nothing.
        for (size_t row = 1; row < launcher.tasks().size(); ++row) {
            QCOMPARE(launcher.tasks()[row].state, TaskState::NotStarted);
            QVERIFY(launcher.tasks()[row].detail.contains(QLatin1String("ps:0 exited")));
        }
    }

    void aMissingBinaryIsReported()
    {
        ClusterLauncher launcher;
        launcher.setNodeBinary(QStringLiteral("/nonexistent/parasync-node"));
        QCOMPARE(launcher.nodeBinary(), QStringLiteral("/nonexistent/parasync-node"));
        QString error;
        QVERIFY(!launcher.launch(demoOnFreePorts(100), &error));
        QVERIFY2(error.contains(QLatin1String("/nonexistent/parasync-node"))
                     && error.contains(QLatin1String("PARASYNC_NODE")),
                 qPrintable(error));
        QVERIFY(launcher.tasks().empty());
    }
};

QTEST_GUILESS_MAIN(TestClusterLauncher)
#include "tst_cluster_launcher.moc"
