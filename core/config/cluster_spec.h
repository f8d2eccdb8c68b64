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
    // The host without an IPv6 address's brackets, as getaddrinfo() takes it.
    std::string bareHost() const;
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

} // namespace parasync
