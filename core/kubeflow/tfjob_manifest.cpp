#include "kubeflow/tfjob_manifest.h"
#include "base/version.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/node_options.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

namespace parasync {

namespace {

bool matches(const char *pattern, const std::string &text)
{
    return QRegularExpression(QString::fromLatin1(pattern)).match(qs(text)).hasMatch();
}

std::string lowered(std::string text)
{
    for (char &c : text)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

// The flags that name the cluster or the task: in a pod's args they would
// override TF_CONFIG and make every pod the same task of a cluster that is
// not the pods'.
const char *const kClusterFlags[] = {"ps_hosts", "worker_hosts", "job_name", "task_index", "cluster_file"};

std::string flagName(const std::string &arg)
{
    if (arg.rfind('-', 0) != 0)
        return {};
    const size_t start = arg.find_first_not_of('-');
    if (start == std::string::npos)
        return {};
    return arg.substr(start, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - start);
}

struct Replica
{
    TfJobReplica type;
    int replicas;
};

// PS, then Chief (when asked for), then Worker: the order people write them in.
std::vector<Replica> replicasOf(const TfJobSettings &settings, int numPs, int numWorkers)
{
    std::vector<Replica> result{{TfJobReplica::Ps, numPs}};
    const int chief = settings.chiefReplica ? 1 : 0;
    if (chief)
        result.push_back({TfJobReplica::Chief, 1});
    if (numWorkers - chief > 0)
        result.push_back({TfJobReplica::Worker, numWorkers - chief});
    return result;
}

void validateSettings(const TfJobSettings &settings, int numPs, int numWorkers)
{
    // Kubeflow names the pods' services "<name>-<type>-<index>", which must
    // be DNS-1035 labels: lower case, a letter first, at most 63 characters.
    if (settings.name.empty())
        throw InputError("the TFJob's name is empty: give one like \"parasync\"");
    if (!matches("^[a-z]([-a-z0-9]*[a-z0-9])?$", settings.name))
        throw InputError("the TFJob's name \"" + settings.name
                         + "\" is not a DNS label: use lower-case letters, digits and '-', starting with a letter "
                           "and not ending with '-'");
    std::string longest;
    for (const Replica &replica : replicasOf(settings, numPs, numWorkers)) {
        const std::string service = settings.name + "-" + lowered(tfJobReplicaName(replica.type)) + "-"
                                    + std::to_string(replica.replicas - 1);
        if (service.size() > longest.size())
            longest = service;
    }
    if (longest.size() > 63)
        throw InputError("the TFJob's name \"" + settings.name + "\" is too long: its pods' service names (\"" + longest
                         + "\") must have at most 63 characters");
    if (!settings.kubernetesNamespace.empty()
        && (settings.kubernetesNamespace.size() > 63
            || !matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", settings.kubernetesNamespace)))
        throw InputError("the namespace \"" + settings.kubernetesNamespace
                         + "\" is not a DNS label: lower-case letters, digits and '-', at most 63 characters");
    if (settings.image.empty())
        throw InputError("the container image is empty: give the image that holds parasync-node, like "
                         "\"registry.example.com/parasync:"
                         + std::string(version()) + "\"");
    if (matches("\\s", settings.image))
        throw InputError("the container image \"" + settings.image + "\" contains white space");
    if (settings.command.empty() || settings.command.front().empty())
        throw InputError("the command is empty: give the path of parasync-node in the image, like \"parasync-node\"");
    static const std::vector<std::string> policies{"Always", "OnFailure", "Never", "ExitCode"};
    if (std::find(policies.begin(), policies.end(), settings.restartPolicy) == policies.end())
        throw InputError("the restart policy \"" + settings.restartPolicy
                         + "\" is not one of TFJob's: Always, OnFailure, Never, ExitCode");
    if (!settings.tokenSecret.empty()
        && (settings.tokenSecret.size() > 253
            || !matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", settings.tokenSecret)))
        throw InputError("the token Secret's name \"" + settings.tokenSecret
                         + "\" is not a Kubernetes name: lower-case letters, digits, '-' and '.'");
    if (settings.port == 0)
        throw InputError("the port is 0: give the port every pod listens on, like 2222");
    for (const std::string &arg : settings.args) {
        const std::string name = flagName(arg);
        for (const char *flag : kClusterFlags) {
            if (name == flag)
                throw InputError("args: " + arg
                                 + " would override the cluster and task that TF_CONFIG gives each pod; remove it");
        }
    }
}

// YAML 1.1 (what Kubernetes' parser reads) takes these plain scalars as
// numbers, booleans or null; a string that looks like one must be quoted or
// the API server sees the wrong type (args must be strings).
bool readsAsNonString(const std::string &text)
{
    return text.empty() || matches("^(?i:y|n|yes|no|true|false|on|off|null|~)$", text)
           || matches("^[-+]?(\\.[0-9]+|[0-9][0-9_]*(\\.[0-9_]*)?)([eE][-+]?[0-9]+)?$", text)
           || matches("^[-+]?0[xob][0-9a-fA-F_]+$", text) || matches("^[-+]?\\.(?i:inf|nan)$", text)
           || matches("^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\\.[0-9_]*)?$", text);
}

YAML::Emitter &string(YAML::Emitter &out, const std::string &text)
{
    if (readsAsNonString(text))
        out << YAML::DoubleQuoted;
    return out << text;
}

void stringList(YAML::Emitter &out, const char *key, const std::vector<std::string> &items)
{
    out << YAML::Key << key << YAML::Value << YAML::BeginSeq;
    for (const std::string &item : items)
        string(out, item);
    out << YAML::EndSeq;
}

} // namespace

std::string tfJobReplicaName(TfJobReplica replica)
{
    switch (replica) {
    case TfJobReplica::Ps: return "PS";
    case TfJobReplica::Chief: return "Chief";
    case TfJobReplica::Worker: return "Worker";
    }
    return "Worker";
}

std::vector<std::string> tfJobArguments(const ClusterPlan &plan)
{
    std::vector<std::string> args;
    const TaskId any{JobName::Ps, 0};
    for (const QString &arg : plan.arguments(any)) {
        const std::string text = arg.toStdString();
        const std::string name = flagName(text);
        if (std::find(std::begin(kClusterFlags), std::end(kClusterFlags), name) == std::end(kClusterFlags))
            args.push_back(text);
    }
    return args;
}

std::string kubeflowTfConfig(const TfJobSettings &settings, int numPs, int numWorkers, TfJobReplica replica, int index)
{
    // As the operator writes it: lower-case job names, one headless service
    // per replica in the job's namespace, "environment": "cloud".
    const std::string ns = settings.kubernetesNamespace.empty() ? "default" : settings.kubernetesNamespace;
    QJsonObject cluster;
    for (const Replica &r : replicasOf(settings, numPs, numWorkers)) {
        const std::string type = lowered(tfJobReplicaName(r.type));
        QJsonArray hosts;
        for (int i = 0; i < r.replicas; ++i)
            hosts.append(qs(settings.name + "-" + type + "-" + std::to_string(i) + "." + ns
                            + ".svc:" + std::to_string(settings.port)));
        cluster.insert(qs(type), hosts);
    }
    const QJsonObject task{{QStringLiteral("type"), qs(lowered(tfJobReplicaName(replica)))},
                           {QStringLiteral("index"), index}};
    const QJsonObject config{{QStringLiteral("cluster"), cluster},
                             {QStringLiteral("task"), task},
                             {QStringLiteral("environment"), QStringLiteral("cloud")}};
    return QJsonDocument(config).toJson(QJsonDocument::Compact).toStdString();
}

std::string tfJobManifest(const ClusterPlan &plan, const TfJobSettings &settings)
{
    plan.cluster.validate();
    // A TFJob's replica types are Chief, PS and Worker; a pod cannot name
    // the other process of its ps pair.
    if (plan.cluster.replicated())
        throw InputError("the cluster backs its ps tasks with replicas (\"ps_backup\" in the cluster file), which a "
                         "TFJob has no replica type for: remove \"ps_backup\" to export it (Kubernetes restarts a "
                         "dead PS pod, from the chief's last checkpoint)");
    // Every pod runs settings.command with the training args; a worker's own
    // command names programs and paths of this machine, not of the image.
    if (plan.hasWorkerCommands())
        throw InputError("the cluster's workers run a command of their own (\"worker_command\" in the cluster file), "
                         "but the TFJob runs parasync-node in every pod: remove \"worker_command\" to export it, or "
                         "after exporting give the Worker replicas a container command of your image (a Python "
                         "worker takes its cluster and task from TF_CONFIG, as parasync-node does)");
    const int numPs = plan.cluster.numPs();
    const int numWorkers = plan.cluster.numWorkers();
    validateSettings(settings, numPs, numWorkers);

    std::vector<std::string> args = settings.args;
    const bool insecure = settings.tokenSecret.empty();
    if (insecure && std::find(args.begin(), args.end(), "--insecure") == args.end())
        args.push_back("--insecure");

    // What every pod will do with these args and its TF_CONFIG, checked by
    // parasync-node's own parser: a manifest that passes here starts.
    for (const Replica &replica : replicasOf(settings, numPs, numWorkers)) {
        std::vector<std::string> argv{settings.command.front()};
        argv.insert(argv.end(), args.begin(), args.end());
        try {
            parseNodeOptions(argv, kubeflowTfConfig(settings, numPs, numWorkers, replica.type, 0));
        } catch (const InputError &error) {
            throw InputError("args: " + tfJobReplicaName(replica.type) + " pods would refuse them: " + error.what());
        }
    }

    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "apiVersion" << YAML::Value << "kubeflow.org/v1";
    out << YAML::Key << "kind" << YAML::Value << "TFJob";
    out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value;
    string(out, settings.name);
    if (!settings.kubernetesNamespace.empty()) {
        out << YAML::Key << "namespace" << YAML::Value;
        string(out, settings.kubernetesNamespace);
    }
    out << YAML::EndMap;
    out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "tfReplicaSpecs" << YAML::Value << YAML::BeginMap;
    for (const Replica &replica : replicasOf(settings, numPs, numWorkers)) {
        out << YAML::Key << tfJobReplicaName(replica.type) << YAML::Value << YAML::BeginMap;
        out << YAML::Key << "replicas" << YAML::Value << replica.replicas;
        out << YAML::Key << "restartPolicy" << YAML::Value << settings.restartPolicy;
        out << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
        out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
        out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
        // The operator finds the container to give TF_CONFIG by this name.
        out << YAML::Key << "name" << YAML::Value << "tensorflow";
        out << YAML::Key << "image" << YAML::Value;
        string(out, settings.image);
        stringList(out, "command", settings.command);
        stringList(out, "args", args);
        out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
        out << YAML::Key << "name" << YAML::Value << "tfjob-port";
        out << YAML::Key << "containerPort" << YAML::Value << int(settings.port);
        out << YAML::EndMap << YAML::EndSeq;
        if (!insecure) {
            out << YAML::Key << "env" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
            out << YAML::Key << "name" << YAML::Value << "PARASYNC_CLUSTER_TOKEN";
            out << YAML::Key << "valueFrom" << YAML::Value << YAML::BeginMap;
            out << YAML::Key << "secretKeyRef" << YAML::Value << YAML::BeginMap;
            out << YAML::Key << "name" << YAML::Value;
            string(out, settings.tokenSecret);
            out << YAML::Key << "key" << YAML::Value << "token";
            out << YAML::EndMap << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
        }
        out << YAML::EndMap << YAML::EndSeq; // containers
        out << YAML::EndMap << YAML::EndMap; // template.spec, template
        out << YAML::EndMap;                 // the replica
    }
    out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
    if (!out.good())
        throw std::logic_error("yaml-cpp could not emit the TFJob manifest: " + out.GetLastError());
    return "# Kubeflow TFJob for a Parasync cluster: kubectl apply -f FILE\n" + std::string(out.c_str()) + "\n";
}

} // namespace parasync
