// The Kubeflow TFJob manifest of a designed cluster: read back with yaml-cpp
// it has the replicas, roles and args of the design, and the pods it
// describes train when started the way the training operator starts them,
// with its TF_CONFIG and nothing else.
#include "base/error.h"
#include "base/port_holder.h"
#include "kubeflow/tfjob_manifest.h"
#include "support/cluster_harness.h"
#include "wire/cluster_token.h"

#include <QTest>

#include <yaml-cpp/yaml.h>

using namespace parasync;
using namespace parasync::testing;

namespace {

ClusterPlan plan(int numPs, int numWorkers)
{
    ClusterPlan result;
    for (int i = 0; i < numPs; ++i)
        result.cluster.ps.push_back(parseHostPort("127.0.0.1:" + std::to_string(3000 + i)));
    for (int i = 0; i < numWorkers; ++i)
        result.cluster.workers.push_back(parseHostPort("127.0.0.1:" + std::to_string(4000 + i)));
    return result;
}

TfJobSettings settingsFor(const ClusterPlan &plan)
{
    TfJobSettings settings;
    settings.name = "linear-demo";
    settings.image = "registry.example.com/parasync:0.1.0";
    settings.args = tfJobArguments(plan);
    return settings;
}

std::vector<std::string> strings(const YAML::Node &sequence)
{
    std::vector<std::string> result;
    for (const YAML::Node &item : sequence)
        result.push_back(item.as<std::string>());
    return result;
}

QString joined(const std::vector<std::string> &items)
{
    QStringList list;
    for (const std::string &item : items)
        list << QString::fromStdString(item);
    return list.join(QLatin1Char(' '));
}

} // namespace

class TestTfJobManifest : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void replicaSpecsFollowTheDesign_data()
    {
        QTest::addColumn<int>("numPs");
        QTest::addColumn<int>("numWorkers");
        QTest::addColumn<bool>("chief");
        QTest::addColumn<int>("expectedWorkerReplicas"); // 0: no Worker spec
        QTest::newRow("the demo: 1 ps, 2 workers") << 1 << 2 << false << 2;
        QTest::newRow("2 ps, 4 workers, worker:0 as Chief") << 2 << 4 << true << 3;
        QTest::newRow("a lone chief") << 1 << 1 << true << 0;
    }

    void replicaSpecsFollowTheDesign()
    {
        QFETCH(int, numPs);
        QFETCH(int, numWorkers);
        QFETCH(bool, chief);
        QFETCH(int, expectedWorkerReplicas);
        const ClusterPlan design = plan(numPs, numWorkers);
        TfJobSettings settings = settingsFor(design);
        settings.chiefReplica = chief;
        settings.restartPolicy = "Never";

        const YAML::Node job = YAML::Load(tfJobManifest(design, settings));
        QCOMPARE(job["apiVersion"].as<std::string>(), std::string("kubeflow.org/v1"));
        QCOMPARE(job["kind"].as<std::string>(), std::string("TFJob"));
        QCOMPARE(job["metadata"]["name"].as<std::string>(), std::string("linear-demo"));
        QVERIFY(!job["metadata"]["namespace"]);
        const YAML::Node specs = job["spec"]["tfReplicaSpecs"];
        QVERIFY(specs.IsMap());
        QCOMPARE(specs["PS"]["replicas"].as<int>(), numPs);
        QCOMPARE(bool(specs["Chief"]), chief);
        if (chief)
            QCOMPARE(specs["Chief"]["replicas"].as<int>(), 1);
        QCOMPARE(bool(specs["Worker"]), expectedWorkerReplicas > 0);
        if (expectedWorkerReplicas > 0)
            QCOMPARE(specs["Worker"]["replicas"].as<int>(), expectedWorkerReplicas);
        QCOMPARE(int(specs.size()), 1 + (chief ? 1 : 0) + (expectedWorkerReplicas > 0 ? 1 : 0));

        // Every replica runs the same container: parasync-node, the design's
        // training flags, no cluster or task flags (TF_CONFIG brings those).
        std::vector<std::string> expectedArgs = settings.args;
        expectedArgs.push_back("--insecure"); // no token Secret given
        for (const auto &entry : specs) {
            const std::string role = entry.first.as<std::string>();
            const YAML::Node replica = entry.second;
            QCOMPARE(replica["restartPolicy"].as<std::string>(), std::string("Never"));
            const YAML::Node containers = replica["template"]["spec"]["containers"];
            QCOMPARE(int(containers.size()), 1);
            const YAML::Node container = containers[0];
            QCOMPARE(container["name"].as<std::string>(), std::string("tensorflow"));
            QCOMPARE(container["image"].as<std::string>(), settings.image);
            QCOMPARE(strings(container["command"]), std::vector<std::string>{"parasync-node"});
            QCOMPARE(joined(strings(container["args"])), joined(expectedArgs));
            QCOMPARE(container["ports"][0]["name"].as<std::string>(), std::string("tfjob-port"));
            QCOMPARE(container["ports"][0]["containerPort"].as<int>(), 2222);
            QVERIFY2(!container["env"], role.c_str());
        }
    }

    void argsCarryTheTrainingFlagsButNotTheCluster()
    {
        ClusterPlan design = plan(1, 3);
        design.training.mode.set_mode(proto::SYNC);
        design.training.mode.set_replicas_to_aggregate(2);
        design.training.optimizer = "adagrad";
        design.training.learningRate = 0.02f;
        design.training.lastStep = 1234;
        const QString args = joined(tfJobArguments(design));
        for (const char *flag : {"--mode=sync", "--replicas_to_aggregate=2", "--optimizer=adagrad",
                                 "--learning_rate=0.02", "--last_step=1234"})
            QVERIFY2(args.contains(QLatin1String(flag)), qPrintable(args));
        for (const char *flag : {"--ps_hosts", "--worker_hosts", "--job_name", "--task_index"})
            QVERIFY2(!args.contains(QLatin1String(flag)), qPrintable(args));
    }

    void aTokenSecretBecomesTheTokenVariable()
    {
        const ClusterPlan design = plan(1, 2);
        TfJobSettings settings = settingsFor(design);
        settings.tokenSecret = "parasync-cluster-token";
        settings.kubernetesNamespace = "ml";
        const YAML::Node job = YAML::Load(tfJobManifest(design, settings));
        QCOMPARE(job["metadata"]["namespace"].as<std::string>(), std::string("ml"));
        const YAML::Node container = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0];
        QCOMPARE(container["env"][0]["name"].as<std::string>(), std::string("PARASYNC_CLUSTER_TOKEN"));
        const YAML::Node secret = container["env"][0]["valueFrom"]["secretKeyRef"];
        QCOMPARE(secret["name"].as<std::string>(), std::string("parasync-cluster-token"));
        QCOMPARE(secret["key"].as<std::string>(), std::string("token"));
        QVERIFY(!joined(strings(container["args"])).contains(QStringLiteral("--insecure")));
    }

    void awkwardValuesStayStrings()
    {
        // A namespace of digits would read as a number, ": " and " #" would
        // end a plain scalar: yaml-cpp and the quoting keep them strings.
        ClusterPlan design = plan(1, 2);
        design.training.logdir = "/runs/a: b #1";
        TfJobSettings settings = settingsFor(design);
        settings.kubernetesNamespace = "2024";
        settings.image = "registry.local:5000/parasync:0.1.0";
        const std::string manifest = tfJobManifest(design, settings);
        const YAML::Node job = YAML::Load(manifest);
        QCOMPARE(job["metadata"]["namespace"].as<std::string>(), std::string("2024"));
        QCOMPARE(job["metadata"]["namespace"].Tag(), std::string("!")); // quoted: a string to Kubernetes too
        const YAML::Node container = job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0];
        QCOMPARE(container["image"].as<std::string>(), settings.image);
        const auto args = strings(container["args"]);
        QVERIFY2(std::find(args.begin(), args.end(), "--logdir=/runs/a: b #1") != args.end(), manifest.c_str());
    }

    void badSettingsAreRefusedByName_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("mentioned");
        QTest::newRow("no image") << "image"
                                  << ""
                                  << "image is empty";
        QTest::newRow("upper-case name") << "name"
                                         << "Linear_Demo"
                                         << "not a DNS label";
        QTest::newRow("name too long") << "name" << QString(60, QLatin1Char('a')) << "at most 63";
        QTest::newRow("unknown restart policy") << "restartPolicy"
                                                << "Sometimes"
                                                << "Sometimes";
        QTest::newRow("a task flag in args") << "arg"
                                             << "--job_name=ps"
                                             << "--job_name=ps";
        QTest::newRow("a cluster flag in args") << "arg"
                                                << "--worker_hosts=a:1"
                                                << "--worker_hosts";
        QTest::newRow("a flag parasync-node refuses") << "arg"
                                                      << "--learning_rate=fast"
                                                      << "learning_rate";
        QTest::newRow("a stray word in args") << "arg"
                                              << "train"
                                              << "train";
        QTest::newRow("bad secret name") << "tokenSecret"
                                         << "My_Token"
                                         << "My_Token";
        QTest::newRow("bad namespace") << "namespace"
                                       << "ML"
                                       << "namespace";
        QTest::newRow("no command") << "command"
                                    << ""
                                    << "command is empty";
        QTest::newRow("ps backups") << "ps_backup"
                                    << "127.0.0.1:2232"
                                    << "which a TFJob has no replica type for";
        QTest::newRow("workers with a command of their own") << "worker_command"
                                                             << "/usr/bin/python3"
                                                             << "remove \"worker_command\" to export it";
    }

    void badSettingsAreRefusedByName()
    {
        QFETCH(QString, field);
        QFETCH(QString, value);
        QFETCH(QString, mentioned);
        ClusterPlan design = plan(1, 2);
        TfJobSettings settings = settingsFor(design);
        const std::string text = value.toStdString();
        if (field == QLatin1String("image"))
            settings.image = text;
        else if (field == QLatin1String("name"))
            settings.name = text;
        else if (field == QLatin1String("restartPolicy"))
            settings.restartPolicy = text;
        else if (field == QLatin1String("arg"))
            settings.args.push_back(text);
        else if (field == QLatin1String("tokenSecret"))
            settings.tokenSecret = text;
        else if (field == QLatin1String("namespace"))
            settings.kubernetesNamespace = text;
        else if (field == QLatin1String("command"))
            settings.command.clear();
        else if (field == QLatin1String("worker_command"))
            design.workerCommand = {text, "train.py"};
        else if (field == QLatin1String("ps_backup"))
            design.cluster.psBackups = {parseHostPort(text)};
        try {
            tfJobManifest(design, settings);
            QFAIL("the manifest was written");
        } catch (const InputError &error) {
            QVERIFY2(QString::fromStdString(error.what()).contains(mentioned), error.what());
        }
    }

    // The pods as the training operator starts them: each its own address
    // (here 127.0.0.2-4 stand for the pods' IPs), all on the same port, the
    // manifest's command and args, the token from the Secret, and the
    // TF_CONFIG the operator writes. They train to the last step and exit 0.
    void podsStartedAsTfJobStartsThemTrain()
    {
        ClusterPlan design = plan(1, 2);
        design.training.lastStep = 200;
        TfJobSettings settings = settingsFor(design);
        settings.chiefReplica = true;
        settings.tokenSecret = "parasync-cluster-token";
        const YAML::Node specs = YAML::Load(tfJobManifest(design, settings))["spec"]["tfReplicaSpecs"];

        const QStringList pods{QStringLiteral("127.0.0.2"), QStringLiteral("127.0.0.3"), QStringLiteral("127.0.0.4")};
        uint16_t port = 0;
        for (int attempt = 0; attempt < 50 && port == 0; ++attempt) {
            const uint16_t candidate = pickFreePort(pods[0].toStdString());
            if (isPortFree(pods[1].toStdString(), candidate) && isPortFree(pods[2].toStdString(), candidate))
                port = candidate;
        }
        QVERIFY2(port != 0, "no port free on 127.0.0.2-4");
        const auto host = [&](int pod) { return QStringLiteral("\"%1:%2\"").arg(pods[pod]).arg(port); };
        // Written as the operator's Go code marshals it: sorted keys, lower-case job names.
        const QString cluster
            = QStringLiteral("{\"chief\":[%1],\"ps\":[%2],\"worker\":[%3]}").arg(host(1), host(0), host(2));
        const auto tfConfig = [&](const char *type) {
            return QStringLiteral("{\"cluster\":%1,\"task\":{\"type\":\"%2\",\"index\":0},\"environment\":\"cloud\"}")
                .arg(cluster, QLatin1String(type));
        };

        const QString token = QString::fromStdString(generateClusterToken());
        std::vector<std::unique_ptr<NodeProcess>> running;
        for (const auto &[role, type] : {std::pair{"PS", "ps"}, {"Chief", "chief"}, {"Worker", "worker"}}) {
            const YAML::Node container = specs[role]["template"]["spec"]["containers"][0];
            QCOMPARE(strings(container["command"]), std::vector<std::string>{"parasync-node"});
            QStringList args;
            for (const std::string &arg : strings(container["args"]))
                args << QString::fromStdString(arg);
            QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
            environment.insert(QStringLiteral("TF_CONFIG"), tfConfig(type));
            QCOMPARE(container["env"][0]["name"].as<std::string>(), std::string("PARASYNC_CLUSTER_TOKEN"));
            environment.insert(QStringLiteral("PARASYNC_CLUSTER_TOKEN"), token);
            running.push_back(std::make_unique<NodeProcess>(QString::fromLatin1(role), args));
            running.back()->start(environment);
        }
        for (auto &pod : running) {
            const int code = pod->waitForExit(std::chrono::seconds(120));
            QVERIFY2(code == 0, qPrintable(pod->name() + QStringLiteral(" exited %1:\n").arg(code) + pod->output()));
        }
        // Each pod served its own address; the Chief pod is the chief
        // (worker:0), the Worker pod worker:1; training reached the last step.
        const auto expect = [&](int pod, const QString &text) {
            QVERIFY2(running[size_t(pod)]->output().contains(text), qPrintable(running[size_t(pod)]->output()));
        };
        expect(0, QStringLiteral("ps:0 listening on 127.0.0.2:%1").arg(port));
        expect(1, QStringLiteral("worker:0 (chief) listening on 127.0.0.3:%1").arg(port));
        expect(2, QStringLiteral("worker:1 listening on 127.0.0.4:%1").arg(port));
        expect(2, QStringLiteral("reached --last_step=200"));
    }
};

QTEST_GUILESS_MAIN(TestTfJobManifest)
#include "tst_tfjob_manifest.moc"
