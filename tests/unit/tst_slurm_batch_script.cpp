// The batch script a designed cluster becomes, and the readers of what
// sbatch, squeue, sacct and scontrol print, from Slurm 22.05's own output.
#include "slurm/slurm_batch_script.h"
#include "support/input_error_checks.h"

#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace Qt::StringLiterals;

namespace {

SlurmSettings settings()
{
    SlurmSettings s;
    s.partition = "gpu";
    s.outputDirectory = "/shared/alice/run1";
    s.portBase = 2222;
    s.expectedVersion = "parasync-node 0.1.0 (protocol 1)";
    return s;
}

ClusterPlan oneByThree()
{
    ClusterPlan plan = ClusterPlan::demo();
    plan.cluster.workers.push_back(HostPort{"127.0.0.1", 2225});
    plan.training.mode.set_mode(proto::SYNC);
    plan.training.lastStep = 5000;
    plan.training.logdir = "/shared/alice/run1/run";
    return plan;
}

} // namespace

class TestSlurmBatchScript : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void scriptAsksForOneTaskPerPsAndWorkerInOneStep()
    {
        const QString script = QString::fromStdString(slurmBatchScript(oneByThree(), settings()));
        for (const QString &line :
             {u"#SBATCH --ntasks=4"_s, u"#SBATCH --partition=gpu"_s, u"#SBATCH --time=01:00:00"_s,
              u"#SBATCH --output=/shared/alice/run1/parasync-%j.out"_s,
              u"exec srun --ntasks=4 --distribution=block --output=\"$out/parasync-%j-task%t.log\""_s,
              u"parasync-node --slurm --slurm_num_ps=1 --slurm_port_base=2222 --mode=sync --last_step=5000 "
              "--logdir=/shared/alice/run1/run"_s,
              u"expected='parasync-node 0.1.0 (protocol 1)'"_s, u"PARASYNC_CLUSTER_TOKEN"_s})
            QVERIFY2(script.contains(line), qPrintable(u"no '%1' in:\n%2"_s.arg(line, script)));
        // Slurm's step gives the cluster and the task: none of them may be on the line.
        for (const QString &flag : {u"--ps_hosts"_s, u"--worker_hosts"_s, u"--job_name"_s, u"--task_index"_s})
            QVERIFY2(!script.contains(flag), qPrintable(flag));
        QVERIFY(!script.contains(u"--multi-prog"_s));
        QVERIFY(!script.contains(u"#SBATCH --nodes"_s));
        QVERIFY(script.startsWith(u"#!/bin/bash\n"_s));
    }

    void aWorkerWithItsOwnPaceGetsItsOwnCommandLine()
    {
        ClusterPlan plan = oneByThree();
        plan.workerPace[1].stragglerMs = 40;
        const QString script = QString::fromStdString(slurmBatchScript(plan, settings()));
        QVERIFY2(script.contains(u"--multi-prog \"$tasks\""_s), qPrintable(script));
        // Rank 2 is worker:1 (rank 0 is ps:0): only its line has the straggler.
        const QStringList lines = script.split(u'\n');
        QCOMPARE(lines.filter(u"--straggler_ms=40"_s).size(), 1);
        QVERIFY(lines.filter(u"--straggler_ms=40"_s).front().startsWith(u"2 parasync-node --slurm"_s));
    }

    void pathsWithSpacesAreQuoted()
    {
        SlurmSettings s = settings();
        s.node = "/opt/my tools/parasync-node";
        const QString script = QString::fromStdString(slurmBatchScript(oneByThree(), s));
        QVERIFY2(script.contains(u"node='/opt/my tools/parasync-node'"_s), qPrintable(script));
    }

    void badSettingsSayWhatToFix_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("expected");
        QTest::newRow("no output directory") << "dir"
                                             << ""
                                             << "no output directory";
        QTest::newRow("relative output directory") << "dir"
                                                   << "runs/1"
                                                   << "is relative";
        QTest::newRow("partition with a space") << "partition"
                                                << "big gpu"
                                                << "partition 'big gpu'";
        QTest::newRow("time limit") << "time"
                                    << "an hour"
                                    << "time limit 'an hour'";
        QTest::newRow("more nodes than tasks") << "nodes"
                                               << "9"
                                               << "uses 1 to 4 nodes";
        QTest::newRow("ports past the end") << "port"
                                            << "65534"
                                            << "within 1-65535";
    }
    void badSettingsSayWhatToFix()
    {
        QFETCH(QString, field);
        QFETCH(QString, value);
        QFETCH(QString, expected);
        SlurmSettings s = settings();
        if (field == u"dir"_s)
            s.outputDirectory = value.toStdString();
        else if (field == u"partition"_s)
            s.partition = value.toStdString();
        else if (field == u"time"_s)
            s.timeLimit = value.toStdString();
        else if (field == u"nodes"_s)
            s.nodes = value.toInt();
        else
            s.portBase = uint16_t(value.toInt());
        verifyMentions(inputErrorOf([&] { slurmBatchScript(oneByThree(), s); }), {expected});
    }

    void workersWithTheirOwnCommandAreRefused()
    {
        ClusterPlan plan = oneByThree();
        plan.workerCommands[2] = {"/usr/bin/python3", "train.py"};
        verifyMentions(inputErrorOf([&] { slurmBatchScript(plan, settings()); }),
                       {u"\"worker_command\""_s, u"runs parasync-node for every task"_s, u"remove"_s});
    }

    // Slurm ranks are ps tasks and workers; a backup would have none.
    void psBackupsAreRefusedWithWhatToDo()
    {
        ClusterPlan plan = oneByThree();
        plan.cluster.psBackups = {parseHostPort("127.0.0.1:2232")};
        verifyMentions(inputErrorOf([&] { slurmBatchScript(plan, settings()); }),
                       {u"\"ps_backup\""_s, u"does not start yet"_s, u"start the cluster from the app"_s});
    }

    void sbatchJobIdsAreRead()
    {
        QCOMPARE(parseSbatchJobId("4242\n").value_or(""), std::string("4242"));
        QCOMPARE(parseSbatchJobId("4242;cluster2\n").value_or(""), std::string("4242"));
        QVERIFY(!parseSbatchJobId("sbatch: error: invalid partition specified: gpu\n"));
    }

    void squeueAndSacctAreRead()
    {
        const SlurmJobStatus pending = parseSqueueOutput("17|PENDING||Resources\n", "17");
        QVERIFY(pending.known);
        QCOMPARE(pending.state, std::string("PENDING"));
        QCOMPARE(pending.reason, std::string("Resources"));
        const SlurmJobStatus running = parseSqueueOutput("17|RUNNING|node[01-02]|None\n", "17");
        QCOMPARE(running.nodeList, std::string("node[01-02]"));
        QVERIFY(!parseSqueueOutput("", "17").known);
        QVERIFY(!parseSqueueOutput("18|RUNNING|n1|None\n", "17").known);
        const SlurmJobStatus cancelled = parseSacctOutput("17|CANCELLED by 1000|node01|0:15\n", "17");
        QCOMPARE(cancelled.state, std::string("CANCELLED"));
        QCOMPARE(cancelled.exitCode, std::string("0:15"));
        QVERIFY(slurmJobIsOver(cancelled.state));
        QVERIFY(!slurmJobIsOver("COMPLETING"));
        QVERIFY(!slurmJobIsOver("RUNNING"));

        // What the person reads of each: why it waits, where it runs.
        QCOMPARE(describeSlurmJobStatus(pending), std::string("Slurm job 17: PENDING (Resources)"));
        QCOMPARE(describeSlurmJobStatus(running), std::string("Slurm job 17: RUNNING on node[01-02]"));
        QCOMPARE(describeSlurmJobStatus(cancelled), std::string("Slurm job 17: CANCELLED on node01"));
        QCOMPARE(describeSlurmJobStatus(parseSqueueOutput("17|PENDING||None\n", "17")),
                 std::string("Slurm job 17: PENDING"));
    }

    void partitionsAreReadAndTheJobFitsOrNot()
    {
        const std::string output
            = "PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=vm "
              "State=UP TotalCPUs=8 TotalNodes=1\n"
              "PartitionName=gpu Default=NO MaxNodes=2 MaxTime=1-00:00:00 Nodes=g[1-4] State=DRAIN TotalCPUs=64 "
              "TotalNodes=4\n";
        const auto partitions = parseScontrolPartitions(output);
        QCOMPARE(partitions.size(), size_t(2));
        QVERIFY(partitions[0].isDefault);
        QCOMPARE(partitions[0].totalCpus, 8);
        QCOMPARE(partitions[1].maxNodes, 2);
        QCOMPARE(partitions[1].nodes, std::string("g[1-4]"));
        QVERIFY(!slurmJobDoesNotFit(oneByThree(), settings(), partitions[0]));
        QVERIFY(slurmJobDoesNotFit(oneByThree(), settings(), partitions[1])->find("DRAIN") != std::string::npos);
        ClusterPlan big = oneByThree();
        for (int i = 0; i < 6; ++i)
            big.cluster.workers.push_back(HostPort{"127.0.0.1", uint16_t(3000 + i)});
        QVERIFY(slurmJobDoesNotFit(big, settings(), partitions[0])->find("need a CPU each") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestSlurmBatchScript)
#include "tst_slurm_batch_script.moc"
