#include "cluster_plan_file.h"

#include "node_options.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>

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
    return file;
}

} // namespace parasync::ui

namespace parasync::ui {

ClusterPlan demoPlanFromEnvironment()
{
    ClusterPlan plan = ClusterPlan::demo();
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
