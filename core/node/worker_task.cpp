#include "node/worker_task.h"

#include "base/clock.h"
#include "base/error.h"
#include "engine/click_log.h"
#include "engine/optimizer.h"
#include "engine/parameter_shard.h"
#include "engine/staleness_cost.h"
#include "formats/acknowledgement_log.h"
#include "node/chief_duties.h"
#include "node/worker_ps_connection.h"

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

WorkerTask::WorkerTask(NodeOptions options, RpcSettings rpc, Log log)
    : WorkerTask(std::move(options), std::move(rpc), std::move(log), Transport{})
{
}

WorkerTask::WorkerTask(NodeOptions options, RpcSettings rpc, Log log, Transport transport)
    : m_options(std::move(options))
    , m_rpc(std::move(rpc))
    , m_log(std::move(log))
    , m_rng(m_options.training.seed * 7919 + uint64_t(m_options.task.index))
    , m_paceRng(m_options.training.seed * 104729 + uint64_t(m_options.task.index))
    , m_transport(std::move(transport))
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
        m_server->shutdown(std::chrono::seconds(1));
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
            if (ps->stream)
                ps->stream->cancel();
    });
}

void WorkerTask::start()
{
    const auto &training = m_options.training;
    if (!m_options.acknowledgementLog.empty())
        m_acknowledged = std::make_unique<AcknowledgementLog>(m_options.acknowledgementLog);
    DatasetOptions data;
    data.spec = training.dataset.empty() ? defaultDatasetFor(training.model) : training.dataset;
    data.shardIndex = m_options.task.index;
    // Every index of an elastic cluster has its own shard, so that the
    // shards do not change as workers come and go.
    data.numShards = m_options.workerSlots();
    data.samplesPerShard = training.samplesPerShard;
    data.seed = training.seed;
    data.classification = isClassifierName(training.model);
    data.evalFraction = training.evalFraction;
    m_data = loadDataset(data);
    if (m_data.size() == 0)
        throw InputError("worker:" + std::to_string(m_options.task.index) + " has no data in its shard of "
                         + data.spec);
    m_model = makeModel(training.model, m_data.featureDim(),
                        m_data.numClasses > 0 ? m_data.numClasses : m_data.targets.cols(), m_data.indexSizes);
    m_variables = m_model->initialVariables(training.seed);
    for (const auto &v : m_variables)
        m_params.push_back(v.value);
    m_tables = m_model->tables(training.seed);
    if (hasTables()) {
        OptimizerOptions optimizer;
        optimizer.name = training.optimizer;
        optimizer.learningRate = training.learningRate;
        if (makeOptimizer(optimizer)->rowSlots() < 0)
            throw InputError("--optimizer=" + training.optimizer + " has no rule for the rows of a table ("
                             + m_model->name()
                             + " has tables): use sgd, momentum, adagrad or ftrl, whose state lies beside each row");
    }
    if (training.hasHeldOutData() && (m_options.task.isChief() || training.chiefHandover))
        loadHeldOutData(data);
    // A join answer carries every parameter of a shard: refuse a limit too
    // small for the model now, not as a RESOURCE_EXHAUSTED on the first step.
    int64_t parameters = 0;
    for (const auto &p : m_params)
        parameters += p.size();
    // A sparse step carries the batch's row gradients and the next batch's
    // ids, and its answer those rows: at most every sample's ids distinct.
    int64_t rowBytes = 0;
    for (const TableDeclaration &table : m_tables)
        rowBytes += training.batchSize * m_data.fields
                    * (int64_t(sizeof(uint64_t)) * 2 + int64_t(sizeof(float)) * table.rowWidth);
    const int64_t needed = parameters * int64_t(sizeof(float)) + rowBytes + 4096;
    if (needed > m_rpc.maxMessageBytes)
        throw InputError(
            "the model has " + std::to_string(parameters) + " parameters"
            + (rowBytes > 0 ? " and a batch of " + std::to_string(training.batchSize) + " touches up to "
                                  + std::to_string(training.batchSize * m_data.fields) + " rows of each table"
                            : std::string())
            + ", so one step's message takes about " + std::to_string(needed) + " bytes, but --max_message_bytes="
            + std::to_string(m_rpc.maxMessageBytes) + ": give every task --max_message_bytes=" + std::to_string(needed)
            + " or more" + (rowBytes > 0 ? ", or a smaller --batch_size" : ""));
    if (hasTables() && training.stalenessProbeEvery > 0)
        m_log("worker:" + std::to_string(m_options.task.index)
              + ": --staleness_probe_every is off for a model with tables: the probe's batch's rows are gone by "
                "the next step");
    const int numPs = m_options.cluster.numPs();
    m_signature = modelSignature();
    m_placement = VariablePlacement::fromSignature(m_signature, numPs);
    for (int k = 0; k < numPs; ++k)
        if (!m_placement.on(k).empty())
            m_log("worker:" + std::to_string(m_options.task.index) + ": ps:" + std::to_string(k) + " holds "
                  + m_placement.describe(k));
    for (const TableDeclaration &table : m_tables)
        m_log("worker:" + std::to_string(m_options.task.index) + ": table '" + table.name + "' (rows of "
              + std::to_string(table.rowWidth) + ") lives on "
              + (numPs == 1 ? "ps:0" : "all " + std::to_string(numPs) + " ps tasks")
              + ", each row on the one its id hashes to; a step moves only its batch's rows");
    m_order.resize(size_t(m_data.size()));
    std::iota(m_order.begin(), m_order.end(), 0);
    std::shuffle(m_order.begin(), m_order.end(), m_rng);

    TaskControlCallbacks callbacks;
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
    // The chief is the witness of every replicated pair's lease
    // (node/lease.h): the third vote, beside the pair's own two.
    if (m_options.task.index == 0 && m_options.cluster.replicated() && m_options.connection.psLeaseMs > 0) {
        std::vector<int> pairs(size_t(m_options.cluster.numPs()));
        std::iota(pairs.begin(), pairs.end(), 0);
        m_witness.emplace(m_options.cluster,
                          "the witness worker:0 at " + m_options.cluster.address(m_options.task).toString(), pairs,
                          std::chrono::milliseconds(m_options.connection.psLeaseMs));
        callbacks.vote = [this](const proto::VoteRequest &request, proto::VoteResponse *response) {
            return m_witness->vote(request, response);
        };
    }
    if (m_transport.serveControl)
        m_server = m_transport.serveControl(m_options.task, m_options.cluster.address(m_options.task), m_rpc,
                                            std::move(callbacks), m_log);

    std::vector<std::shared_ptr<PsClient>> clients;
    for (int k = 0; k < numPs; ++k) {
        auto connection = std::make_unique<PsConnection>();
        connection->index = k;
        std::vector<std::string> addresses;
        for (const HostPort &process : m_options.cluster.psPair(k))
            addresses.push_back(process.toString());
        connection->client = m_transport.connectToPs(addresses, m_rpc);
        connection->address = addresses.front();
        clients.push_back(connection->client);
        m_ps.push_back(std::move(connection));
    }
    m_chief = std::make_unique<ChiefDuties>(m_options, m_signature, m_variables, m_placement, m_data,
                                            std::move(clients), m_stop.get_token(), m_log);

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
        if (hasTables()) {
            m_heldOutIds = m_model->touchedIds(heldOut, {});
            heldOutMetrics(*m_model, m_params, initialRows(m_heldOutIds), heldOut);
        } else {
            heldOutMetrics(*m_model, m_params, heldOut);
        }
    } catch (const InputError &e) {
        throw InputError(flag + ": " + e.what());
    }
    m_log("worker:" + std::to_string(m_options.task.index) + ": held-out data (" + flag + "): " + heldOut.description
          + ", " + std::to_string(heldOut.size()) + " samples");
    // Data drawn from a known model has a known best: what the model's
    // held-out AUC is to be read against.
    if (!heldOut.trueProbability.empty()) {
        std::vector<float> labels(size_t(heldOut.size()));
        for (int64_t i = 0; i < heldOut.size(); ++i)
            labels[size_t(i)] = heldOut.targets(i, 0);
        char best[160];
        std::snprintf(best, sizeof best, "%.4f (log loss %.4f)", double(areaUnderRoc(heldOut.trueProbability, labels)),
                      double(logLoss(heldOut.trueProbability, labels)));
        m_log("worker:" + std::to_string(m_options.task.index)
              + ": the model that generated the held-out data scores AUC " + best
              + " on it: the best any model can reach there");
    }
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
    for (const TableDeclaration &table : m_tables) {
        auto *spec = signature.add_tables();
        spec->set_name(table.name);
        spec->set_row_width(table.rowWidth);
        spec->set_id_limit(table.idLimit);
        spec->set_init_stddev(table.initStddev);
        spec->set_seed(table.seed);
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
    // A sparse model's batch was chosen a step ahead: its rows came with
    // the last answer (or the pull after joining).
    const std::vector<int64_t> batch = hasTables() ? m_batch : nextBatch();
    const float batchLoss
        = hasTables() ? m_model->lossAndGradient(m_params, m_batchRows, m_data, batch, &m_gradient, &m_rowGradient)
                      : m_model->lossAndGradient(m_params, m_data, batch, &m_gradient);
    ChiefMeasurement measured;
    if (m_chief->evaluatesFullLoss(m_globalStep) && !measureForChief(&measured))
        return false;
    const int64_t computeUs = microsSince(computeStart);
    // After the compute time is taken: the probe's gradient is the
    // measurement's cost, not the model's.
    const std::optional<proto::StalenessProbe> probe = finishProbe();
    const int64_t computedFrom = m_globalStep;
    // The next batch, whose rows this step's answers bring.
    std::vector<int64_t> next;
    std::vector<std::vector<uint64_t>> nextIds;
    if (hasTables()) {
        next = nextBatch();
        nextIds = touchedIds(next);
    }

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
    describePush(push, batchLoss, computeUs, measured, probe);
    const TensorValues &gradient = makePush(0, push);
    if (hasTables()) {
        addRowGradients(0, push->mutable_row_gradients());
        addPulls(0, nextIds, push->mutable_pull());
    }

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
        return k + 1 < m_ps.size() ? PsStream::LinkWrite::Overlapped : PsStream::LinkWrite::Here;
    };
    if (!ps0.stream->writeSharingValues(request, gradient, linkWrite(0)))
        return false;
    for (size_t k = 1; k < m_ps.size(); ++k) {
        proto::TrainRequest &staged = m_ps[k]->push;
        staged.mutable_push()->Clear();
        staged.mutable_push()->set_staged(true);
        staged.mutable_push()->set_computed_from_step(m_globalStep);
        if (hasTables())
            addRowGradients(int(k), staged.mutable_push()->mutable_row_gradients());
        if (!m_ps[k]->stream->writeSharingValues(staged, makePush(int(k), staged.mutable_push()), linkWrite(k)))
            return false;
    }
    // The answers' parameters go straight into m_params (TrainCall::read);
    // readParameters() copies them from an answer of another form.
    proto::TrainResponse &response = ps0.answer;
    bool delivered = false;
    if (!ps0.stream->read(&response, parameterDestinations(0), &delivered) || !answerIsCurrent(ps0, response))
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
        if (hasTables())
            addPulls(int(k), nextIds, shardPush->mutable_pull());
        if (!m_ps[k]->stream->write(decided))
            return false;
    }
    for (size_t k = 1; k < m_ps.size(); ++k) {
        proto::TrainResponse &shardResponse = m_ps[k]->answer;
        if (!m_ps[k]->stream->read(&shardResponse, parameterDestinations(int(k)), &delivered)
            || !answerIsCurrent(*m_ps[k], shardResponse))
            return false;
        if (!delivered)
            readParameters(int(k), shardResponse.push().parameters());
    }
    m_previousPushUs = microsSince(pushStart) - decision.waited_us();
    m_globalStep = decision.global_step();
    m_ps[0]->acknowledged = m_globalStep;
    m_done = decision.done();
    if (hasTables() && !m_done) {
        std::vector<const google::protobuf::RepeatedPtrField<proto::SparseRows> *> answered;
        for (const auto &ps : m_ps)
            answered.push_back(&ps->answer.push().rows());
        readRows(answered, nextIds, &m_batchRows);
        m_batch = std::move(next);
        m_batchIds = std::move(nextIds);
    }
    m_chief->afterStep(decision, batchLoss, measured, m_params);
    addToMeters(decision, computeUs, batchLoss);
    if (decision.outcome() == proto::PUSH_OUTCOME_UNSPECIFIED)
        return true; // the last step was reached before this gradient arrived
    ++m_clock;
    if (m_acknowledged)
        recordAcknowledgement(decision);
    // Sampled: the next step compares this gradient with its batch's at the
    // parameters the answers just brought (finishProbe).
    if (const int64_t every = m_options.training.stalenessProbeEvery; every > 0 && m_clock % every == 0 && !hasTables())
        m_pendingProbe = PendingProbe{batch, m_gradient, computedFrom};

    // As the seeds: print when this worker's update produced a multiple of
    // --display_step, so the workers' printed steps interleave.
    const int64_t display = m_options.training.displayStep;
    if (counted && display > 0 && decision.update() > 0 && decision.update() % display == 0)
        logStep(decision, batchLoss);
    return true;
}

void WorkerTask::recordAcknowledgement(const proto::PushResponse &decision)
{
    Acknowledgement a;
    a.worker = m_options.task.index;
    a.workerClock = m_clock;
    a.update = decision.update();
    a.globalStep = decision.global_step();
    a.outcome = decision.outcome();
    for (const auto &ps : m_ps) {
        a.leaseEpochs.push_back(ps->answer.lease_epoch());
        a.answeredBy.push_back(ps->address);
    }
    a.time = wallTime();
    if (const std::string problem = m_acknowledged->record(a); !problem.empty())
        m_log("worker:" + std::to_string(m_options.task.index) + " " + problem);
}

bool WorkerTask::answerIsCurrent(PsConnection &ps, const proto::TrainResponse &answer)
{
    if (answer.lease_epoch() >= ps.epoch) {
        ps.epoch = answer.lease_epoch();
        return true;
    }
    m_log("worker:" + std::to_string(m_options.task.index) + " refuses an answer of ps:" + std::to_string(ps.index)
          + " at " + ps.address + " under lease epoch " + std::to_string(answer.lease_epoch())
          + ": its pair answered under epoch " + std::to_string(ps.epoch)
          + " before, so that process no longer serves (its lease ended). The step is not counted; "
            "the worker turns to the process that serves");
    return false;
}

bool WorkerTask::measureForChief(ChiefMeasurement *measured)
{
    if (hasTables()) {
        // The whole shard's rows would be most of the tables: a sparse
        // model is scored on its held-out data alone, whose rows are
        // looked up without being made.
        if (m_heldOut) {
            RowBlocks rows;
            if (!pullRows(m_heldOutIds, true, &rows))
                return false;
            measured->metrics = heldOutMetrics(*m_model, m_params, rows, *m_heldOut);
            m_lastHeldOut = measured->metrics;
        }
    } else {
        measured->fullLoss = m_model->loss(m_params, m_data);
        if (m_heldOut)
            measured->metrics = heldOutMetrics(*m_model, m_params, *m_heldOut);
    }
    measured->variables = m_chief->summarizeVariables(m_params, m_globalStep);
    return true;
}

void WorkerTask::describePush(proto::PushRequest *push, float batchLoss, int64_t computeUs,
                              const ChiefMeasurement &measured, const std::optional<proto::StalenessProbe> &probe) const
{
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
}

// "worker:0 step 1200 (local 600) loss 0.000123 w 2.0001 b 9.9987", as the
// seeds print it; a model too large to list its values gives its accuracy.
void WorkerTask::logStep(const proto::PushResponse &decision, float batchLoss) const
{
    Eigen::Index total = 0;
    for (const auto &p : m_params)
        total += p.size();
    char line[256];
    std::string values;
    if (total <= kMaxViewedParameters) {
        for (size_t i = 0; i < m_variables.size(); ++i) {
            for (Eigen::Index j = 0; j < m_params[i].size(); ++j) {
                std::snprintf(line, sizeof line, " %s %.4f", m_variables[i].name.c_str(), double(m_params[i][j]));
                values += line;
            }
        }
    } else if (!hasTables()) {
        std::snprintf(line, sizeof line, " accuracy %.4f", double(m_model->accuracy(m_params, m_data)));
        values += line;
    }
    // Beside the training loss, the score on data no worker trains on:
    // what tells learning from memorising. A sparse model's needs its rows
    // from the ps tasks: shown when this step measured it.
    if (m_heldOut && m_chief->held() && (!hasTables() || !m_lastHeldOut.empty())) {
        const std::vector<float> heldOut = hasTables() ? m_lastHeldOut : heldOutMetrics(*m_model, m_params, *m_heldOut);
        const std::vector<std::string> names = heldOutMetricNames(*m_model);
        for (size_t i = 0; i < names.size() && i < heldOut.size(); ++i) {
            // "heldout_accuracy" -> "held-out accuracy", the log's words.
            std::snprintf(line, sizeof line, " held-out %s %.4f", names[i].substr(names[i].find('_') + 1).c_str(),
                          double(heldOut[i]));
            values += line;
        }
    }
    // A sparse model's loss over the whole shard would pull most of its
    // tables: the batch's is shown.
    std::snprintf(line, sizeof line, "worker:%d step %lld (local %lld) %s %.6f%s%s", m_options.task.index,
                  static_cast<long long>(decision.update()), static_cast<long long>(m_clock.load()),
                  hasTables() ? "batch loss" : "loss",
                  double(hasTables() ? batchLoss : m_model->loss(m_params, m_data)), values.c_str(),
                  decision.outcome() == proto::AGGREGATED
                      ? (" [sync, " + std::to_string(decision.contributions()) + " gradients]").c_str()
                      : "");
    m_log(line);
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
                ps->stream->cancel();
                const CallResult status = ps->stream->finish();
                // Cancelled: this worker ended a stream that was fine, to
                // rejoin every ps task after another one's stream broke.
                if (status.code != CallResult::Code::Cancelled)
                    setState(TaskPhase::Waiting, "reconnecting: lost ps:" + std::to_string(ps->index) + " at "
                                                     + ps->address + ": " + status.description);
            }
            ps->stream.reset();
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
