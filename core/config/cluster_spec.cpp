#include "config/cluster_spec.h"

#include "base/error.h"
#include "base/qt_text.h"

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

// TF_CONFIG's and the cluster file's "cluster" object. TF 2 lists the chief
// as its own job; Parasync's chief is worker:0, so it goes first.
struct ParsedCluster
{
    ClusterSpec spec;
    bool hasChief = false;
    int tfWorkerCount = 0;
};

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

std::string countText(int count, const char *noun)
{
    return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string validRange(int count)
{
    return count == 1 ? "valid: 0" : "valid: 0-" + std::to_string(count - 1);
}

// QJsonObject forgets the order of keys, and a cluster file's "training" is
// kept in file order, so its keys are read from the text itself. Only called
// on text QJsonDocument has accepted, so it need not diagnose bad JSON.
class KeyOrderScanner
{
public:
    explicit KeyOrderScanner(const std::string &text) : m_text(text) {}

    // Raw JSON string tokens of the keys of root[member], in order.
    std::vector<std::string> keysOfMember(const std::string &member)
    {
        std::vector<std::string> keys;
        // QJsonDocument skips a UTF-8 byte order mark, and so must this.
        if (m_text.compare(0, 3, "\xEF\xBB\xBF") == 0)
            m_pos = 3;
        skipSpace();
        if (!consume('{'))
            return keys;
        skipSpace();
        if (consume('}'))
            return keys;
        while (m_pos < m_text.size()) {
            skipSpace();
            const std::string key = decoded(stringToken());
            skipSpace();
            consume(':');
            skipSpace();
            if (key == member && peek() == '{')
                keys = objectKeys();
            else
                skipValue();
            skipSpace();
            if (!consume(','))
                break;
        }
        return keys;
    }

    static std::string decoded(const std::string &token)
    {
        const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString("[" + token + "]"));
        return ss(doc.array().at(0).toString());
    }

private:
    char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }
    bool consume(char c)
    {
        if (peek() != c)
            return false;
        ++m_pos;
        return true;
    }
    void skipSpace()
    {
        while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos])))
            ++m_pos;
    }
    std::string stringToken()
    {
        const size_t start = m_pos;
        consume('"');
        while (m_pos < m_text.size() && m_text[m_pos] != '"')
            m_pos += m_text[m_pos] == '\\' ? 2 : 1;
        consume('"');
        return m_text.substr(start, m_pos - start);
    }
    std::vector<std::string> objectKeys()
    {
        std::vector<std::string> keys;
        consume('{');
        skipSpace();
        if (consume('}'))
            return keys;
        while (m_pos < m_text.size()) {
            skipSpace();
            keys.push_back(decoded(stringToken()));
            skipSpace();
            consume(':');
            skipValue();
            skipSpace();
            if (!consume(','))
                break;
        }
        consume('}');
        return keys;
    }
    void skipValue()
    {
        skipSpace();
        const char c = peek();
        if (c == '"') {
            stringToken();
        } else if (c == '{' || c == '[') {
            int depth = 0;
            while (m_pos < m_text.size()) {
                const char d = m_text[m_pos];
                if (d == '"') {
                    stringToken();
                    continue;
                }
                if (d == '{' || d == '[')
                    ++depth;
                else if (d == '}' || d == ']')
                    --depth;
                ++m_pos;
                if (depth == 0)
                    break;
            }
        } else {
            while (m_pos < m_text.size() && m_text[m_pos] != ',' && m_text[m_pos] != '}' && m_text[m_pos] != ']')
                ++m_pos;
        }
    }

    const std::string &m_text;
    size_t m_pos = 0;
};

// Whole numbers print without a fraction so that `"batch_size": 10` reads
// back as "10", as it would have been typed on the command line.
std::string numberText(double value)
{
    if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) <= 9007199254740992.0)
        return std::to_string(static_cast<long long>(value));
    return ss(QString::number(value, 'g', QLocale::FloatingPointShortest));
}

std::string trainingValueText(const QJsonValue &value, const std::string &key, const std::string &origin)
{
    switch (value.type()) {
    case QJsonValue::String: return ss(value.toString());
    case QJsonValue::Double: return numberText(value.toDouble());
    case QJsonValue::Bool: return value.toBool() ? "true" : "false";
    default:
        throw InputError(origin + ": \"training\" \"" + key + "\" must be a number or a string, like \"" + key
                         + "\": 10");
    }
}

// A JSON string literal, escaped by Qt.
std::string jsonString(const std::string &text)
{
    const QByteArray array = QJsonDocument(QJsonArray{qs(text)}).toJson(QJsonDocument::Compact);
    return array.mid(1, array.size() - 2).toStdString();
}

// Training values are kept as text; those that are numbers (or booleans)
// in their canonical spelling are written as JSON numbers so the file reads
// naturally, and every value reads back as the same text.
std::string trainingValueJson(const std::string &text)
{
    if (text == "true" || text == "false")
        return text;
    const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString("[" + text + "]"));
    if (doc.isArray() && doc.array().size() == 1 && doc.array().at(0).isDouble()
        && numberText(doc.array().at(0).toDouble()) == text)
        return text;
    return jsonString(text);
}

std::string hostListJson(const std::vector<HostPort> &hosts, const std::string &indent)
{
    if (hosts.empty())
        return "[]";
    std::string out = "[\n";
    for (size_t i = 0; i < hosts.size(); ++i)
        out += indent + "    " + jsonString(hosts[i].toString()) + (i + 1 < hosts.size() ? ",\n" : "\n");
    return out + indent + "]";
}

} // namespace

std::string HostPort::toString() const
{
    if (host.find(':') != std::string::npos && host.front() != '[')
        return "[" + host + "]:" + std::to_string(port);
    return host + ":" + std::to_string(port);
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

namespace {

// The "hosts" object of a cluster file: each key a host name as the
// cluster's addresses spell it, each value how ssh reaches it.
std::vector<RemoteHost> parseRemoteHosts(const std::string &json, const QJsonObject &root, const std::string &origin)
{
    std::vector<RemoteHost> hosts;
    if (!root.contains(QStringLiteral("hosts")))
        return hosts;
    const QJsonValue hostsValue = root.value(QStringLiteral("hosts"));
    const std::string example
        = "like {\"10.0.0.2\": {\"user\": \"alice\", \"node\": \"/opt/parasync/bin/parasync-node\"}}";
    if (!hostsValue.isObject())
        throw InputError(origin + ": \"hosts\" must be an object " + example);
    const QJsonObject object = hostsValue.toObject();
    static const std::set<std::string> known = {"ssh_host", "user", "port", "node", "identity_file", "ssh_options"};
    for (const std::string &name : KeyOrderScanner(json).keysOfMember("hosts")) {
        const std::string where = origin + ": host \"" + name + "\"";
        const QJsonValue value = object.value(qs(name));
        if (!value.isObject())
            throw InputError(where + " must be an object " + example);
        const QJsonObject entry = value.toObject();
        for (const QString &key : entry.keys())
            if (!known.count(ss(key)))
                throw InputError(where + " has an unknown key \"" + ss(key)
                                 + "\": known keys are ssh_host, user, port, node, identity_file, ssh_options");
        const auto text = [&](const char *key) {
            const QJsonValue field = entry.value(QLatin1String(key));
            if (!field.isUndefined() && !field.isString())
                throw InputError(where + ": \"" + key + "\" must be a string");
            return ss(field.toString());
        };
        RemoteHost host;
        host.name = name;
        host.sshHost = text("ssh_host");
        host.user = text("user");
        host.node = text("node");
        host.identityFile = text("identity_file");
        if (entry.contains(QStringLiteral("port"))) {
            const double port = entry.value(QStringLiteral("port")).toDouble(-1);
            if (port < 1 || port > 65535 || port != std::floor(port))
                throw InputError(where + ": \"port\" (ssh's port) must be a number in 1-65535");
            host.sshPort = uint16_t(port);
        }
        if (entry.contains(QStringLiteral("ssh_options"))) {
            const QJsonValue options = entry.value(QStringLiteral("ssh_options"));
            if (!options.isArray())
                throw InputError(where
                                 + ": \"ssh_options\" must be a list of ssh -o options, like "
                                   "[\"UserKnownHostsFile=/path/known_hosts\"]");
            for (const QJsonValue option : options.toArray()) {
                if (!option.isString() || !option.toString().contains(QLatin1Char('=')))
                    throw InputError(where + ": each of \"ssh_options\" must be a string \"Name=value\"");
                host.sshOptions.push_back(ss(option.toString()));
            }
        }
        // Control characters would let a host entry smuggle a second
        // command into the line ssh runs.
        for (const std::string *field : {&host.name, &host.sshHost, &host.user, &host.node, &host.identityFile})
            for (char c : *field)
                if (static_cast<unsigned char>(c) < 0x20)
                    throw InputError(where + " holds a control character: remove it");
        hosts.push_back(std::move(host));
    }
    return hosts;
}

std::string remoteHostsJson(const std::vector<RemoteHost> &hosts)
{
    std::string text = ",\n    \"hosts\": {\n";
    for (size_t i = 0; i < hosts.size(); ++i) {
        const RemoteHost &h = hosts[i];
        std::vector<std::string> fields;
        if (!h.sshHost.empty())
            fields.push_back("\"ssh_host\": " + jsonString(h.sshHost));
        if (!h.user.empty())
            fields.push_back("\"user\": " + jsonString(h.user));
        if (h.sshPort != 0)
            fields.push_back("\"port\": " + std::to_string(h.sshPort));
        if (!h.node.empty())
            fields.push_back("\"node\": " + jsonString(h.node));
        if (!h.identityFile.empty())
            fields.push_back("\"identity_file\": " + jsonString(h.identityFile));
        if (!h.sshOptions.empty()) {
            std::string list;
            for (const std::string &option : h.sshOptions)
                list += (list.empty() ? "" : ", ") + jsonString(option);
            fields.push_back("\"ssh_options\": [" + list + "]");
        }
        std::string body;
        for (const std::string &field : fields)
            body += (body.empty() ? "" : ", ") + field;
        text += "        " + jsonString(h.name) + ": {" + body + "}" + (i + 1 < hosts.size() ? ",\n" : "\n");
    }
    return text + "    }";
}

} // namespace

const std::vector<std::string> &trainingFlagNames()
{
    static const std::vector<std::string> names = {
        "mode",
        "issync",
        "staleness",
        "replicas_to_aggregate",
        "total_num_replicas",
        "learning_rate_by_staleness",
        "model",
        "dataset",
        "samples_per_shard",
        "eval_dataset",
        "eval_fraction",
        "optimizer",
        "learning_rate",
        "batch_size",
        "last_step",
        "display_step",
        "staleness_probe_every",
        "logdir",
        "save_checkpoint_secs",
        "max_to_keep",
        "logdir_max_mb",
        "seed",
        "min_slice_bytes",
        "nonfinite_gradients",
        "hang_timeout_secs",
        "chief_handover",
        "compute_ms",
        "compute_jitter",
        "straggler_ms",
    };
    return names;
}

const std::vector<std::string> &perWorkerFlagNames()
{
    static const std::vector<std::string> names = {"compute_ms", "compute_jitter", "straggler_ms"};
    return names;
}

namespace {

std::string nameList(const std::vector<std::string> &names)
{
    std::string list;
    for (const std::string &name : names)
        list += (list.empty() ? "" : ", ") + name;
    return list;
}

// "worker_command": ["/usr/bin/python3", "train.py", "--batch_size=64"]. The
// app appends the cluster and task flags to it, so a command that gives them
// itself would contradict them (and each worker needs its own --task_index).
std::vector<std::string> parseWorkerCommand(const QJsonValue &value, const std::string &where)
{
    const std::string example = "like [\"/usr/bin/python3\", \"train.py\", \"--batch_size=64\"]";
    if (!value.isArray())
        throw InputError(where + " must be a list of strings, the program and then its arguments, " + example);
    std::vector<std::string> command;
    for (const QJsonValue word : value.toArray()) {
        if (!word.isString())
            throw InputError(where + " must hold only strings, the program and then its arguments, " + example);
        command.push_back(ss(word.toString()));
    }
    if (command.empty() || command.front().empty())
        throw InputError(where + " names no program: give the program first, then its arguments, " + example
                         + " (or leave it out for parasync-node)");
    for (const std::string &word : command) {
        // As for "hosts": over ssh the command becomes a shell command line.
        for (char c : word)
            if (static_cast<unsigned char>(c) < 0x20)
                throw InputError(where + " holds a control character: remove it");
        for (const std::string flag : {"--ps_hosts", "--worker_hosts", "--job_name", "--task_index", "--cluster_file"})
            if (word == flag || word.rfind(flag + "=", 0) == 0)
                throw InputError(where + " gives " + flag
                                 + ": leave it out, the app adds the cluster and task flags to each worker's command");
    }
    return command;
}

std::string commandJson(const std::vector<std::string> &command)
{
    std::string list;
    for (const std::string &word : command)
        list += (list.empty() ? "" : ", ") + jsonString(word);
    return "[" + list + "]";
}

// "per_worker": {"1": {"compute_ms": 200, "worker_command": [...]}}: one
// worker's pace and command, by index.
void parsePerWorker(const QJsonObject &root, const std::string &origin, ClusterFile &file)
{
    if (!root.contains(QStringLiteral("per_worker")))
        return;
    const std::string example = "like {\"1\": {\"straggler_ms\": 150}}";
    const QJsonValue value = root.value(QStringLiteral("per_worker"));
    if (!value.isObject())
        throw InputError(origin + ": \"per_worker\" must be an object " + example);
    const QJsonObject object = value.toObject();
    const auto &known = perWorkerFlagNames();
    const ClusterSpec &cluster = file.cluster;
    for (const QString &indexText : object.keys()) {
        const std::string where = origin + ": \"per_worker\" \"" + ss(indexText) + "\"";
        bool ok = false;
        const int index = indexText.toInt(&ok);
        if (!ok || index < 0 || QString::number(index) != indexText)
            throw InputError(where + ": keys are worker indexes, " + example);
        if (index >= cluster.numWorkers())
            throw InputError(where + ": the cluster has " + std::to_string(cluster.numWorkers())
                             + " workers (indexes 0-" + std::to_string(cluster.numWorkers() - 1) + ")");
        const QJsonValue entry = object.value(indexText);
        if (!entry.isObject())
            throw InputError(where + " must be an object " + example);
        auto &flags = file.perWorker[index];
        const QJsonObject flagObject = entry.toObject();
        for (const QString &key : flagObject.keys()) {
            if (key == QLatin1String("worker_command")) {
                file.perWorkerCommand[index] = parseWorkerCommand(flagObject.value(key), where + " \"worker_command\"");
                continue;
            }
            if (std::find(known.begin(), known.end(), ss(key)) == known.end())
                throw InputError(where + " has an unknown key \"" + ss(key) + "\": a worker's own keys are "
                                 + nameList(known)
                                 + " and worker_command (the rest goes in \"training\", for every task)");
            flags.emplace_back(ss(key), trainingValueText(flagObject.value(key), ss(key), origin));
        }
        if (flags.empty())
            file.perWorker.erase(index);
    }
}

} // namespace

ClusterFile parseClusterFile(const std::string &json, const std::string &originForErrors)
{
    const std::string origin = originForErrors.empty() ? std::string("cluster file") : originForErrors;
    const QJsonObject root = parseJson(json, origin).object();
    ClusterFile file;
    file.cluster = parseClusterObject(root, origin).spec;
    file.cluster.validate();
    file.hosts = parseRemoteHosts(json, root, origin);
    parsePerWorker(root, origin, file);
    if (root.contains(QStringLiteral("worker_command")))
        file.workerCommand
            = parseWorkerCommand(root.value(QStringLiteral("worker_command")), origin + ": \"worker_command\"");

    if (!root.contains(QStringLiteral("training")))
        return file;
    const QJsonValue trainingValue = root.value(QStringLiteral("training"));
    if (!trainingValue.isObject())
        throw InputError(origin + ": \"training\" must be an object like {\"mode\": \"sync\", \"batch_size\": 10}");
    const QJsonObject training = trainingValue.toObject();

    const auto &known = trainingFlagNames();
    std::set<std::string> seen;
    for (const std::string &key : KeyOrderScanner(json).keysOfMember("training")) {
        if (std::find(known.begin(), known.end(), key) == known.end()) {
            throw InputError(origin + ": unknown key \"" + key + "\" in \"training\": known keys are "
                             + nameList(known));
        }
        if (!seen.insert(key).second)
            throw InputError(origin + ": \"" + key + "\" appears twice in \"training\": keep one");
        file.training.emplace_back(key, trainingValueText(training.value(qs(key)), key, origin));
    }
    return file;
}

ClusterFile readClusterFile(const std::string &path)
{
    QFile file(qs(path));
    if (!file.exists())
        throw InputError("cluster file '" + path + "' does not exist: check the path");
    if (!file.open(QIODevice::ReadOnly))
        throw InputError("cannot read cluster file '" + path + "': " + ss(file.errorString()));
    return parseClusterFile(file.readAll().toStdString(), "cluster file '" + path + "'");
}

void writeClusterFile(const std::string &path, const ClusterFile &file)
{
    // Written by hand rather than through QJsonObject, which would sort the
    // training flags alphabetically instead of keeping their order.
    std::string text = "{\n    \"cluster\": {\n";
    text += "        \"ps\": " + hostListJson(file.cluster.ps, "        ") + ",\n";
    if (file.cluster.replicated())
        text += "        \"ps_backup\": " + hostListJson(file.cluster.psBackups, "        ") + ",\n";
    text += "        \"worker\": " + hostListJson(file.cluster.workers, "        ") + "\n";
    text += "    }";
    if (!file.hosts.empty())
        text += remoteHostsJson(file.hosts);
    if (!file.training.empty()) {
        text += ",\n    \"training\": {\n";
        for (size_t i = 0; i < file.training.size(); ++i) {
            const auto &[key, value] = file.training[i];
            text += "        " + jsonString(key) + ": " + trainingValueJson(value)
                    + (i + 1 < file.training.size() ? ",\n" : "\n");
        }
        text += "    }";
    }
    if (!file.workerCommand.empty())
        text += ",\n    \"worker_command\": " + commandJson(file.workerCommand);
    // A worker's pace flags and its command share its "per_worker" entry.
    std::set<int> ownEntries;
    for (const auto &entry : file.perWorker)
        ownEntries.insert(entry.first);
    for (const auto &entry : file.perWorkerCommand)
        ownEntries.insert(entry.first);
    if (!ownEntries.empty()) {
        text += ",\n    \"per_worker\": {\n";
        size_t n = 0;
        for (const int index : ownEntries) {
            std::string body;
            if (const auto flags = file.perWorker.find(index); flags != file.perWorker.end())
                for (const auto &[key, value] : flags->second)
                    body += (body.empty() ? "" : ", ") + jsonString(key) + ": " + trainingValueJson(value);
            if (const auto command = file.perWorkerCommand.find(index); command != file.perWorkerCommand.end())
                body += (body.empty() ? "" : ", ") + std::string("\"worker_command\": ") + commandJson(command->second);
            text += "        \"" + std::to_string(index) + "\": {" + body + "}"
                    + (++n < ownEntries.size() ? ",\n" : "\n");
        }
        text += "    }";
    }
    text += "\n}\n";

    const QFileInfo info(qs(path));
    QDir().mkpath(info.absolutePath());
    // QSaveFile writes a temporary and renames it: a crash never leaves half a file.
    QSaveFile out(qs(path));
    if (!out.open(QIODevice::WriteOnly))
        throw InputError("cannot write cluster file '" + path + "': " + ss(out.errorString()));
    out.write(text.data(), qint64(text.size()));
    if (!out.commit())
        throw InputError("cannot write cluster file '" + path + "': " + ss(out.errorString()));
}

} // namespace parasync
