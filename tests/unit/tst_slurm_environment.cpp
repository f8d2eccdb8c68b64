// A task's cluster from a Slurm job step's environment, as TensorFlow's
// SlurmClusterResolver builds it: the hostlist and tasks-per-node syntaxes,
// ranks to ps and worker tasks, ports from the base, and what a task says
// when the environment cannot describe a cluster.
#include "config/node_options.h"
#include "config/slurm_environment.h"
#include "support/input_error_checks.h"
#include "support/node_arguments.h"

#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace Qt::StringLiterals;

namespace {

QString joined(const std::vector<std::string> &names)
{
    QStringList list;
    for (const std::string &name : names)
        list << QString::fromStdString(name);
    return list.join(u' ');
}

QString joined(const std::vector<HostPort> &addresses)
{
    QStringList list;
    for (const HostPort &address : addresses)
        list << QString::fromStdString(address.toString());
    return list.join(u' ');
}

// The step of `srun --ntasks=4` on node[01-02] with two tasks each, seen by rank `rank`.
SlurmVariables fourTaskStep(int rank)
{
    return {{"SLURM_PROCID", std::to_string(rank)},
            {"SLURM_LOCALID", std::to_string(rank % 2)},
            {"SLURMD_NODENAME", rank < 2 ? "node01" : "node02"},
            {"SLURM_STEP_NODELIST", "node[01-02]"},
            {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
            {"SLURM_STEP_NUM_TASKS", "4"},
            {"SLURM_NTASKS", "4"},
            {"SLURM_JOB_NODELIST", "node[01-02]"},
            {"SLURM_TASKS_PER_NODE", "2(x2)"}};
}

} // namespace

class TestSlurmEnvironment : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void hostListsExpandAsSlurmWritesThem_data()
    {
        QTest::addColumn<QString>("list");
        QTest::addColumn<QString>("hosts");
        QTest::newRow("one node") << "gpu5"
                                  << "gpu5";
        QTest::newRow("plain list") << "a,b,c"
                                    << "a b c";
        QTest::newRow("range keeps padding") << "node[08-11]"
                                             << "node08 node09 node10 node11";
        QTest::newRow("ranges and singles") << "node[01-03,07],gpu5"
                                            << "node01 node02 node03 node07 gpu5";
        QTest::newRow("no padding") << "n[9-10]"
                                    << "n9 n10";
        QTest::newRow("suffix after brackets") << "rack[1-2]-ib"
                                               << "rack1-ib rack2-ib";
        QTest::newRow("two bracket groups") << "r[1-2]n[01-02]"
                                            << "r1n01 r1n02 r2n01 r2n02";
        QTest::newRow("dotted names") << "c[1-2].cluster.example.org"
                                      << "c1.cluster.example.org c2.cluster.example.org";
        QTest::newRow("trailing newline") << "vm\n"
                                          << "vm";
    }
    void hostListsExpandAsSlurmWritesThem()
    {
        QFETCH(QString, list);
        QFETCH(QString, hosts);
        QCOMPARE(joined(expandSlurmHostList(list.toStdString(), "SLURM_STEP_NODELIST")), hosts);
    }

    void badHostListsSayWhatIsWrong_data()
    {
        QTest::addColumn<QString>("list");
        QTest::addColumn<QStringList>("words");
        QTest::newRow("empty") << "" << QStringList{u"SLURM_STEP_NODELIST is empty"_s};
        QTest::newRow("unclosed") << "node[01-03" << QStringList{u"'[' without its ']'"_s, u"node[01-03"_s};
        QTest::newRow("stray close") << "node01]" << QStringList{u"']' without its '['"_s};
        QTest::newRow("backwards") << "node[05-02]" << QStringList{u"'05-02' runs backwards"_s};
        QTest::newRow("letters in range") << "node[a-c]" << QStringList{u"not a number"_s, u"node[01-03,07]"_s};
        QTest::newRow("empty range") << "node[]" << QStringList{u"empty range"_s};
        QTest::newRow("empty name") << "a,,b" << QStringList{u"empty name between commas"_s};
        QTest::newRow("nested") << "n[1-[2]]" << QStringList{u"brackets inside brackets"_s};
        QTest::newRow("too many") << "n[0-99999999]" << QStringList{u"more than 65536 node names"_s};
        QTest::newRow("too many multiplied") << "a[0-999]b[0-999]" << QStringList{u"more than 65536"_s};
        QTest::newRow("colon") << "node1:22" << QStringList{u"':' cannot be part of a node name"_s};
    }
    void badHostListsSayWhatIsWrong()
    {
        QFETCH(QString, list);
        QFETCH(QStringList, words);
        verifyMentions(inputErrorOf([&] { expandSlurmHostList(list.toStdString(), "SLURM_STEP_NODELIST"); }), words);
    }

    void tasksPerNodeExpand_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("counts");
        QTest::newRow("one") << "4"
                             << "4";
        QTest::newRow("repeated") << "2(x3),1"
                                  << "2 2 2 1";
        QTest::newRow("mixed") << "1,3(x2)"
                               << "1 3 3";
    }
    void tasksPerNodeExpand()
    {
        QFETCH(QString, text);
        QFETCH(QString, counts);
        QStringList list;
        for (const int count : expandSlurmTasksPerNode(text.toStdString(), "SLURM_STEP_TASKS_PER_NODE"))
            list << QString::number(count);
        QCOMPARE(list.join(u' '), counts);
    }

    void badTasksPerNodeAreRefused_data()
    {
        QTest::addColumn<QString>("text");
        QTest::newRow("empty") << "";
        QTest::newRow("no number") << "x";
        QTest::newRow("unclosed repeat") << "2(x3";
        QTest::newRow("zero tasks") << "0";
        QTest::newRow("zero repeat") << "2(x0)";
        QTest::newRow("trailing comma") << "2,";
    }
    void badTasksPerNodeAreRefused()
    {
        QFETCH(QString, text);
        verifyMentions(inputErrorOf([&] { expandSlurmTasksPerNode(text.toStdString(), "SLURM_STEP_TASKS_PER_NODE"); }),
                       {u"SLURM_STEP_TASKS_PER_NODE"_s});
    }

    void ranksBecomePsThenWorkersWithPortsFromTheBase_data()
    {
        QTest::addColumn<int>("rank");
        QTest::addColumn<int>("numPs");
        QTest::addColumn<QString>("task");
        QTest::addColumn<QString>("ps");
        QTest::addColumn<QString>("workers");
        QTest::newRow("rank 0, one ps") << 0 << 1 << "ps:0"
                                        << "node01:8888"
                                        << "node01:8889 node02:8888 node02:8889";
        QTest::newRow("rank 1, one ps is the chief") << 1 << 1 << "worker:0"
                                                     << "node01:8888"
                                                     << "node01:8889 node02:8888 node02:8889";
        QTest::newRow("rank 3, one ps") << 3 << 1 << "worker:2"
                                        << "node01:8888"
                                        << "node01:8889 node02:8888 node02:8889";
        QTest::newRow("rank 1, two ps") << 1 << 2 << "ps:1"
                                        << "node01:8888 node01:8889"
                                        << "node02:8888 node02:8889";
        QTest::newRow("rank 2, two ps") << 2 << 2 << "worker:0"
                                        << "node01:8888 node01:8889"
                                        << "node02:8888 node02:8889";
    }
    void ranksBecomePsThenWorkersWithPortsFromTheBase()
    {
        QFETCH(int, rank);
        QFETCH(int, numPs);
        QFETCH(QString, task);
        QFETCH(QString, ps);
        QFETCH(QString, workers);
        const SlurmTask result = slurmTaskFromEnvironment(fourTaskStep(rank), SlurmLayout{numPs, 8888});
        QCOMPARE(QString::fromStdString(result.task.toString()), task);
        QCOMPARE(joined(result.cluster.ps), ps);
        QCOMPARE(joined(result.cluster.workers), workers);
        QCOMPARE(result.rank, rank);
    }

    void jobVariablesServeWhenStepOnesAreMissing()
    {
        // Inside an salloc shell's srun, older Slurm versions set only the job's.
        const SlurmVariables variables{{"SLURM_PROCID", "2"},
                                       {"SLURM_JOB_NODELIST", "gpu[1-3]"},
                                       {"SLURM_TASKS_PER_NODE", "1(x3)"},
                                       {"SLURM_NTASKS", "3"}};
        const SlurmTask result = slurmTaskFromEnvironment(variables, SlurmLayout{1, 2222});
        QCOMPARE(QString::fromStdString(result.task.toString()), u"worker:1"_s);
        QCOMPARE(joined(result.cluster.workers), u"gpu2:2222 gpu3:2222"_s);
    }

    void badStepsSayWhatToFix_data()
    {
        QTest::addColumn<int>("numPs");
        QTest::addColumn<QString>("variable");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QStringList>("words");
        QTest::newRow("too small for the ps") << 4 << ""
                                              << "" << QStringList{u"4 task(s)"_s, u"--ntasks=5"_s};
        QTest::newRow("more ps than tasks")
            << 7 << ""
            << "" << QStringList{u"more than all of them"_s, u"smaller --slurm_num_ps"_s};
        QTest::newRow("no node list") << 1 << "SLURM_STEP_NODELIST,SLURM_JOB_NODELIST"
                                      << ""
                                      << QStringList{u"SLURM_STEP_NODELIST or SLURM_JOB_NODELIST is not set"_s,
                                                     u"srun"_s};
        QTest::newRow("unparsable node list") << 1 << "SLURM_STEP_NODELIST"
                                              << "node[01-02" << QStringList{u"SLURM_STEP_NODELIST='node[01-02'"_s};
        QTest::newRow("tasks per node for other nodes") << 1 << "SLURM_STEP_TASKS_PER_NODE"
                                                        << "4" << QStringList{u"on 1 node(s)"_s, u"names 2"_s};
        QTest::newRow("tasks do not add up") << 1 << "SLURM_STEP_NUM_TASKS"
                                             << "5" << QStringList{u"adds up to 4 tasks"_s, u"with srun"_s};
        QTest::newRow("rank outside the step") << 1 << "SLURM_PROCID"
                                               << "9" << QStringList{u"(0-3)"_s};
        QTest::newRow("cyclic distribution") << 1 << "SLURM_LOCALID"
                                             << "0" << QStringList{u"--distribution=block"_s};
        QTest::newRow("rank not a number") << 1 << "SLURM_PROCID"
                                           << "one" << QStringList{u"not a task rank"_s};
    }
    void badStepsSayWhatToFix()
    {
        QFETCH(int, numPs);
        QFETCH(QString, variable);
        QFETCH(QString, value);
        QFETCH(QStringList, words);
        SlurmVariables variables = fourTaskStep(1);
        for (const QString &name : variable.split(u',', Qt::SkipEmptyParts)) {
            if (value.isEmpty())
                variables.erase(name.toStdString());
            else
                variables[name.toStdString()] = value.toStdString();
        }
        verifyMentions(inputErrorOf([&] { slurmTaskFromEnvironment(variables, SlurmLayout{numPs, 8888}); }), words);
    }

    void portsBeyondTheRangeAreRefused()
    {
        verifyMentions(inputErrorOf([] {
                           slurmTaskFromEnvironment(fourTaskStep(0), SlurmLayout{1, 65535});
                       }),
                       {u"beyond 65535"_s, u"lower --slurm_port_base"_s});
    }

    void theNodeTakesItsClusterFromTheStep()
    {
        // Implied: SLURM_PROCID is set and nothing else names the cluster.
        const NodeOptions implied = parseNodeOptions(nodeArguments({u"--last_step=50"_s}), "", fourTaskStep(2));
        QCOMPARE(QString::fromStdString(implied.task.toString()), u"worker:1"_s);
        QCOMPARE(joined(implied.cluster.ps), u"node01:8888"_s);
        QCOMPARE(implied.training.lastStep, int64_t(50));
        const NodeOptions laidOut = parseNodeOptions(
            nodeArguments({u"--slurm"_s, u"--slurm_num_ps=2"_s, u"--slurm_port_base=2222"_s}), "", fourTaskStep(1));
        QCOMPARE(QString::fromStdString(laidOut.task.toString()), u"ps:1"_s);
        QCOMPARE(joined(laidOut.cluster.workers), u"node02:2222 node02:2223"_s);
    }

    // srun gives each rank the same --metrics_port: the tasks of one node
    // take consecutive ports, as they take their own.
    void metricsPortsFollowTheLocalIndexUnderSlurm()
    {
        for (const int rank : {0, 1, 2, 3}) {
            const NodeOptions options
                = parseNodeOptions(nodeArguments({u"--slurm"_s, u"--slurm_port_base=2222"_s, u"--metrics_port=9100"_s}),
                                   "", fourTaskStep(rank));
            QCOMPARE(options.metricsPort, 9100 + rank % 2);
        }
        QCOMPARE(parseNodeOptions(nodeArguments({u"--metrics_port=9100"_s}), "", fourTaskStep(3)).metricsPort, 9101);
        verifyMentions(
            inputErrorOf([] {
                parseNodeOptions(nodeArguments({u"--slurm"_s, u"--metrics_port=65535"_s}), "", fourTaskStep(1));
            }),
            {u"--metrics_port=65535"_s, u"beyond 65535"_s});
    }

    void otherClusterSourcesWinUnlessSlurmIsAskedFor()
    {
        const QStringList demo{u"--ps_hosts=127.0.0.1:2222"_s, u"--worker_hosts=127.0.0.1:2223"_s,
                               u"--job_name=worker"_s};
        QCOMPARE(parseNodeOptions(nodeArguments(demo), "", fourTaskStep(3)).task.toString(), std::string("worker:0"));
        const std::string tfConfig
            = R"({"cluster": {"ps": ["a:1"], "worker": ["b:1"]}, "task": {"type": "ps", "index": 0}})";
        QCOMPARE(parseNodeOptions(nodeArguments({}), tfConfig, fourTaskStep(3)).task.toString(), std::string("ps:0"));
        QCOMPARE(parseNodeOptions(nodeArguments({u"--slurm"_s}), tfConfig, fourTaskStep(3)).task.toString(),
                 std::string("worker:2"));
    }

    void slurmFlagsOutsideSlurmSayWhatToDo_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<bool>("inStep");
        QTest::addColumn<QStringList>("words");
        QTest::newRow("--slurm outside a job")
            << QStringList{u"--slurm"_s} << false << QStringList{u"SLURM_PROCID is not set"_s, u"srun"_s};
        QTest::newRow("--slurm with --ps_hosts")
            << QStringList{u"--slurm"_s, u"--ps_hosts=a:1"_s, u"--worker_hosts=b:1"_s} << true
            << QStringList{u"--ps_hosts/--worker_hosts given with --slurm"_s};
        QTest::newRow("--slurm with --job_name") << QStringList{u"--slurm"_s, u"--job_name=ps"_s} << true
                                                 << QStringList{u"--job_name/--task_index given with --slurm"_s};
        QTest::newRow("--slurm_num_ps without Slurm")
            << QStringList{u"--ps_hosts=a:1"_s, u"--worker_hosts=b:1"_s, u"--job_name=ps"_s, u"--slurm_num_ps=2"_s}
            << false << QStringList{u"--slurm_num_ps only lays out"_s};
        QTest::newRow("zero ps") << QStringList{u"--slurm"_s, u"--slurm_num_ps=0"_s} << true
                                 << QStringList{u"--slurm_num_ps=0: must be at least 1"_s};
        QTest::newRow("bad port base") << QStringList{u"--slurm_port_base=70000"_s} << true
                                       << QStringList{u"--slurm_port_base=70000: must be at most 65535"_s};
        QTest::newRow("no cluster at all") << QStringList{} << false << QStringList{u"--slurm"_s};
    }
    void slurmFlagsOutsideSlurmSayWhatToDo()
    {
        QFETCH(QStringList, flags);
        QFETCH(bool, inStep);
        QFETCH(QStringList, words);
        verifyMentions(inputErrorOf([&] {
                           parseNodeOptions(nodeArguments(flags), "", inStep ? fourTaskStep(0) : SlurmVariables());
                       }),
                       words);
    }

    void ps0IsTheFirstNodeOnThePortBase()
    {
        QCOMPARE(QString::fromStdString(slurmPs0Address("node[03-04]", SlurmLayout{1, 2222}).toString()),
                 u"node03:2222"_s);
    }
};

QTEST_GUILESS_MAIN(TestSlurmEnvironment)
#include "tst_slurm_environment.moc"
