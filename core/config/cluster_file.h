#pragma once

// The cluster file: the cluster, the hosts the app reaches over SSH, the
// training flags and each worker's own -- what the app's designer saves and
// `parasync-node --cluster_file` and the app read.

#include "config/cluster_spec.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace parasync {

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
