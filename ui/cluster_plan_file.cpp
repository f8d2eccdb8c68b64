#include "ui/cluster_plan_file.h"

#include "config/node_options.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>

#include <charconv>
#include <cmath>

namespace parasync::ui {

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
    std::vector<std::string> args = {"parasync", "--ps_hosts=" + hostList(file.cluster.ps),
                                     "--worker_hosts=" + hostList(file.cluster.workers), "--job_name=ps",
                                     "--task_index=0"};
    for (const auto &[name, value] : file.training)
        args.push_back("--" + name + "=" + value);
    const NodeOptions options = parseNodeOptions(args, std::string());
    ClusterPlan plan;
    plan.cluster = options.cluster;
    plan.training = options.training;
    plan.hosts = file.hosts;
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
            file.training.emplace_back(name, number == std::floor(number) && std::fabs(number) < 9.0e15
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

} // namespace parasync::ui

namespace parasync::ui {

ClusterPlan demoPlanFromEnvironment()
{
    ClusterPlan plan = ClusterPlan::demo();
    // At full speed the demo's two parameters take microseconds a step and
    // the whole run is over before the window repaints. These make it a
    // run a person can follow and that shows the modes apart:
    // - ~40 ms of simulated compute per step, long-tailed (jitter 0.5: now
    //   and then a step takes two or three times as long), so each worker
    //   makes 10-25 steps a second and the lanes can be read;
    // - worker:1 a straggler (+40 ms a step, about half worker:0's speed):
    //   sync then waits for it at every barrier, ssp lets worker:0 run up
    //   to the staleness bound and then waits, async lets its gradients
    //   arrive stale -- each visible in the lanes as it happens;
    // - a learning rate at which w and b take tens of seconds to converge,
    //   so a mode switch lands while they still move;
    // - no last step: in the window the demo trains until stopped.
    plan.training.pace.computeMs = 40;
    plan.training.pace.computeJitter = 0.5f;
    plan.workerPace[1] = plan.training.pace;
    plan.workerPace[1].stragglerMs = 40;
    plan.training.learningRate = 0.01f;
    plan.training.lastStep = 0;
    const QString ports = qEnvironmentVariable("PARASYNC_DEMO_PORTS");
    if (ports.isEmpty())
        return plan;
    std::vector<HostPort *> addresses;
    for (HostPort &ps : plan.cluster.ps)
        addresses.push_back(&ps);
    for (HostPort &worker : plan.cluster.workers)
        addresses.push_back(&worker);
    const QStringList list = ports.split(QLatin1Char(','), Qt::SkipEmptyParts);
    for (qsizetype i = 0; i < list.size() && size_t(i) < addresses.size(); ++i) {
        bool ok = false;
        const uint port = list[i].trimmed().toUInt(&ok);
        if (ok && port > 0 && port < 65536)
            addresses[size_t(i)]->port = uint16_t(port);
    }
    return plan;
}

} // namespace parasync::ui
