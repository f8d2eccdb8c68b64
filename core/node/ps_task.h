#pragma once

// One parameter-server task's logic: membership (join, leave, death), the
// updates (ps:0's update policy, the other tasks' shards), the hang watchdog
// and the status it reports. It serves wire/ps_calls.h's PsHandler; its
// server and its calls to other ps processes come in a PsTransport
// (wire/ps_transport.h), the gRPC one (wire/ps_server.h) wired by
// parasync-node, so that tests and the fuzzer drive this logic in-process.

#include "config/task_options.h"
#include "engine/parameter_shard.h"
#include "engine/straggler_detector.h"
#include "engine/telemetry_hub.h"
#include "engine/update_policy.h"
#include "formats/open_metrics.h"
#include "formats/run_log.h"
#include "node/lease.h"
#include "node/ps_meters.h"
#include "wire/ps_calls.h"
#include "wire/ps_transport.h"
#include "wire/rpc_settings.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace parasync {

// One parameter-server task. Every ps task holds a shard of the variables and
// serves ParameterService; ps:0 also keeps the global step and the update
// policy, serves ClusterControl and Telemetry, and writes the run's step log.
//
// Threads: gRPC calls each handler on its own thread (tests and the fuzzer
// call them from threads of their own); a handler may block (sync barrier,
// staleness bound) on m_changed. All state is guarded by m_mutex. run()
// blocks the calling thread until the task should exit. A task that is never
// start()ed, or given no transport, serves no address: its calls are made
// in-process only.
class PsTask final : public PsHandler
{
public:
    using Log = std::function<void(const std::string &)>;

    PsTask(NodeOptions options, RpcSettings rpc, Log log, PsTransport transport = {});
    ~PsTask() override;

    // Starts serving through the transport (binding the task's address) and
    // takes the task's role. Throws InputError (address in use, naming the
    // holder; bad logdir).
    void start();
    // Blocks until every worker that joined has finished (or died) after the
    // last step, or until stopped. Then tells the other ps tasks to stop
    // (ps:0), ends telemetry streams and shuts the server down. Returns the
    // process exit code.
    int run();
    // Asks run() to return; thread-safe, callable from signal-handling code
    // paths that are not async-signal contexts.
    void requestStop(const std::string &reason) override;

    // --- the calls, as ps_server.cpp hands them over; thread-safe ---
    // ParameterService.Train: one worker's stream of join, push and leave
    // requests, answered in order. Blocks for the stream's life; a push may
    // be held (sync barrier, staleness bound). Ends the stream with
    // InvalidArgument (index not in the cluster, gradients of the wrong count,
    // shape or size, a step from the future), FailedPrecondition (a push
    // before the join or before the chief initialised, another model),
    // AlreadyExists (another live process holds the worker index) or
    // RetryLater (the index's old connection is open but may be dead).
    CallStatus train(TrainStream &stream) override;
    CallStatus initialize(const proto::InitializeRequest &request, proto::InitializeResponse *response) override;
    CallStatus snapshot(proto::SnapshotResponse *response) override;
    CallStatus setMode(const proto::SetModeRequest &request, proto::SetModeResponse *response) override;
    proto::ClusterStatusResponse clusterStatus() override;
    // Telemetry.Watch: batches of events (and the cluster's status every
    // 0.5 s) until the watcher is gone or the cluster finished. Blocks.
    CallStatus watch(const proto::WatchRequest &request, WatchStream &stream) override;
    void reportCheckpoint(const proto::ReportCheckpointRequest &request) override;
    // TaskControl.GetTaskStatus.
    proto::TaskStatusResponse taskStatus() override;
    // PsReplication.Follow: a backup follows this task, its primary, for the
    // stream's life: the whole state first, then every change; the workers'
    // answers wait for the backup's acknowledgement. Blocks. Unavailable when
    // this task is not the primary; AlreadyExists when it has a backup.
    CallStatus follow(FollowStream &stream) override;
    // PsLease.Vote: this process's vote for its pair's lease (ps_task_lease.cpp).
    std::string vote(const proto::VoteRequest &request, proto::VoteResponse *response) override;

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

    // The task's metrics as Prometheus scrapes them (--metrics_port): ps:0's
    // carry the cluster's view (ps_task_metrics.cpp). Thread-safe; takes the
    // task's lock briefly.
    std::string metricsText(ExpositionFormat format) const;

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
        // Where it serves TaskControl (JoinRequest.address): the status names
        // a newcomer beyond --worker_hosts by it.
        std::string address;
        std::chrono::system_clock::time_point heldSince;
        int64_t nonfinite = 0;
        // Last join or push: the hang watchdog tells a worker that computes
        // slowly (or is frozen) from one that is held by the policy.
        std::chrono::steady_clock::time_point lastSeen;
        // The time its pushes were held (sync barrier, staleness bound), and
        // since when the hold in progress lasts: the straggler watch leaves
        // it out of the worker's pace.
        std::chrono::microseconds heldTotal{0};
        std::optional<std::chrono::steady_clock::time_point> heldFrom;
    };

    bool isCoordinator() const { return m_options.task.index == 0; }
    // "ps:N", whichever process of a ps pair this is.
    std::string psName() const { return "ps:" + std::to_string(m_options.task.index); }
    // A log line, but none while a backup replays its primary's changes
    // (the primary said them already).
    void note(const std::string &line) const;
    int64_t lastStep() const { return m_options.training.lastStep; }
    bool doneLocked() const;

    // Empty when the join's index and address fit the cluster; else what
    // is wrong and what to do.
    std::string checkJoinIndex(const proto::JoinRequest &join) const;
    // An index beyond --worker_hosts (up to --max_workers).
    bool isNewcomerIndex(int worker) const { return worker >= m_options.cluster.numWorkers(); }
    proto::TrainResponse joinLocked(std::unique_lock<std::mutex> &lock, int worker, const proto::JoinRequest &join,
                                    CallStatus *error);
    // An answer to a push carries its parameters' shapes; their values are
    // in `values`, sent from the shard's memory once m_mutex is let go.
    // `wakeHeld` is set when the push moved the global step while others may
    // be held for it: the caller wakes them once it has let go of m_mutex.
    // A push held at a barrier looks at `stream` every kHeldWorkerLook and
    // gives up when the worker is gone.
    CallStatus pushLocked(std::unique_lock<std::mutex> &lock, int worker, const proto::PushRequest &push,
                          proto::PushResponse *response, ValuesSnapshot *values, bool *wakeHeld,
                          const TrainStream &stream);
    static constexpr std::chrono::milliseconds kHeldWorkerLook{200};
    // Refuses a staged push where the protocol has none (PushRequest.staged).
    CallStatus checkStaging(const proto::PushRequest &push, bool holdsStaged) const;
    // `staged`: an earlier staged push on this stream, whose gradients
    // `push` (ps:0's decision) applies; null when `push` brings its own.
    CallStatus pushShardLocked(std::unique_lock<std::mutex> &lock, const proto::PushRequest &push,
                               const proto::PushRequest *staged, proto::PushResponse *response, ValuesSnapshot *values);
    void leaveLocked(int worker, const proto::LeaveRequest &leave);
    void streamEndedLocked(int worker, uint64_t streamId, const std::string &reason);
    void markDeadLocked(int worker, const std::string &reason);
    CallStatus initializeLocked(const proto::InitializeRequest &request, proto::InitializeResponse *response);
    // ps:0: a joined worker counts as live and training.
    void admitWorkerLocked(int worker, int64_t pid, const std::string &host);
    // A replicated ps:0 that holds less than a joining worker had
    // acknowledged says how many updates were lost (JoinRequest.acknowledged_step).
    void checkAcknowledgedLocked(int worker, int64_t acknowledged);
    // ps:0: a checked gradient goes to the policy, or is rejected as
    // non-finite (false).
    bool takeGradientLocked(int worker, const proto::PushRequest &push, const GradientView &gradient,
                            const RowGradientView &rows);
    // Other ps tasks: an averaged gradient (and its row gradients) is
    // applied as update `update`, its step multiplied by ps:0's
    // `learningRateScale`.
    void applyShardUpdateLocked(int64_t update, const GradientView &average, const RowGradientView &rows,
                                bool incomplete, float learningRateScale);
    UpdatePolicy::ModeChange setModeLocked(const proto::SetModeRequest &request);
    // The cluster's signature, and the parameter names the step log shows.
    void adoptSignatureLocked(const proto::ModelSignature &signature);
    // ps:0 with --logdir: the run's step log and model.json (once).
    void openRunLogLocked();

    // --- replication (ps_task_replication.cpp) ---
    // At start, with a backup configured: follows the other process of the
    // pair when it is the primary (it took over earlier), else serves.
    void chooseRole();
    // A change for the backup, numbered; nothing without one.
    void recordLocked(proto::ReplicaRecord &&record);
    // The sequence number of the last change made.
    int64_t lastRecordLocked() const { return m_recordSequence; }
    // Blocks until the backup applied every change up to `sequence`, or is
    // gone (then the primary trains on alone, and says so). Then, in a
    // replicated pair, whether this process may acknowledge: Unavailable
    // when it does not hold its lease (or no longer serves); `epoch` gets
    // the lease epoch the answer goes out under. An answer that tells the
    // worker nothing of the pair's state (a join told to wait for the
    // chief) needs no lease (`acknowledges` false).
    CallStatus awaitBackup(int64_t sequence, int64_t *epoch = nullptr, bool acknowledges = true);
    proto::ReplicaState exportStateLocked() const;
    proto::ReplicaStatus replicaStatusLocked() const;
    // Throws InputError when the state does not fit this task's cluster.
    void importStateLocked(const proto::ReplicaState &state);
    void applyRecordLocked(const proto::ReplicaRecord &record);
    // The backup's thread: follows the primary until this task takes over or stops.
    void followPrimary();
    // A worker turned to this backup: it takes over if the primary is gone,
    // else says where the primary is (Unavailable).
    CallStatus takeOverIfPrimaryGone(std::unique_lock<std::mutex> &lock);
    // The same for a backup that never received the state: it takes over
    // empty once its primary has been gone for emptyTakeOverAfter().
    CallStatus takeOverWithoutStateIfPrimaryGone(std::unique_lock<std::mutex> &lock);
    // Before a call that changes or reads the pair's state: fine on the
    // primary (or a ps without a backup); a backup takes over or says where
    // the primary is; a process still choosing its role says to ask again.
    // A call that acknowledges nothing (a worker's goodbye) does not wait
    // for the lease (`acknowledges` false).
    CallStatus servesLocked(std::unique_lock<std::mutex> &lock, bool acknowledges = true);
    // The backup becomes the pair's primary; `why` goes to the log. A backup
    // without the state takes over as a ps that lost its memory: the chief
    // gives it the variables again.
    void takeOverLocked(const std::string &why);
    // How long a backup without the state waits, after its last failed
    // attempt to follow, before it serves in its primary's place.
    std::chrono::milliseconds emptyTakeOverAfter() const { return std::chrono::milliseconds(3 * m_rpc.heartbeatMs); }
    // After taking over: workers that did not come back by now are dead.
    void checkRejoinDeadlineLocked();

    // --- the lease (ps_task_lease.cpp) ---
    // A replicated pair with leases (--ps_lease_ms above 0, the default).
    bool leased() const { return m_options.cluster.replicated() && m_options.connection.psLeaseMs > 0; }
    std::chrono::milliseconds leaseLength() const;
    // worker:0's address: the witness of every pair's lease.
    std::string witnessAddress() const;
    // "the witness worker:0 at ..." or "the pair's other process at ...".
    std::string describeVoter(const std::string &address) const;
    // A replicated pair's primary may acknowledge while it holds its lease;
    // a ps task without a backup always may.
    bool leaseHeldLocked(LeaseClock::time_point now) const;
    // Why it does not hold it, voter by voter, in words.
    std::string leaseProblemLocked() const;
    // Waits up to a lease for it to be renewed; Unavailable, in words, if not.
    CallStatus awaitLeaseLocked(std::unique_lock<std::mutex> &lock);
    // At start: this process's vote, and a thread per voter that renews the
    // lease while this process is the primary.
    void startLeaseRenewal();
    void renewLease(const std::string &voter);
    // Asks `voter` for its vote for this process under `epoch`, with the
    // lock let go for the call (VoteRequest's alone_turn and holds_turn).
    VoteResult askVoteUnlocked(std::unique_lock<std::mutex> &lock, const std::string &voter, int64_t epoch,
                               int64_t aloneTurn, int64_t holdsTurn);
    // A primary acknowledges updates its backup does not hold: none
    // follows, or the one that does has not taken the state yet. Said in
    // its votes (VoteRequest.alone_turn: m_aloneTurns), so that the voters
    // keep the other process from taking over without them.
    bool servesAloneLocked() const;
    void countVoteLocked(const std::string &voter, int64_t epoch, LeaseClock::time_point askedAt,
                         const VoteResult &result);
    // A backup that is to take over wins the lease first, under a higher
    // epoch: its own vote and the witness's or its old primary's.
    CallStatus winLeaseLocked(std::unique_lock<std::mutex> &lock);
    // A primary whose lease ended learns that another epoch began: it stops
    // serving, drops its state and follows the other process.
    void stepDownLocked(const std::string &why);
    std::string peerAddress() const;
    // The transport's askPeer; without a transport (in-process) no peer is
    // there.
    PeerStatus askPeer(const std::string &address, std::chrono::milliseconds timeout) const;
    std::string ownAddress() const;
    // One identity per index: OK when `index` is free or held by the same
    // process; AlreadyExists when another live process holds it; RetryLater
    // when the holder's connection is open but may be dead.
    // Waits up to oldStreamGrace for a holder's stream that is closing.
    CallStatus claimIndexLocked(std::unique_lock<std::mutex> &lock, int index, const proto::JoinRequest &join);
    // The end of stream `streamId`: frees the index if that stream held it.
    void releaseIndex(int worker, uint64_t streamId);
    void releaseIndexLocked(int worker, uint64_t streamId);

    void onDecision(int worker, int64_t computedFromStep, const PushDecision &decision);
    // Telemetry and the step log. With a backup, an event waits until the
    // backup holds the change that made it (publishAcknowledgedLocked), so
    // that the log never shows an update a failover could lose; while a
    // backup replays, its events wait for the takeover.
    void publishLocked(const proto::TelemetryEvent &event);
    void publishNowLocked(const proto::TelemetryEvent &event);
    void publishAcknowledgedLocked();
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
    // ps:0: compares the live workers' paces, about once a second (run()),
    // and says when a worker becomes, or stops being, a straggler.
    void watchForStragglersLocked();
    std::string describeStragglerLocked(const StragglerDetector::Change &change) const;
    std::string describeWaitLocked() const;
    // The push's gradients checked against the variables this task holds, as
    // views of the push's own tensors (valid while `push` is unchanged).
    GradientView parseGradients(const proto::PushRequest &push, std::string *error) const;
    // An update's tensors checked the same way (a record from ps:k's primary).
    GradientView viewGradients(const google::protobuf::RepeatedPtrField<proto::Tensor> &tensors,
                               std::string *error) const;

    // --- the rows of a sparse model's tables (ps_task_rows.cpp) ---
    // A push's row gradients checked as a hostile client could fill them
    // (sparse_rows.h: rowBlocksProblem), and each row held here (pulled
    // before), as views of the push. The pull it carries is the caller's
    // to check (pullProblem), once, before anything is applied.
    RowGradientView parseRowGradients(const proto::PushRequest &push, std::string *error) const;
    // What is wrong with the ids a request asks rows for (sparse_rows.h:
    // rowRequestsProblem), or an answer that would not fit a message; empty
    // when nothing.
    std::string pullProblem(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests) const;
    // Gathers the rows `requests` ask for into `out`, made on first touch
    // unless `lookupOnly` (a new row is recorded for the backup), and counts
    // them. The requests were checked (pullProblem): a step checks its
    // push's pull before it applies the gradient, and the ids are not
    // walked again here.
    void gatherRowsLocked(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests, bool lookupOnly,
                          google::protobuf::RepeatedPtrField<proto::SparseRows> *out);
    // A PullRequest on a worker's stream.
    CallStatus pullLocked(const proto::PullRequest &pull, proto::PullResponse *response);
    // Applies row gradients to the tables, counting them.
    void applyRowsLocked(const RowGradientView &rows, float learningRateScale);
    // What each table holds here, for TaskStatus and the metrics.
    std::vector<proto::TableStatus> tableStatusLocked() const;

    NodeOptions m_options;
    IdentityTimings m_identityTimings;
    RpcSettings m_rpc;
    Log m_log;
    PsTransport m_transport;

    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    // Wakes run() for the end of the run only: m_changed is notified at every
    // sync or ssp step, which woke run() (and had it take m_mutex) each time.
    std::condition_variable m_runWake;
    ParameterShard m_shard;
    std::optional<UpdatePolicy> m_policy; // ps:0 only
    std::vector<WorkerInfo> m_workers;
    proto::ModelSignature m_signature;
    // The signature's tables, and what crossed the wire for each here.
    std::vector<TableDeclaration> m_tables;
    struct TableMeters
    {
        int64_t rowsPulled = 0;
        int64_t rowsPushed = 0;
        int64_t wireBytes = 0;
        // A pull's ids are distinct, so no id is counted more than once a
        // pull, and Space-Saving tells the hottest apart only with more
        // counters than the ids most pulls share: with 64, a click log's
        // ps task whose every pull held ~70 common ids reported 16 ids of
        // equal, uncertain counts (the app's Tables tab). 1,024 counters
        // take 40 KB a table. Counting a pull's ~500 ids in them costs
        // about what gathering their rows does (bench_sparse_table's
        // BM_HotIdsAdd/1024), so one pull in kHotIdsEvery is counted and the
        // counts are reported scaled back: the ids hot enough to show are in
        // most pulls, and so in most counted ones.
        static constexpr int64_t kHotIdsEvery = 8;
        HotIds hot{1024};
        int64_t pulls = 0;
    };
    std::vector<TableMeters> m_tableMeters;
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
    // ps:0 with --straggler_threshold above 0.
    std::optional<StragglerDetector> m_stragglers;
    std::chrono::steady_clock::time_point m_lastStragglerLook;

    // Non-ps:0 tasks: gradients of updates decided by ps:0, until all arrived.
    struct PendingUpdate
    {
        Parameters sum;
        RowGradients rows; // summed id by id
        int received = 0;
        int expected = 0;
    };
    std::map<int64_t, PendingUpdate> m_pendingUpdates;
    // Sync updates applied without every contribution because the rest did
    // not come (a worker died between ps:0 and this task); a contribution
    // arriving after that is not applied twice.
    std::set<int64_t> m_incompleteUpdates;
    int64_t m_updatesApplied = 0;

    // Replication. The role is UNSPECIFIED without --ps_backup_hosts.
    proto::ReplicaRole m_role = proto::REPLICA_ROLE_UNSPECIFIED;
    std::atomic<bool> m_replaying{false};
    // Primary: the backup following it, and the changes not yet sent to it.
    struct Follower
    {
        uint64_t id = 0;
        std::string who; // "127.0.0.1:2225 (pid 123 on host 'h')"
        std::deque<proto::ReplicaRecord> queue;
        // The record of the whole state it starts from: until it acknowledges
        // that one, it holds nothing this primary acknowledged before.
        int64_t stateSequence = 0;
    };
    std::optional<Follower> m_follower;
    uint64_t m_nextFollowerId = 1;
    int64_t m_recordSequence = 0; // last change numbered
    int64_t m_ackedSequence = 0;  // last change the backup applied
    // An acknowledgement came, or the backup went: awaitBackup() looks.
    std::condition_variable m_replicaChanged;
    // A record is queued for the backup, or its stream must end: only the
    // writer in follow() waits here, so a record wakes no worker's call.
    std::condition_variable m_recordQueued;
    // Primary: events of changes the backup has not acknowledged yet,
    // with the change's sequence number.
    std::deque<std::pair<int64_t, proto::TelemetryEvent>> m_unacknowledgedEvents;
    // Backup: events of the last changes it applied, which its primary may
    // not have published or written to disk yet, and the change being applied.
    std::deque<std::pair<int64_t, proto::TelemetryEvent>> m_heldEvents;
    static constexpr size_t kHeldEvents = 20000;
    int64_t m_applyingSequence = 0;
    int64_t m_primaryPublishedThrough = 0; // ReplicaRecord.published_through
    // Backup: whether it holds its primary's state, and its link to it.
    bool m_hasState = false;
    bool m_following = false; // its state is current: the stream to the primary is up
    std::string m_primaryLostReason;
    // Backup: since when every attempt to follow its primary has failed
    // (unset before the first attempt and while it follows). A backup
    // without the state serves in its primary's place, empty, only once its
    // primary has been gone this long (takeOverIfPrimaryGone).
    std::optional<std::chrono::steady_clock::time_point> m_primaryGoneSince;
    // Primary: why its last backup went (empty while one follows).
    std::string m_backupLostReason = "no backup has attached yet";
    int m_failovers = 0;
    // It took over without the state: its step log starts the history again
    // rather than continuing the old primary's (openRunLogLocked).
    bool m_tookOverEmpty = false;
    int64_t m_lastFailoverStep = 0;
    // Acknowledged updates this process found it does not hold, at most
    // (checkAcknowledgedLocked).
    int64_t m_acknowledgedLost = 0;
    std::unique_ptr<PrimaryLink> m_primaryLink;
    std::thread m_followThread;
    bool m_followThreadRunning = false; // followPrimary() has not returned

    // The lease. This process's vote (replicated tasks only), the promises
    // it holds as primary, the epoch it serves under (a backup: the last it
    // knows), the highest a voter reported, and each voter's last refusal.
    std::optional<LeaseVoter> m_voter;
    LeaseHold m_lease;
    int64_t m_epoch = 0;
    int64_t m_epochSeen = 0;
    std::map<std::string, std::string> m_voterProblems;
    bool m_leaseLapseLogged = false;
    bool m_leaseEverHeld = false; // as primary, in this process's life

    // Changes when the votes held so far stop counting (the backup went):
    // a renewal asked before does not count, and the renewals ask at once.
    uint64_t m_leaseRound = 0;
    bool m_campaigning = false;
    // Times a primary of this pair began serving alone (ReplicaState.
    // alone_turns): at start, after losing its backup, after taking over.
    int64_t m_aloneTurns = 0;
    // A backup that won the lease over a process that served alone
    // (VoteResponse.served_alone_by): that process, whose updates it lacks.
    std::string m_wonOverAlone;
    // The lease was won, renewed or lost, or the role changed, or the
    // primary began or stopped serving alone.
    std::condition_variable m_leaseChanged;
    std::vector<std::thread> m_leaseThreads;
    // After taking over: when workers that did not rejoin count as dead.
    std::optional<std::chrono::steady_clock::time_point> m_rejoinDeadline;

    TelemetryHub m_telemetry;
    // What --metrics_port shows beyond the state above (ps_task_metrics.cpp).
    PsMeters m_meters;
    std::unique_ptr<RunLog> m_runLog;
    std::vector<std::string> m_parameterNames;

    // Last: destroyed, and so shut down, before the state its calls use.
    std::unique_ptr<PsServing> m_server;
};

} // namespace parasync
