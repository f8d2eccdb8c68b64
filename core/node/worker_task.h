#pragma once

#include "config/task_options.h"
#include "engine/dataset.h"
#include "engine/model.h"
#include "engine/sparse_table.h"
#include "engine/variable_placement.h"
#include "formats/open_metrics.h"
#include "formats/task_state_line.h"
#include "node/chief_measurement.h"
#include "node/lease.h"
#include "node/worker_meters.h"
#include "wire/ps_client.h"
#include "wire/task_control.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace parasync {

class AcknowledgementLog;

class ChiefDuties;

// One worker task: loads its own shard of the data (between-graph
// replication), pulls parameters, computes gradients, pushes them to the ps
// tasks and follows the update policy's answer. worker:0 is the chief: its
// duties (initialising the variables, checkpoints, summaries) are
// ChiefDuties', which this loop calls at the points they hang on.
//
// run() blocks the calling thread; the task's own server (status, stop,
// straggler delay) answers on its own threads; requestStop() is thread-safe.
// The ps tasks are reached through PsClient and the server is a
// TaskControlServer: gRPC by default, in-process in tests
// (node/in_process_ps_client.h), so that no gRPC header is reached here.
class WorkerTask
{
public:
    using Log = std::function<void(const std::string &)>;
    // How the task reaches its ps tasks and answers its own control calls.
    struct Transport
    {
        std::function<std::unique_ptr<PsClient>(std::vector<std::string> addresses, const RpcSettings &rpc)> connectToPs
            = makeGrpcPsClient;
        // Empty: no control server (a test drives the task itself).
        std::function<std::unique_ptr<TaskControlServer>(const TaskId &task, const HostPort &address,
                                                         const RpcSettings &rpc, TaskControlCallbacks callbacks,
                                                         Log log)>
            serveControl = serveTaskControl;
    };

    // Over gRPC.
    WorkerTask(NodeOptions options, RpcSettings rpc, Log log);
    WorkerTask(NodeOptions options, RpcSettings rpc, Log log, Transport transport);
    ~WorkerTask();

    // Loads the data shard and builds the model (InputError on bad data),
    // then binds the task's address (InputError naming the holder).
    void start();
    // Trains until the global step reaches --last_step or a stop is requested.
    // Returns the exit code: 0 when finished or stopped, 2 when refused by the
    // cluster (a different model or data shape).
    int run();
    void requestStop(const std::string &reason);
    // The worker's own metrics as Prometheus scrapes them (--metrics_port;
    // worker_task_metrics.cpp). Thread-safe.
    std::string metricsText(ExpositionFormat format) const;

private:
    struct PsConnection;
    enum class Phase { Connecting, WaitingForChief, Training, Finished };

    bool stopping() const { return m_stop.stop_requested(); }
    // Connects to every ps task and joins; the chief initialises first.
    // Returns false when stopping.
    bool connectAndJoin();
    enum class JoinOutcome { Joined, Stopping, Lost };
    // One attempt of connectAndJoin(); Lost (and why) when a ps went away
    // or does not serve yet.
    JoinOutcome joinAll(std::string *why);
    // Waits until ps task `ps` answers, and picks the process of its pair
    // that serves. Returns false when stopping.
    bool waitForPs(int ps);
    // What this worker trains, as ps:0 checks it and checkpoints record it:
    // the model's variables, partitioned over the cluster's ps tasks.
    proto::ModelSignature modelSignature() const;
    // Copies the pieces of the variables ps task `ps` answered with into
    // m_params; throws InputError when one has another size than its slice.
    void readParameters(int ps, const google::protobuf::RepeatedPtrField<proto::Tensor> &parameters);
    // Whether `answer` comes from the process that serves `ps`'s pair now:
    // with --ps_backup_hosts, one under a lower lease epoch than the pair
    // answered under before comes from a deposed primary, and is refused
    // (said in the log; the step is then retried on the other process).
    bool answerIsCurrent(PsConnection &ps, const proto::TrainResponse &answer);
    // Where ps task `ps`'s answer puts its values: its slices' rows of m_params.
    const TensorDestinations &parameterDestinations(int ps);
    // Loads m_heldOut and checks it fits the model; throws InputError.
    void loadHeldOutData(const DatasetOptions &training);
    // One training step; returns false when a stream broke (reconnect).
    bool step();
    // What the chief measures on this step's parameters (every
    // --display_step of its steps); false when a stream broke fetching a
    // sparse model's held-out rows.
    bool measureForChief(ChiefMeasurement *measured);
    // ps:0's push, all but the gradients: the step's figures for the
    // telemetry and what the chief measured.
    void describePush(proto::PushRequest *push, float batchLoss, int64_t computeUs, const ChiefMeasurement &measured,
                      const std::optional<proto::StalenessProbe> &probe) const;
    // The step's figures for metricsText() (worker_task_metrics.cpp).
    void addToMeters(const proto::PushResponse &decision, int64_t computeUs, float batchLoss);
    // The step's line in the log, every --display_step updates.
    void logStep(const proto::PushResponse &decision, float batchLoss) const;
    // The step after a probed one (--staleness_probe_every): the probed
    // step's gradient against its batch's gradient at m_params, the
    // parameters this step starts from (engine/staleness_cost.h). nullopt
    // with nothing to compare: no probed step before, a rejoin in between,
    // or a gradient with no direction.
    std::optional<proto::StalenessProbe> finishProbe();
    void leave(bool finished);
    // The state TaskControl reports in words, and -- when it changed -- one
    // state line (task_state_line.h) for whoever reads this task's output.
    void setState(TaskPhase phase, const std::string &detail);
    // Whether the joins offer a data link, for the whole step: on, not TLS.
    bool offersDataLink() const;
    // Connects the link a join granted; on failure says so, and the stream
    // carries the values.
    void openDataLink(PsConnection &ps, const proto::DataLinkGrant &grant);
    std::vector<int64_t> nextBatch();

    // --- a sparse model's table rows (worker_task_rows.cpp) ---
    bool hasTables() const { return !m_tables.empty(); }
    // The distinct ids of each table the samples `batch` of the shard touch.
    std::vector<std::vector<uint64_t>> touchedIds(const std::vector<int64_t> &batch) const;
    // The requests for the ids of `ids` that ps task `ps` holds (psOfRow).
    void addPulls(int ps, const std::vector<std::vector<uint64_t>> &ids,
                  google::protobuf::RepeatedPtrField<proto::RowRequest> *out) const;
    // The rows of m_rowGradient that ps task `ps` holds.
    void addRowGradients(int ps, google::protobuf::RepeatedPtrField<proto::SparseRows> *out) const;
    // Joins every ps task's answered rows into one block per table with
    // the ids of `ids`; throws InputError when an answer lacks a row asked
    // for or brings another.
    void readRows(const std::vector<const google::protobuf::RepeatedPtrField<proto::SparseRows> *> &answers,
                  const std::vector<std::vector<uint64_t>> &ids, RowBlocks *rows) const;
    // Pulls of the rows `requests` ask for, each answer within half of
    // --max_message_bytes (at least one pull, however few the rows).
    std::vector<proto::PullRequest> pullsOf(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests,
                                            bool lookupOnly) const;
    // The rows of `ids` from every ps task, outside a step: PullRequests on
    // every stream, as many as the answers need to fit a message. False
    // when a stream broke.
    bool pullRows(const std::vector<std::vector<uint64_t>> &ids, bool lookupOnly, RowBlocks *rows);
    // The rows of `ids` as the ps tasks make them on first touch (the
    // held-out data's check before joining).
    RowBlocks initialRows(const std::vector<std::vector<uint64_t>> &ids) const;
    // The simulated compute time of one step (WorkerPace): log-normal with the
    // pace's mean and spread; zero at full speed.
    std::chrono::microseconds drawComputeTime();
    // Sleeps `duration` in short slices, so a stop is not kept waiting behind
    // a long step. Returns early when stopping.
    void sleepUnlessStopped(std::chrono::microseconds duration);

    NodeOptions m_options;
    RpcSettings m_rpc;
    // This machine's name, sent with the join: with the pid it names the
    // holder of an index that a second process claims.
    std::string m_hostName;
    Log m_log;

    std::unique_ptr<Model> m_model;
    Dataset m_data;
    // What the chief scores the model on (--eval_dataset, --eval_fraction):
    // loaded by the chief, and by every worker that may take over its duties.
    std::optional<Dataset> m_heldOut;
    std::vector<Variable> m_variables; // names and shapes, model order
    proto::ModelSignature m_signature; // made once in start()
    VariablePlacement m_placement;     // which ps task holds which piece
    Parameters m_params;               // current view, model order
    // A sparse model's tables (empty for a dense model). Its batch is chosen
    // a step ahead, so that a step's push asks for the next batch's rows
    // and the answer brings them: one exchange a step. m_batchRows holds the
    // rows of m_batch's ids, m_rowGradient the step's row gradients; the
    // held-out data's ids are the chief's to look up when it measures.
    std::vector<TableDeclaration> m_tables;
    std::vector<int64_t> m_batch;
    std::vector<std::vector<uint64_t>> m_batchIds;
    RowBlocks m_batchRows;
    RowBlocks m_rowGradient;
    std::vector<std::vector<uint64_t>> m_heldOutIds;
    // The chief's last held-out scores of a sparse model, for the log line
    // (measured every --display_step steps of its own, when it pulls the
    // held-out rows).
    std::vector<float> m_lastHeldOut;
    // The step's gradient, model order: kept so that its vectors keep their
    // storage from step to step, and sent from there (no copy into the push).
    Parameters m_gradient;
    // A probed step's batch and gradient, and the global step of the
    // parameters it was computed at, until the next step compares them
    // (finishProbe); the fresh gradient's storage, kept from probe to probe.
    struct PendingProbe
    {
        std::vector<int64_t> batch;
        Parameters gradient;
        int64_t staleStep = 0;
    };
    std::optional<PendingProbe> m_pendingProbe;
    Parameters m_probeGradient;
    int64_t m_globalStep = 0;
    // Whether m_params came from a ps (this worker joined once): then they
    // are the newest values the chief can give a ps that lost its memory.
    bool m_joinedBefore = false;
    // ps:0's --last_step, as its join answered (0: until stopped).
    int64_t m_clusterLastStep = 0;
    std::atomic<int64_t> m_clock{0}; // read by the status call on a gRPC thread
    // What the ps tasks acknowledged, step by step (--acknowledgement_log).
    std::unique_ptr<AcknowledgementLog> m_acknowledged;
    // Records the step just acknowledged in m_acknowledged.
    void recordAcknowledgement(const proto::PushResponse &decision);
    WorkerMeters m_meters; // each step's figures, for metricsText()
    int64_t m_previousPushUs = 0;
    std::vector<int64_t> m_order;
    size_t m_cursor = 0;
    std::mt19937_64 m_rng;
    bool m_done = false;

    // Moves the bytes of the data links to the ps tasks (wire/data_link.h);
    // declared first, it outlives the streams that hold them.
    std::unique_ptr<DataLinkContext> m_dataLinks;
    std::vector<std::unique_ptr<PsConnection>> m_ps;

    // Requested once, by requestStop() or at the end of run(); also ends the
    // chief's checkpoint thread.
    std::stop_source m_stop;
    std::atomic<int> m_stragglerMs{0};
    // The pace in force (WorkerPace), changed by TaskControl.SetPace.
    std::atomic<int> m_computeMs{0};
    std::atomic<float> m_computeJitter{0};
    // Its own generator, so that the pace never changes which batches a
    // seed gives: runs at different paces train on the same data.
    std::mt19937_64 m_paceRng;
    mutable std::mutex m_stateMutex;
    std::string m_state = "starting";
    std::optional<TaskPhase> m_phase; // as last reported in a state line
    std::string m_phaseDetail;
    std::string m_stopReason;
    // Guards the ps streams' call contexts, which requestStop() cancels from
    // other threads.
    std::mutex m_streamMutex;
    std::condition_variable m_runFinished; // with m_stateMutex
    bool m_finishedRunning = false;
    std::thread m_stopWatchdog;

    // Made in start(); idle on every worker but the chief until taken over.
    std::unique_ptr<ChiefDuties> m_chief;

    Transport m_transport;
    // worker:0 of a cluster with --ps_backup_hosts: its vote in every pair's lease.
    std::optional<LeaseVoter> m_witness;
    std::unique_ptr<TaskControlServer> m_server;
};

} // namespace parasync
