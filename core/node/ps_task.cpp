#include "node/ps_task.h"

#include "base/clock.h"
#include "base/error.h"
#include "engine/staleness_cost.h"
#include "engine/variable_placement.h"
#include "formats/task_state_line.h"
#include "node/ps_service.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>

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

// Which field of two signatures differs, in words, and what aligns them.
struct SignatureDifference
{
    std::string what; // empty: none
    std::string fix = "Give every task the same --model, --dataset and --optimizer";
};

SignatureDifference signatureDifference(const proto::ModelSignature &cluster, const proto::ModelSignature &worker)
{
    if (cluster.model() != worker.model())
        return {"it trains model '" + worker.model() + "' but the cluster trains '" + cluster.model() + "'"};
    if (cluster.feature_dim() != worker.feature_dim())
        return {"its data has " + std::to_string(worker.feature_dim()) + " features but the cluster's has "
                + std::to_string(cluster.feature_dim())};
    if (cluster.output_dim() != worker.output_dim())
        return {"its model has " + std::to_string(worker.output_dim()) + " outputs/classes but the cluster's has "
                + std::to_string(cluster.output_dim())};
    if (cluster.variables_size() != worker.variables_size())
        return {"its model has " + std::to_string(worker.variables_size()) + " variables but the cluster's has "
                + std::to_string(cluster.variables_size())};
    for (int i = 0; i < cluster.variables_size(); ++i) {
        const auto &a = cluster.variables(i);
        const auto &b = worker.variables(i);
        if (a.name() != b.name() || !std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()))
            return {"variable " + std::to_string(i) + " is '" + b.name() + "' of a different shape than the cluster's '"
                    + a.name() + "'"};
        if (!std::equal(a.slice_rows().begin(), a.slice_rows().end(), b.slice_rows().begin(), b.slice_rows().end())) {
            const auto slices = [](const auto &rows) {
                if (rows.empty())
                    return std::string("keeps it whole");
                std::string text;
                for (const int64_t r : rows)
                    text += (text.empty() ? "" : ", ") + std::to_string(r);
                return "splits it into " + std::to_string(rows.size()) + " slices (rows " + text + ")";
            };
            return {"variable '" + b.name() + "': it " + slices(b.slice_rows()) + " but the cluster "
                        + slices(a.slice_rows()),
                    "Give every worker the same --min_slice_bytes"};
        }
    }
    if (cluster.optimizer() != worker.optimizer())
        return {"it uses optimizer '" + worker.optimizer() + "' but the cluster uses '" + cluster.optimizer() + "'"};
    if (!std::equal(cluster.metric_names().begin(), cluster.metric_names().end(), worker.metric_names().begin(),
                    worker.metric_names().end())) {
        const auto list = [](const auto &names) {
            std::string text;
            for (const auto &name : names)
                text += (text.empty() ? "" : ", ") + name;
            return text.empty() ? std::string("none") : text;
        };
        return {"it reports the metrics " + list(worker.metric_names()) + " but the cluster's workers report "
                    + list(cluster.metric_names()),
                "Give every worker the same --eval_dataset or --eval_fraction"};
    }
    return {};
}

// Variable and metric names become keys of the step log's JSON, metrics.csv
// columns and TensorBoard tags: refuse a name that would break one of them (a
// quote, a comma, a newline) or repeats another.
std::string signatureNamesProblem(const proto::ModelSignature &signature)
{
    constexpr size_t kMaxVariableNameLength = 128;
    std::set<std::string> variables;
    for (const auto &variable : signature.variables()) {
        const std::string &name = variable.name();
        const bool valid = !name.empty() && name.size() <= kMaxVariableNameLength
                           && std::all_of(name.begin(), name.end(), [](char c) {
                                  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'
                                         || c == '/' || c == ':';
                              });
        if (!valid)
            return "variable name '" + name.substr(0, kMaxVariableNameLength)
                   + "' is not 1-128 characters of letters, digits, '_', '.', '-', '/' or ':': rename the variable";
        if (!variables.insert(name).second)
            return "variable name '" + name + "' is declared twice: give each variable its own name";
    }

    constexpr int kMaxMetrics = 32;
    constexpr size_t kMaxNameLength = 64;
    if (signature.metric_names_size() > kMaxMetrics)
        return "the signature declares " + std::to_string(signature.metric_names_size()) + " metric names, more than "
               + std::to_string(kMaxMetrics) + ": report fewer metrics";
    std::set<std::string> seen;
    for (const std::string &name : signature.metric_names()) {
        const bool valid
            = !name.empty() && name.size() <= kMaxNameLength && std::all_of(name.begin(), name.end(), [](char c) {
                  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
              });
        if (!valid)
            return "metric name '" + name.substr(0, kMaxNameLength)
                   + "' is not 1-64 characters of letters, digits, '_', '.' or '-': rename the metric";
        if (!seen.insert(name).second)
            return "metric name '" + name + "' is declared twice: declare each metric once";
    }
    return {};
}

// "[784, 10]", a scalar "[]".
template<typename Dims>
std::string describeShape(const Dims &dims)
{
    std::string text = "[";
    for (auto d : dims)
        text += (text.size() > 1 ? ", " : "") + std::to_string(d);
    return text + "]";
}

// Says how the shard the chief sent differs from the pieces the signature's
// placement gives this ps task, in words; empty when it holds exactly them.
std::string shardPlacementProblem(const std::vector<VariableSlice> &expected, const proto::ShardState &shard,
                                  const std::string &task)
{
    const auto names = [&expected] {
        std::string text;
        for (const VariableSlice &slice : expected)
            text += (text.empty() ? "'" : ", '") + slice.name + "'";
        return text.empty() ? std::string("nothing") : text;
    };
    if (shard.variables_size() != int(expected.size()))
        return "the chief sent " + task + " " + std::to_string(shard.variables_size())
               + " variables, but its signature places " + names() + " here: give every task the same --ps_hosts";
    for (size_t j = 0; j < expected.size(); ++j) {
        const VariableSlice &slice = expected[j];
        const auto &variable = shard.variables(int(j));
        const auto &shape = variable.value().shape();
        if (variable.name() != slice.name)
            return "the chief sent " + task + " '" + variable.name() + "' as its variable " + std::to_string(j)
                   + ", but its signature places '" + slice.name + "' there: give every task the same --ps_hosts";
        if (!std::equal(shape.begin(), shape.end(), slice.shape.begin(), slice.shape.end()))
            return "the chief sent " + task + " '" + variable.name() + "' of shape " + describeShape(shape)
                   + ", but its signature declares " + describeShape(slice.shape)
                   + ": its checkpoint or the chief's state is corrupt";
    }
    return {};
}

// "21:05:03 UTC": when a worker joined, for the refusal of a second claimant.
std::string clockTime(std::chrono::system_clock::time_point when)
{
    const std::time_t t = std::chrono::system_clock::to_time_t(when);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%H:%M:%S UTC", &utc);
    return text;
}

proto::WorkerPhase holdPhase(HoldReason reason)
{
    switch (reason) {
    case HoldReason::SyncBarrier: return proto::BLOCKED_BY_SYNC;
    case HoldReason::StalenessBound: return proto::BLOCKED_BY_STALENESS;
    case HoldReason::None: break;
    }
    return proto::TRAINING;
}

} // namespace

PsTask::PsTask(NodeOptions options, RpcSettings rpc, Log log)
    : m_options(std::move(options))
    , m_rpc(std::move(rpc))
    , m_log(std::move(log))
    , m_shard(makeOptimizer([this] {
        OptimizerOptions o;
        o.name = m_options.training.optimizer;
        o.learningRate = m_options.training.learningRate;
        return o;
    }()))
    , m_workers(size_t(m_options.cluster.numWorkers()))
{
    if (isCoordinator()) {
        m_policy.emplace(
            m_options.cluster.numWorkers(), m_options.training.mode,
            [this](const GradientView &gradient, int, float learningRateScale) {
                m_shard.apply(gradient, learningRateScale);
            },
            [this](int worker, int64_t from, const PushDecision &decision) { onDecision(worker, from, decision); });
    }
}

PsTask::~PsTask()
{
    requestStop("shutting down");
    if (m_followThread.joinable())
        m_followThread.join();
}

void PsTask::note(const std::string &line) const
{
    if (!m_replaying)
        m_log(line);
}

void PsTask::start()
{
    m_server = std::make_unique<PsServer>(*this, m_options, m_rpc, m_log);
    if (m_options.cluster.replicated())
        chooseRole();

    if (isCoordinator() && m_role != proto::REPLICA_BACKUP && !m_options.training.logdir.empty())
        writeRunClusterJson(m_options.training.logdir, m_options.cluster.toJson(), m_options.training.toJson());

    const int linkPort = m_server->dataLinkPort();
    m_log(m_options.task.toString() + " listening on " + ownAddress()
          + (isCoordinator() ? ", mode " + describeMode(m_options.training.mode) : std::string())
          + (linkPort ? "; data links on port " + std::to_string(linkPort) : std::string()));
    if (m_role == proto::REPLICA_BACKUP) {
        m_log(taskStateLine({m_options.task, TaskPhase::Waiting,
                             "backup of " + psName() + ": following its primary at " + peerAddress()}));
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
            if (isCoordinator())
                watchForHangLocked();
            // Periodic progress so a ps terminal is never silent for long.
            if (isCoordinator() && m_initialized
                && std::chrono::steady_clock::now() - m_lastStatusLog > std::chrono::seconds(10)) {
                m_lastStatusLog = std::chrono::steady_clock::now();
                std::string workers;
                for (int i = 0; i < int(m_workers.size()); ++i) {
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
    if (isCoordinator() && primary)
        stopOtherPsTasks(m_options.cluster, ownAddress(), m_rpc, m_log);
    if (m_runLog)
        m_runLog->flush();
    m_telemetry.close();
    m_server->shutdown(std::chrono::seconds(2));
    m_server.reset();
    return 0;
}

proto::TaskStatusResponse PsTask::taskStatus()
{
    std::lock_guard lock(m_mutex);
    proto::TaskStatusResponse status;
    status.set_job_name("ps");
    status.set_task_index(m_options.task.index);
    status.set_pid(::getpid());
    status.set_steps(m_policy ? m_policy->globalStep() : m_updatesApplied);
    status.set_state(m_finished ? "finished"
                     : m_role == proto::REPLICA_ROLE_UNSPECIFIED && m_options.cluster.replicated()
                         ? "starting: asking the other process of " + psName() + "'s pair which one serves"
                     : m_role == proto::REPLICA_BACKUP
                         ? "backup of " + psName() + ", following its primary at " + peerAddress()
                     : m_initialized ? "serving"
                                     : "waiting for the chief worker:0 to initialise the variables");
    status.set_replica_role(m_role);
    status.set_replica_holds_state(m_role == proto::REPLICA_BACKUP ? m_hasState : m_initialized);
    if (m_options.cluster.replicated())
        status.set_replica_peer(peerAddress());
    return status;
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
            bool wakeHeld = false;
            {
                std::unique_lock lock(m_mutex);
                if (const CallStatus notServing = servesLocked(lock); !notServing.ok())
                    return notServing;
                if (request.has_join()) {
                    const int index = request.join().worker_index();
                    if (index < 0 || index >= int(m_workers.size()))
                        return CallStatus::invalidArgument(
                            "worker index " + std::to_string(index) + " is not in the cluster ("
                            + std::to_string(m_workers.size()) + " workers): check --task_index and --worker_hosts");
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
                        if (!parseError.empty())
                            return CallStatus::invalidArgument(parseError);
                        request.Swap(&staged);
                        holdsStaged = true;
                        continue; // answered with the decision that follows
                    }
                    if (isCoordinator()) {
                        error = pushLocked(lock, worker, push, response.mutable_push(), &answerValues, &wakeHeld);
                    } else {
                        error = pushShardLocked(lock, push, holdsStaged ? &staged.push() : nullptr,
                                                response.mutable_push(), &answerValues);
                        holdsStaged = false;
                    }
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
            if (!error.ok())
                return error;
            awaitBackup(replicateThrough);
            const bool sent = stream.write(response, answerValues);
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

CallStatus PsTask::claimIndexLocked(std::unique_lock<std::mutex> &lock, int index, const proto::JoinRequest &join)
{
    const WorkerInfo &holder = m_workers[size_t(index)];
    // The same process opening a new stream (it reconnects after a lost
    // link) takes its index back; the old stream's end then changes nothing.
    // A pid of 0 proves nothing: a client that sends none never takes over.
    const auto sameProcess = [&] { return holder.pid != 0 && holder.pid == join.pid() && holder.host == join.host(); };
    // A worker killed and started again may join before its old stream's end
    // has reached this task: give that end a moment to arrive.
    m_changed.wait_for(lock, m_identityTimings.oldStreamGrace,
                       [&] { return !holder.streamOpen || sameProcess() || m_finished; });
    if (m_finished)
        return CallStatus::failedPrecondition(psName() + " is stopping: " + m_stopReason);
    if (!holder.streamOpen || sameProcess())
        return {};
    const std::string name = "worker:" + std::to_string(index);
    const std::string who = "pid " + std::to_string(holder.pid) + " on host '" + holder.host + "'";
    const auto quietFor = std::chrono::steady_clock::now() - holder.lastSeen;
    const double quietSeconds = std::chrono::duration<double>(quietFor).count();
    // Evidence that the holder lives: ps:0 is holding it at a barrier, or it
    // spoke a moment ago. Without that evidence its connection may be dead
    // but not yet noticed (a killed host, a cut link), and the claimant is
    // told to retry rather than refused for good: keepalive closes a dead
    // connection within about two --heartbeat_ms, a live holder speaks again
    // within a step and the next attempt gets the refusal below.
    const bool held = holder.phase == proto::BLOCKED_BY_SYNC || holder.phase == proto::BLOCKED_BY_STALENESS;
    char quiet[32];
    std::snprintf(quiet, sizeof quiet, "%.1f", quietSeconds);
    if (held || quietFor < m_identityTimings.holderHeardRecently) {
        return CallStatus::alreadyExists(
            psName() + " refuses a second " + name + " (pid " + std::to_string(join.pid()) + " on host '" + join.host()
            + "'): " + name + " is " + who + ", in the cluster since " + clockTime(holder.heldSince)
            + ", last heard from " + quiet + " s ago. Two processes cannot share --task_index=" + std::to_string(index)
            + ": stop one of them, or give this one its own index and address in --worker_hosts");
    }
    return CallStatus::retryLater("retry: the old connection of " + name + " (" + who + ", in the cluster since "
                                  + clockTime(holder.heldSince) + ", silent for " + quiet + " s) is still open; "
                                  + psName() + " lets the index go once that connection closes");
}

void PsTask::releaseIndex(int worker, uint64_t streamId)
{
    std::lock_guard lock(m_mutex);
    releaseIndexLocked(worker, streamId);
}

void PsTask::releaseIndexLocked(int worker, uint64_t streamId)
{
    if (worker < 0)
        return;
    auto &info = m_workers[size_t(worker)];
    if (info.streamId == streamId && info.streamOpen) {
        info.streamOpen = false;
        m_changed.notify_all(); // a claimant may be waiting for this index
    }
}

proto::TrainResponse PsTask::joinLocked(std::unique_lock<std::mutex> &lock, int worker, const proto::JoinRequest &join,
                                        CallStatus *error)
{
    proto::TrainResponse response;
    auto *out = response.mutable_join();
    auto &info = m_workers[size_t(worker)];
    if (!m_initialized && isCoordinator() && info.phase != proto::WAITING_FOR_CHIEF) {
        info.phase = proto::WAITING_FOR_CHIEF;
        publishWorkerStateLocked(worker);
    }
    // Hold the join a while rather than have the worker poll: it starts the
    // moment the chief has initialised (a sync cluster then starts with every
    // worker), and still hears back often enough to say what it waits for.
    m_changed.wait_for(lock, std::chrono::seconds(1), [this] { return m_initialized || m_finished; });
    if (!m_initialized) {
        out->set_ready(false);
        out->set_waiting_for("the chief worker:0 at " + m_options.cluster.workers.front().toString()
                             + " to initialise the variables");
        return response;
    }
    if (const auto difference = signatureDifference(m_signature, join.signature()); !difference.what.empty()) {
        *error = CallStatus::failedPrecondition(psName() + " refuses worker:" + std::to_string(worker) + ": "
                                                + difference.what + ". " + difference.fix);
        note(error->message());
        return response;
    }
    out->set_ready(true);
    out->set_last_step(lastStep());
    m_shard.copyValuesTo(out->mutable_parameters());
    if (isCoordinator()) {
        out->set_global_step(m_policy->globalStep());
        *out->mutable_mode() = m_policy->mode();
        admitWorkerLocked(worker, join.pid(), join.host());
        checkAcknowledgedLocked(worker, join.acknowledged_step());
        out->set_acting_chief(m_actingChief);
        proto::ReplicaRecord record;
        auto *joined = record.mutable_membership();
        joined->set_worker(worker);
        joined->set_change(proto::ReplicaMembership::JOINED);
        joined->set_pid(join.pid());
        joined->set_host(join.host());
        recordLocked(std::move(record));
    } else {
        out->set_global_step(m_updatesApplied);
    }
    return response;
}

void PsTask::checkAcknowledgedLocked(int worker, int64_t acknowledged)
{
    // Without a backup, a ps that died restarts from the chief's checkpoint,
    // which says so itself; a pair promises that nothing acknowledged is lost.
    const int64_t held = m_policy->globalStep();
    if (!m_options.cluster.replicated() || acknowledged <= held)
        return;
    const int64_t lost = acknowledged - held;
    if (lost <= m_acknowledgedLost)
        return;
    m_acknowledgedLost = lost;
    note(psName() + " at " + ownAddress() + " holds global step " + std::to_string(held)
         + ", but worker:" + std::to_string(worker) + " had global step " + std::to_string(acknowledged)
         + " acknowledged: " + std::to_string(lost) + (lost == 1 ? " update is" : " updates are")
         + " lost. The other process of the pair acknowledged them without a backup holding them (it had lost "
           "its backup, or both processes went in turn) and is gone. Training goes on from global step "
         + std::to_string(held) + ": global steps " + std::to_string(held + 1) + " to " + std::to_string(acknowledged)
         + " are taken a second time");
}

void PsTask::admitWorkerLocked(int worker, int64_t pid, const std::string &host)
{
    auto &info = m_workers[size_t(worker)];
    const bool rejoin = info.everJoined;
    m_policy->join(worker);
    info.everJoined = true;
    info.phase = proto::TRAINING;
    info.reason.clear();
    info.pid = pid;
    info.host = host;
    info.lastSeen = std::chrono::steady_clock::now();
    updateActingChiefLocked();
    note("worker:" + std::to_string(worker) + (rejoin ? " rejoined" : " joined") + " at global step "
         + std::to_string(m_policy->globalStep()));
    publishWorkerStateLocked(worker);
    m_changed.notify_all();
}

GradientView PsTask::parseGradients(const proto::PushRequest &push, std::string *error) const
{
    if (push.gradients_size() != m_shard.size()) {
        *error = "the push has " + std::to_string(push.gradients_size()) + " gradient tensors but " + psName()
                 + " holds " + std::to_string(m_shard.size()) + " variables";
        return {};
    }
    for (int i = 0; i < push.gradients_size(); ++i) {
        const proto::Tensor &tensor = push.gradients(i);
        // The shape first: a [10, 784] gradient for a [784, 10] variable has
        // the right number of values and would be applied transposed.
        const std::vector<int64_t> &shape = m_shard.shape(i);
        if (!std::equal(tensor.shape().begin(), tensor.shape().end(), shape.begin(), shape.end())) {
            *error = "gradient " + std::to_string(i) + " (for '" + m_shard.name(i) + "') has shape "
                     + describeShape(tensor.shape()) + ", the variable " + describeShape(shape)
                     + ": push each gradient in its variable's shape";
            return {};
        }
    }
    return viewGradients(push.gradients(), error);
}

GradientView PsTask::viewGradients(const google::protobuf::RepeatedPtrField<proto::Tensor> &tensors,
                                   std::string *error) const
{
    if (tensors.size() != m_shard.size()) {
        *error = std::to_string(tensors.size()) + " gradient tensors for the " + std::to_string(m_shard.size())
                 + " variables " + psName() + " holds";
        return {};
    }
    GradientView gradient;
    gradient.reserve(size_t(m_shard.size()));
    for (int i = 0; i < tensors.size(); ++i) {
        const proto::Tensor &tensor = tensors[i];
        if (size_t(tensor.values_size()) != m_shard.values(i).size()) {
            *error = "gradient " + std::to_string(i) + " has " + std::to_string(tensor.values_size())
                     + " values, the variable has " + std::to_string(m_shard.values(i).size());
            return {};
        }
        gradient.emplace_back(tensor.values().data(), size_t(tensor.values_size()));
    }
    return gradient;
}

CallStatus PsTask::pushLocked(std::unique_lock<std::mutex> &lock, int worker, const proto::PushRequest &push,
                              proto::PushResponse *response, ValuesSnapshot *values, bool *wakeHeld)
{
    auto &info = m_workers[size_t(worker)];
    if (!m_initialized)
        return CallStatus::failedPrecondition(
            "worker:" + std::to_string(worker)
            + " pushed before the chief initialised the variables: join again and wait until it is ready");
    if (doneLocked()) {
        // The last step is reached: the gradient is not applied, the worker stops.
        response->set_done(true);
        response->set_global_step(m_policy->globalStep());
        *response->mutable_mode() = m_policy->mode();
        m_shard.share(response->mutable_parameters(), values);
        return {};
    }
    std::string error;
    const GradientView gradient = parseGradients(push, &error);
    if (!error.empty())
        return CallStatus::invalidArgument("worker:" + std::to_string(worker) + ": " + error);
    if (push.metrics_size() != 0 && push.metrics_size() != m_signature.metric_names_size())
        return CallStatus::invalidArgument(
            "worker:" + std::to_string(worker) + " pushed " + std::to_string(push.metrics_size())
            + " metric values, but the cluster's signature declares " + std::to_string(m_signature.metric_names_size())
            + " metric names: send one value per declared name, in their order, or none on a step that measured "
              "nothing");
    if (push.parameter_view_size() != 0 && size_t(push.parameter_view_size()) != m_parameterNames.size())
        return CallStatus::invalidArgument("worker:" + std::to_string(worker) + " sent "
                                           + std::to_string(push.parameter_view_size())
                                           + " parameter values for the telemetry, but the model has "
                                           + (m_parameterNames.empty() ? std::string("too many to show them")
                                                                       : std::to_string(m_parameterNames.size()))
                                           + ": send every value of a model of at most 16, or none");
    if (push.variable_summaries_size() != 0 && push.variable_summaries_size() != m_signature.variables_size())
        return CallStatus::invalidArgument(
            "worker:" + std::to_string(worker) + " pushed " + std::to_string(push.variable_summaries_size())
            + " variable summaries, but the cluster's signature declares "
            + std::to_string(m_signature.variables_size())
            + " variables: send one per variable, in their order, or none on a step that measured nothing");
    if (push.computed_from_step() > m_policy->globalStep() || push.computed_from_step() < 0)
        return CallStatus::invalidArgument(
            "worker:" + std::to_string(worker) + " pushed a gradient computed from global step "
            + std::to_string(push.computed_from_step()) + ", but the global step is only "
            + std::to_string(m_policy->globalStep()) + ": a step from the future is refused");
    if (push.has_staleness_probe())
        if (const std::string wrong = checkStalenessProbe(push, m_policy->globalStep()); !wrong.empty())
            return CallStatus::invalidArgument("worker:" + std::to_string(worker) + "'s staleness probe: " + wrong);
    if (push.learning_rate_scale() != 0.0f)
        return CallStatus::invalidArgument(
            "worker:" + std::to_string(worker)
            + " sent ps:0 a learning_rate_scale: ps:0 chooses it (PushResponse.learning_rate_scale); send it "
              "only to the other ps tasks, with the decision");
    if (m_follower) {
        proto::ReplicaRecord record;
        record.mutable_push()->set_worker(worker);
        *record.mutable_push()->mutable_push() = push;
        recordLocked(std::move(record));
    }
    const int64_t stepBefore = m_policy->globalStep();
    // In ssp every push moves the global step, but only the slowest worker's
    // moves the bound that holds the others.
    const bool mayReleaseOthers = m_policy->mode().mode() != proto::SSP || m_policy->atSlowestClock(worker);
    if (!takeGradientLocked(worker, push, gradient)) {
        response->set_outcome(proto::REJECTED_NONFINITE);
        response->set_global_step(m_policy->globalStep());
        response->set_done(doneLocked());
        *response->mutable_mode() = m_policy->mode();
        m_shard.share(response->mutable_parameters(), values);
        return {};
    }
    // Held workers wait for their sync step to close or for the slowest clock
    // to move (ssp), and both move the global step; in async nobody is held.
    // Waking every waiting thread on every push cost each of them a context
    // switch and a turn at m_mutex per push: O(workers^2) per sync step.
    bool wake = m_policy->globalStep() != stepBefore && m_policy->mode().mode() != proto::ASYNC && mayReleaseOthers;

    const auto holdStart = std::chrono::steady_clock::now();
    proto::WorkerPhase heldBy = proto::WORKER_PHASE_UNSPECIFIED;
    for (;;) {
        const Hold hold = m_policy->hold(worker);
        if (hold.reason == HoldReason::None || doneLocked() || m_finished)
            break;
        if (wake) { // this worker waits too: the others cannot wait for it to let go
            m_changed.notify_all();
            wake = false;
        }
        heldBy = holdPhase(hold.reason);
        info.phase = heldBy;
        info.waitingFor = hold.waitingFor;
        m_changed.wait(lock);
    }
    info.phase = proto::TRAINING;
    info.waitingFor.clear();
    const int64_t heldUs = heldBy == proto::WORKER_PHASE_UNSPECIFIED ? 0 : microsSince(holdStart);
    // A sync barrier wait is part of the step it aggregated into (reported by
    // onDecision); an ssp hold comes after the update and is reported with the
    // worker's next step.
    if (heldBy == proto::BLOCKED_BY_STALENESS) {
        info.previousHoldUs = heldUs;
        info.previousHoldReason = heldBy;
    }

    const PushDecision &result = m_policy->result(worker);
    response->set_outcome(result.outcome);
    response->set_update(result.update);
    response->set_contributions(result.contributions);
    response->set_staleness(result.staleness);
    response->set_learning_rate_scale(result.learningRateScale);
    response->set_waited_us(heldUs);
    response->set_global_step(m_policy->globalStep());
    response->set_done(doneLocked());
    *response->mutable_mode() = m_policy->mode();
    response->set_acting_chief(m_actingChief);
    m_shard.share(response->mutable_parameters(), values);
    *wakeHeld = wake;
    return {};
}

bool PsTask::takeGradientLocked(int worker, const proto::PushRequest &push, const GradientView &gradient)
{
    auto &info = m_workers[size_t(worker)];
    const bool finite
        = std::all_of(gradient.begin(), gradient.end(), [](std::span<const float> g) { return allFinite(g); });
    if (!finite) {
        ++info.nonfinite;
        if (info.nonfinite == 1 || info.nonfinite % 1000 == 0)
            note("worker:" + std::to_string(worker) + " pushed a gradient with NaN or infinite values ("
                 + std::to_string(info.nonfinite) + " so far); "
                 + (m_options.training.applyNonfinite ? "applied, as --nonfinite_gradients=apply asks"
                                                      : "rejected (--nonfinite_gradients=reject)"));
        if (!m_options.training.applyNonfinite) {
            proto::TelemetryEvent event;
            auto *step = event.mutable_step();
            step->set_global_step(m_policy->globalStep());
            step->set_wall_time(wallTime());
            step->set_worker(worker);
            step->set_worker_clock(m_policy->workerClock(worker));
            step->set_batch_loss(push.batch_loss());
            step->set_outcome(proto::REJECTED_NONFINITE);
            step->set_computed_from_step(push.computed_from_step());
            publishLocked(event);
            return false;
        }
    }

    // Keep what the step's telemetry event needs, not the gradient itself
    // (a copy of up to megabytes per step on the hot path).
    info.lastPush.Clear();
    info.lastPush.set_batch_loss(push.batch_loss());
    info.lastPush.set_full_loss(push.full_loss());
    info.lastPush.set_compute_us(push.compute_us());
    info.lastPush.set_previous_push_us(push.previous_push_us());
    *info.lastPush.mutable_parameter_view() = push.parameter_view();
    *info.lastPush.mutable_metrics() = push.metrics();
    *info.lastPush.mutable_variable_summaries() = push.variable_summaries();
    if (push.has_staleness_probe())
        *info.lastPush.mutable_staleness_probe() = push.staleness_probe();
    info.arrival = std::chrono::steady_clock::now();
    info.lastSeen = info.arrival;
    info.phase = proto::TRAINING;
    m_policy->push(worker, push.computed_from_step(), gradient);
    return true;
}

CallStatus PsTask::checkStaging(const proto::PushRequest &push, bool holdsStaged) const
{
    const std::string self = psName();
    if (push.staged() && isCoordinator())
        return CallStatus::invalidArgument("a staged push sent to " + self
                                           + ": ps:0 decides on each push as it comes; stage gradients only on the "
                                             "other ps tasks");
    if (push.staged() && holdsStaged)
        return CallStatus::invalidArgument("a second staged push before ps:0's decision on the first: send the "
                                           "decision (a push with update and contributions, no gradients) first");
    if (!push.staged() && holdsStaged && push.gradients_size() > 0)
        return CallStatus::invalidArgument("the decision on a staged push brings "
                                           + std::to_string(push.gradients_size())
                                           + " gradients of its own: it carries update and contributions only");
    return {};
}

CallStatus PsTask::pushShardLocked(std::unique_lock<std::mutex> &lock, const proto::PushRequest &push,
                                   const proto::PushRequest *staged, proto::PushResponse *response,
                                   ValuesSnapshot *values)
{
    const int64_t update = push.update();
    // 0, unset, is a client that knows no staleness-aware rule: 1.
    const float learningRateScale = push.learning_rate_scale() == 0.0f ? 1.0f : push.learning_rate_scale();
    if (!(learningRateScale > 0.0f && learningRateScale <= 1.0f))
        return CallStatus::invalidArgument(
            "learning_rate_scale " + std::to_string(push.learning_rate_scale()) + " with the decision on update "
            + std::to_string(update)
            + ": send ps:0's PushResponse.learning_rate_scale as it came, a number in (0, 1], or none");
    if (push.contributions() > 0 && m_incompleteUpdates.contains(update)) {
        note(psName() + ": a late contribution to update " + std::to_string(update)
             + " arrived after it was applied without it; not applied");
    } else if (push.contributions() == 1 && !m_pendingUpdates.contains(update)) {
        // async, ssp, a sync step of one: applied where the gradient lies.
        std::string error;
        const GradientView gradient = parseGradients(staged ? *staged : push, &error);
        if (!error.empty())
            return CallStatus::invalidArgument(error);
        applyShardUpdateLocked(update, gradient, false, learningRateScale);
        m_changed.notify_all();
    } else if (push.contributions() > 0) {
        std::string error;
        const GradientView gradient = parseGradients(staged ? *staged : push, &error);
        if (!error.empty())
            return CallStatus::invalidArgument(error);
        auto &pending = m_pendingUpdates[update];
        if (pending.received == 0)
            for (std::span<const float> g : gradient)
                pending.sum.emplace_back(asVector(g));
        else
            for (size_t v = 0; v < pending.sum.size(); ++v)
                pending.sum[v] += asVector(gradient[v]);
        pending.expected = push.contributions();
        if (++pending.received >= pending.expected) {
            for (auto &v : pending.sum)
                v /= float(pending.received);
            applyShardUpdateLocked(update, viewOf(pending.sum), false, 1.0f);
            m_pendingUpdates.erase(update);
            m_changed.notify_all();
        } else {
            // The other contributions of this sync step are on their way from
            // workers ps:0 released together with this one; they come within
            // milliseconds unless one of them died on the way from ps:0 to
            // here. Then apply what came rather than hold everyone forever.
            const auto deadline
                = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * m_rpc.heartbeatMs + 1000);
            const bool complete = m_changed.wait_until(
                lock, deadline, [&] { return !m_pendingUpdates.contains(update) || m_finished; });
            if (auto it = m_pendingUpdates.find(update); !complete && it != m_pendingUpdates.end()) {
                auto &partial = it->second;
                for (auto &v : partial.sum)
                    v /= float(partial.received);
                applyShardUpdateLocked(update, viewOf(partial.sum), true, 1.0f);
                note(psName() + ": update " + std::to_string(update) + " applied with "
                     + std::to_string(partial.received) + " of its " + std::to_string(partial.expected)
                     + " gradients: the others never came (a worker died between ps:0 and " + psName() + "?)");
                m_pendingUpdates.erase(it);
                m_changed.notify_all();
            }
        }
    }
    response->set_outcome(proto::APPLIED);
    response->set_update(update);
    response->set_global_step(update);
    m_shard.share(response->mutable_parameters(), values);
    return {};
}

void PsTask::applyShardUpdateLocked(int64_t update, const GradientView &average, bool incomplete,
                                    float learningRateScale)
{
    if (m_follower) {
        proto::ReplicaRecord record;
        auto *applied = record.mutable_shard_update();
        applied->set_update(update);
        applied->set_incomplete(incomplete);
        if (learningRateScale != 1.0f)
            applied->set_learning_rate_scale(learningRateScale);
        for (std::span<const float> g : average)
            toTensor(g.data(), int64_t(g.size()), {int64_t(g.size())}, applied->add_gradient());
        recordLocked(std::move(record));
    }
    m_shard.apply(average, learningRateScale);
    ++m_updatesApplied;
    if (incomplete) {
        m_incompleteUpdates.insert(update);
        // Remember a bounded number: late arrivals come soon or never.
        while (m_incompleteUpdates.size() > 1000)
            m_incompleteUpdates.erase(m_incompleteUpdates.begin());
    }
}

void PsTask::leaveLocked(int worker, const proto::LeaveRequest &leave)
{
    proto::ReplicaRecord record;
    auto *left = record.mutable_membership();
    left->set_worker(worker);
    left->set_change(leave.finished() ? proto::ReplicaMembership::FINISHED : proto::ReplicaMembership::STOPPED);
    left->set_worker_clock(leave.worker_clock());
    recordLocked(std::move(record));
    auto &info = m_workers[size_t(worker)];
    if (leave.finished()) {
        info.phase = proto::FINISHED;
        m_policy->setFinished(worker);
        note("worker:" + std::to_string(worker) + " finished at clock " + std::to_string(leave.worker_clock()));
    } else {
        info.phase = proto::STOPPED;
        info.reason = "it was stopped before the last step";
        m_policy->setAlive(worker, false);
        note("worker:" + std::to_string(worker) + " left: " + info.reason);
    }
    updateActingChiefLocked();
    publishWorkerStateLocked(worker);
    m_changed.notify_all();
    checkFinishedLocked();
}

void PsTask::streamEndedLocked(int worker, uint64_t streamId, const std::string &reason)
{
    auto &info = m_workers[size_t(worker)];
    if (info.streamId != streamId)
        return;
    markDeadLocked(worker, reason);
}

void PsTask::markDeadLocked(int worker, const std::string &reason)
{
    auto &info = m_workers[size_t(worker)];
    if (info.phase == proto::FINISHED || info.phase == proto::DEAD || info.phase == proto::STOPPED)
        return;
    proto::ReplicaRecord record;
    auto *died = record.mutable_membership();
    died->set_worker(worker);
    died->set_change(proto::ReplicaMembership::DEAD);
    died->set_reason(reason);
    recordLocked(std::move(record));
    info.phase = proto::DEAD;
    info.reason = reason;
    m_policy->setAlive(worker, false);
    note("worker:" + std::to_string(worker) + " is dead: " + reason + "; not waiting for it");
    updateActingChiefLocked();
    publishWorkerStateLocked(worker);
    m_changed.notify_all();
    checkFinishedLocked();
}

void PsTask::checkFinishedLocked()
{
    if (!doneLocked() || m_finished)
        return;
    std::string neverJoined;
    for (int i = 0; i < int(m_workers.size()); ++i) {
        const auto &info = m_workers[size_t(i)];
        if (info.everJoined && info.phase != proto::FINISHED && info.phase != proto::DEAD
            && info.phase != proto::STOPPED)
            return;
        if (!info.everJoined)
            neverJoined += (neverJoined.empty() ? "" : ", ") + ("worker:" + std::to_string(i));
    }
    if (!neverJoined.empty() && !m_finishDeadline) {
        // A worker started late still gets to join, see the last step and
        // finish, rather than find no ps and retry forever.
        m_finishDeadline = std::chrono::steady_clock::now() + kLateWorkerGrace;
        note("the last step is reached; waiting up to "
             + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kLateWorkerGrace).count()) + " s for "
             + neverJoined + " (never joined) before exiting");
        return;
    }
    if (!neverJoined.empty() && std::chrono::steady_clock::now() < *m_finishDeadline)
        return;
    m_finished = true;
    m_allWorkersFinished = true;
    m_stopReason = "all workers finished at global step " + std::to_string(m_policy->globalStep()) + "; exiting"
                   + (neverJoined.empty() ? std::string() : " (" + neverJoined + " never joined)");
    m_changed.notify_all();
    m_runWake.notify_all();
}

bool PsTask::isLiveLocked(int worker) const
{
    const auto &info = m_workers[size_t(worker)];
    return info.everJoined && info.phase != proto::DEAD && info.phase != proto::FINISHED
           && info.phase != proto::STOPPED;
}

int PsTask::actingChiefLocked() const
{
    if (!m_options.training.chiefHandover || isLiveLocked(0) || !m_workers.front().everJoined)
        return 0;
    for (int i = 1; i < int(m_workers.size()); ++i)
        if (isLiveLocked(i))
            return i;
    return 0;
}

void PsTask::updateActingChiefLocked()
{
    const int acting = actingChiefLocked();
    if (acting == m_actingChief)
        return;
    if (acting == 0)
        note("the chief worker:0 is back: it takes its duties back from worker:" + std::to_string(m_actingChief));
    else
        note("the chief worker:0 is " + std::string(m_workers.front().phase == proto::DEAD ? "dead" : "gone")
             + ": worker:" + std::to_string(acting)
             + " takes over its duties (checkpoints, the full-shard loss) as --chief_handover=1 asks");
    m_actingChief = acting;
}

// In sentences that read on their own in the log and inside the app's
// banner ("ps:0 is waiting for ..."), without parentheses inside parentheses.
std::string PsTask::describeWaitLocked() const
{
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::string> working;
    std::vector<std::string> held;
    for (int i = 0; i < int(m_workers.size()); ++i) {
        if (!isLiveLocked(i))
            continue;
        const auto &info = m_workers[size_t(i)];
        const std::string name = "worker:" + std::to_string(i);
        if (info.phase == proto::BLOCKED_BY_SYNC || info.phase == proto::BLOCKED_BY_STALENESS) {
            const std::string why = !info.waitingFor.empty() ? info.waitingFor : proto::WorkerPhase_Name(info.phase);
            held.push_back(
                name + (info.phase == proto::BLOCKED_BY_SYNC ? " is held in " : " is held by the staleness bound: ")
                + why);
            continue;
        }
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f", std::chrono::duration<double>(now - info.lastSeen).count());
        working.push_back(name + ", last heard from " + seconds + " s ago");
    }
    const auto join = [](const std::vector<std::string> &parts, const char *separator, const char *last) {
        std::string text;
        for (size_t i = 0; i < parts.size(); ++i)
            text += (i == 0 ? "" : i + 1 == parts.size() ? last : separator) + parts[i];
        return text;
    };
    std::string text;
    if (!working.empty())
        text = join(working, "; ", "; and ") + (working.size() == 1 ? ". It is" : ". They are")
               + " still computing a step: slowed by a straggler delay, or frozen by SIGSTOP, swapping or a link "
                 "that drops data but not the connection";
    if (!held.empty())
        text += (text.empty() ? "" : ". ") + join(held, ". ", ". ");
    return text.empty() ? std::string("no live worker") : text;
}

void PsTask::watchForHangLocked()
{
    const int timeout = m_options.training.hangTimeoutSecs;
    const auto now = std::chrono::steady_clock::now();
    const int64_t step = m_policy->globalStep();
    // run() calls this on every wake-up, often many times a step: the
    // common case (the step moved) returns before looking at the workers.
    bool anyLive = false;
    for (int i = 0; step == m_progressStep && !anyLive && i < int(m_workers.size()); ++i)
        anyLive = isLiveLocked(i);
    if (step != m_progressStep || !m_initialized || doneLocked() || !anyLive || timeout <= 0) {
        if (m_stall.seconds() > 0 && step != m_progressStep)
            note("hang watchdog: the global step moves again (" + std::to_string(step) + ") after "
                 + std::to_string(int(m_stall.seconds())) + " s");
        m_progressStep = step;
        m_progressTime = now;
        m_stall.Clear();
        m_lastStallLog = {};
        return;
    }
    const double stalled = std::chrono::duration<double>(now - m_progressTime).count();
    if (stalled < timeout)
        return;
    m_stall.set_seconds(stalled);
    m_stall.set_global_step(step);
    m_stall.set_waiting_for(describeWaitLocked());
    // A line when the stall is first seen, then every timeout period.
    if (now - m_lastStallLog >= std::chrono::seconds(timeout)) {
        m_lastStallLog = now;
        note("hang watchdog: the global step has not moved from " + std::to_string(step) + " for "
             + std::to_string(int(stalled)) + " s (mode " + describeMode(m_policy->mode()) + "); waiting for "
             + m_stall.waiting_for());
    }
}

void PsTask::onDecision(int worker, int64_t computedFromStep, const PushDecision &decision)
{
    auto &info = m_workers[size_t(worker)];
    proto::TelemetryEvent event;
    auto *step = event.mutable_step();
    step->set_global_step(decision.update);
    step->set_wall_time(wallTime());
    step->set_worker(worker);
    step->set_worker_clock(m_policy->workerClock(worker));
    step->set_staleness(decision.staleness);
    step->set_batch_loss(info.lastPush.batch_loss());
    step->set_full_loss(info.lastPush.full_loss());
    step->set_outcome(decision.outcome);
    step->set_compute_us(info.lastPush.compute_us());
    step->set_push_us(info.lastPush.previous_push_us());
    step->set_contributions(decision.contributions);
    step->set_computed_from_step(computedFromStep);
    if (decision.outcome == proto::APPLIED || decision.outcome == proto::AGGREGATED)
        step->set_learning_rate_scale(decision.learningRateScale);
    if (info.lastPush.has_staleness_probe())
        *step->mutable_staleness_probe() = info.lastPush.staleness_probe();
    if (decision.outcome == proto::AGGREGATED) {
        step->set_wait_us(microsSince(info.arrival));
        step->set_wait_reason(proto::BLOCKED_BY_SYNC);
    } else {
        step->set_wait_us(info.previousHoldUs);
        step->set_wait_reason(info.previousHoldUs > 0 ? info.previousHoldReason : proto::WORKER_PHASE_UNSPECIFIED);
        info.previousHoldUs = 0;
    }
    step->mutable_parameters()->CopyFrom(info.lastPush.parameter_view());
    step->mutable_metrics()->CopyFrom(info.lastPush.metrics());
    step->mutable_variable_summaries()->CopyFrom(info.lastPush.variable_summaries());
    publishLocked(event);
}

void PsTask::publishLocked(const proto::TelemetryEvent &event)
{
    if (m_follower) {
        m_unacknowledgedEvents.emplace_back(m_recordSequence, event);
        return;
    }
    if (m_role == proto::REPLICA_BACKUP) {
        // The last ones only: the primary's step log writer is at most
        // ~100 ms behind what it published, far fewer events than these.
        if (m_heldEvents.size() >= kHeldEvents)
            m_heldEvents.pop_front();
        m_heldEvents.emplace_back(m_applyingSequence, event);
        return;
    }
    publishNowLocked(event);
}

void PsTask::publishNowLocked(const proto::TelemetryEvent &event)
{
    m_telemetry.publish(event);
    if (m_runLog)
        m_runLog->record(event);
}

proto::WorkerStatus PsTask::workerStatusLocked(int worker) const
{
    const auto &info = m_workers[size_t(worker)];
    proto::WorkerStatus status;
    status.set_worker_index(worker);
    status.set_phase(info.phase);
    status.set_pid(info.pid);
    status.set_reason(info.reason);
    status.set_waiting_for(info.waitingFor);
    status.set_nonfinite(info.nonfinite);
    if (m_policy) {
        status.set_worker_clock(m_policy->workerClock(worker));
        status.set_applied(m_policy->applied(worker));
        status.set_dropped(m_policy->dropped(worker));
    }
    return status;
}

void PsTask::publishWorkerStateLocked(int worker)
{
    proto::TelemetryEvent event;
    event.mutable_worker_state()->set_wall_time(wallTime());
    *event.mutable_worker_state()->mutable_status() = workerStatusLocked(worker);
    publishLocked(event);
}

void PsTask::adoptSignatureLocked(const proto::ModelSignature &signature)
{
    m_signature = signature;
    m_parameterNames = parameterNames(m_signature);
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
    awaitBackup(replicateThrough);
    return {};
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
    awaitBackup(replicateThrough);
    return {};
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

proto::ClusterStatusResponse PsTask::clusterStatus()
{
    std::lock_guard lock(m_mutex);
    return clusterStatusLocked();
}

proto::ClusterStatusResponse PsTask::clusterStatusLocked() const
{
    proto::ClusterStatusResponse status;
    status.set_initialized(m_initialized);
    status.set_last_step(lastStep());
    for (const auto &ps : m_options.cluster.ps)
        status.add_ps_hosts(ps.toString());
    for (const auto &w : m_options.cluster.workers)
        status.add_worker_hosts(w.toString());
    *status.mutable_signature() = m_signature;
    status.set_cluster_json(m_options.training.toJson());
    if (m_policy) {
        status.set_global_step(m_policy->globalStep());
        *status.mutable_mode() = m_policy->mode();
        status.set_dropped_total(m_policy->droppedTotal());
        *status.mutable_stall() = m_stall;
        status.set_acting_chief(m_actingChief);
    }
    for (int i = 0; i < int(m_workers.size()); ++i)
        *status.add_workers() = workerStatusLocked(i);
    if (m_options.cluster.replicated())
        *status.mutable_replica() = replicaStatusLocked();
    if (m_runLog)
        status.set_records_problem(m_runLog->problem());
    return status;
}

CallStatus PsTask::watch(const proto::WatchRequest &request, WatchStream &stream)
{
    if (request.has_resume_after_step() && request.resume_after_step() < 0)
        return CallStatus::invalidArgument("a Watch request resumes after global step "
                                           + std::to_string(request.resume_after_step())
                                           + ": give the last global step seen (0 or more), or leave it unset");
    std::optional<int64_t> resumeAfter;
    if (request.has_resume_after_step())
        resumeAfter = request.resume_after_step();
    auto subscription = m_telemetry.subscribe(size_t(std::max(0, request.max_buffered_events())), resumeAfter);
    auto lastStatus = std::chrono::steady_clock::now();
    bool first = true;
    for (;;) {
        proto::TelemetryBatch batch;
        // Batches of up to 50 ms keep the subscriber live (>= 10 refreshes a
        // second) without one message per event.
        const bool open = subscription->next(&batch, std::chrono::milliseconds(50));
        const auto now = std::chrono::steady_clock::now();
        // A failover changes which process serves: the watcher learns the
        // new primary's role with the event, not up to 0.5 s after it (the
        // panel would show the dead ps:0 serving meanwhile).
        const bool failover = std::any_of(batch.events().begin(), batch.events().end(),
                                          [](const proto::TelemetryEvent &event) { return event.has_failover(); });
        if ((first && request.include_status()) || failover || now - lastStatus > std::chrono::milliseconds(500)) {
            *batch.mutable_status() = clusterStatus();
            lastStatus = now;
        }
        first = false;
        batch.set_wall_time(wallTime());
        if (!open)
            batch.set_cluster_finished(true);
        if (!stream.write(batch) || !open)
            break;
    }
    m_telemetry.unsubscribe(subscription);
    return {};
}

void PsTask::reportCheckpoint(const proto::ReportCheckpointRequest &request)
{
    std::lock_guard lock(m_mutex);
    proto::TelemetryEvent event;
    *event.mutable_checkpoint() = request.checkpoint();
    publishLocked(event);
}

} // namespace parasync
