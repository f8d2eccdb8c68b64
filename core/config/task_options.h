#pragma once

// What one parasync-node task is told: the training flags every task of a
// cluster shares, how it talks to the others, and its place in the cluster.
// The vocabulary of the engine, the launcher and the app; the parser that
// fills it from a command line is node_options.h, which only parsers include.

#include "config/cluster_spec.h"
#include "config/update_modes.h" // the mode names and their parsing, used with the flags
#include "proto/parasync.pb.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace parasync {

// Simulated work per worker step, so a person can follow a cluster on one
// machine where the demo's real maths takes microseconds, and so straggler
// experiments are repeatable. Each step sleeps a log-normal time with mean
// computeMs and coefficient of variation computeJitter (long-tailed, as real
// step times are), plus the straggler delay. A worker may have its own
// (a cluster file's "per_worker"); the app's speed control and the straggler
// control change them while it trains.
struct WorkerPace
{
    int computeMs = 0;          // --compute_ms (0: full speed)
    float computeJitter = 0.3f; // --compute_jitter
    int stragglerMs = 0;        // --straggler_ms
    bool operator==(const WorkerPace &) const = default;
};
constexpr int kMaxComputeMs = 60000;
// --max_workers at most: ps:0 keeps a row for every index.
constexpr int kMaxWorkers = 4096;
constexpr float kMaxComputeJitter = 4.0f;

// Training flags: the same for every task of a cluster (the seeds run one
// script everywhere), but for the pace, which may differ per worker.
// Defaults make the three-port demo converge in seconds at full speed.
struct TrainingOptions
{
    // --mode --staleness --replicas_to_aggregate --total_num_replicas --learning_rate_by_staleness
    proto::ModeConfig mode;
    std::string model = "linear";   // --model
    std::string dataset;            // --dataset (empty: the model's default)
    std::string optimizer = "sgd";  // --optimizer
    float learningRate = 0.05f;     // --learning_rate
    int batchSize = 10;             // --batch_size
    int64_t samplesPerShard = 100;  // --samples_per_shard
    int64_t minSliceBytes = 262144; // --min_slice_bytes (0: variables stay whole)
    std::string evalDataset;        // --eval_dataset (empty: none)
    double evalFraction = 0;        // --eval_fraction (0: none)
    int64_t lastStep = 2000;        // --last_step
    int64_t displayStep = 100;      // --display_step
    // --staleness_probe_every: workers measure what staleness costs on every
    // Nth step (engine/staleness_cost.h); 0: never.
    int64_t stalenessProbeEvery = 100;
    std::string logdir;          // --logdir (empty: no run directory)
    int saveCheckpointSecs = 50; // --save_checkpoint_secs
    int maxToKeep = 5;           // --max_to_keep
    int logdirMaxMb = 1024;      // --logdir_max_mb: ps:0's records' budget in MiB (0: none)
    uint64_t seed = 1;           // --seed
    bool applyNonfinite = false; // --nonfinite_gradients=reject|apply
    int hangTimeoutSecs = 30;    // --hang_timeout_secs (0: no watchdog)
    // --max_workers: an elastic cluster's worker indexes reach up to this
    // (torchrun's --nnodes=MIN:MAX): workers beyond --worker_hosts may join
    // while it trains. 0: the --worker_hosts count, no newcomers.
    int maxWorkers = 0;
    // --straggler_threshold: ps:0 flags a worker whose steps take this many
    // times the others' (engine/straggler_detector.h); 0: never.
    float stragglerThreshold = 2.0f;
    bool chiefHandover = false; // --chief_handover=1
    WorkerPace pace;            // --compute_ms --compute_jitter --straggler_ms

    // Whether the chief scores the model on held-out data.
    bool hasHeldOutData() const { return !evalDataset.empty() || evalFraction > 0; }

    TrainingOptions();
    // The flags as a JSON object (for cluster.json and the app).
    std::string toJson() const;
};

// How a task talks to the others: TLS files and limits. Paths, not
// secrets (the cluster token travels apart, see cluster_token.h).
struct ConnectionOptions
{
    std::string tlsCert;                    // --tls_cert: this task's certificate (PEM)
    std::string tlsKey;                     // --tls_key: its private key (PEM)
    std::string tlsCa;                      // --tls_ca: the CA that signed every task's certificate
    bool tlsMutual = false;                 // --tls_mutual: servers require a client certificate too
    int maxMessageBytes = 64 * 1024 * 1024; // --max_message_bytes
    int heartbeatMs = 1000;                 // --heartbeat_ms
    int psLeaseMs = 1000;                   // --ps_lease_ms: a replicated pair's lease (node/lease.h)
    bool dataLink = true;                   // --data_link: big tensors' values beside the stream (wire/data_link.h)
    bool tls() const { return !tlsCert.empty() || !tlsKey.empty() || !tlsCa.empty() || tlsMutual; }
};

// Everything one parasync-node process needs.
struct NodeOptions
{
    ClusterSpec cluster;
    TaskId task;
    TrainingOptions training;
    ConnectionOptions connection;
    std::string clusterTokenFile; // --cluster_token_file
    bool insecure = false;        // --insecure: non-loopback without a token
    bool generateToken = false;   // --generate_token: make a token and exit
    bool help = false;            // --help was given: print helpText() and exit 0
    bool version = false;         // --version
    // --metrics_port: where this task serves its metrics over HTTP, on its
    // own host (node/task_metrics.h); 0: nowhere. Per task, as its address.
    int metricsPort = 0;
    // --acknowledgement_log: where a worker appends what the ps tasks
    // acknowledged to it (formats/acknowledgement_log.h); empty: nowhere.
    std::string acknowledgementLog;

    // Worker indexes the cluster can hold: --worker_hosts, or --max_workers
    // when that is more. Every task of a cluster gets the same, so the data
    // shards and ps:0's worker table agree whichever workers come.
    int workerSlots() const { return std::max(cluster.numWorkers(), training.maxWorkers); }
};

} // namespace parasync
