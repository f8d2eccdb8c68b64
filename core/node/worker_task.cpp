#include "node/worker_task.h"

#include "base/clock.h"
#include "base/error.h"
#include "engine/parameter_shard.h"
#include "engine/staleness_cost.h"
#include "node/chief_duties.h"
#include "wire/task_server.h"
#include "wire/train_call.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace parasync {

namespace {

using Clock = std::chrono::steady_clock;

// Parameters small enough to travel with every push for the telemetry's
// w/b view (the linear demo has two).
constexpr Eigen::Index kMaxViewedParameters = 16;

} // namespace

struct WorkerTask::PsConnection
{
    int index = 0;
    // The process this worker trains with; with --ps_backup_hosts, either of
    // the task's pair (the one that serves).
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    // Every process of the task: one, or the pair's two (primary first).
    std::vector<std::string> addresses;
    std::vector<std::shared_ptr<grpc::Channel>> channels; // also the chief's, for its calls to this ps
    std::unique_ptr<proto::ParameterService::Stub> parameters;
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<TrainCall> stream;
    // Kept from step to step, so that a push's tensors reuse their storage
    // (wire/train_call.h): the push to this ps and its answer.
    proto::TrainRequest push;
    proto::TrainResponse answer;
    // Where the push's gradient values lie (slices of m_gradient), refilled
    // every step into the same vector: no allocation per step.
    TensorValues gradient;
    // Where this ps's answer puts its parameters' values: the rows of
    // m_params its slices cover (parameterDestinations()).
    TensorDestinations parameterRows;
    // ps:0 only: the last global step it acknowledged, told to it when
    // joining again, so that a replicated ps:0 that took over can tell
    // whether acknowledged updates were lost.
    int64_t acknowledged = 0;

    void closeStream()
    {
        if (stream) {
            context->TryCancel();
            stream->finish();
        }
        stream.reset();
        context.reset();
    }
};

WorkerTask::WorkerTask(NodeOptions options, RpcSettings rpc, Log log)
    : m_options(std::move(options))
    , m_rpc(std::move(rpc))
    , m_log(std::move(log))
    , m_rng(m_options.training.seed * 7919 + uint64_t(m_options.task.index))
    , m_paceRng(m_options.training.seed * 104729 + uint64_t(m_options.task.index))
{
    const WorkerPace &pace = m_options.training.pace;
    m_computeMs = pace.computeMs;
    m_computeJitter = pace.computeJitter;
    m_stragglerMs = pace.stragglerMs;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0)
        m_hostName = host;
}

WorkerTask::~WorkerTask()
{
    requestStop("shutting down");
    {
        std::lock_guard lock(m_stateMutex);
        m_finishedRunning = true;
    }
    m_runFinished.notify_all();
    if (m_stopWatchdog.joinable())
        m_stopWatchdog.join();
    m_chief.reset();
    {
        std::lock_guard lock(m_streamMutex);
        for (auto &ps : m_ps)
            ps->closeStream();
    }
    if (m_server)
        m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

void WorkerTask::setState(TaskPhase phase, const std::string &detail)
{
    std::lock_guard lock(m_stateMutex);
    if (m_phase == phase && m_phaseDetail == detail)
        return; // a retry of the same wait says nothing new
    m_phase = phase;
    m_phaseDetail = detail;
    // TaskControl's words: what a worker waits for, else the phase's name.
    m_state = phase == TaskPhase::Waiting && !detail.empty() ? detail : taskPhaseName(phase);
    m_log(taskStateLine({m_options.task, phase, detail}));
}

void WorkerTask::requestStop(const std::string &reason)
{
    {
        std::lock_guard lock(m_stateMutex);
        if (m_stopReason.empty())
            m_stopReason = reason;
        if (!m_stop.request_stop())
            return;
    }
    // run() notices the stop between steps and leaves the streams cleanly. A
    // push held at a sync barrier or the staleness bound blocks in Read,
    // though: if run() has not finished in a while, cancel the calls.
    m_stopWatchdog = std::thread([this] {
        std::unique_lock lock(m_stateMutex);
        if (m_runFinished.wait_for(lock, std::chrono::seconds(2), [this] { return m_finishedRunning; }))
            return;
        lock.unlock();
        std::lock_guard streams(m_streamMutex);
        for (auto &ps : m_ps)
            if (ps->context)
                ps->context->TryCancel();
    });
}

void WorkerTask::start()
{
    const auto &training = m_options.training;
    DatasetOptions data;
    data.spec = training.dataset.empty() ? defaultDatasetFor(training.model) : training.dataset;
    data.shardIndex = m_options.task.index;
    data.numShards = m_options.cluster.numWorkers();
    data.samplesPerShard = training.samplesPerShard;
    data.seed = training.seed;
    data.classification = training.model != "linear";
    data.evalFraction = training.evalFraction;
    m_data = loadDataset(data);
    if (m_data.size() == 0)
        throw InputError("worker:" + std::to_string(m_options.task.index) + " has no data in its shard of "
                         + data.spec);
    m_model = makeModel(training.model, m_data.featureDim(),
                        m_data.numClasses > 0 ? m_data.numClasses : m_data.targets.cols());
    m_variables = m_model->initialVariables(training.seed);
    for (const auto &v : m_variables)
        m_params.push_back(v.value);
    if (training.hasHeldOutData() && (m_options.task.isChief() || training.chiefHandover))
        loadHeldOutData(data);
    // A join answer carries every parameter of a shard: refuse a limit too
    // small for the model now, not as a RESOURCE_EXHAUSTED on the first step.
    int64_t parameters = 0;
    for (const auto &p : m_params)
        parameters += p.size();
    const int64_t needed = parameters * int64_t(sizeof(float)) + 4096;
    if (needed > m_rpc.maxMessageBytes)
        throw InputError("the model has " + std::to_string(parameters)
                         + " parameters, so one step's message takes about " + std::to_string(needed)
                         + " bytes, but --max_message_bytes=" + std::to_string(m_rpc.maxMessageBytes)
                         + ": give every task --max_message_bytes=" + std::to_string(needed) + " or more");
    const int numPs = m_options.cluster.numPs();
    m_signature = modelSignature();
    m_placement = VariablePlacement::fromSignature(m_signature, numPs);
    for (int k = 0; k < numPs; ++k)
        if (!m_placement.on(k).empty())
            m_log("worker:" + std::to_string(m_options.task.index) + ": ps:" + std::to_string(k) + " holds "
                  + m_placement.describe(k));
    m_order.resize(size_t(m_data.size()));
    std::iota(m_order.begin(), m_order.end(), 0);
    std::shuffle(m_order.begin(), m_order.end(), m_rng);

    TaskControlService::Callbacks callbacks;
    callbacks.status = [this] {
        proto::TaskStatusResponse status;
        status.set_job_name("worker");
        status.set_task_index(m_options.task.index);
        status.set_pid(::getpid());
        {
            std::lock_guard lock(m_stateMutex);
            status.set_state(m_state);
        }
        status.set_steps(m_clock);
        status.set_straggler_delay_ms(m_stragglerMs.load());
        status.set_compute_ms(m_computeMs.load());
        status.set_compute_jitter(m_computeJitter.load());
        return status;
    };
    callbacks.stop = [this](const std::string &reason) { requestStop(reason); };
    callbacks.setStraggler = [this](int delayMs) {
        m_stragglerMs = delayMs;
        m_log("worker:" + std::to_string(m_options.task.index) + ": straggler delay now " + std::to_string(delayMs)
              + " ms per step");
        return delayMs;
    };
    callbacks.setPace = [this](const proto::SetPaceRequest &request) {
        m_computeMs = request.compute_ms();
        if (request.has_compute_jitter())
            m_computeJitter = request.compute_jitter();
        proto::SetPaceResponse response;
        response.set_compute_ms(m_computeMs.load());
        response.set_compute_jitter(m_computeJitter.load());
        m_log("worker:" + std::to_string(m_options.task.index) + ": compute time now "
              + (response.compute_ms() == 0 ? std::string("0 (full speed)")
                                            : std::to_string(response.compute_ms()) + " ms per step")
              + ", jitter " + std::to_string(response.compute_jitter()).substr(0, 4));
        return response;
    };
    m_auth = std::make_unique<TokenCheck>(m_rpc.clusterToken, m_log);
    m_services.push_back(std::make_unique<TaskControlService>(std::move(callbacks), m_auth.get()));
    m_server
        = startTaskServer(m_options.task, m_options.cluster.address(m_options.task), m_rpc, {m_services.front().get()});

    for (int k = 0; k < numPs; ++k) {
        auto connection = std::make_unique<PsConnection>();
        connection->index = k;
        for (const HostPort &process : m_options.cluster.psPair(k)) {
            connection->addresses.push_back(process.toString());
            connection->channels.push_back(makeChannel(connection->addresses.back(), m_rpc));
        }
        connection->address = connection->addresses.front();
        connection->channel = connection->channels.front();
        connection->parameters = proto::ParameterService::NewStub(connection->channel);
        m_ps.push_back(std::move(connection));
    }
    std::vector<std::vector<std::shared_ptr<grpc::Channel>>> psChannels;
    for (const auto &ps : m_ps)
        psChannels.push_back(ps->channels);
    m_chief = std::make_unique<ChiefDuties>(m_options, m_rpc, m_signature, m_variables, m_placement, m_data,
                                            std::move(psChannels), m_stop.get_token(), m_log);

    m_log("worker:" + std::to_string(m_options.task.index) + (m_options.task.isChief() ? " (chief)" : "")
          + " listening on " + m_options.cluster.address(m_options.task).toString() + "; data: " + m_data.description
          + ", " + std::to_string(m_data.size()) + " samples");
    setState(TaskPhase::Listening, "connecting to the ps tasks");
}

void WorkerTask::loadHeldOutData(const DatasetOptions &training)
{
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%g", m_options.training.evalFraction);
    const std::string flag = m_options.training.evalDataset.empty()
                                 ? "--eval_fraction=" + std::string(fraction)
                                 : "--eval_dataset=" + m_options.training.evalDataset;
    Dataset heldOut = parasync::loadHeldOutData(training, m_options.training.evalDataset);
    if (heldOut.featureDim() != m_model->featureDim())
        throw InputError(flag + ": the held-out data has " + std::to_string(heldOut.featureDim())
                         + " features per sample, but the model trains on " + std::to_string(m_model->featureDim())
                         + " (" + m_data.description + "): give held-out data with the training data's columns");
    // Scored once now, so a class index the model lacks stops the worker
    // before it joins rather than on its first evaluation.
    try {
        heldOutMetrics(*m_model, m_params, heldOut);
    } catch (const InputError &e) {
        throw InputError(flag + ": " + e.what());
    }
    m_log("worker:" + std::to_string(m_options.task.index) + ": held-out data (" + flag + "): " + heldOut.description
          + ", " + std::to_string(heldOut.size()) + " samples");
    m_heldOut = std::move(heldOut);
}

proto::ModelSignature WorkerTask::modelSignature() const
{
    proto::ModelSignature signature;
    signature.set_model(m_model->name());
    signature.set_dataset(m_options.training.dataset);
    signature.set_feature_dim(m_model->featureDim());
    signature.set_output_dim(m_model->outputDim());
    signature.set_optimizer(m_options.training.optimizer);
    for (const auto &v : m_variables) {
        auto *spec = signature.add_variables();
        spec->set_name(v.name);
        spec->mutable_shape()->Assign(v.shape.begin(), v.shape.end());
    }
    // Declared by every worker given held-out data, whether or not it will
    // ever measure them, so that all workers' signatures agree.
    if (m_options.training.hasHeldOutData())
        for (const std::string &name : heldOutMetricNames(*m_model))
            signature.add_metric_names(name);
    VariablePlacement::partition(&signature, m_options.cluster.numPs(), m_options.training.minSliceBytes);
    return signature;
}

void WorkerTask::readParameters(int ps, const google::protobuf::RepeatedPtrField<proto::Tensor> &parameters)
{
    const std::vector<VariableSlice> &slices = m_placement.on(ps);
    if (parameters.size() != int(slices.size()))
        throw InputError("ps:" + std::to_string(ps) + " answered with " + std::to_string(parameters.size())
                         + " tensors, but it holds " + std::to_string(slices.size())
                         + " variables and slices: give every task the same cluster");
    for (size_t j = 0; j < slices.size(); ++j) {
        const VariableSlice &slice = slices[j];
        const proto::Tensor &tensor = parameters[int(j)];
        if (tensor.values_size() != slice.size)
            throw InputError("ps:" + std::to_string(ps) + " answered with " + std::to_string(tensor.values_size())
                             + " values for '" + slice.name + "', which has " + std::to_string(slice.size));
        // Into the slice's own rows: no new vector per step.
        m_params[size_t(slice.variable)].segment(slice.offset, slice.size)
            = Eigen::Map<const Eigen::VectorXf>(tensor.values().data(), slice.size);
    }
}

const TensorDestinations &WorkerTask::parameterDestinations(int ps)
{
    // Refilled every step: m_params is assigned anew when the worker joins.
    TensorDestinations &destinations = m_ps[size_t(ps)]->parameterRows;
    destinations.clear();
    for (const VariableSlice &slice : m_placement.on(ps))
        destinations.emplace_back(m_params[size_t(slice.variable)].data() + slice.offset, size_t(slice.size));
    return destinations;
}

bool WorkerTask::waitForPs(int ps)
{
    PsConnection &connection = *m_ps[size_t(ps)];
    const std::string name = "ps:" + std::to_string(ps);
    Backoff backoff;
    for (;;) {
        // A cheap unary call tells reachable from not, with a reason we can
        // print, and -- with a backup -- which process of the pair serves.
        std::string why;
        std::optional<size_t> serving;
        std::optional<size_t> backupWithState;
        std::optional<size_t> backupWithoutState;
        size_t unreachable = 0;
        for (size_t p = 0; p < connection.addresses.size() && !serving; ++p) {
            auto stub = proto::TaskControl::NewStub(connection.channels[p]);
            auto context = makeContext(m_rpc, std::chrono::milliseconds(1000));
            proto::TaskStatusResponse status;
            const auto result = stub->GetTaskStatus(context.get(), {}, &status);
            if (!result.ok()) {
                ++unreachable;
                why += (why.empty() ? "" : "; ")
                       + ("cannot reach " + name + " at " + connection.addresses[p] + ": " + describeRpcError(result));
            } else if (status.replica_role() == proto::REPLICA_PRIMARY
                       || (connection.addresses.size() == 1 && status.replica_role() != proto::REPLICA_BACKUP)) {
                serving = p;
            } else if (status.replica_role() == proto::REPLICA_ROLE_UNSPECIFIED) {
                // One of a pair that has not taken its role yet.
                why += (why.empty() ? "" : "; ") + (name + " at " + connection.addresses[p] + " is starting");
            } else if (status.replica_holds_state()) {
                backupWithState = p;
                why += (why.empty() ? "" : "; ") + (name + " at " + connection.addresses[p] + " is the backup");
            } else {
                backupWithoutState = p;
                why += (why.empty() ? "" : "; ")
                       + (name + " at " + connection.addresses[p] + " is a backup without the state yet");
            }
        }
        // No process serves, but a backup holds the state: the join makes it
        // take over if its primary is gone (or tells this worker where it is).
        // A backup without the state is turned to when its primary cannot be
        // reached at all: it serves in the primary's place, empty, once the
        // primary has been gone a few heartbeats, else says how long it waits.
        if (!serving && backupWithState && connection.addresses.size() > 1)
            serving = backupWithState;
        if (!serving && backupWithoutState && unreachable + 1 == connection.addresses.size())
            serving = backupWithoutState;
        if (serving) {
            if (connection.address != connection.addresses[*serving]) {
                std::lock_guard lock(m_streamMutex);
                connection.address = connection.addresses[*serving];
                connection.channel = connection.channels[*serving];
                connection.parameters = proto::ParameterService::NewStub(connection.channel);
                m_log("worker:" + std::to_string(m_options.task.index) + ": " + name + " is served by "
                      + connection.address + " now");
            }
            return true;
        }
        setState(TaskPhase::Waiting, why);
        if (!backoff.wait(why, m_log, [this] { return stopping(); }))
            return false;
    }
}

bool WorkerTask::connectAndJoin()
{
    // A ps lost while joining (or a backup that does not serve yet) starts
    // the whole join again, after a pause that grows while it lasts.
    Backoff lost(std::chrono::milliseconds(200), std::chrono::seconds(2));
    for (;;) {
        std::string why;
        switch (joinAll(&why)) {
        case JoinOutcome::Joined: return true;
        case JoinOutcome::Stopping: return false;
        case JoinOutcome::Lost: break;
        }
        if (!lost.wait(why, m_log, [this] { return stopping(); }))
            return false;
    }
}

bool WorkerTask::offersDataLink() const
{
    // At every size: with the whole step on the link (offers_messages_on_
    // data_link) a 2-float step is one TCP exchange, where gRPC's own
    // framing costs more than the step's bytes (BENCHMARKS.md, raw gRPC echo).
    return m_options.connection.dataLink && !m_rpc.tls.enabled();
}

void WorkerTask::openDataLink(PsConnection &ps, const proto::DataLinkGrant &grant)
{
    if (!m_dataLinks)
        m_dataLinks = std::make_unique<DataLinkContext>();
    // As the ps: a link that moves no byte for two heartbeats is broken.
    const auto stall = std::max(std::chrono::milliseconds(2 * m_rpc.heartbeatMs), std::chrono::milliseconds(2000));
    std::string why;
    if (!ps.stream->openDataLink(*m_dataLinks, parseHostPort(ps.address).host, grant, stall, stall, &why))
        m_log("worker:" + std::to_string(m_options.task.index) + ": no data link to ps:" + std::to_string(ps.index)
              + " (" + why + "); its tensors go on the gRPC stream");
}

WorkerTask::JoinOutcome WorkerTask::joinAll(std::string *why)
{
    const int index = m_options.task.index;
    for (int k = 0; k < int(m_ps.size()); ++k)
        if (!waitForPs(k))
            return JoinOutcome::Stopping;
    if (m_options.task.isChief()) {
        Backoff backoff;
        // On a rejoin a ps may have lost its memory (restarted, or a backup
        // that took over without the state): the chief's own parameters are
        // the newest it can give when no checkpoint holds them.
        const Parameters *lastValues = m_joinedBefore ? &m_params : nullptr;
        for (std::string failure = m_chief->initializeVariables(lastValues, m_globalStep); !failure.empty();
             failure = m_chief->initializeVariables(lastValues, m_globalStep)) {
            setState(TaskPhase::Waiting, failure);
            if (!backoff.wait(failure, m_log, [this] { return stopping(); }))
                return JoinOutcome::Stopping;
        }
    }

    // The ps holds a join for up to a second and answers the moment the chief
    // has initialised; asking again at once keeps this worker in a held join,
    // so that a sync cluster's first step waits for it too.
    Backoff waitingForChief(std::chrono::milliseconds(10), std::chrono::milliseconds(10));
    Backoff indexHeld(std::chrono::milliseconds(500), std::chrono::seconds(2));
    for (auto &ps : m_ps) {
        {
            std::lock_guard lock(m_streamMutex);
            ps->closeStream();
            ps->context = makeContext(m_rpc);
            ps->stream = std::make_unique<TrainCall>(*ps->channel, *ps->context);
        }
        for (;;) {
            if (stopping())
                return JoinOutcome::Stopping;
            proto::TrainRequest request;
            auto *join = request.mutable_join();
            join->set_worker_index(index);
            join->set_pid(::getpid());
            join->set_host(m_hostName);
            join->set_acknowledged_step(ps->acknowledged);
            *join->mutable_signature() = m_signature;
            join->set_offers_data_link(offersDataLink());
            join->set_offers_messages_on_data_link(offersDataLink());
            proto::TrainResponse response;
            if (!ps->stream->write(request) || !ps->stream->read(&response)) {
                const auto status = ps->stream->finish();
                ps->stream.reset();
                if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION
                    || status.error_code() == grpc::StatusCode::INVALID_ARGUMENT
                    || status.error_code() == grpc::StatusCode::ALREADY_EXISTS)
                    throw InputError(status.error_message());
                if (status.error_code() == grpc::StatusCode::ABORTED) {
                    // Our index's old connection is still open on the ps:
                    // ask again once it may have closed, saying why.
                    setState(TaskPhase::Waiting, status.error_message());
                    if (!indexHeld.wait(status.error_message(), m_log, [this] { return stopping(); }))
                        return JoinOutcome::Stopping;
                    std::lock_guard lock(m_streamMutex);
                    ps->context = makeContext(m_rpc);
                    ps->stream = std::make_unique<TrainCall>(*ps->channel, *ps->context);
                    continue;
                }
                *why = "reconnecting: lost ps:" + std::to_string(ps->index) + " at " + ps->address
                       + " while joining: " + describeRpcError(status);
                setState(TaskPhase::Waiting, *why);
                return JoinOutcome::Lost;
            }
            const auto &join_ = response.join();
            if (!join_.ready()) {
                const std::string what = "waiting for " + join_.waiting_for();
                setState(TaskPhase::Waiting, what);
                if (!waitingForChief.wait(what, m_log, [this] { return stopping(); }))
                    return JoinOutcome::Stopping;
                continue;
            }
            readParameters(ps->index, join_.parameters());
            if (join_.has_data_link())
                openDataLink(*ps, join_.data_link());
            if (ps->index == 0) {
                ps->acknowledged = join_.global_step();
                m_globalStep = join_.global_step();
                m_done = join_.last_step() > 0 && m_globalStep >= join_.last_step();
                // ps:0's --last_step ends the run; a worker started with
                // another one is told which counts, once.
                if (join_.last_step() != m_options.training.lastStep && m_clusterLastStep != join_.last_step())
                    m_log("worker:" + std::to_string(index)
                          + ": ps:0 runs to --last_step=" + std::to_string(join_.last_step()) + ", not this worker's "
                          + std::to_string(m_options.training.lastStep) + ": ps:0's decides");
                m_clusterLastStep = join_.last_step();
            }
            break;
        }
    }
    // Says what goes where: a link with frames carries the whole step, one
    // without (a ps that grants values only) the tensors' values.
    std::string wholeSteps;
    std::string valuesOnly;
    for (const auto &ps : m_ps) {
        if (!ps->stream->hasDataLink())
            continue;
        std::string &list = ps->stream->messagesOnDataLink() ? wholeSteps : valuesOnly;
        list += (list.empty() ? "ps:" : ", ps:") + std::to_string(ps->index);
    }
    std::string links;
    if (!wholeSteps.empty())
        links += " (steps on data links to " + wholeSteps + ")";
    if (!valuesOnly.empty())
        links += " (tensor values on data links to " + valuesOnly + ")";
    setState(TaskPhase::Training, "joined the cluster at global step " + std::to_string(m_globalStep) + links);
    m_joinedBefore = true;
    return JoinOutcome::Joined;
}

std::vector<int64_t> WorkerTask::nextBatch()
{
    const size_t batch = std::min(size_t(m_options.training.batchSize), m_order.size());
    std::vector<int64_t> rows;
    rows.reserve(batch);
    for (size_t i = 0; i < batch; ++i) {
        if (m_cursor == m_order.size()) {
            // A new epoch over the shard, in a new order.
            std::shuffle(m_order.begin(), m_order.end(), m_rng);
            m_cursor = 0;
        }
        rows.push_back(m_order[m_cursor++]);
    }
    return rows;
}

std::chrono::microseconds WorkerTask::drawComputeTime()
{
    const double mean = m_computeMs.load() * 1000.0;
    if (mean <= 0)
        return std::chrono::microseconds(0);
    const double cv = m_computeJitter.load();
    if (cv <= 0)
        return std::chrono::microseconds(int64_t(mean));
    // A log-normal with this mean and coefficient of variation.
    const double sigma2 = std::log1p(cv * cv);
    std::lognormal_distribution<double> draw(std::log(mean) - sigma2 / 2, std::sqrt(sigma2));
    // Capped, so one draw from the far tail cannot freeze the worker.
    return std::chrono::microseconds(int64_t(std::min(draw(m_paceRng), 20 * mean)));
}

void WorkerTask::sleepUnlessStopped(std::chrono::microseconds duration)
{
    const auto until = Clock::now() + duration;
    constexpr auto kSlice = std::chrono::milliseconds(20);
    for (auto now = Clock::now(); now < until && !stopping(); now = Clock::now())
        std::this_thread::sleep_for(std::min<Clock::duration>(until - now, kSlice));
}

bool WorkerTask::step()
{
    // Simulated work and a straggler's delay count as compute time: to
    // ps:0, the timeline and the waiting fractions, a straggler is a worker
    // whose steps take longer, as a slow machine's would.
    const auto computeStart = Clock::now();
    if (const int delay = m_stragglerMs.load(); delay > 0)
        sleepUnlessStopped(std::chrono::milliseconds(delay));
    sleepUnlessStopped(drawComputeTime());
    const std::vector<int64_t> batch = nextBatch();
    const float batchLoss = m_model->lossAndGradient(m_params, m_data, batch, &m_gradient);
    const bool evaluates = m_chief->evaluatesFullLoss(m_globalStep);
    ChiefMeasurement measured;
    if (evaluates) {
        measured.fullLoss = m_model->loss(m_params, m_data);
        if (m_heldOut)
            measured.metrics = heldOutMetrics(*m_model, m_params, *m_heldOut);
        measured.variables = m_chief->summarizeVariables(m_params, m_globalStep);
    }
    const int64_t computeUs = microsSince(computeStart);
    // After the compute time is taken: the probe's gradient is the
    // measurement's cost, not the model's.
    const std::optional<proto::StalenessProbe> probe = finishProbe();
    const int64_t computedFrom = m_globalStep;

    const auto pushStart = Clock::now();
    // A push's tensors carry the slices' shapes; their values go out from
    // m_gradient itself (TrainCall::writeSharingValues).
    auto makePush = [&](int ps, proto::PushRequest *push) -> const TensorValues & {
        TensorValues &values = m_ps[size_t(ps)]->gradient;
        values.clear();
        for (const VariableSlice &slice : m_placement.on(ps)) {
            push->add_gradients()->mutable_shape()->Assign(slice.shape.begin(), slice.shape.end());
            values.emplace_back(m_gradient[size_t(slice.variable)].data() + slice.offset, size_t(slice.size));
        }
        return values;
    };

    // ps:0 first: its update policy decides what happens to the gradient.
    auto &ps0 = *m_ps.front();
    proto::TrainRequest &request = ps0.push;
    auto *push = request.mutable_push();
    push->Clear(); // keeps the gradient tensors' storage for this step's values
    push->set_computed_from_step(m_globalStep);
    push->set_batch_loss(batchLoss);
    push->set_full_loss(measured.fullLoss);
    push->set_compute_us(computeUs);
    push->set_previous_push_us(m_previousPushUs);
    if (probe)
        *push->mutable_staleness_probe() = *probe;
    push->mutable_metrics()->Add(measured.metrics.begin(), measured.metrics.end());
    for (const VariableSummary &v : measured.variables) {
        auto *summary = push->add_variable_summaries();
        summary->set_norm(v.norm);
        summary->set_distance_from_start(v.distanceFromStart);
        summary->set_update_per_step(v.updatePerStep);
    }
    Eigen::Index total = 0;
    for (const auto &p : m_params)
        total += p.size();
    if (total <= kMaxViewedParameters)
        for (const auto &p : m_params)
            push->mutable_parameter_view()->Add(p.data(), p.data() + p.size());
    const TensorValues &gradient = makePush(0, push);

    // ps:0 first: its decision is on every step's critical path. The other
    // ps tasks get their slices of the gradient staged while ps:0 decides,
    // so the uploads overlap ps:0's work and its answer instead of
    // following them; then each gets the decision (a few bytes) and answers
    // with its fresh slices. Every write goes out before any answer is read.
    // The gradients go out from m_gradient, computed again only after every
    // answer of this step has been read.
    // On data links, every upload but the last is overlapped with the
    // next ones; the last goes on this thread.
    auto linkWrite = [this](size_t k) {
        return k + 1 < m_ps.size() ? TrainCall::LinkWrite::Overlapped : TrainCall::LinkWrite::Here;
    };
    if (!ps0.stream->writeSharingValues(request, gradient, linkWrite(0)))
        return false;
    for (size_t k = 1; k < m_ps.size(); ++k) {
        proto::TrainRequest &staged = m_ps[k]->push;
        staged.mutable_push()->Clear();
        staged.mutable_push()->set_staged(true);
        staged.mutable_push()->set_computed_from_step(m_globalStep);
        if (!m_ps[k]->stream->writeSharingValues(staged, makePush(int(k), staged.mutable_push()), linkWrite(k)))
            return false;
    }
    // The answers' parameters go straight into m_params (TrainCall::read);
    // readParameters() copies them from an answer of another form.
    proto::TrainResponse &response = ps0.answer;
    bool delivered = false;
    if (!ps0.stream->read(&response, parameterDestinations(0), &delivered))
        return false;
    const auto &decision = response.push();
    if (!delivered)
        readParameters(0, decision.parameters());

    const bool counted = decision.outcome() == proto::APPLIED || decision.outcome() == proto::AGGREGATED;
    for (size_t k = 1; k < m_ps.size(); ++k) {
        proto::TrainRequest decided;
        auto *shardPush = decided.mutable_push();
        shardPush->set_computed_from_step(m_globalStep);
        shardPush->set_update(decision.update());
        if (counted) {
            shardPush->set_contributions(decision.contributions()); // 0: the staged gradient is dropped
            // Every shard of the update moves by ps:0's rule (ModeConfig.learning_rate_by_staleness).
            shardPush->set_learning_rate_scale(decision.learning_rate_scale());
        }
        if (!m_ps[k]->stream->write(decided))
            return false;
    }
    for (size_t k = 1; k < m_ps.size(); ++k) {
        proto::TrainResponse &shardResponse = m_ps[k]->answer;
        if (!m_ps[k]->stream->read(&shardResponse, parameterDestinations(int(k)), &delivered))
            return false;
        if (!delivered)
            readParameters(int(k), shardResponse.push().parameters());
    }
    m_previousPushUs = microsSince(pushStart) - decision.waited_us();
    m_globalStep = decision.global_step();
    m_ps[0]->acknowledged = m_globalStep;
    m_done = decision.done();
    m_chief->afterStep(decision, batchLoss, measured, m_params);
    if (decision.outcome() == proto::PUSH_OUTCOME_UNSPECIFIED)
        return true; // the last step was reached before this gradient arrived
    ++m_clock;
    // Sampled: the next step compares this gradient with its batch's at the
    // parameters the answers just brought (finishProbe).
    if (const int64_t every = m_options.training.stalenessProbeEvery; every > 0 && m_clock % every == 0)
        m_pendingProbe = PendingProbe{batch, m_gradient, computedFrom};

    // As the seeds: print when this worker's update produced a multiple of
    // --display_step, so the workers' printed steps interleave.
    const int64_t display = m_options.training.displayStep;
    if (counted && display > 0 && decision.update() > 0 && decision.update() % display == 0) {
        char line[256];
        std::string values;
        if (total <= kMaxViewedParameters) {
            for (size_t i = 0; i < m_variables.size(); ++i) {
                for (Eigen::Index j = 0; j < m_params[i].size(); ++j) {
                    std::snprintf(line, sizeof line, " %s %.4f", m_variables[i].name.c_str(), double(m_params[i][j]));
                    values += line;
                }
            }
        } else {
            std::snprintf(line, sizeof line, " accuracy %.4f", double(m_model->accuracy(m_params, m_data)));
            values += line;
        }
        // Beside the training loss, the score on data no worker trains on:
        // what tells learning from memorising.
        if (m_heldOut && m_chief->held()) {
            const std::vector<float> heldOut = heldOutMetrics(*m_model, m_params, *m_heldOut);
            const std::vector<std::string> names = heldOutMetricNames(*m_model);
            for (size_t i = 0; i < names.size() && i < heldOut.size(); ++i) {
                // "heldout_accuracy" -> "held-out accuracy", the log's words.
                std::snprintf(line, sizeof line, " held-out %s %.4f", names[i].substr(names[i].find('_') + 1).c_str(),
                              double(heldOut[i]));
                values += line;
            }
        }
        std::snprintf(line, sizeof line, "worker:%d step %lld (local %lld) loss %.6f%s%s", m_options.task.index,
                      static_cast<long long>(decision.update()), static_cast<long long>(m_clock.load()),
                      double(m_model->loss(m_params, m_data)), values.c_str(),
                      decision.outcome() == proto::AGGREGATED
                          ? (" [sync, " + std::to_string(decision.contributions()) + " gradients]").c_str()
                          : "");
        m_log(line);
    }
    return true;
}

std::optional<proto::StalenessProbe> WorkerTask::finishProbe()
{
    if (!m_pendingProbe)
        return std::nullopt;
    const PendingProbe pending = std::move(*m_pendingProbe);
    m_pendingProbe.reset();
    // A worker that joined again may hold an older global step than the one
    // it probed at (a ps:0 restored from a checkpoint): nothing to compare.
    if (m_globalStep < pending.staleStep)
        return std::nullopt;
    m_model->lossAndGradient(m_params, m_data, pending.batch, &m_probeGradient);
    const std::optional<GradientComparison> comparison = compareGradients(pending.gradient, m_probeGradient);
    if (!comparison)
        return std::nullopt;
    proto::StalenessProbe probe;
    probe.set_stale_step(pending.staleStep);
    probe.set_fresh_step(m_globalStep);
    probe.set_cosine(comparison->cosine);
    probe.set_relative_error(comparison->relativeError);
    return probe;
}

void WorkerTask::leave(bool finished)
{
    std::lock_guard lock(m_streamMutex);
    for (auto &ps : m_ps) {
        if (!ps->stream)
            continue;
        proto::TrainRequest request;
        request.mutable_leave()->set_finished(finished);
        request.mutable_leave()->set_worker_clock(m_clock);
        ps->stream->write(request);
        ps->stream->writesDone();
        ps->stream->finish();
        ps->stream.reset();
        ps->context.reset();
    }
}

int WorkerTask::run()
{
    const int index = m_options.task.index;
    try {
        if (!connectAndJoin())
            return 0;
    } catch (const InputError &e) {
        m_log(std::string("worker:") + std::to_string(index) + ": " + e.what());
        return 2;
    }
    if (m_options.task.isChief())
        m_chief->take(true);

    while (!m_done && !stopping()) {
        if (step())
            continue;
        if (stopping())
            break;
        // A stream broke: the ps died or the network went away. Reconnect
        // (the chief restores from the newest checkpoint if the ps lost its
        // variables) and carry on.
        for (auto &ps : m_ps) {
            std::lock_guard lock(m_streamMutex);
            if (ps->stream) {
                ps->context->TryCancel();
                const auto status = ps->stream->finish();
                // CANCELLED: this worker ended a stream that was fine, to
                // rejoin every ps task after another one's stream broke.
                if (status.error_code() != grpc::StatusCode::CANCELLED)
                    setState(TaskPhase::Waiting, "reconnecting: lost ps:" + std::to_string(ps->index) + " at "
                                                     + ps->address + ": " + describeRpcError(status));
            }
            ps->stream.reset();
            ps->context.reset();
        }
        try {
            if (!connectAndJoin())
                break;
        } catch (const InputError &e) {
            m_log(std::string("worker:") + std::to_string(index) + ": " + e.what());
            return 2;
        }
    }

    const bool finished = m_done;
    m_stop.request_stop();
    m_chief->finish(finished);
    leave(finished);
    {
        std::lock_guard lock(m_stateMutex);
        m_finishedRunning = true;
    }
    m_runFinished.notify_all();
    if (finished) {
        setState(TaskPhase::Finished, "global step " + std::to_string(m_globalStep)
                                          + " reached --last_step=" + std::to_string(m_clusterLastStep)
                                          + " (local steps " + std::to_string(m_clock.load()) + ")");
    } else {
        std::string reason;
        {
            std::lock_guard lock(m_stateMutex);
            reason = m_stopReason;
        }
        setState(TaskPhase::Stopped, reason + " (local steps " + std::to_string(m_clock.load())
                                         + ", the last at global step " + std::to_string(m_globalStep) + ")");
    }
    return 0;
}

} // namespace parasync
