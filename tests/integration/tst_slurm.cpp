// Clusters run as jobs of a real Slurm: a one-node slurmctld/slurmd with
// munge, started by the test (root only, skipped with the reason anywhere
// else), receives the app's batch scripts through sbatch; parasync-node
// runs under srun and takes its cluster from the step; the app follows the
// job with squeue, watches ps:0 with the job's token, relays each task's
// output, and cancels with scancel, after which nothing of the job is left.
#include "base/port_holder.h"
#include "base/version.h"
#include "config/cluster_plan.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/slurm_job.h"
#include "orchestration/slurm_preflight.h"
#include "support/slurm_cluster.h"
#include "wire/cluster_token.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <memory>

using namespace parasync;
using namespace parasync::testing;
using namespace Qt::StringLiterals;

namespace {

QString nodeBinary()
{
    return qEnvironmentVariable("PARASYNC_NODE");
}

struct Watched
{
    std::shared_ptr<const RunSnapshot> latest;
    double w() const { return value("w"); }
    double b() const { return value("b"); }
    double value(const std::string &name) const
    {
        if (!latest)
            return NAN;
        for (size_t i = 0; i < latest->parameterNames.size() && i < latest->parameterSeries.size(); ++i)
            if (latest->parameterNames[i] == name && !latest->parameterSeries[i].isEmpty())
                return double(latest->parameterSeries[i].buckets().back().last);
        return NAN;
    }
    bool converged() const { return std::abs(w() - 2.0) < 0.15 && std::abs(b() - 10.0) < 0.5; }
};

} // namespace

class TestSlurm : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<SlurmCluster> m_slurm;
    QTemporaryDir m_shared; // the "shared file system": the scripts, the tasks' logs, the run directories

    SlurmSettings settingsFor(const QString &name, uint16_t portBase) const
    {
        SlurmSettings settings;
        settings.jobName = name.toStdString();
        settings.partition = m_slurm->partition().toStdString();
        settings.timeLimit = "10:00";
        settings.portBase = portBase;
        settings.node = nodeBinary().toStdString();
        settings.outputDirectory = m_shared.filePath(name).toStdString();
        settings.expectedVersion = nodeVersionLine();
        return settings;
    }

    static ClusterPlan planOf(int numWorkers, const QString &runDirectory)
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.cluster.workers.clear();
        for (int i = 0; i < numWorkers; ++i)
            plan.cluster.workers.push_back(HostPort{"127.0.0.1", uint16_t(2223 + i)}); // replaced by the step's
        plan.training.logdir = runDirectory.toStdString();
        return plan;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_shared.isValid());
        m_slurm = std::make_unique<SlurmCluster>();
        QString whyNot;
        if (!m_slurm->start(&whyNot)) {
            m_slurm.reset();
            QSKIP(qPrintable(u"no Slurm for this test: "_s + whyNot));
        }
    }

    void cleanupTestCase()
    {
        m_slurm.reset(); // cancels what is left, stops the daemons
    }

    void preflightFindsThePartitionItsRoomAndTheNode()
    {
        SlurmPreflight check;
        QSignalSpy finished(&check, &SlurmPreflight::finished);
        check.start(planOf(3, {}), settingsFor(u"preflight"_s, 8888));
        QVERIFY(finished.wait(60000));
        QVERIFY2(finished.front().front().toBool(), qPrintable(check.report()));
        QCOMPARE(check.checks().size(), size_t(3));
        QVERIFY2(check.report().contains(u"runs "_s + QString::fromStdString(nodeVersionLine())),
                 qPrintable(check.report()));
    }

    void preflightSaysWhatToFix_data()
    {
        QTest::addColumn<QString>("partition");
        QTest::addColumn<int>("workers");
        QTest::addColumn<QString>("node");
        QTest::addColumn<QString>("expected");
        QTest::newRow("no such partition") << u"gpu"_s << 3 << QString() << u"partition gpu does not exist"_s;
        QTest::newRow("more tasks than CPUs") << QString() << 8 << QString() << u"need a CPU each"_s;
        QTest::newRow("no parasync-node there")
            << QString() << 2 << u"/nonexistent/parasync-node"_s << u"is not on the path of the nodes"_s;
    }
    void preflightSaysWhatToFix()
    {
        QFETCH(QString, partition);
        QFETCH(int, workers);
        QFETCH(QString, node);
        QFETCH(QString, expected);
        SlurmSettings settings = settingsFor(u"preflight"_s, 8888);
        if (!partition.isEmpty())
            settings.partition = partition.toStdString();
        if (!node.isEmpty())
            settings.node = node.toStdString();
        SlurmPreflight check;
        QSignalSpy finished(&check, &SlurmPreflight::finished);
        check.start(planOf(workers, {}), settings);
        QVERIFY(finished.wait(60000));
        QVERIFY2(!finished.front().front().toBool(), qPrintable(check.report()));
        QVERIFY2(check.report().contains(expected), qPrintable(check.report()));
        QVERIFY2(check.report().contains(u"fix "_s) || expected.contains(u"CPU"_s), qPrintable(check.report()));
    }

    void demoRunsAsOneJobAndConverges()
    {
        const uint16_t portBase = freePortBase(3);
        QVERIFY(portBase != 0);
        ClusterPlan plan = planOf(2, m_shared.filePath(u"demo-run"_s));
        plan.training.lastStep = 1500;
        // A few seconds of training: at full speed it would be over before a watcher could see it.
        plan.training.pace.computeMs = 5;
        const SlurmSettings settings = settingsFor(u"demo"_s, portBase);

        ClusterWatcher watcher;
        Watched watched;
        connect(&watcher, &ClusterWatcher::snapshotReady, this,
                [&watched](const RunSnapshot &s) { watched.latest = std::make_shared<const RunSnapshot>(s); });
        SlurmJob job;
        job.setWatcher(&watcher);
        QStringList states;
        connect(&job, &SlurmJob::statusChanged, this, [&states](const SlurmJobStatus &s) {
            if (states.isEmpty() || states.back() != QString::fromStdString(s.state))
                states << QString::fromStdString(s.state);
        });
        QSignalSpy running(&job, &SlurmJob::running);
        QSignalSpy ended(&job, &SlurmJob::ended);
        QSignalSpy failed(&job, &SlurmJob::failed);
        std::map<std::string, QStringList> output; // task -> its lines
        connect(&job, &SlurmJob::taskOutput, this,
                [&output](int, const TaskId &task, const QString &line) { output[task.toString()] << line; });

        QStringList jobOutput;
        connect(&job, &SlurmJob::jobOutput, this, [&jobOutput](const QString &line) { jobOutput << line; });
        RpcSettings rpc;
        rpc.clusterToken = generateClusterToken();
        QString error;
        QVERIFY2(job.submit(plan, settings, rpc, &error), qPrintable(error));
        QVERIFY(QFile::exists(job.scriptPath()));
        QVERIFY2(ended.wait(120000), qPrintable(m_slurm->logs() + job.taskLog(0)));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.front().front().toString()));

        // What the app showed: the job ran on the node, ps:0 there, training to the end.
        QVERIFY2(job.status().state == "COMPLETED",
                 qPrintable(QString::fromStdString(job.status().state) + u"\n"_s + jobOutput.join(u'\n') + u"\n"_s
                            + job.taskLog(0).right(1500)));
        QVERIFY2(states.contains(u"RUNNING"_s), qPrintable(states.join(u", "_s)));
        QCOMPARE(running.size(), 1);
        QCOMPARE(running.front().front().toString(), u"%1:%2"_s.arg(m_slurm->nodeName()).arg(portBase));
        QVERIFY2(watched.latest, "the watcher never got telemetry from ps:0");
        QVERIFY2(watched.converged(), qPrintable(u"w %1, b %2"_s.arg(watched.w()).arg(watched.b())));
        QCOMPARE(watched.latest->globalStep, int64_t(1500));
        // Every task's own output, relayed; each finished.
        for (const char *task : {"ps:0", "worker:0", "worker:1"}) {
            const QString lines = output[task].join(u'\n');
            QVERIFY2(lines.contains(QString::fromLatin1(task) + u" state finished"_s), qPrintable(lines));
        }
        QVERIFY(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).isEmpty());
    }

    void clusterOfThreeWorkersConvergesAndCancelLeavesNothing()
    {
        const uint16_t portBase = freePortBase(4);
        QVERIFY(portBase != 0);
        ClusterPlan plan = planOf(3, m_shared.filePath(u"cancel-run"_s));
        plan.training.lastStep = 0; // until stopped
        plan.training.pace.computeMs = 5;
        plan.workerPace[2].stragglerMs = 10; // its own pace: srun --multi-prog
        const SlurmSettings settings = settingsFor(u"cancelled"_s, portBase);

        ClusterWatcher watcher;
        Watched watched;
        connect(&watcher, &ClusterWatcher::snapshotReady, this,
                [&watched](const RunSnapshot &s) { watched.latest = std::make_shared<const RunSnapshot>(s); });
        SlurmJob job;
        job.setWatcher(&watcher);
        QSignalSpy ended(&job, &SlurmJob::ended);
        RpcSettings rpc;
        rpc.clusterToken = generateClusterToken();
        QString error;
        QVERIFY2(job.submit(plan, settings, rpc, &error), qPrintable(error));
        QTRY_VERIFY2_WITH_TIMEOUT(
            watched.converged() && watched.latest->workers.size() == 3,
            qPrintable(u"w %1, b %2; %3"_s.arg(watched.w()).arg(watched.b()).arg(job.taskLog(1).right(600))), 120000);
        QVERIFY(!job.isOver());
        QCOMPARE(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).size(), 4);

        // Stop: scancel, and the job ends with every task gone.
        job.cancel();
        QVERIFY2(ended.wait(60000), qPrintable(m_slurm->logs()));
        QCOMPARE(QString::fromStdString(job.status().state), u"CANCELLED"_s);
        QVERIFY2(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).isEmpty(),
                 qPrintable(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).join(u'\n')));
        QTRY_VERIFY_WITH_TIMEOUT(m_slurm->idle(), 20000);
        for (int i = 0; i < 4; ++i)
            QVERIFY(isPortFree(m_slurm->nodeName().toStdString(), uint16_t(portBase + i)));
        // The tasks were told to stop, and said so.
        QVERIFY2(job.taskLog(0).contains(u"SIGTERM"_s) || job.taskLog(0).contains(u"stopp"_s),
                 qPrintable(job.taskLog(0).right(600)));
    }

    void headlessRunSubmitsFollowsAndExports()
    {
        const uint16_t portBase = freePortBase(3);
        QVERIFY(portBase != 0);
        const QString exportDir = m_shared.filePath(u"headless-export"_s);
        QProcess app;
        app.setProcessChannelMode(QProcess::MergedChannels);
        app.start(QStringLiteral(PARASYNC_APP),
                  {u"--headless"_s, u"--slurm"_s, u"--demo"_s, u"--last_step=600"_s, u"--compute_ms=5"_s,
                   u"--straggler_ms=0"_s, u"--slurm_node="_s + nodeBinary(), u"--slurm_port_base=%1"_s.arg(portBase),
                   u"--slurm_time=5:00"_s, u"--export="_s + exportDir});
        QVERIFY(app.waitForFinished(180000));
        const QString output = QString::fromLocal8Bit(app.readAll());
        QVERIFY2(app.exitStatus() == QProcess::NormalExit && app.exitCode() == 0, qPrintable(output));
        for (const QString &said : {u"partition: ok -- debug is UP"_s, u"parasync-node: ok"_s, u"Submitted Slurm job"_s,
                                    QString(u"RUNNING on "_s + m_slurm->nodeName()),
                                    u"ps:0 runs at %1:%2"_s.arg(m_slurm->nodeName()).arg(portBase), u"worker:1 | "_s,
                                    u"COMPLETED"_s, u"ps:0 reports the cluster finished"_s})
            QVERIFY2(output.contains(said), qPrintable(u"no '%1' in:\n%2"_s.arg(said, output)));
        QVERIFY(QFile::exists(exportDir + u"/loss.png"_s));
        QVERIFY(QFile::exists(exportDir + u"/slurm/parasync.sbatch"_s));
    }

    void savedScriptRunsWhenSubmittedByHand()
    {
        const uint16_t portBase = freePortBase(3);
        QVERIFY(portBase != 0);
        const QString dir = m_shared.filePath(u"by-hand"_s);
        const QString script = dir + u"/parasync-demo.sbatch"_s;
        QProcess app;
        app.setProcessChannelMode(QProcess::MergedChannels);
        app.start(QStringLiteral(PARASYNC_APP),
                  {u"--headless"_s, u"--slurm"_s, u"--demo"_s, u"--last_step=300"_s, u"--compute_ms=0"_s,
                   u"--slurm_node="_s + nodeBinary(), u"--slurm_port_base=%1"_s.arg(portBase), u"--slurm_dir="_s + dir,
                   u"--slurm_script="_s + script});
        QVERIFY(app.waitForFinished(30000));
        QVERIFY2(app.exitCode() == 0, app.readAll().constData());
        QVERIFY(QFile::exists(script));

        // Without a token the job says what to do and starts no task.
        const auto submit = [&](const QByteArray &token) {
            QProcess sbatch;
            QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
            environment.remove(u"PARASYNC_CLUSTER_TOKEN"_s);
            if (!token.isEmpty())
                environment.insert(u"PARASYNC_CLUSTER_TOKEN"_s, QString::fromLatin1(token));
            sbatch.setProcessEnvironment(environment);
            sbatch.start(u"sbatch"_s, {u"--parsable"_s, script});
            sbatch.waitForFinished(30000);
            const QString jobId = QString::fromLatin1(sbatch.readAllStandardOutput()).trimmed().section(u';', 0, 0);
            QString state;
            for (int i = 0; i < 600; ++i) {
                state = m_slurm
                            ->run(u"squeue"_s,
                                  {u"--noheader"_s, u"--states=all"_s, u"--jobs="_s + jobId, u"--format=%T"_s})
                            .trimmed();
                if (state == u"COMPLETED"_s || state == u"FAILED"_s || state == u"CANCELLED"_s)
                    break;
                QTest::qWait(200);
            }
            QFile out(dir + u"/parasync-"_s + jobId + u".out"_s);
            out.open(QIODevice::ReadOnly);
            return std::make_pair(state, QString::fromLocal8Bit(out.readAll()));
        };
        const auto [refused, refusal] = submit({});
        QCOMPARE(refused, u"FAILED"_s);
        QVERIFY2(refusal.contains(u"no cluster token"_s), qPrintable(refusal));
        const auto [state, jobOutput] = submit(QByteArray::fromStdString(generateClusterToken()));
        QVERIFY2(state == u"COMPLETED"_s, qPrintable(state + u"\n"_s + jobOutput));
        QFile chief(dir + u"/"_s
                    + QString::fromStdString(
                        slurmTaskOutputName(jobOutput.section(u"job "_s, 1).section(u' ', 0, 0).toStdString(), 1)));
        QVERIFY2(chief.open(QIODevice::ReadOnly), qPrintable(chief.fileName()));
        QVERIFY(chief.readAll().contains("worker:0 state finished"));
    }
};

QTEST_GUILESS_MAIN(TestSlurm)
#include "tst_slurm.moc"
