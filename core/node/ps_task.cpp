// PsTask: its life (start, run, stop), the Train stream each worker opens,
// and what the chief and a control client ask of ps:0 -- initialise the
// variables, a snapshot, a change of mode. The other concerns, behind the
// same lock: membership (ps_task_membership.cpp), pushes and their holds
// (ps_task_pushes.cpp), status and telemetry (ps_task_status.cpp), the
// backup pair (ps_task_replication.cpp).

#include "node/ps_task.h"

#include "base/clock.h"
#include "base/error.h"
#include "formats/task_state_line.h"
#include "node/ps_signature_check.h"

#include <chrono>

namespace parasync {

namespace {

// Column names for metrics.csv: every scalar of a small model ("w", "b"), or
// none for models too large to log per step.
std::vector<std::string> parameterNames(const proto::ModelSignature &signature)
{
    constexpr int64_t kMaxLogged = 16;
    // Sizes are counted with an early exit: a signature's shapes come off the
    // wire and may claim 2^34 x 2^34 elements.
    int64_t total = 0;
    for (const auto &var : signature.variables()) {
        int64_t size = 1;
        for (auto d : var.shape()) {
            if (d < 0 || (d > 0 && size > kMaxLogged / d + 1))
                return {};
            size *= d;
        }
        total += size;
        if (total > kMaxLogged)
            return {};
    }
    std::vector<std::string> names;
    for (const auto &var : signature.variables()) {
        int64_t size = 1;
        for (auto d : var.shape())
            size *= d;
        for (int64_t i = 0; i < size; ++i)
            names.push_back(size == 1 ? var.name() : var.name() + "[" + std::to_string(i) + "]");
    }
    return names;
}

} // namespace

PsTask::PsTask(NodeOptions options, RpcSettings rpc, Log log, PsTransport transport)
    : m_options(std::move(options))
    , m_rpc(std::move(rpc))
    , m_log(std::move(log))
    , m_transport(std::move(transport))
    , m_shard(makeOptimizer([this] {
        OptimizerOptions o;
        o.name = m_options.training.optimizer;
        o.learningRate = m_options.training.learningRate;
        return o;
    }()))
    , m_workers(size_t(m_options.workerSlots()))
{
    // Before the server answers its first vote: a process that has just
    // started promises none for a lease (node/lease.h).
    if (leased())
        m_voter.emplace(m_options.cluster, psName() + "'s process at " + ownAddress(),
                        std::vector<int>{m_options.task.index}, leaseLength());
    if (isCoordinator()) {
        m_policy.emplace(
            m_options.workerSlots(), m_options.training.mode,
            [this](const GradientView &gradient, const RowGradientView &rows, int, float learningRateScale) {
                m_shard.apply(gradient, learningRateScale);
                applyRowsLocked(rows, learningRateScale);
            },
            [this](int worker, int64_t from, const PushDecision &decision) { onDecision(worker, from, decision); });
        if (m_options.training.stragglerThreshold > 0) {
            StragglerDetector::Settings settings;
            settings.threshold = double(m_options.training.stragglerThreshold);
            m_stragglers.emplace(settings);
        }
    }
}

PsTask::~PsTask()
{
    requestStop("shutting down");
    if (m_followThread.joinable())
        m_followThread.join();
    for (std::thread &renewal : m_leaseThreads)
        renewal.join();
}

void PsTask::note(const std::string &line) const
{
    if (!m_replaying)
        m_log(line);
}

void PsTask::start()
{
    if (m_transport.serve)
        m_server = m_transport.serve(*this);
    if (m_options.cluster.replicated()) {
        chooseRole();
        if (leased())
            startLeaseRenewal();
        else
            m_log(psName() + " at " + ownAddress()
                  + " has no lease (--ps_lease_ms=0): under a network partition both processes of the pair may "
                    "serve, each acknowledging updates the other never sees");
    }

    if (isCoordinator() && m_role != proto::REPLICA_BACKUP && !m_options.training.logdir.empty())
        writeRunClusterJson(m_options.training.logdir, m_options.cluster.toJson(), m_options.training.toJson());

    const int linkPort = m_server ? m_server->dataLinkPort() : 0;
    m_log(m_options.task.toString() + " listening on " + ownAddress()
          + (isCoordinator() ? ", mode " + describeMode(m_options.training.mode) : std::string())
          + (linkPort ? "; data links on port " + std::to_string(linkPort) : std::string()));
    if (m_role == proto::REPLICA_BACKUP) {
        m_log(taskStateLine({m_options.task, TaskPhase::Waiting,
                             "backup of " + psName() + ": following its primary at " + peerAddress()}));
        {
            std::lock_guard lock(m_mutex);
            m_followThreadRunning = true;
        }
        m_followThread = std::thread([this] { followPrimary(); });
    } else {
        m_log(taskStateLine(
            {m_options.task, TaskPhase::Waiting, "waiting for the chief worker:0 to initialise the variables"}));
    }
}

void PsTask::requestStop(const std::string &reason)
{
    {
        std::lock_guard lock(m_mutex);
        if (m_finished)
            return;
        m_finished = true;
        m_stopReason = reason;
        if (m_primaryLink)
            m_primaryLink->cancel();
    }
    m_changed.notify_all();
    m_leaseChanged.notify_all();
    m_replicaChanged.notify_all();
    m_recordQueued.notify_all();
    m_runWake.notify_all();
}

int PsTask::run()
{
    {
        std::unique_lock lock(m_mutex);
        m_lastStatusLog = std::chrono::steady_clock::now();
        while (!m_finished) {
            m_runWake.wait_for(lock, std::chrono::seconds(1));
            if (m_role == proto::REPLICA_BACKUP)
                continue; // its primary watches, reports and finishes the run
            if (m_finishDeadline)
                checkFinishedLocked();
            if (m_rejoinDeadline)
                checkRejoinDeadlineLocked();
            if (isCoordinator()) {
                watchForHangLocked();
                watchForStragglersLocked();
            }
            // Periodic progress so a ps terminal is never silent for long.
            if (isCoordinator() && m_initialized
                && std::chrono::steady_clock::now() - m_lastStatusLog > std::chrono::seconds(10)) {
                m_lastStatusLog = std::chrono::steady_clock::now();
                std::string workers;
                for (int i = 0; i < int(m_workers.size()); ++i) {
                    if (isNewcomerIndex(i) && !m_workers[size_t(i)].everJoined)
                        continue; // an elastic cluster's unused index
                    const auto status = workerStatusLocked(i);
                    workers += " worker:" + std::to_string(i) + "=" + proto::WorkerPhase_Name(status.phase());
                }
                note(taskStateLine({m_options.task, TaskPhase::Serving,
                                    "global step " + std::to_string(m_policy->globalStep()) + ", mode "
                                        + describeMode(m_policy->mode()) + ";" + workers}));
            }
        }
    }
    note(
        taskStateLine({m_options.task, m_allWorkersFinished ? TaskPhase::Finished : TaskPhase::Stopped, m_stopReason}));
    bool primary = false;
    {
        std::lock_guard lock(m_mutex);
        primary = m_role != proto::REPLICA_BACKUP;
        if (m_primaryLink)
            m_primaryLink->cancel();
    }
    if (isCoordinator() && primary && m_transport.stopOtherPsTasks)
        m_transport.stopOtherPsTasks(ownAddress());
    {
        std::lock_guard lock(m_mutex); // a primary stepping down closes it
        if (m_runLog)
            m_runLog->flush();
    }
    m_telemetry.close();
    if (m_server)
        m_server->shutdown(std::chrono::seconds(2));
    m_server.reset();
    return 0;
}

bool PsTask::doneLocked() const
{
    // --last_step=0 trains until stopped.
    return m_policy && lastStep() > 0 && m_policy->globalStep() >= lastStep();
}

CallStatus PsTask::train(TrainStream &stream)
{
    int worker = -1;
    uint64_t streamId = 0;
    bool left = false;
    proto::TrainRequest request;
    // One response for the stream's life. Clearing the whole message would
    // delete the PushResponse in its oneof; clearing only that keeps its
    // parameter tensors' storage, so a step reuses the last step's instead of
    // allocating its own (bench_roundtrip's table 1-2f counts them).
    proto::TrainResponse response;
    // A push's answer's parameter values, in the shard's memory until sent.
    ValuesSnapshot answerValues;
    // However the stream ends -- a goodbye, a cut, or a request refused
    // mid-way -- the worker's index is given up, and ps:0 no longer waits
    // for a worker whose stream is over (a sync step would hold forever).
    const CallStatus status = [&]() -> CallStatus {
        // A staged push, until the decision that follows it: swapped out of
        // `request` rather than copied, so the two messages take turns
        // keeping a push's storage.
        proto::TrainRequest staged;
        bool holdsStaged = false;
        while (stream.read(&request)) {
            if (response.has_push())
                response.mutable_push()->Clear();
            else
                response.Clear();
            CallStatus error;
            // The last change this answer reflects: the backup must hold it first.
            int64_t replicateThrough = 0;
            bool acknowledges = true;
            bool wakeHeld = false;
            {
                std::unique_lock lock(m_mutex);
                // A goodbye, and a join told to wait for the chief, tell the
                // worker nothing of the pair's state: they need no lease.
                acknowledges = !request.has_leave() && !(request.has_join() && !m_initialized);
                if (const CallStatus notServing = servesLocked(lock, acknowledges); !notServing.ok())
                    return notServing;
                if (request.has_join()) {
                    const int index = request.join().worker_index();
                    if (const std::string wrong = checkJoinIndex(request.join()); !wrong.empty())
                        return CallStatus::invalidArgument(wrong);
                    if (request.join().acknowledged_step() < 0)
                        return CallStatus::invalidArgument(
                            "a JoinRequest's acknowledged_step is " + std::to_string(request.join().acknowledged_step())
                            + ": send the last global step ps:0 acknowledged, or 0 before the first");
                    if (worker != index) {
                        if (const CallStatus claim = claimIndexLocked(lock, index, request.join()); !claim.ok()) {
                            note(claim.message());
                            return claim;
                        }
                        // A stream that joined as another index before gives that one up.
                        releaseIndexLocked(worker, streamId);
                        worker = index;
                        streamId = m_nextStreamId++;
                        auto &info = m_workers[size_t(worker)];
                        info.streamId = streamId;
                        info.streamOpen = true;
                        info.pid = request.join().pid();
                        info.host = request.join().host();
                        info.address = request.join().address();
                        info.heldSince = std::chrono::system_clock::now();
                        info.lastSeen = std::chrono::steady_clock::now();
                    }
                    response = joinLocked(lock, worker, request.join(), &error);
                } else if (request.has_push()) {
                    if (worker < 0)
                        return CallStatus::failedPrecondition("push before join: send a JoinRequest first");
                    const proto::PushRequest &push = request.push();
                    if (const CallStatus refused = checkStaging(push, holdsStaged); !refused.ok())
                        return refused;
                    if (push.staged()) {
                        std::string parseError;
                        parseGradients(push, &parseError);
                        if (parseError.empty())
                            parseRowGradients(push, &parseError);
                        if (!parseError.empty())
                            return CallStatus::invalidArgument(parseError);
                        request.Swap(&staged);
                        holdsStaged = true;
                        continue; // answered with the decision that follows
                    }
                    if (isCoordinator()) {
                        error
                            = pushLocked(lock, worker, push, response.mutable_push(), &answerValues, &wakeHeld, stream);
                    } else {
                        error = pushShardLocked(lock, push, holdsStaged ? &staged.push() : nullptr,
                                                response.mutable_push(), &answerValues);
                        holdsStaged = false;
                    }
                } else if (request.has_pull()) {
                    if (worker < 0)
                        return CallStatus::failedPrecondition("pull before join: send a JoinRequest first");
                    error = pullLocked(request.pull(), response.mutable_pull());
                } else if (request.has_leave()) {
                    if (worker >= 0 && isCoordinator())
                        leaveLocked(worker, request.leave());
                    left = true;
                    break;
                }
                replicateThrough = lastRecordLocked();
            }
            // Notified with m_mutex let go, so the released workers do not
            // wake only to wait again for the lock this thread still holds.
            if (wakeHeld)
                m_changed.notify_all();
            if (!error.ok() && stream.gone())
                break; // killed while held: the end of a stream without a goodbye
            if (!error.ok())
                return error;
            // ps:0's answer to a push that came after the last step applied
            // nothing: it acknowledges no update, so the run's end needs no
            // lease (the chief, the witness, may have finished first).
            if (isCoordinator() && response.has_push() && response.push().done()
                && response.push().outcome() == proto::PUSH_OUTCOME_UNSPECIFIED)
                acknowledges = false;
            int64_t epoch = 0;
            if (const CallStatus acknowledged = awaitBackup(replicateThrough, &epoch, acknowledges); !acknowledged.ok())
                return acknowledged;
            response.set_lease_epoch(epoch);
            const bool sent = stream.write(response, answerValues.values());
            answerValues.release(); // the next update of the shard need not copy
            if (!sent)
                break;
        }
        return {};
    }();
    if (worker >= 0 && !left && isCoordinator()) {
        std::lock_guard lock(m_mutex);
        streamEndedLocked(worker, streamId,
                          status.ok() ? "its training stream closed without a goodbye (process killed, or network cut)"
                                      : "its stream was refused: " + status.message());
    }
    releaseIndex(worker, streamId);
    return status;
}

void PsTask::adoptSignatureLocked(const proto::ModelSignature &signature)
{
    m_signature = signature;
    m_parameterNames = parameterNames(m_signature);
    m_tables = tablesOf(m_signature);
    m_tableMeters.clear();
    m_tableMeters.resize(m_tables.size());
}

void PsTask::openRunLogLocked()
{
    if (m_options.training.logdir.empty() || m_runLog)
        return;
    const bool tookOver = m_failovers > 0 && !m_tookOverEmpty;
    try {
        std::vector<std::string> variableNames;
        for (const auto &variable : m_signature.variables())
            variableNames.push_back(variable.name());
        m_runLog = std::make_unique<RunLog>(
            m_options.training.logdir, m_parameterNames,
            std::vector<std::string>(m_signature.metric_names().begin(), m_signature.metric_names().end()),
            std::move(variableNames));
        // Said at once, in ps:0's log; --status and the app show it too.
        m_runLog->onProblem([this](const std::string &words) { note(psName() + ": " + words); });
        m_runLog->setMaxBytes(int64_t(m_options.training.logdirMaxMb) * 1024 * 1024);
        // A backup that took over continues its old primary's log, which
        // may hold the last steps already (one host, one --logdir).
        if (tookOver)
            m_runLog->skipStepsAlreadyLogged();
    } catch (const InputError &e) {
        note(std::string("cannot keep the run's step log: ") + e.what());
    }
    try {
        writeRunModelJson(m_options.training.logdir, m_signature);
    } catch (const InputError &e) {
        note(std::string("cannot record the model in the run directory: ") + e.what());
    }
}

CallStatus PsTask::initialize(const proto::InitializeRequest &request, proto::InitializeResponse *response)
{
    int64_t replicateThrough = 0;
    {
        std::unique_lock lock(m_mutex);
        if (const CallStatus notServing = servesLocked(lock); !notServing.ok())
            return notServing;
        if (const CallStatus status = initializeLocked(request, response); !status.ok())
            return status;
        replicateThrough = lastRecordLocked();
        // A primary does not wait for its backup to start training: a backup
        // that never comes would hold the cluster. Until one attaches its
        // updates live in this process alone, and the user is told so.
        if (response->initialized_now() && m_options.cluster.replicated() && !m_follower)
            note(psName() + " at " + ownAddress() + " trains WITHOUT its backup at " + peerAddress()
                 + ": none has attached yet. Until one does, the updates it acknowledges live in this process alone; "
                   "if it dies first, the backup serves in its place without them and says how many were lost");
    }
    // The chief goes on (and checkpoints) only once the backup holds the variables too.
    return awaitBackup(replicateThrough);
}

CallStatus PsTask::initializeLocked(const proto::InitializeRequest &request, proto::InitializeResponse *response)
{
    if (request.global_step() < 0)
        return CallStatus::invalidArgument("global step " + std::to_string(request.global_step())
                                           + " is negative: the chief's checkpoint is damaged");
    // The ps applies its own --optimizer: a chief that declares another would
    // train with an optimizer it did not ask for, and no one would notice.
    if (const std::string &declared = request.signature().optimizer();
        !declared.empty() && declared != m_options.training.optimizer)
        return CallStatus::failedPrecondition(psName() + " runs optimizer '" + m_options.training.optimizer
                                              + "' but the chief declares '" + declared
                                              + "': give every task the same --optimizer");
    if (m_initialized) {
        response->set_initialized_now(false);
        response->set_global_step(m_policy ? m_policy->globalStep() : m_updatesApplied);
        return {};
    }
    if (const std::string problem = signatureNamesProblem(request.signature()); !problem.empty())
        return CallStatus::invalidArgument(problem);
    std::string holds;
    try {
        const VariablePlacement placement
            = VariablePlacement::fromSignature(request.signature(), m_options.cluster.numPs());
        holds = placement.describe(m_options.task.index);
        if (const std::string problem
            = shardPlacementProblem(placement.on(m_options.task.index), request.shard(), psName());
            !problem.empty())
            return CallStatus::invalidArgument(problem);
        m_shard.declareTables(tablesOf(request.signature()));
        m_shard.load(request.shard());
    } catch (const InputError &e) {
        return CallStatus::invalidArgument(e.what());
    }
    adoptSignatureLocked(request.signature());
    m_initialized = true;
    proto::ReplicaRecord record;
    *record.mutable_initialize() = request;
    recordLocked(std::move(record));
    if (m_policy) {
        m_policy->setGlobalStep(request.global_step());
        // A backup opens the step log when it takes over, not while it follows.
        if (m_role != proto::REPLICA_BACKUP)
            openRunLogLocked();
    } else {
        m_updatesApplied = request.global_step();
    }
    response->set_initialized_now(true);
    response->set_global_step(request.global_step());
    std::string rows;
    for (const proto::TableSpec &table : request.signature().tables())
        rows += (rows.empty() ? "" : ", ") + ("'" + table.name() + "'");
    if (!rows.empty())
        holds += (holds.empty() ? "" : "; ")
                 + ("the rows of table" + std::string(request.signature().tables_size() > 1 ? "s " : " ") + rows
                    + " whose ids hash here (1 of " + std::to_string(m_options.cluster.numPs()) + " ps tasks)");
    note(psName() + ": variables initialised by the chief (" + request.origin() + ") at global step "
         + std::to_string(request.global_step()) + "; holds " + (holds.empty() ? std::string("nothing") : holds));
    note(taskStateLine({m_options.task, TaskPhase::Serving, "holds its variables"}));
    m_changed.notify_all();
    return {};
}

CallStatus PsTask::snapshot(proto::SnapshotResponse *response)
{
    std::unique_lock lock(m_mutex);
    if (const CallStatus notServing = servesLocked(lock); !notServing.ok())
        return notServing;
    if (!m_initialized)
        return CallStatus::failedPrecondition("the variables are not initialised yet");
    *response->mutable_shard() = m_shard.save(m_options.task.index);
    if (m_policy) {
        response->set_global_step(m_policy->globalStep());
        *response->mutable_mode() = m_policy->mode();
    } else {
        response->set_global_step(m_updatesApplied);
    }
    return {};
}

CallStatus PsTask::setMode(const proto::SetModeRequest &request, proto::SetModeResponse *response)
{
    int64_t replicateThrough = 0;
    {
        std::unique_lock lock(m_mutex);
        if (!m_policy)
            return CallStatus::failedPrecondition("the update mode is kept by ps:0: call it there");
        if (const CallStatus notServing = servesLocked(lock); !notServing.ok())
            return notServing;
        UpdatePolicy::ModeChange change;
        try {
            change = setModeLocked(request);
        } catch (const InputError &e) {
            return CallStatus::invalidArgument(e.what());
        }
        *response->mutable_mode() = change.current;
        response->set_global_step(change.globalStep);
        replicateThrough = lastRecordLocked();
    }
    return awaitBackup(replicateThrough);
}

UpdatePolicy::ModeChange PsTask::setModeLocked(const proto::SetModeRequest &request)
{
    const UpdatePolicy::ModeChange change = m_policy->setMode(request.mode());
    proto::ReplicaRecord replica;
    *replica.mutable_set_mode() = request;
    recordLocked(std::move(replica));
    proto::TelemetryEvent event;
    auto *record = event.mutable_mode_change();
    record->set_global_step(change.globalStep);
    record->set_wall_time(wallTime());
    *record->mutable_previous() = change.previous;
    *record->mutable_current() = change.current;
    record->set_requested_by(request.requested_by());
    publishLocked(event);
    note("mode changed from " + describeMode(change.previous) + " to " + describeMode(change.current)
         + " at global step " + std::to_string(change.globalStep)
         + (request.requested_by().empty() ? std::string() : " (requested by " + request.requested_by() + ")"));
    m_changed.notify_all();
    return change;
}

} // namespace parasync
