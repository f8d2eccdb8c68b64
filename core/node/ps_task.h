#pragma once

// One parameter-server task's logic: membership (join, leave, death), the
// updates (ps:0's update policy, the other tasks' shards), the hang watchdog
// and the status it reports. Its calls take the streams of ps_calls.h; the
// gRPC services that hand them over are in ps_service.h, so that tests and
// the fuzzer drive this logic in-process.

#include "config/node_options.h"
#include "engine/parameter_shard.h"
#include "engine/telemetry_hub.h"
#include "engine/update_policy.h"
#include "formats/run_log.h"
#include "node/ps_calls.h"
#include "wire/rpc_settings.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace parasync {

class PsServer;

// One parameter-server task. Every ps task holds a shard of the variables and
// serves ParameterService; ps:0 also keeps the global step and the update
// policy, serves ClusterControl and Telemetry, and writes the run's step log.
//
// Threads: gRPC calls each handler on its own thread (tests and the fuzzer
// call them from threads of their own); a handler may block (sync barrier,
// staleness bound) on m_changed. All state is guarded by m_mutex. run()
// blocks the calling thread until the task should exit. A task that is never
// start()ed serves no address: its calls are made in-process only.
class PsTask
{
public:
    using Log = std::function<void(const std::string &)>;

    PsTask(NodeOptions options, RpcSettings rpc, Log log);
    ~PsTask();

    // Binds the task's address and starts serving. Throws InputError (address
    // in use, naming the holder; bad logdir).
    void start();
    // Blocks until every worker that joined has finished (or died) after the
    // last step, or until stopped. Then tells the other ps tasks to stop
    // (ps:0), ends telemetry streams and shuts the server down. Returns the
    // process exit code.
    int run();
    // Asks run() to return; thread-safe, callable from signal-handling code
    // paths that are not async-signal contexts.
    void requestStop(const std::string &reason);

    // --- the calls, as ps_service.cpp hands them over; thread-safe ---
    // ParameterService.Train: one worker's stream of join, push and leave
    // requests, answered in order. Blocks for the stream's life; a push may
    // be held (sync barrier, staleness bound). Ends the stream with
    // InvalidArgument (index not in the cluster, gradients of the wrong count,
    // shape or size, a step from the future), FailedPrecondition (a push
    // before the join or before the chief initialised, another model),
    // AlreadyExists (another live process holds the worker index) or
    // RetryLater (the index's old connection is open but may be dead).
    CallStatus train(TrainStream &stream);
    CallStatus initialize(const proto::InitializeRequest &request, proto::InitializeResponse *response);
    CallStatus snapshot(proto::SnapshotResponse *response);
    CallStatus setMode(const proto::SetModeRequest &request, proto::SetModeResponse *response);
    proto::ClusterStatusResponse clusterStatus();
    // Telemetry.Watch: batches of events (and the cluster's status every
    // 0.5 s) until the watcher is gone or the cluster finished. Blocks.
    void watch(const proto::WatchRequest &request, WatchStream &stream);
    void reportCheckpoint(const proto::ReportCheckpointRequest &request);
    // TaskControl.GetTaskStatus.
    proto::TaskStatusResponse taskStatus();

    // How ps:0 decides between two processes that claim one worker index.
    struct IdentityTimings
    {
        // A claimant waits this long for the holder's stream to end: a
        // killed worker started again may join before its old stream's end
        // has reached this task.
        std::chrono::milliseconds oldStreamGrace{1000};
        // A holder heard from this recently is live: the claimant is refused
        // rather than told to retry.
        std::chrono::milliseconds holderHeardRecently{2000};
    };
    // Before start() or the first call; tests lengthen the grace so that a
    // loaded machine cannot outwait it.
    void setIdentityTimings(IdentityTimings timings) { m_identityTimings = timings; }

private:
    struct WorkerInfo
    {
        proto::WorkerPhase phase = proto::WORKER_PHASE_UNSPECIFIED;
        bool everJoined = false;
        int64_t pid = 0;
        std::string reason;
        std::string waitingFor;
        // The push being decided: what the telemetry event needs from it.
        proto::PushRequest lastPush;
        std::chrono::steady_clock::time_point arrival;
        // The hold after the previous push (ssp), reported with the next step.
        int64_t previousHoldUs = 0;
        proto::WorkerPhase previousHoldReason = proto::WORKER_PHASE_UNSPECIFIED;
        // Which stream is the worker's current one (a restarted worker opens
        // a new stream; the old one's end must not mark it dead).
        uint64_t streamId = 0;
        // Whether that stream is still open: the index is held, and a second
        // process claiming it is refused (claimIndexLocked).
        bool streamOpen = false;
        std::string host; // as the worker names its host (JoinRequest.host)
        std::chrono::system_clock::time_point heldSince;
        int64_t nonfinite = 0;
        // Last join or push: the hang watchdog tells a worker that computes
        // slowly (or is frozen) from one that is held by the policy.
        std::chrono::steady_clock::time_point lastSeen;
    };

    bool isCoordinator() const { return m_options.task.index == 0; }
    int64_t lastStep() const { return m_options.training.lastStep; }
    bool doneLocked() const;

    proto::TrainResponse joinLocked(std::unique_lock<std::mutex> &lock, int worker, const proto::JoinRequest &join,
                                    CallStatus *error);
    CallStatus pushLocked(std::unique_lock<std::mutex> &lock, int worker, const proto::PushRequest &push,
                          proto::PushResponse *response);
    // Refuses a staged push where the protocol has none (PushRequest.staged).
    CallStatus checkStaging(const proto::PushRequest &push, bool holdsStaged) const;
    // `staged`: the gradients of an earlier staged push on this stream, of
    // which `push` is ps:0's decision; null when `push` brings its own.
    CallStatus pushShardLocked(std::unique_lock<std::mutex> &lock, const proto::PushRequest &push, Parameters *staged,
                               proto::PushResponse *response);
    void leaveLocked(int worker, const proto::LeaveRequest &leave);
    void streamEndedLocked(int worker, uint64_t streamId, const std::string &reason);
    // One identity per index: OK when `index` is free or held by the same
    // process; AlreadyExists when another live process holds it; RetryLater
    // when the holder's connection is open but may be dead.
    // Waits up to oldStreamGrace for a holder's stream that is closing.
    CallStatus claimIndexLocked(std::unique_lock<std::mutex> &lock, int index, const proto::JoinRequest &join);
    // The end of stream `streamId`: frees the index if that stream held it.
    void releaseIndex(int worker, uint64_t streamId);
    void releaseIndexLocked(int worker, uint64_t streamId);

    void onDecision(int worker, int64_t computedFromStep, const PushDecision &decision);
    void publishLocked(const proto::TelemetryEvent &event);
    void publishWorkerStateLocked(int worker);
    proto::WorkerStatus workerStatusLocked(int worker) const;
    proto::ClusterStatusResponse clusterStatusLocked() const;
    void checkFinishedLocked();
    bool isLiveLocked(int worker) const;
    // The worker doing the chief's duties (see PushResponse.acting_chief);
    // logs a change of hands.
    int actingChiefLocked() const;
    void updateActingChiefLocked();
    // The hang watchdog: called about once a second by run().
    void watchForHangLocked();
    std::string describeWaitLocked() const;
    Parameters parseGradients(const proto::PushRequest &push, std::string *error) const;

    NodeOptions m_options;
    IdentityTimings m_identityTimings;
    RpcSettings m_rpc;
    Log m_log;

    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    // Wakes run() for the end of the run only: m_changed is notified at every
    // sync or ssp step, which woke run() (and had it take m_mutex) each time.
    std::condition_variable m_runWake;
    ParameterShard m_shard;
    std::optional<UpdatePolicy> m_policy; // ps:0 only
    std::vector<WorkerInfo> m_workers;
    proto::ModelSignature m_signature;
    bool m_initialized = false;
    bool m_finished = false;
    bool m_allWorkersFinished = false; // m_finished because every worker reached the last step
    std::string m_stopReason;
    uint64_t m_nextStreamId = 1;
    std::chrono::steady_clock::time_point m_lastStatusLog;
    // Set when the last step is reached while some worker never joined.
    std::optional<std::chrono::steady_clock::time_point> m_finishDeadline;
    static constexpr std::chrono::seconds kLateWorkerGrace{30};
    int m_actingChief = 0;

    // Hang watchdog (ps:0): when the global step last moved.
    int64_t m_progressStep = -1;
    std::chrono::steady_clock::time_point m_progressTime;
    std::chrono::steady_clock::time_point m_lastStallLog;
    proto::Stall m_stall;

    // Non-ps:0 tasks: gradients of updates decided by ps:0, until all arrived.
    struct PendingUpdate
    {
        Parameters sum;
        int received = 0;
        int expected = 0;
    };
    std::map<int64_t, PendingUpdate> m_pendingUpdates;
    // Sync updates applied without every contribution because the rest did
    // not come (a worker died between ps:0 and this task); a contribution
    // arriving after that is not applied twice.
    std::set<int64_t> m_incompleteUpdates;
    int64_t m_updatesApplied = 0;

    TelemetryHub m_telemetry;
    std::unique_ptr<RunLog> m_runLog;
    std::vector<std::string> m_parameterNames;

    // Last: destroyed, and so shut down, before the state its calls use.
    std::unique_ptr<PsServer> m_server;
};

} // namespace parasync
