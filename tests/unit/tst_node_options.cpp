#include "base/error.h"
#include "config/cluster_file.h"
#include "config/node_options.h"
#include "support/input_error_checks.h"
#include "support/node_arguments.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <functional>

using namespace parasync;
using namespace parasync::testing;
using namespace Qt::StringLiterals;

namespace {

const QString kPs = QStringLiteral("--ps_hosts=127.0.0.1:2222");
const QString kWorkers = QStringLiteral("--worker_hosts=127.0.0.1:2223,127.0.0.1:2224");

// The demo cluster's command line for worker:1 plus `extra`.
QStringList demo(const QStringList &extra)
{
    return QStringList{kPs, kWorkers, QStringLiteral("--job_name=worker"), QStringLiteral("--task_index=1")} + extra;
}

const char kTfConfigCluster[]
    = R"("cluster": {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]})";

std::string writeFile(const QTemporaryDir &dir, const std::string &json)
{
    const QString path = dir.filePath(QStringLiteral("cluster.json"));
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly))
        qFatal("cannot write %s", qPrintable(path));
    file.write(json.data(), qint64(json.size()));
    return path.toStdString();
}

} // namespace

class TestNodeOptions : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void seedCommandsParse_data()
    {
        QTest::addColumn<QString>("command");
        QTest::addColumn<QString>("task");
        QTest::addColumn<QString>("secondWorker");
        const QString demoHosts
            = QStringLiteral("--ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224");
        QTest::newRow("demo ps") << demoHosts + u" --job_name=ps --task_index=0"_s << "ps:0"
                                 << "127.0.0.1:2224";
        QTest::newRow("demo chief") << demoHosts + u" --job_name=worker --task_index=0"_s << "worker:0"
                                    << "127.0.0.1:2224";
        QTest::newRow("demo worker 1") << demoHosts + u" --job_name=worker --task_index=1"_s << "worker:1"
                                       << "127.0.0.1:2224";
        const QString twoMachines = QStringLiteral(
            "--ps_hosts=192.168.139.130:2222 --worker_hosts=192.168.139.130:2224,192.168.139.128:2225");
        QTest::newRow("seed 001 ps") << twoMachines + u" --job_name=ps --task_index=0"_s << "ps:0"
                                     << "192.168.139.128:2225";
        QTest::newRow("seed 001 worker 1") << twoMachines + u" --job_name=worker --task_index=1"_s << "worker:1"
                                           << "192.168.139.128:2225";
        QTest::newRow("space-separated values")
            << QStringLiteral("--ps_hosts 127.0.0.1:2222 --worker_hosts 127.0.0.1:2223,127.0.0.1:2224 --job_name "
                              "worker --task_index 1")
            << "worker:1"
            << "127.0.0.1:2224";
        QTest::newRow("single dash, as TF's flags") << QStringLiteral(
            "-ps_hosts=127.0.0.1:2222 -worker_hosts=127.0.0.1:2223,127.0.0.1:2224 -job_name=ps -task_index=0")
                                                    << "ps:0"
                                                    << "127.0.0.1:2224";
    }
    void seedCommandsParse()
    {
        QFETCH(QString, command);
        QFETCH(QString, task);
        QFETCH(QString, secondWorker);
        const NodeOptions options = parseNodeOptions(nodeArguments(command.split(u' ')), {});
        QCOMPARE(QString::fromStdString(options.task.toString()), task);
        QCOMPARE(options.cluster.numPs(), 1);
        QCOMPARE(options.cluster.numWorkers(), 2);
        QCOMPARE(QString::fromStdString(options.cluster.workers[1].toString()), secondWorker);
        QVERIFY(!options.help);
        // Nothing else given: the defaults of the demo.
        QCOMPARE(options.training.mode.mode(), proto::ASYNC);
        QCOMPARE(options.training.mode.staleness(), 10);
        QCOMPARE(options.training.batchSize, 10);
    }

    void defaultsAreTheDemo()
    {
        const TrainingOptions t;
        QCOMPARE(t.mode.mode(), proto::ASYNC);
        QCOMPARE(t.mode.staleness(), 10);
        QCOMPARE(t.mode.replicas_to_aggregate(), 0);
        QCOMPARE(t.mode.total_num_replicas(), 0);
        QCOMPARE(t.model, std::string("linear"));
        QCOMPARE(t.optimizer, std::string("sgd"));
        QCOMPARE(t.learningRate, 0.05f);
        QCOMPARE(t.batchSize, 10);
        QCOMPARE(t.samplesPerShard, int64_t(100));
        QCOMPARE(t.lastStep, int64_t(2000));
        QCOMPARE(t.displayStep, int64_t(100));
        QCOMPARE(t.saveCheckpointSecs, 50);
        QCOMPARE(t.maxToKeep, 5);
        QCOMPARE(t.seed, uint64_t(1));
        // The engine runs at full speed unless asked; the app's demo asks.
        QCOMPARE(t.pace.computeMs, 0);
        QCOMPARE(t.pace.stragglerMs, 0);
    }

    void paceFlagsParseAndLastStepZeroTrainsUntilStopped()
    {
        const NodeOptions o = parseNodeOptions(nodeArguments(demo({u"--compute_ms=40"_s, u"--compute_jitter=0.5"_s,
                                                                   u"--straggler_ms=25"_s, u"--last_step=0"_s})),
                                               {});
        QCOMPARE(o.training.pace.computeMs, 40);
        QCOMPARE(o.training.pace.computeJitter, 0.5f);
        QCOMPARE(o.training.pace.stragglerMs, 25);
        QCOMPARE(o.training.lastStep, int64_t(0));
        // And they travel in cluster.json's training flags.
        const QString json = QString::fromStdString(o.training.toJson());
        QVERIFY2(json.contains(u"\"compute_ms\":40"_s) && json.contains(u"\"straggler_ms\":25"_s), qPrintable(json));
    }

    void everyTrainingFlagParses()
    {
        const NodeOptions o = parseNodeOptions(
            nodeArguments(
                demo({u"--mode=sync"_s, u"--staleness=3"_s, u"--replicas_to_aggregate=2"_s, u"--total_num_replicas=2"_s,
                      u"--model=softmax"_s, u"--dataset=blobs:3:4"_s, u"--samples_per_shard=50"_s,
                      u"--optimizer=adam"_s, u"--learning_rate=0.001"_s, u"--batch_size=32"_s, u"--last_step=500"_s,
                      u"--display_step=25"_s, u"--logdir=/tmp/run"_s, u"--save_checkpoint_secs=0"_s,
                      u"--max_to_keep=0"_s, u"--seed=18446744073709551615"_s})),
            {});
        const TrainingOptions &t = o.training;
        QCOMPARE(t.mode.mode(), proto::SYNC);
        QCOMPARE(t.mode.staleness(), 3);
        QCOMPARE(t.mode.replicas_to_aggregate(), 2);
        QCOMPARE(t.mode.total_num_replicas(), 2);
        QCOMPARE(t.model, std::string("softmax"));
        QCOMPARE(t.dataset, std::string("blobs:3:4"));
        QCOMPARE(t.samplesPerShard, int64_t(50));
        QCOMPARE(t.optimizer, std::string("adam"));
        QCOMPARE(t.learningRate, 0.001f);
        QCOMPARE(t.batchSize, 32);
        QCOMPARE(t.lastStep, int64_t(500));
        QCOMPARE(t.displayStep, int64_t(25));
        QCOMPARE(t.logdir, std::string("/tmp/run"));
        QCOMPARE(t.saveCheckpointSecs, 0);
        QCOMPARE(t.maxToKeep, 0);
        QCOMPARE(t.seed, uint64_t(18446744073709551615ULL));
    }

    void issyncSelectsTheMode_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<int>("mode");
        QTest::newRow("issync=1 is sync") << QStringList{u"--issync=1"_s} << int(proto::SYNC);
        QTest::newRow("issync=0 is async") << QStringList{u"--issync=0"_s} << int(proto::ASYNC);
        QTest::newRow("issync=0 with ssp") << QStringList{u"--issync=0"_s, u"--mode=ssp"_s} << int(proto::SSP);
        QTest::newRow("issync=1 with sync") << QStringList{u"--issync=1"_s, u"--mode=sync"_s} << int(proto::SYNC);
        QTest::newRow("mode ssp") << QStringList{u"--mode=ssp"_s} << int(proto::SSP);
    }
    void issyncSelectsTheMode()
    {
        QFETCH(QStringList, flags);
        QFETCH(int, mode);
        QCOMPARE(int(parseNodeOptions(nodeArguments(demo(flags)), {}).training.mode.mode()), mode);
    }

    void tfConfigGivesClusterAndTask()
    {
        const std::string tf = std::string("{") + kTfConfigCluster + R"(, "task": {"type": "worker", "index": 1}})";
        const NodeOptions o = parseNodeOptions(nodeArguments({}), tf);
        QCOMPARE(o.task.toString(), std::string("worker:1"));
        QCOMPARE(o.cluster.numWorkers(), 2);
    }

    void flagsOverrideTfConfigsTask()
    {
        const std::string tf = std::string("{") + kTfConfigCluster + R"(, "task": {"type": "worker", "index": 1}})";
        QCOMPARE(parseNodeOptions(nodeArguments({u"--job_name=ps"_s}), tf).task.toString(), std::string("ps:0"));
        QCOMPARE(parseNodeOptions(nodeArguments({u"--task_index=0"_s}), tf).task.toString(), std::string("worker:0"));
        // TF_CONFIG without "task" serves a task that names itself.
        const std::string clusterOnly = std::string("{") + kTfConfigCluster + "}";
        QCOMPARE(
            parseNodeOptions(nodeArguments({u"--job_name=worker"_s, u"--task_index=1"_s}), clusterOnly).task.toString(),
            std::string("worker:1"));
    }

    void hostFlagsOverrideTfConfigsCluster()
    {
        const std::string tf
            = R"({"cluster": {"ps": ["10.0.0.1:1"], "worker": ["10.0.0.2:1"]}, "task": {"type": "ps"}})";
        const NodeOptions o
            = parseNodeOptions(nodeArguments({kPs, kWorkers, u"--job_name=worker"_s, u"--task_index=1"_s}), tf);
        QCOMPARE(o.cluster.ps[0].toString(), std::string("127.0.0.1:2222"));
        QCOMPARE(o.cluster.numWorkers(), 2);
        // A broken TF_CONFIG does not matter when the command line says everything.
        QCOMPARE(parseNodeOptions(nodeArguments({kPs, kWorkers, u"--job_name=ps"_s}), "{broken").task.toString(),
                 std::string("ps:0"));
    }

    void clusterFileGivesClusterAndTraining()
    {
        QTemporaryDir dir;
        const std::string path = writeFile(
            dir, std::string("{") + kTfConfigCluster
                     + R"(, "training": {"mode": "ssp", "staleness": 4, "learning_rate": 0.01, "batch_size": 20}})");
        const NodeOptions o = parseNodeOptions(nodeArguments({QString::fromStdString("--cluster_file=" + path),
                                                              u"--job_name=worker"_s, u"--task_index=1"_s}),
                                               {});
        QCOMPARE(o.cluster.numWorkers(), 2);
        QCOMPARE(o.training.mode.mode(), proto::SSP);
        QCOMPARE(o.training.mode.staleness(), 4);
        QCOMPARE(o.training.learningRate, 0.01f);
        QCOMPARE(o.training.batchSize, 20);
    }

    void aPsTaskIgnoresTheWorkersCommand()
    {
        // The app starts Python workers from the same file; ps:0 reads it for
        // the cluster and training flags and leaves the command to the app.
        QTemporaryDir dir;
        const std::string path
            = writeFile(dir, std::string("{") + kTfConfigCluster
                                 + R"(, "worker_command": ["/usr/bin/python3", "train.py", "--batch_size=64"],
                          "per_worker": {"1": {"worker_command": ["./other"], "straggler_ms": 30}},
                          "training": {"optimizer": "adam"}})");
        const NodeOptions o = parseNodeOptions(
            nodeArguments({QString::fromStdString("--cluster_file=" + path), u"--job_name=ps"_s}), {});
        QCOMPARE(o.task.toString(), std::string("ps:0"));
        QCOMPARE(o.training.optimizer, std::string("adam"));
        QCOMPARE(o.training.batchSize, TrainingOptions().batchSize);
    }

    void commandLineBeatsClusterFile()
    {
        QTemporaryDir dir;
        const std::string path = writeFile(
            dir,
            R"({"cluster": {"ps": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2223", "10.0.0.3:2224", "10.0.0.4:2225"]},
                    "training": {"mode": "ssp", "learning_rate": 0.01, "batch_size": 20}})");
        const QString fileFlag = QString::fromStdString("--cluster_file=" + path);
        const NodeOptions o
            = parseNodeOptions(nodeArguments(demo({fileFlag, u"--learning_rate=0.2"_s, u"--issync=1"_s})), {});
        // --ps_hosts/--worker_hosts beat the file's cluster...
        QCOMPARE(o.cluster.numWorkers(), 2);
        QCOMPARE(o.cluster.ps[0].toString(), std::string("127.0.0.1:2222"));
        // ...the command line's training flags beat the file's, and --issync replaces the file's mode...
        QCOMPARE(o.training.learningRate, 0.2f);
        QCOMPARE(o.training.mode.mode(), proto::SYNC);
        // ...and what the command line does not say comes from the file.
        QCOMPARE(o.training.batchSize, 20);

        // The file's cluster beats TF_CONFIG's.
        const std::string tf
            = R"({"cluster": {"ps": ["10.9.9.9:1"], "worker": ["10.9.9.8:1"]}, "task": {"type": "ps"}})";
        const NodeOptions fromFile
            = parseNodeOptions(nodeArguments({fileFlag, u"--job_name=worker"_s, u"--task_index=2"_s}), tf);
        QCOMPARE(fromFile.cluster.numWorkers(), 3);
        QCOMPARE(fromFile.task.toString(), std::string("worker:2"));
    }

    void badValueInClusterFileNamesTheFile()
    {
        QTemporaryDir dir;
        const std::string path
            = writeFile(dir, std::string("{") + kTfConfigCluster + R"(, "training": {"batch_size": 0}})");
        const QString message = inputErrorOf([&] {
            parseNodeOptions(nodeArguments({QString::fromStdString("--cluster_file=" + path), u"--job_name=ps"_s}), {});
        });
        verifyMentions(message, {u"--batch_size=0"_s, u"must be at least 1"_s, QString::fromStdString(path)});
        // Given on the command line, the file's bad value is never looked at.
        QCOMPARE(parseNodeOptions(nodeArguments({QString::fromStdString("--cluster_file=" + path), u"--job_name=ps"_s,
                                                 u"--batch_size=5"_s}),
                                  {})
                     .training.batchSize,
                 5);
    }

    void trainingJsonReplaysThroughAClusterFile()
    {
        // What a run directory's cluster.json holds must give back the same flags.
        const NodeOptions original = parseNodeOptions(
            nodeArguments(demo({u"--mode=ssp"_s, u"--staleness=2"_s, u"--optimizer=adagrad"_s, u"--learning_rate=0.3"_s,
                                u"--logdir=runs/a b"_s, u"--seed=42"_s, u"--eval_fraction=0.25"_s})),
            {});
        const std::string json
            = R"({"cluster": )" + original.cluster.toJson() + R"(, "training": )" + original.training.toJson() + "}";
        QTemporaryDir dir;
        const std::string path = writeFile(dir, json);
        const NodeOptions replayed = parseNodeOptions(nodeArguments({QString::fromStdString("--cluster_file=" + path),
                                                                     u"--job_name=worker"_s, u"--task_index=1"_s}),
                                                      {});
        QCOMPARE(replayed.cluster, original.cluster);
        QCOMPARE(replayed.training.toJson(), original.training.toJson());
        QCOMPARE(replayed.training.learningRate, 0.3f);
        QCOMPARE(replayed.training.logdir, std::string("runs/a b"));
        QCOMPARE(replayed.training.evalFraction, 0.25);
    }

    void trainingJsonNamesEveryFlag()
    {
        const QJsonObject object
            = QJsonDocument::fromJson(QByteArray::fromStdString(TrainingOptions().toJson())).object();
        for (const std::string &name : trainingFlagNames()) {
            if (name != "issync") // a spelling of --mode, not a value of its own
                QVERIFY2(object.contains(QString::fromStdString(name)), name.c_str());
        }
        QCOMPARE(object.value(u"mode"_s).toString(), u"async"_s);
        QCOMPARE(object.value(u"learning_rate"_s).toDouble(), 0.05);
        QCOMPARE(object.value(u"batch_size"_s).toInt(), 10);
    }

    void helpListsEveryFlagWithItsDefaultAndTheDemo()
    {
        const QString help = QString::fromStdString(nodeHelpText());
        QVERIFY(help.startsWith(u"Usage: parasync-node"_s));
        for (const QString &job : {u"--job_name=ps --task_index=0"_s, u"--job_name=worker --task_index=0"_s,
                                   u"--job_name=worker --task_index=1"_s})
            QVERIFY(help.contains(
                u"parasync-node --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 "_s + job));
        for (const std::string &name : trainingFlagNames())
            QVERIFY2(help.contains(QString::fromStdString("--" + name + "=")), name.c_str());
        for (const QString &flag : {u"--ps_hosts="_s, u"--worker_hosts="_s, u"--job_name="_s, u"--task_index="_s,
                                    u"--cluster_file="_s, u"--help"_s, u"--version"_s, u"TF_CONFIG"_s})
            QVERIFY2(help.contains(flag), qPrintable(flag));
        QVERIFY(help.contains(u"(default: 0.05)"_s));
        QVERIFY(help.contains(u"(default: async)"_s));
        QVERIFY(help.contains(u"(default: 2000)"_s));
    }

    void helpNamesEveryModeOfTheTable()
    {
        // From config/update_modes' rows: a new mode's row is its help too. Words are compared, since the
        // help wraps its lines.
        const auto words = [](const std::string &text) { return QString::fromStdString(text).simplified(); };
        const QString help = words(nodeHelpText());
        std::string choices;
        for (const UpdateModeInfo &info : updateModes()) {
            choices += (choices.empty() ? "" : "|") + std::string(info.name);
            QVERIFY2(help.contains(words(info.name + std::string(": ") + info.meaning)), info.name);
        }
        QVERIFY(help.contains(QString::fromStdString("--mode=" + choices)));
        QVERIFY(help.contains(QString::fromStdString("--set_mode=" + choices)));
    }

    // TensorFlow's spellings of a boolean, for the flags that take 0|1 and
    // for the switches alike.
    void everyBooleanTakesTensorFlowsForms_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<bool>("dataLink");
        QTest::addColumn<bool>("chiefHandover");
        QTest::addColumn<bool>("insecure");
        QTest::newRow("defaults") << QStringList{} << true << false << false;
        QTest::newRow("--noname") << QStringList{u"--nodata_link"_s, u"--nochief_handover"_s, u"--noinsecure"_s}
                                  << false << false << false;
        QTest::newRow("--name, the last one counting")
            << QStringList{u"--nodata_link"_s, u"--data_link"_s, u"--chief_handover"_s, u"--insecure"_s} << true << true
            << true;
        QTest::newRow("=false") << QStringList{u"--data_link=false"_s, u"--chief_handover=false"_s,
                                               u"--insecure=false"_s}
                                << false << false << false;
        QTest::newRow("=true") << QStringList{u"--data_link=true"_s, u"--chief_handover=true"_s, u"--insecure=true"_s}
                               << true << true << true;
        QTest::newRow("=0 and =1, one dash")
            << QStringList{u"-data_link=0"_s, u"-chief_handover=0"_s, u"-insecure=1"_s} << false << false << true;
    }
    void everyBooleanTakesTensorFlowsForms()
    {
        QFETCH(QStringList, flags);
        const NodeOptions options = parseNodeOptions(nodeArguments(demo(flags)), {});
        QTEST(options.connection.dataLink, "dataLink");
        QTEST(options.training.chiefHandover, "chiefHandover");
        QTEST(options.insecure, "insecure");
    }

    void aBooleanOfAnotherWordIsRefusedWithItsForms()
    {
        for (const auto &[flag, expected] :
             {std::pair{u"--data_link=yes"_s, u"must be 1 or 0, or true or false"_s},
              std::pair{u"--insecure=yes"_s, u"--noinsecure"_s}, std::pair{u"--nomode"_s, u"Did you mean"_s}}) {
            try {
                parseNodeOptions(nodeArguments(demo({flag})), {});
                QFAIL(qPrintable(flag + u" was taken"_s));
            } catch (const InputError &e) {
                QVERIFY2(QString::fromStdString(e.what()).contains(expected), e.what());
            }
        }
    }

    void helpSaysTheBooleanFormsAndTheEnvironment()
    {
        const QString help = QString::fromStdString(nodeHelpText());
        QVERIFY(help.contains(u"--noNAME"_s));
        for (const char *variable : {"TF_CONFIG", "PARASYNC_CLUSTER_TOKEN", "SLURM_", "GRPC_VERBOSITY"})
            QVERIFY2(help.contains(QString::fromLatin1(variable)), variable);
    }

    void helpAndVersionNeedNoCluster()
    {
        QVERIFY(parseNodeOptions(nodeArguments({u"--help"_s}), {}).help);
        QVERIFY(parseNodeOptions(nodeArguments({u"-h"_s}), {}).help);
        QVERIFY(parseNodeOptions(nodeArguments({u"--version"_s}), {}).version);
    }

    void badInputsSayWhatToDo_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QString>("tfConfig");
        QTest::addColumn<QStringList>("words");
        QTest::newRow("unknown flag") << demo({u"--lerning_rate=0.1"_s}) << QString()
                                      << QStringList{u"lerning_rate"_s, u"--learning_rate"_s, u"--help"_s};
        QTest::newRow("unknown mode") << demo({u"--mode=fast"_s}) << QString()
                                      << QStringList{u"--mode=fast"_s, u"async, sync or ssp"_s};
        QTest::newRow("issync=2") << demo({u"--issync=2"_s}) << QString()
                                  << QStringList{u"--issync=2"_s, u"0 (async) or 1 (sync)"_s};
        QTest::newRow("issync=1 with ssp") << demo({u"--issync=1"_s, u"--mode=ssp"_s}) << QString()
                                           << QStringList{u"--issync=1"_s, u"--mode=ssp"_s, u"only one"_s};
        QTest::newRow("issync=0 with sync")
            << demo({u"--issync=0"_s, u"--mode=sync"_s}) << QString() << QStringList{u"--issync=0"_s, u"--mode=sync"_s};
        QTest::newRow("batch size 0") << demo({u"--batch_size=0"_s}) << QString()
                                      << QStringList{u"--batch_size=0: must be at least 1"_s};
        QTest::newRow("batch size text") << demo({u"--batch_size=ten"_s}) << QString()
                                         << QStringList{u"--batch_size=ten"_s, u"not a whole number"_s};
        QTest::newRow("batch size huge") << demo({u"--batch_size=99999999999"_s}) << QString()
                                         << QStringList{u"--batch_size=99999999999"_s, u"at most"_s};
        QTest::newRow("eval fraction 0") << demo({u"--eval_fraction=0"_s}) << QString()
                                         << QStringList{u"--eval_fraction=0: must be more than 0 and less than 1"_s};
        QTest::newRow("eval fraction 1.5") << demo({u"--eval_fraction=1.5"_s}) << QString()
                                           << QStringList{u"--eval_fraction=1.5: must be more than 0"_s, u"0.2"_s};
        QTest::newRow("eval fraction text") << demo({u"--eval_fraction=most"_s}) << QString()
                                            << QStringList{u"--eval_fraction=most"_s, u"not a number"_s};
        QTest::newRow("both held-out flags")
            << demo({u"--eval_fraction=0.2"_s, u"--eval_dataset=blobs"_s}) << QString()
            << QStringList{u"--eval_dataset=blobs"_s, u"--eval_fraction=0.2"_s, u"give only one of them"_s};
        QTest::newRow("negative staleness")
            << demo({u"--staleness=-1"_s}) << QString() << QStringList{u"--staleness=-1: must be at least 0"_s};
        QTest::newRow("zero learning rate")
            << demo({u"--learning_rate=0"_s}) << QString() << QStringList{u"--learning_rate=0"_s, u"greater than 0"_s};
        // Was accepted as > 0, became 0 as a float, and the task refused it at start.
        QTest::newRow("learning rate rounds to 0") << demo({u"--learning_rate=1e-50"_s}) << QString()
                                                   << QStringList{u"--learning_rate=1e-50"_s, u"rounds to 0"_s};
        QTest::newRow("learning rate text") << demo({u"--learning_rate=fast"_s}) << QString()
                                            << QStringList{u"--learning_rate=fast"_s, u"not a number"_s};
        QTest::newRow("negative compute time")
            << demo({u"--compute_ms=-5"_s}) << QString() << QStringList{u"--compute_ms=-5: must be at least 0"_s};
        QTest::newRow("compute time above a minute") << demo({u"--compute_ms=600000"_s}) << QString()
                                                     << QStringList{u"--compute_ms=600000: must be at most 60000"_s};
        QTest::newRow("jitter NaN") << demo({u"--compute_jitter=nan"_s}) << QString()
                                    << QStringList{u"--compute_jitter=nan"_s, u"must be from 0 to 4"_s};
        QTest::newRow("jitter text") << demo({u"--compute_jitter=lots"_s}) << QString()
                                     << QStringList{u"--compute_jitter=lots"_s, u"not a number"_s};
        QTest::newRow("negative straggler")
            << demo({u"--straggler_ms=-1"_s}) << QString() << QStringList{u"--straggler_ms=-1: must be at least 0"_s};
        QTest::newRow("straggler threshold 1")
            << demo({u"--straggler_threshold=1"_s}) << QString()
            << QStringList{u"--straggler_threshold=1"_s, u"give more than 1"_s, u"0 to turn flagging off"_s};
        QTest::newRow("straggler threshold NaN") << demo({u"--straggler_threshold=nan"_s}) << QString()
                                                 << QStringList{u"--straggler_threshold=nan"_s, u"must be from 0"_s};
        QTest::newRow("max workers below the list")
            << demo({u"--max_workers=1"_s}) << QString()
            << QStringList{u"--max_workers=1"_s, u"--worker_hosts lists 2 workers"_s, u"give at least 2"_s};
        QTest::newRow("max workers huge") << demo({u"--max_workers=100000"_s}) << QString()
                                          << QStringList{u"--max_workers=100000"_s, u"at most 4096"_s};
        QTest::newRow("negative last step")
            << demo({u"--last_step=-1"_s}) << QString() << QStringList{u"--last_step=-1: must be at least 0"_s};
        QTest::newRow("negative seed") << demo({u"--seed=-3"_s}) << QString()
                                       << QStringList{u"--seed=-3"_s, u"at least 0"_s};
        QTest::newRow("unknown optimizer")
            << demo({u"--optimizer=rmsprop"_s}) << QString()
            << QStringList{u"--optimizer=rmsprop"_s, u"sgd, momentum, adagrad, adam or ftrl"_s};
        QTest::newRow("replicas above total")
            << demo({u"--replicas_to_aggregate=2"_s, u"--total_num_replicas=1"_s}) << QString()
            << QStringList{u"--replicas_to_aggregate=2"_s, u"--total_num_replicas=1"_s};
        QTest::newRow("replicas above workers") << demo({u"--replicas_to_aggregate=3"_s}) << QString()
                                                << QStringList{u"--replicas_to_aggregate=3"_s, u"2 workers"_s};
        QTest::newRow("no cluster")
            << QStringList{u"--job_name=ps"_s} << QString()
            << QStringList{u"no cluster given: pass --ps_hosts and --worker_hosts, --cluster_file, set TF_CONFIG"_s,
                           u"run under srun in a Slurm job (--slurm)"_s,
                           u"the local demo cluster is --ps_hosts=127.0.0.1:2222 "
                           u"--worker_hosts=127.0.0.1:2223,127.0.0.1:2224"_s};
        QTest::newRow("no job name") << QStringList{kPs, kWorkers} << QString()
                                     << QStringList{u"--job_name is missing"_s};
        QTest::newRow("job chief") << QStringList{kPs, kWorkers, u"--job_name=chief"_s} << QString()
                                   << QStringList{u"worker:0"_s};
        QTest::newRow("task index out of range")
            << QStringList{kPs, kWorkers, u"--job_name=worker"_s, u"--task_index=2"_s} << QString()
            << QStringList{u"--task_index=2 but --worker_hosts lists 2 workers (valid: 0-1)"_s};
        QTest::newRow("negative task index") << QStringList{kPs, kWorkers, u"--job_name=worker"_s, u"--task_index=-1"_s}
                                             << QString() << QStringList{u"--task_index=-1"_s, u"at least 0"_s};
        QTest::newRow("empty worker list")
            << QStringList{kPs, u"--worker_hosts="_s, u"--job_name=ps"_s} << QString()
            << QStringList{
                   u"--worker_hosts is empty: give a comma-separated list like 127.0.0.1:2223,127.0.0.1:2224"_s};
        QTest::newRow("bad port") << QStringList{u"--ps_hosts=127.0.0.1:99999"_s, kWorkers, u"--job_name=ps"_s}
                                  << QString()
                                  << QStringList{
                                         u"port 99999 in '127.0.0.1:99999' (--ps_hosts) is out of range 1-65535"_s};
        QTest::newRow("ps hosts alone") << QStringList{kPs, u"--job_name=ps"_s} << QString()
                                        << QStringList{u"--ps_hosts given without --worker_hosts"_s};
        QTest::newRow("address used twice")
            << QStringList{kPs, u"--worker_hosts=127.0.0.1:2222"_s, u"--job_name=ps"_s} << QString()
            << QStringList{u"address 127.0.0.1:2222 is used twice: ps:0 and worker:0"_s};
        QTest::newRow("stray argument") << demo({u"train"_s}) << QString()
                                        << QStringList{u"unexpected argument 'train'"_s};
        QTest::newRow("missing cluster file")
            << QStringList{u"--cluster_file=/nonexistent/c.json"_s, u"--job_name=ps"_s} << QString()
            << QStringList{u"/nonexistent/c.json"_s};
        QTest::newRow("bad TF_CONFIG") << QStringList{} << u"{\"cluster\": "_s
                                       << QStringList{u"TF_CONFIG is not valid JSON"_s, u"offset"_s};
        QTest::newRow("TF_CONFIG without task")
            << QStringList{} << QString::fromLatin1(kTfConfigCluster).prepend(u'{').append(u'}')
            << QStringList{u"no \"task\""_s, u"--job_name"_s};
    }
    void badInputsSayWhatToDo()
    {
        QFETCH(QStringList, flags);
        QFETCH(QString, tfConfig);
        QFETCH(QStringList, words);
        verifyMentions(inputErrorOf([&] { parseNodeOptions(nodeArguments(flags), tfConfig.toStdString()); }), words);
    }

    void modeNamesAndDescriptions()
    {
        QCOMPARE(parseUpdateMode("ssp"), proto::SSP);
        QCOMPARE(parseUpdateMode("sync"), proto::SYNC);
        QCOMPARE(updateModeName(proto::ASYNC), std::string("async"));
        verifyMentions(inputErrorOf([] { parseUpdateMode("semi"); }), {u"'semi'"_s, u"async, sync or ssp"_s});

        proto::ModeConfig mode;
        mode.set_mode(proto::SYNC);
        mode.set_replicas_to_aggregate(2);
        mode.set_total_num_replicas(2);
        QCOMPARE(describeMode(mode), std::string("sync (replicas_to_aggregate=2, total_num_replicas=2)"));
        mode.set_mode(proto::SSP);
        mode.set_staleness(10);
        QCOMPARE(describeMode(mode), std::string("ssp (staleness=10)"));
        mode.set_mode(proto::ASYNC);
        QCOMPARE(describeMode(mode), std::string("async"));
    }
};

QTEST_GUILESS_MAIN(TestNodeOptions)
#include "tst_node_options.moc"
