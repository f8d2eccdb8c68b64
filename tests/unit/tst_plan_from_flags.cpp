// What the app makes of the cluster flags on its command line: the demo (at
// its pace, worker:1 a straggler) or a cluster file, with --ps_hosts,
// --worker_hosts and training flags that apply to every task, each checked
// by parasync-node's own parser and refused by name.
#include "config/plan_from_flags.h"

#include "config/cluster_file.h"
#include "config/cluster_plan_file.h"
#include "config/cluster_spec.h"
#include "config/update_modes.h"
#include "config/workloads.h"
#include "support/input_error_checks.h"

#include <QTemporaryDir>
#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace Qt::StringLiterals;

class TestPlanFromFlags : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        // The demo's own ports, whatever the caller's environment says.
        qunsetenv("PARASYNC_DEMO_PORTS");
    }

    void noFlagsIsTheDemoAsTheAppRunsIt()
    {
        const ClusterPlan plan = planFromFlags({});
        QCOMPARE(plan.cluster, ClusterPlan::demo().cluster);
        QCOMPARE(plan.training.lastStep, int64_t(0)); // trains until stopped
        QCOMPARE(plan.training.pace.computeMs, 40);
        QCOMPARE(plan.paceOf(0).stragglerMs, 0);
        QCOMPARE(plan.paceOf(1).stragglerMs, 40);
        QCOMPARE(plan.training.learningRate, demoPlanFromEnvironment().training.learningRate);
    }

    void trainingFlagsApplyToEveryTaskTheWorkersOwnIncluded()
    {
        PlanFlags flags;
        flags.training = {{"mode", "ssp"},       {"staleness", "3"},  {"last_step", "500"},
                          {"straggler_ms", "0"}, {"compute_ms", "5"}, {"learning_rate", "0.05"}};
        const ClusterPlan plan = planFromFlags(flags);
        QCOMPARE(plan.training.mode.mode(), proto::SSP);
        QCOMPARE(plan.training.mode.staleness(), 3);
        QCOMPARE(plan.training.lastStep, int64_t(500));
        QCOMPARE(plan.training.learningRate, 0.05f);
        // The demo slows worker:1 down; --straggler_ms=0 is for it too.
        for (int worker : {0, 1}) {
            QCOMPARE(plan.paceOf(worker).computeMs, 5);
            QCOMPARE(plan.paceOf(worker).stragglerMs, 0);
        }
        // What no flag names keeps the demo's value: its jitter.
        QCOMPARE(plan.paceOf(1).computeJitter, 0.5f);
    }

    void hostFlagsReplaceTheClusterAndKeepTheRest()
    {
        PlanFlags flags;
        flags.psHosts = "127.0.0.1:5000";
        flags.workerHosts = "127.0.0.1:5001,127.0.0.1:5002,127.0.0.1:5003";
        const ClusterPlan plan = planFromFlags(flags);
        QCOMPARE(plan.cluster.ps, parseHostList("127.0.0.1:5000", "--ps_hosts"));
        QCOMPARE(plan.cluster.numWorkers(), 3);
        QCOMPARE(plan.cluster.workers.at(2).port, uint16_t(5003));
        QCOMPARE(plan.paceOf(1).stragglerMs, 40);
        QCOMPARE(plan.paceOf(2).stragglerMs, 0);
    }

    void aBackupFlagBacksTheDemosPs()
    {
        PlanFlags flags;
        flags.psBackupHosts = "127.0.0.1:2232";
        const ClusterPlan plan = planFromFlags(flags);
        QCOMPARE(plan.cluster.psBackups, parseHostList("127.0.0.1:2232", "--ps_backup_hosts"));
        QCOMPARE(plan.tasks().size(), size_t(4));
    }

    void aClusterFileIsTheBaseAndTheFlagsWinOverIt()
    {
        ClusterPlan designed = ClusterPlan::demo();
        designed.cluster.workers.push_back(parseHostPort("127.0.0.1:2225"));
        designed.training.mode.set_mode(proto::SYNC);
        designed.training.learningRate = 0.02f;
        designed.training.lastStep = 900;
        designed.workerPace[2] = designed.training.pace;
        designed.workerPace[2].stragglerMs = 60;
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("cluster.json")).toStdString();
        writeClusterFile(path, clusterFileFromPlan(designed));

        PlanFlags flags;
        flags.clusterFile = path;
        flags.training = {{"learning_rate", "0.1"}};
        const ClusterPlan plan = planFromFlags(flags);
        QCOMPARE(plan.cluster, designed.cluster);
        QCOMPARE(plan.training.mode.mode(), proto::SYNC);
        QCOMPARE(plan.training.lastStep, int64_t(900));
        QCOMPARE(plan.training.learningRate, 0.1f);
        QCOMPARE(plan.paceOf(2).stragglerMs, 60);
        // Not the demo's pace: the file's.
        QCOMPARE(plan.paceOf(1).stragglerMs, 0);
    }

    void aWorkerCommandGetsTheClusterAndConnectionFlagsOnly()
    {
        ClusterPlan designed = ClusterPlan::demo();
        designed.training.optimizer = "adam";
        designed.training.learningRate = 0.005f;
        designed.workerCommand = {"/usr/bin/python3", "train.py", "--batch_size=64"};
        designed.workerCommands[1] = {"./own_worker"};
        designed.connection.tlsCa = "/etc/ca.pem";
        designed.connection.tlsMutual = true;
        designed.connection.heartbeatMs = 500;
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("cluster.json")).toStdString();
        writeClusterFile(path, clusterFileFromPlan(designed));

        PlanFlags flags;
        flags.clusterFile = path;
        ClusterPlan plan = planFromFlags(flags);
        QCOMPARE(plan.commandOf(0), designed.workerCommand);
        QCOMPARE(plan.commandOf(1), std::vector<std::string>{"./own_worker"});
        QVERIFY(plan.hasWorkerCommands());
        plan.connection = designed.connection; // the app's flags, not the file's
        const QStringList worker = plan.commandArguments(TaskId{JobName::Worker, 1});
        QCOMPARE(worker, (QStringList{QStringLiteral("--ps_hosts=127.0.0.1:2222"),
                                      QStringLiteral("--worker_hosts=127.0.0.1:2223,127.0.0.1:2224"),
                                      QStringLiteral("--job_name=worker"), QStringLiteral("--task_index=1"),
                                      QStringLiteral("--tls_ca=/etc/ca.pem"), QStringLiteral("--heartbeat_ms=500")}));
        // The chief's command also gets the run directory: its checkpoints.
        plan.training.logdir = "/runs/mlp";
        plan.training.saveCheckpointSecs = 30;
        const QStringList chief = plan.commandArguments(TaskId{JobName::Worker, 0});
        QVERIFY2(chief.contains(QStringLiteral("--logdir=/runs/mlp"))
                     && chief.contains(QStringLiteral("--save_checkpoint_secs=30"))
                     && !chief.contains(QStringLiteral("--optimizer=adam")),
                 qPrintable(chief.join(u' ')));
        QVERIFY(!plan.commandArguments(TaskId{JobName::Worker, 1}).join(u' ').contains(QStringLiteral("--logdir")));
        // How variables are partitioned is part of the model's signature:
        // every worker's command gets it, or ps:0 would refuse a Python
        // worker that splits otherwise than the chief.
        plan.training.minSliceBytes = 1024;
        QVERIFY(plan.commandArguments(TaskId{JobName::Worker, 1}).contains(QStringLiteral("--min_slice_bytes=1024")));
        QVERIFY(plan.commandArguments(TaskId{JobName::Worker, 0}).contains(QStringLiteral("--min_slice_bytes=1024")));
        QVERIFY(!plan.commandArguments(TaskId{JobName::Ps, 0}).contains(QStringLiteral("--min_slice_bytes=1024")));
        // The ps tasks still get the training flags (and the serving rule).
        const QStringList ps = plan.arguments(TaskId{JobName::Ps, 0});
        QVERIFY2(ps.contains(QStringLiteral("--optimizer=adam")) && ps.contains(QStringLiteral("--tls_mutual")),
                 qPrintable(ps.join(u' ')));
    }

    // --workload=staleness: 16 workers on one softmax with momentum and held-out
    // data; the training flags given still win, and every task's command
    // line carries the workload (what parasync-node parses is the plan).
    void aWorkloadIsItsPlanWithTheFlagsOnTop()
    {
        PlanFlags flags;
        flags.workload = "staleness";
        flags.training = {{"learning_rate", "0.25"}};
        const ClusterPlan plan = planFromFlags(flags);
        QCOMPARE(plan.cluster.numWorkers(), 16);
        QCOMPARE(plan.cluster.numPs(), 1);
        QCOMPARE(plan.training.model, std::string("softmax"));
        QCOMPARE(plan.training.optimizer, std::string("momentum"));
        QVERIFY(plan.training.hasHeldOutData());
        QCOMPARE(plan.training.learningRate, 0.25f);
        QCOMPARE(plan.training.lastStep, int64_t(0));
        const QStringList worker = plan.arguments(TaskId{JobName::Worker, 15});
        for (const QString &expected : {QStringLiteral("--model=softmax"), QStringLiteral("--dataset=blobs:10:2"),
                                        QStringLiteral("--optimizer=momentum"), QStringLiteral("--eval_fraction=0.2"),
                                        QStringLiteral("--learning_rate=0.25")})
            QVERIFY2(worker.contains(expected), qPrintable(expected + u" not in "_s + worker.join(u' ')));
        // Its contenders and target are a valid comparison.
        const Workload named = workload("staleness");
        QVERIFY(parseModeSpecList(named.contenders).size() >= 4);
        QVERIFY(named.targetLoss > 0);
    }

    // Every named workload is a comparison the app can run: its contenders
    // parse, it has a target and a menu title, and --workload gives its plan.
    void everyWorkloadIsAComparisonTheAppCanRun()
    {
        QVERIFY(workloadNames().size() >= 2);
        for (const std::string &name : workloadNames()) {
            const Workload w = workload(name);
            QCOMPARE(w.name, name);
            QVERIFY(!w.title.empty() && !w.description.empty());
            QVERIFY(parseModeSpecList(w.contenders).size() >= 3);
            QVERIFY(w.targetLoss > 0);
            QVERIFY(w.plan.cluster.numWorkers() >= 8);
        }
        const Workload mlp = workload("mlp");
        QCOMPARE(mlp.plan.training.model, std::string("mlp"));
        QVERIFY(mlp.contenders.find(std::string("async") + kStalenessRuleSuffix) != std::string::npos);
    }

    void aWrongFlagIsRefusedByName_data()
    {
        QTest::addColumn<QString>("flag");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("mode") << QStringLiteral("mode") << QStringLiteral("bogus") << QStringLiteral("--mode");
        QTest::newRow("last step") << QStringLiteral("last_step") << QStringLiteral("soon")
                                   << QStringLiteral("--last_step");
        QTest::newRow("empty ps hosts") << QStringLiteral("ps_hosts") << QString() << QStringLiteral("--ps_hosts");
        QTest::newRow("worker hosts") << QStringLiteral("worker_hosts") << QStringLiteral("nohost")
                                      << QStringLiteral("--worker_hosts");
        QTest::newRow("two backups for one ps")
            << QStringLiteral("ps_backup_hosts") << QStringLiteral("127.0.0.1:2232,127.0.0.1:2233")
            << QStringLiteral("--ps_backup_hosts lists 2 backups for 1 ps task");
        QTest::newRow("backup on a worker's address")
            << QStringLiteral("ps_backup_hosts") << QStringLiteral("127.0.0.1:2223")
            << QStringLiteral("address 127.0.0.1:2223 is used twice");
        QTest::newRow("cluster file") << QStringLiteral("cluster_file") << QStringLiteral("/nonexistent/cluster.json")
                                      << QStringLiteral("/nonexistent/cluster.json");
        QTest::newRow("unknown workload") << QStringLiteral("workload") << QStringLiteral("bogus")
                                          << QStringLiteral("unknown workload 'bogus': the workloads are staleness");
        QTest::newRow("workload and cluster file") << QStringLiteral("workload_and_cluster_file")
                                                   << QStringLiteral("staleness") << QStringLiteral("give one of them");
    }

    void aWrongFlagIsRefusedByName()
    {
        QFETCH(QString, flag);
        QFETCH(QString, value);
        QFETCH(QString, mentions);
        PlanFlags flags;
        if (flag == QLatin1String("ps_hosts"))
            flags.psHosts = value.toStdString();
        else if (flag == QLatin1String("worker_hosts"))
            flags.workerHosts = value.toStdString();
        else if (flag == QLatin1String("ps_backup_hosts"))
            flags.psBackupHosts = value.toStdString();
        else if (flag == QLatin1String("cluster_file"))
            flags.clusterFile = value.toStdString();
        else if (flag == QLatin1String("workload"))
            flags.workload = value.toStdString();
        else if (flag == QLatin1String("workload_and_cluster_file")) {
            flags.workload = value.toStdString();
            flags.clusterFile = "/nonexistent/cluster.json";
        } else
            flags.training = {{flag.toStdString(), value.toStdString()}};
        verifyMentions(inputErrorOf([&flags] { planFromFlags(flags); }), {mentions});
    }
};

QTEST_GUILESS_MAIN(TestPlanFromFlags)
#include "tst_plan_from_flags.moc"
