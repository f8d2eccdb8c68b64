#pragma once

// A Kubeflow TFJob (kubeflow.org/v1) for a designed cluster. parasync-node
// runs in the pods unchanged: the training operator gives every pod a
// TF_CONFIG naming the cluster (one headless service per replica,
// "<job>-<type>-<index>.<namespace>.svc:<port>") and the pod's own task, and
// parasync-node takes its cluster and task from TF_CONFIG when no
// --ps_hosts/--job_name are given. The pods' args carry only the training
// flags, the same in every pod, as the seeds run one script everywhere.

#include "config/cluster_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parasync {

// What the person fills in; the replicas come from the designed cluster.
struct TfJobSettings
{
    std::string name = "parasync";   // metadata.name, a DNS-1123 label
    std::string kubernetesNamespace; // metadata.namespace; empty: kubectl's current one
    std::string image;               // the container image that holds parasync-node
    std::vector<std::string> command{"parasync-node"};
    std::vector<std::string> args;           // tfJobArguments() unless the person edits them
    std::string restartPolicy = "OnFailure"; // Always, OnFailure, Never or ExitCode
    // worker:0 as TFJob's own Chief replica (TF 2's layout; parasync-node
    // makes TF_CONFIG's "chief" its worker:0) instead of Worker 0.
    bool chiefReplica = false;
    // A Secret whose key "token" holds the cluster token (parasync-node
    // --generate_token); the pods get it as PARASYNC_CLUSTER_TOKEN. Empty:
    // the pods run with --insecure, as they serve non-loopback addresses.
    std::string tokenSecret;
    uint16_t port = 2222; // the "tfjob-port" every pod listens on
};

// The replica types of a TFJob, as its tfReplicaSpecs name them.
enum class TfJobReplica { Ps, Chief, Worker };
std::string tfJobReplicaName(TfJobReplica replica); // "PS", "Chief", "Worker"

// The training flags of `plan` as the pods' args: what differs from the
// defaults, with no cluster or task flag (TF_CONFIG gives those).
std::vector<std::string> tfJobArguments(const ClusterPlan &plan);

// The TF_CONFIG the training operator sets in the pod of replica `index` of
// `replica`, for a job of `numPs` ps and `numWorkers` workers (the chief
// included) laid out as `settings` says.
std::string kubeflowTfConfig(const TfJobSettings &settings, int numPs, int numWorkers, TfJobReplica replica, int index);

// The manifest as YAML (emitted by yaml-cpp). Throws InputError naming the
// setting that is wrong: a name Kubernetes refuses, an empty image, args that
// give a cluster or task flag (they would make every pod the same task), or
// args parasync-node itself refuses under the TF_CONFIG a pod gets, or
// workers with a command of their own (ClusterPlan::workerCommand).
std::string tfJobManifest(const ClusterPlan &plan, const TfJobSettings &settings);

} // namespace parasync
