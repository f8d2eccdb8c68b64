#include "config/cluster_plan_file.h"

#include "config/cluster_file.h"
#include "config/node_options.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>

#include <charconv>
#include <cmath>

namespace parasync {

namespace {
std::string hostList(const std::vector<HostPort> &hosts)
{
    std::string text;
    for (const HostPort &host : hosts)
        text += (text.empty() ? "" : ",") + host.toString();
    return text;
}
// A float's shortest spelling ("0.3", not 0.30000001).
std::string shortestText(float value)
{
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}
} // namespace

ClusterPlan planFromClusterFile(const ClusterFile &file)
{
    std::vector<std::string> args
        = {"parasync", "--ps_hosts=" + hostList(file.cluster.ps), "--worker_hosts=" + hostList(file.cluster.workers),
           "--job_name=ps", "--task_index=0"};
    if (file.cluster.replicated())
        args.push_back("--ps_backup_hosts=" + hostList(file.cluster.psBackups));
    for (const auto &[name, value] : file.training)
        args.push_back("--" + name + "=" + value);
    const NodeOptions options = parseNodeOptions(args, std::string());
    ClusterPlan plan;
    plan.cluster = options.cluster;
    plan.training = options.training;
    plan.hosts = file.hosts;
    plan.workerCommand = file.workerCommand;
    plan.workerCommands = file.perWorkerCommand;
    // Each worker's own pace, parsed as that worker's node would.
    for (const auto &[index, flags] : file.perWorker) {
        std::vector<std::string> workerArgs = args;
        workerArgs[3] = "--job_name=worker";
        workerArgs[4] = "--task_index=" + std::to_string(index);
        for (const auto &[name, value] : flags)
            workerArgs.push_back("--" + name + "=" + value);
        const WorkerPace pace = parseNodeOptions(workerArgs, std::string()).training.pace;
        if (!(pace == plan.training.pace))
            plan.workerPace[index] = pace;
    }
    return plan;
}

ClusterFile clusterFileFromPlan(const ClusterPlan &plan)
{
    ClusterFile file;
    file.cluster = plan.cluster;
    file.hosts = plan.hosts;
    file.workerCommand = plan.workerCommand;
    file.perWorkerCommand = plan.workerCommands;
    const QJsonObject training = QJsonDocument::fromJson(QByteArray::fromStdString(plan.training.toJson())).object();
    // In the order of parasync-node --help, as a person would write them.
    for (const std::string &name : trainingFlagNames()) {
        const QJsonValue value = training.value(QString::fromStdString(name));
        if (value.isString() && !value.toString().isEmpty())
            file.training.emplace_back(name, value.toString().toStdString());
        else if (value.isDouble()) {
            // Whole numbers as integers: 'g' would spell --last_step=200000000
            // "2e+08", which the flag parser rightly refuses.
            const double number = value.toDouble();
            file.training.emplace_back(
                name, number == std::floor(number) && std::fabs(number) < 9.0e15
                          ? std::to_string(static_cast<long long>(number))
                          : QString::number(number, 'g', QLocale::FloatingPointShortest).toStdString());
        }
    }
    const WorkerPace defaults = plan.training.pace;
    for (const auto &[index, pace] : plan.workerPace) {
        auto &flags = file.perWorker[index];
        if (pace.computeMs != defaults.computeMs)
            flags.emplace_back("compute_ms", std::to_string(pace.computeMs));
        if (pace.computeJitter != defaults.computeJitter)
            flags.emplace_back("compute_jitter", shortestText(pace.computeJitter));
        if (pace.stragglerMs != defaults.stragglerMs)
            flags.emplace_back("straggler_ms", std::to_string(pace.stragglerMs));
        if (flags.empty())
            file.perWorker.erase(index);
    }
    return file;
}

} // namespace parasync
