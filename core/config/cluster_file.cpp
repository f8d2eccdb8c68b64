#include "config/cluster_file.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/cluster_json.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonValue>
#include <QLocale>
#include <QSaveFile>

#include <algorithm>
#include <cmath>
#include <set>

namespace parasync {

namespace {

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
        "max_workers",
        "straggler_threshold",
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
