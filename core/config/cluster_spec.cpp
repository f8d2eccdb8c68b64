#include "config/cluster_spec.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/cluster_json.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QJsonValue>
#include <QLocale>
#include <QSaveFile>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

namespace parasync {

namespace {

std::string trimmed(const std::string &text)
{
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
        return {};
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

std::string lowered(std::string text)
{
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return text;
}

bool isDecimal(const std::string &text)
{
    return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool isIpv4Loopback(const std::string &host)
{
    int parts = 0;
    int first = -1;
    size_t start = 0;
    while (start <= host.size()) {
        const size_t dot = std::min(host.find('.', start), host.size());
        const std::string part = host.substr(start, dot - start);
        if (!isDecimal(part) || part.size() > 3 || std::stoi(part) > 255)
            return false;
        if (parts == 0)
            first = std::stoi(part);
        ++parts;
        start = dot + 1;
    }
    return parts == 4 && first == 127;
}

// "'127.0.0.1:99999' (--ps_hosts)": where a bad address came from.
std::string quoted(const std::string &text, const std::string &origin)
{
    std::string out = "'" + text + "'";
    if (!origin.empty())
        out += " (" + origin + ")";
    return out;
}

HostPort parseHostPortIn(const std::string &rawText, const std::string &origin)
{
    const std::string text = trimmed(rawText);
    const std::string where = quoted(text, origin);
    if (text.empty())
        throw InputError("empty address" + (origin.empty() ? std::string() : " in " + origin)
                         + ": write host:port, like 127.0.0.1:2222");
    const auto scheme = text.find("://");
    if (scheme != std::string::npos)
        throw InputError(where + ": leave out '" + text.substr(0, scheme + 3)
                         + "' and give host:port, like 127.0.0.1:2222");

    HostPort result;
    std::string portText;
    if (text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string::npos)
            throw InputError("unclosed '[' in " + where + ": write an IPv6 address like [::1]:2222");
        result.host = text.substr(1, close - 1);
        if (result.host.empty())
            throw InputError("missing host in " + where + ": write host:port, like [::1]:2222");
        if (close + 1 >= text.size() || text[close + 1] != ':')
            throw InputError("missing ':port' in " + where + ": write [host]:port, like [::1]:2222");
        portText = text.substr(close + 2);
        for (unsigned char c : result.host) {
            if (!std::isxdigit(c) && c != ':' && c != '.' && c != '%' && !std::isalnum(c))
                throw InputError("'" + result.host + "' in " + where + " is not an IPv6 address");
        }
        // Without a ':' toString() writes the host unbracketed, where '%' is
        // refused: "[%eth0]:9" would not read back from a cluster file.
        if (result.host.find(':') == std::string::npos && result.host.find('%') != std::string::npos)
            throw InputError("'" + result.host + "' in " + where + " is not an IPv6 address");
    } else {
        const auto colon = text.rfind(':');
        if (colon == std::string::npos)
            throw InputError("missing ':port' in " + where + ": write host:port, like " + text + ":2222");
        if (text.find(':') != colon)
            throw InputError(where + " has more than one ':': write an IPv6 address in brackets, like [::1]:2222");
        result.host = text.substr(0, colon);
        portText = text.substr(colon + 1);
        if (result.host.empty())
            throw InputError("missing host in " + where + ": write host:port, like 127.0.0.1" + text);
        for (unsigned char c : result.host) {
            if (!std::isalnum(c) && c != '.' && c != '-' && c != '_')
                throw InputError("host '" + result.host + "' in " + where + " contains '" + char(c)
                                 + "', which cannot be in a host name or IPv4 address");
        }
    }

    if (portText.empty())
        throw InputError("missing port in " + where + ": write host:port, like " + text + "2222");
    if (!isDecimal(portText))
        throw InputError("port '" + portText + "' in " + where + " is not a number: write host:port, like "
                         + (text.front() == '[' ? "[" + result.host + "]" : result.host) + ":2222");
    unsigned long long port = 0;
    const auto [end, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
    (void)end;
    if (ec != std::errc() || port < 1 || port > 65535)
        throw InputError("port " + portText + " in " + where + " is out of range 1-65535");
    result.port = uint16_t(port);
    return result;
}

std::vector<HostPort> hostsOfJob(const QJsonValue &value, const std::string &origin)
{
    if (!value.isArray())
        throw InputError(origin + " must be a list of \"host:port\" strings, like [\"127.0.0.1:2222\"]");
    std::vector<HostPort> hosts;
    for (const QJsonValue entry : value.toArray()) {
        if (!entry.isString())
            throw InputError(origin + " must be a list of \"host:port\" strings, like [\"127.0.0.1:2222\"]");
        hosts.push_back(parseHostPortIn(ss(entry.toString()), origin));
    }
    return hosts;
}

} // namespace

QJsonDocument parseJson(const std::string &json, const std::string &origin)
{
    QJsonParseError error;
    const QJsonDocument document = QJsonDocument::fromJson(QByteArray::fromStdString(json), &error);
    if (error.error != QJsonParseError::NoError)
        throw InputError(origin + " is not valid JSON: " + ss(error.errorString()) + " at offset "
                         + std::to_string(error.offset) + " (of " + std::to_string(json.size()) + " bytes)");
    if (!document.isObject())
        throw InputError(origin + " must be a JSON object ({...})");
    return document;
}

ParsedCluster parseClusterObject(const QJsonObject &root, const std::string &origin)
{
    if (!root.contains(QStringLiteral("cluster")))
        throw InputError(origin
                         + " has no \"cluster\": add \"cluster\": {\"ps\": [\"127.0.0.1:2222\"], "
                           "\"worker\": [\"127.0.0.1:2223\", \"127.0.0.1:2224\"]}");
    const QJsonValue clusterValue = root.value(QStringLiteral("cluster"));
    if (!clusterValue.isObject())
        throw InputError(origin + ": \"cluster\" must be an object like {\"ps\": [...], \"worker\": [...]}");
    const QJsonObject cluster = clusterValue.toObject();
    for (const QString &key : cluster.keys()) {
        if (key != QStringLiteral("ps") && key != QStringLiteral("worker") && key != QStringLiteral("chief")
            && key != QStringLiteral("ps_backup"))
            throw InputError(origin + ": \"cluster\" has a job \"" + ss(key)
                             + "\" that Parasync does not run: only \"ps\", \"worker\", \"chief\" and \"ps_backup\"");
    }

    ParsedCluster parsed;
    if (cluster.contains(QStringLiteral("ps")))
        parsed.spec.ps = hostsOfJob(cluster.value(QStringLiteral("ps")), origin + " cluster \"ps\"");
    if (cluster.contains(QStringLiteral("ps_backup")))
        parsed.spec.psBackups
            = hostsOfJob(cluster.value(QStringLiteral("ps_backup")), origin + " cluster \"ps_backup\"");
    std::vector<HostPort> workers;
    if (cluster.contains(QStringLiteral("worker")))
        workers = hostsOfJob(cluster.value(QStringLiteral("worker")), origin + " cluster \"worker\"");
    parsed.tfWorkerCount = int(workers.size());
    if (cluster.contains(QStringLiteral("chief"))) {
        const auto chief = hostsOfJob(cluster.value(QStringLiteral("chief")), origin + " cluster \"chief\"");
        if (chief.size() > 1)
            throw InputError(origin + ": \"chief\" lists " + std::to_string(chief.size())
                             + " addresses; a cluster has one chief");
        parsed.hasChief = !chief.empty();
        parsed.spec.workers = chief;
    }
    parsed.spec.workers.insert(parsed.spec.workers.end(), workers.begin(), workers.end());
    return parsed;
}

namespace {

std::string countText(int count, const char *noun)
{
    return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string validRange(int count)
{
    return count == 1 ? "valid: 0" : "valid: 0-" + std::to_string(count - 1);
}

} // namespace

std::string HostPort::toString() const
{
    if (host.find(':') != std::string::npos && host.front() != '[')
        return "[" + host + "]:" + std::to_string(port);
    return host + ":" + std::to_string(port);
}

std::string HostPort::bareHost() const
{
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        return host.substr(1, host.size() - 2);
    return host;
}

bool HostPort::isLoopback() const
{
    std::string name = lowered(host);
    if (name.size() >= 2 && name.front() == '[' && name.back() == ']')
        name = name.substr(1, name.size() - 2);
    if (name == "localhost" || name == "::1" || name == "0:0:0:0:0:0:0:1")
        return true;
    if (name.rfind("::ffff:", 0) == 0)
        name = name.substr(7);
    return isIpv4Loopback(name);
}

HostPort parseHostPort(const std::string &text)
{
    return parseHostPortIn(text, {});
}

std::string TaskId::toString() const
{
    return jobNameString(job) + ":" + std::to_string(index);
}

JobName parseJobName(const std::string &text)
{
    const std::string name = lowered(trimmed(text));
    if (name == "ps")
        return JobName::Ps;
    if (name == "worker")
        return JobName::Worker;
    if (name == "ps_backup")
        return JobName::PsBackup;
    if (name.empty())
        throw InputError("--job_name is empty: give --job_name=ps or --job_name=worker");
    if (name == "chief" || name == "master")
        throw InputError("--job_name=" + text
                         + ": Parasync's chief is worker:0, give --job_name=worker --task_index=0");
    throw InputError("--job_name=" + text + ": must be ps, worker or ps_backup");
}

std::string jobNameString(JobName job)
{
    switch (job) {
    case JobName::Ps: return "ps";
    case JobName::Worker: return "worker";
    case JobName::PsBackup: return "ps_backup";
    }
    return "worker";
}

const HostPort &ClusterSpec::address(const TaskId &task) const
{
    validateTask(task);
    switch (task.job) {
    case JobName::Ps: return ps[size_t(task.index)];
    case JobName::PsBackup: return psBackups[size_t(task.index)];
    case JobName::Worker: break;
    }
    return workers[size_t(task.index)];
}

std::vector<HostPort> ClusterSpec::psPair(int index) const
{
    std::vector<HostPort> pair{ps.at(size_t(index))};
    if (replicated())
        pair.push_back(psBackups.at(size_t(index)));
    return pair;
}

void ClusterSpec::validate() const
{
    if (ps.empty())
        throw InputError("the cluster has no ps task: give at least one ps address, like "
                         "--ps_hosts=127.0.0.1:2222");
    if (workers.empty())
        throw InputError("the cluster has no worker task: give at least one worker address, like "
                         "--worker_hosts=127.0.0.1:2223,127.0.0.1:2224");
    std::vector<std::pair<std::string, TaskId>> seen;
    const auto check = [&seen](const HostPort &address, TaskId task) {
        const std::string key = lowered(address.host) + ":" + std::to_string(address.port);
        for (const auto &[otherKey, other] : seen) {
            if (otherKey == key)
                throw InputError("address " + address.toString() + " is used twice: " + other.toString() + " and "
                                 + task.toString() + ": give every task its own port");
        }
        seen.emplace_back(key, task);
    };
    for (size_t i = 0; i < ps.size(); ++i)
        check(ps[i], TaskId{JobName::Ps, int(i)});
    for (size_t i = 0; i < workers.size(); ++i)
        check(workers[i], TaskId{JobName::Worker, int(i)});
    if (replicated() && psBackups.size() != ps.size())
        throw InputError("--ps_backup_hosts lists " + countText(int(psBackups.size()), "backup") + " for "
                         + countText(numPs(), "ps task") + ": give one backup per ps task, in --ps_hosts' order");
    for (size_t i = 0; i < psBackups.size(); ++i)
        check(psBackups[i], TaskId{JobName::PsBackup, int(i)});
}

void ClusterSpec::validateTask(const TaskId &task) const
{
    const bool isPs = task.job == JobName::Ps;
    const bool isBackup = task.job == JobName::PsBackup;
    const int count = isPs ? numPs() : isBackup ? int(psBackups.size()) : numWorkers();
    const std::string flag = isPs ? "--ps_hosts" : isBackup ? "--ps_backup_hosts" : "--worker_hosts";
    if (task.index < 0)
        throw InputError("--task_index=" + std::to_string(task.index) + " is negative: give 0 for the first "
                         + jobNameString(task.job));
    if (count == 0)
        throw InputError("--job_name=" + jobNameString(task.job) + " but the cluster has no " + jobNameString(task.job)
                         + " tasks: add addresses to " + flag);
    if (task.index >= count)
        throw InputError("--task_index=" + std::to_string(task.index) + " but " + flag + " lists "
                         + countText(count, isPs       ? "ps task"
                                            : isBackup ? "backup"
                                                       : "worker")
                         + " (" + validRange(count) + ")");
}

std::string ClusterSpec::toJson() const
{
    QJsonArray psArray;
    for (const HostPort &address : ps)
        psArray.append(qs(address.toString()));
    QJsonArray workerArray;
    for (const HostPort &address : workers)
        workerArray.append(qs(address.toString()));
    QJsonObject object;
    object.insert(QStringLiteral("ps"), psArray);
    object.insert(QStringLiteral("worker"), workerArray);
    if (replicated()) {
        QJsonArray backupArray;
        for (const HostPort &address : psBackups)
            backupArray.append(qs(address.toString()));
        object.insert(QStringLiteral("ps_backup"), backupArray);
    }
    return QJsonDocument(object).toJson(QJsonDocument::Compact).toStdString();
}

std::vector<HostPort> parseHostList(const std::string &text, const std::string &flagName)
{
    const std::string example
        = flagName.find("ps") != std::string::npos ? "127.0.0.1:2222" : "127.0.0.1:2223,127.0.0.1:2224";
    if (trimmed(text).empty())
        throw InputError(flagName + " is empty: give a comma-separated list like " + example);
    std::vector<HostPort> hosts;
    size_t start = 0;
    int entry = 1;
    while (true) {
        const size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        if (trimmed(item).empty())
            throw InputError(flagName + " has an empty entry (number " + std::to_string(entry) + " in '" + text
                             + "'): remove the extra comma, like " + example);
        hosts.push_back(parseHostPortIn(item, flagName));
        if (comma == text.size())
            break;
        start = comma + 1;
        ++entry;
    }
    return hosts;
}

ClusterSpec parseTfConfigCluster(const std::string &json)
{
    if (trimmed(json).empty())
        throw InputError("TF_CONFIG is empty: set it to {\"cluster\": {...}, \"task\": {...}} or unset it");
    const QJsonDocument document = parseJson(json, "TF_CONFIG");
    ParsedCluster parsed = parseClusterObject(document.object(), "TF_CONFIG");
    parsed.spec.validate();
    return parsed.spec;
}

TfConfig parseTfConfig(const std::string &json)
{
    TfConfig config;
    config.cluster = parseTfConfigCluster(json);
    const QJsonObject root = parseJson(json, "TF_CONFIG").object();
    const ParsedCluster parsed = parseClusterObject(root, "TF_CONFIG");

    const std::string taskExample = "\"task\": {\"type\": \"worker\", \"index\": 0}";
    if (!root.contains(QStringLiteral("task")))
        throw InputError("TF_CONFIG has no \"task\": add " + taskExample + " (or pass --job_name and --task_index)");
    const QJsonValue taskValue = root.value(QStringLiteral("task"));
    if (!taskValue.isObject())
        throw InputError("TF_CONFIG \"task\" must be an object like {\"type\": \"worker\", \"index\": 0}");
    const QJsonObject task = taskValue.toObject();
    const QJsonValue typeValue = task.value(QStringLiteral("type"));
    if (!typeValue.isString())
        throw InputError("TF_CONFIG \"task\" has no \"type\": add \"type\": \"ps\", \"worker\" or \"chief\"");
    const std::string type = ss(typeValue.toString());

    int index = 0;
    if (task.contains(QStringLiteral("index"))) {
        const QJsonValue indexValue = task.value(QStringLiteral("index"));
        const double number = indexValue.toDouble(-1.0);
        if (!indexValue.isDouble() || number < 0 || number != std::floor(number) || number > 1e6)
            throw InputError("TF_CONFIG \"task\" \"index\" must be a whole number of at least 0, like "
                             "\"index\": 0");
        index = int(number);
    }

    const std::string taskText
        = "TF_CONFIG task {\"type\": \"" + type + "\", \"index\": " + std::to_string(index) + "}";
    if (type == "ps") {
        if (index >= config.cluster.numPs())
            throw InputError(taskText + " but its cluster lists " + countText(config.cluster.numPs(), "ps task") + " ("
                             + validRange(config.cluster.numPs()) + ")");
        config.task = TaskId{JobName::Ps, index};
    } else if (type == "worker") {
        if (index >= parsed.tfWorkerCount)
            throw InputError(taskText + " but its cluster lists " + countText(parsed.tfWorkerCount, "worker")
                             + (parsed.tfWorkerCount > 0 ? " (" + validRange(parsed.tfWorkerCount) + ")" : ""));
        config.task = TaskId{JobName::Worker, index + (parsed.hasChief ? 1 : 0)};
    } else if (type == "chief") {
        if (!parsed.hasChief)
            throw InputError(taskText
                             + " but its cluster has no \"chief\" job: add \"chief\": [\"host:port\"] "
                               "or use \"type\": \"worker\", \"index\": 0");
        if (index != 0)
            throw InputError(taskText + ": a cluster has one chief, its index is 0");
        config.task = TaskId{JobName::Worker, 0};
    } else {
        throw InputError("TF_CONFIG task type \"" + type
                         + "\" is not run by Parasync: use \"ps\", \"worker\" or "
                           "\"chief\"");
    }
    return config;
}

} // namespace parasync
