#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parasync {

// "host:port" split and checked.
struct HostPort
{
    std::string host;
    uint16_t port = 0;

    std::string toString() const;
    bool isLoopback() const;
    friend bool operator==(const HostPort &, const HostPort &) = default;
};

// Parses "host:port" (host may be a name, IPv4, or [IPv6]). Throws InputError
// saying what is wrong ("port 99999 is out of range 1-65535", "missing ':port'").
HostPort parseHostPort(const std::string &text);

// PsBackup: the backup of the ps task of the same index (--ps_backup_hosts);
// it runs a ps task's logic and takes over when its primary dies.
enum class JobName { Ps, Worker, PsBackup };

// One task of the cluster: "ps:0", "worker:1".
struct TaskId
{
    JobName job = JobName::Worker;
    int index = 0;

    std::string toString() const; // "ps:0"
    bool isChief() const { return job == JobName::Worker && index == 0; }
    // A ps task or a ps task's backup: either runs PsTask.
    bool isPs() const { return job == JobName::Ps || job == JobName::PsBackup; }
    friend bool operator==(const TaskId &, const TaskId &) = default;
};

// Parses "ps" / "worker" / "ps_backup" (the --job_name values). Throws InputError.
JobName parseJobName(const std::string &text);
std::string jobNameString(JobName job);

// tf.train.ClusterSpec: the ps and worker addresses. Every task gets the same.
struct ClusterSpec
{
    std::vector<HostPort> ps;
    std::vector<HostPort> workers;
    // --ps_backup_hosts: empty, or one backup per ps task, in the same order.
    std::vector<HostPort> psBackups;

    const HostPort &address(const TaskId &task) const;
    int numPs() const { return int(ps.size()); }
    int numWorkers() const { return int(workers.size()); }
    bool replicated() const { return !psBackups.empty(); }
    // The two addresses of ps task `index`, the primary's first: one entry
    // when the cluster has no backups.
    std::vector<HostPort> psPair(int index) const;

    // Checks: at least one ps and one worker, no address used twice. Throws
    // InputError naming the offending entries.
    void validate() const;
    // Throws InputError when `task` is not in the spec ("--task_index=2 but
    // --worker_hosts lists 2 workers (indexes 0-1)").
    void validateTask(const TaskId &task) const;

    // {"ps": [...], "worker": [...]}, as in TF_CONFIG's "cluster".
    std::string toJson() const;

    friend bool operator==(const ClusterSpec &, const ClusterSpec &) = default;
};

// "a:1,b:2" as given to --ps_hosts / --worker_hosts. Empty entries, bad ports
// and an empty list are InputErrors naming the flag.
std::vector<HostPort> parseHostList(const std::string &text, const std::string &flagName);

// TensorFlow's TF_CONFIG:
//   {"cluster": {"ps": ["h:p"], "worker": ["h:p", ...], "chief": [...]},
//    "task": {"type": "worker", "index": 0}}
// A "chief" job, as TF 2 writes it, becomes worker:0 and shifts the others.
struct TfConfig
{
    ClusterSpec cluster;
    TaskId task;
};
TfConfig parseTfConfig(const std::string &json);
// Only TF_CONFIG's "cluster": for a task that takes its job and index from
// --job_name/--task_index, TF_CONFIG's "task" may be absent.
ClusterSpec parseTfConfigCluster(const std::string &json);

// A host the app reaches over SSH to start the tasks whose address names it.
// No password is ever stored: ssh authenticates with a key (identity_file,
// or the user's agent and default keys).
struct RemoteHost
{
    std::string name;                    // the host as the cluster's addresses spell it
    std::string sshHost;                 // where ssh connects; empty: `name`
    std::string user;                    // empty: ssh's default (the local user, ~/.ssh/config)
    uint16_t sshPort = 0;                // 0: ssh's default (22, ~/.ssh/config)
    std::string node;                    // parasync-node there; empty: "parasync-node" on its PATH
    std::string identityFile;            // private key; empty: the agent and ssh's defaults
    std::vector<std::string> sshOptions; // extra "-o" options, e.g. "UserKnownHostsFile=/path"

    std::string connectHost() const { return sshHost.empty() ? name : sshHost; }
    std::string nodeProgram() const { return node.empty() ? std::string("parasync-node") : node; }
    friend bool operator==(const RemoteHost &, const RemoteHost &) = default;
};

// A cluster file (JSON) as the desktop app saves it:
//   {"cluster": {"ps": [...], "worker": [...]},
//    "hosts": {"192.168.139.130": {"user": "alice", "port": 22,
//              "node": "/opt/parasync/bin/parasync-node",
//              "identity_file": "~/.ssh/id_ed25519"}},
//    "training": {"mode": "sync", "learning_rate": 0.05, ...}}
// "hosts" (optional) names the hosts whose tasks are started over SSH; a
// task whose host is not listed runs on this machine. parasync-node itself
// ignores "hosts".
// "training" holds flag names without dashes and their values; it may be
// absent. Unknown keys in "training" are InputErrors (a typo must not be
// silently ignored).
// "worker_command" (optional), e.g. ["/usr/bin/python3", "train.py",
// "--batch_size=64"]: the program and arguments the workers run instead of
// parasync-node -- a Python worker -- to which the app adds the cluster,
// task and connection flags. A worker's own in "per_worker" overrides it.
// parasync-node ignores it, as it ignores "hosts".
struct ClusterFile
{
    ClusterSpec cluster;
    // Flag name (no dashes) -> value as text, in file order.
    std::vector<std::pair<std::string, std::string>> training;
    std::vector<RemoteHost> hosts; // "hosts", in file order
    // "per_worker": {"1": {"straggler_ms": 150}}: pace flags (perWorkerFlagNames)
    // for one worker, over "training"'s. Worker index -> flag name -> text.
    std::map<int, std::vector<std::pair<std::string, std::string>>> perWorker;
    // "worker_command": program and arguments; empty: the workers run parasync-node.
    std::vector<std::string> workerCommand;
    // "per_worker": {"1": {"worker_command": [...]}}: one worker's own command.
    std::map<int, std::vector<std::string>> perWorkerCommand;
};
ClusterFile readClusterFile(const std::string &path);
// The keys "training" may hold: the training flags' names without dashes, in
// --help order (node_options.cpp parses their values).
const std::vector<std::string> &trainingFlagNames();
// The keys a worker's entry in "per_worker" may hold: the pace flags (and
// "worker_command", which is not a flag).
const std::vector<std::string> &perWorkerFlagNames();
ClusterFile parseClusterFile(const std::string &json, const std::string &originForErrors);
void writeClusterFile(const std::string &path, const ClusterFile &file);

} // namespace parasync
