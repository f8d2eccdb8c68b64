#include "node/chief_duties.h"

#include "base/backoff.h"
#include "base/clock.h"
#include "base/error.h"
#include "engine/dataset.h"
#include "engine/parameter_shard.h"
#include "engine/sparse_rows.h"
#include "formats/checkpoint.h"
#include "node/training_summaries.h"

#include <algorithm>
#include <filesystem>

namespace parasync {

ChiefDuties::ChiefDuties(const NodeOptions &options, proto::ModelSignature signature,
                         const std::vector<Variable> &variables, VariablePlacement placement, const Dataset &data,
                         std::vector<std::shared_ptr<PsClient>> ps, std::stop_token stop, Log log)
    : m_options(options)
    , m_signature(std::move(signature))
    , m_variables(variables)
    , m_placement(std::move(placement))
    , m_log(std::move(log))
    , m_onStop(std::move(stop), [this] {
        {
            std::lock_guard lock(m_wakeMutex);
            m_stopping = true;
        }
        m_wake.notify_all();
    })
{
    m_ps = std::move(ps);
    m_servingProcess.assign(m_ps.size(), 0);
    const auto &training = m_options.training;
    if (m_options.task.isChief() && !training.logdir.empty()) {
        m_checkpoints = std::make_unique<CheckpointStore>(training.logdir, training.maxToKeep);
        m_summaries = std::make_unique<TrainingSummaries>(
            training.logdir, training.displayStep, training.toJson(), data, m_variables,
            std::vector<std::string>(m_signature.metric_names().begin(), m_signature.metric_names().end()),
            m_ps.front(), m_log);
    }
}

ChiefDuties::~ChiefDuties()
{
    endCheckpointThread();
}

std::string ChiefDuties::me() const
{
    return "worker:" + std::to_string(m_options.task.index);
}

std::string ChiefDuties::initializeVariables(const Parameters *lastValues, int64_t lastGlobalStep)
{
    const int numPs = int(m_ps.size());

    // Variable states in model order: fresh, or from the newest checkpoint.
    std::vector<proto::VariableState> states(m_variables.size());
    int64_t globalStep = 0;
    // A checkpoint's table rows, whole (none on a fresh start: rows are made
    // on their first touch).
    google::protobuf::RepeatedPtrField<proto::TableState> savedTables;
    std::string origin = "fresh, seed " + std::to_string(m_options.training.seed);
    if (m_checkpoints) {
        std::vector<std::string> skipped;
        const auto found = m_checkpoints->newestValid(&skipped);
        for (const auto &s : skipped)
            m_log("checkpoint skipped (corrupt): " + s);
        if (found) {
            const auto &ckpt = found->checkpoint;
            if (ckpt.signature().model() != m_signature.model()
                || ckpt.signature().variables_size() != m_signature.variables_size())
                throw InputError(found->path + " was saved by a '" + ckpt.signature().model()
                                 + "' model; this cluster trains '" + m_signature.model()
                                 + "': use another --logdir or the same --model");
            // Whole variables, cut again below for this cluster's ps tasks
            // and partitioning.
            std::vector<proto::VariableState> saved = checkpointVariables(ckpt);
            saved.resize(states.size());
            states = std::move(saved);
            for (size_t i = 0; i < states.size(); ++i) {
                const auto &shape = states[i].value().shape();
                if (states[i].value().values_size() != m_variables[i].value.size()
                    || !std::equal(shape.begin(), shape.end(), m_variables[i].shape.begin(),
                                   m_variables[i].shape.end()))
                    throw InputError(found->path + ": variable '" + m_variables[i].name
                                     + "' has a different shape than the model's: use another --logdir");
            }
            // Tables by name and width: their rows go back to whichever ps
            // task each id hashes to in this cluster.
            for (int t = 0; t < ckpt.tables_size(); ++t) {
                const proto::TableState &table = ckpt.tables(t);
                const bool fits
                    = t < m_signature.tables_size() && table.name() == m_signature.tables(t).name()
                      && int64_t(table.values_size()) == int64_t(table.ids_size()) * m_signature.tables(t).row_width();
                if (!fits)
                    throw InputError(found->path + ": table '" + table.name()
                                     + "' is not the model's table of that place and width: use another --logdir");
            }
            if (ckpt.tables_size() != 0 && ckpt.tables_size() != m_signature.tables_size())
                throw InputError(found->path + " holds " + std::to_string(ckpt.tables_size())
                                 + " tables, the model declares " + std::to_string(m_signature.tables_size())
                                 + ": use another --logdir");
            savedTables = ckpt.tables();
            globalStep = ckpt.global_step();
            origin = "restored from " + std::filesystem::path(found->path).filename().string();
        }
    }
    if (globalStep == 0 && origin.rfind("fresh", 0) == 0) {
        const bool ownValues = lastValues && lastValues->size() == m_variables.size();
        for (size_t i = 0; i < m_variables.size(); ++i) {
            states[i].set_name(m_variables[i].name);
            toTensor(ownValues ? (*lastValues)[i] : m_variables[i].value, m_variables[i].shape,
                     states[i].mutable_value());
        }
        if (ownValues) {
            globalStep = lastGlobalStep;
            origin = "the chief's own parameters at global step " + std::to_string(lastGlobalStep)
                     + ", no checkpoint in --logdir; optimizer state starts again"
                     + (m_signature.tables_size() > 0 ? ", and the tables' rows (the chief holds only a batch's)" : "");
        }
    }

    std::vector<proto::ShardState> shards = m_placement.split(states);
    splitTableStates(savedTables, &shards);
    // ps:0 last: its initialisation is what tells the other workers the
    // variables are ready.
    for (int k = numPs - 1; k >= 0; --k) {
        proto::InitializeRequest request;
        request.set_global_step(globalStep);
        request.set_origin(origin);
        *request.mutable_signature() = m_signature;
        *request.mutable_shard() = std::move(shards[size_t(k)]);
        proto::InitializeResponse response;
        const CallResult status = callPs(k, [&](PsClient &ps, size_t process) {
            return ps.initialize(process, request, std::chrono::seconds(10), &response);
        });
        if (status.code == CallResult::Code::InvalidArgument || status.code == CallResult::Code::FailedPrecondition)
            throw InputError("ps:" + std::to_string(k) + " refused the variables: " + status.message);
        // A ps that is slow to answer (overloaded, swapping, being profiled)
        // or went away meanwhile is waited for, as at the start. Initialize
        // is idempotent: a call that timed out here but reached ps:k makes
        // the next one answer "already holds the variables".
        if (!status.ok())
            return "cannot initialise ps:" + std::to_string(k) + " at " + m_options.cluster.ps[size_t(k)].toString()
                   + ": " + status.description;
        if (response.initialized_now() && k == 0)
            m_log("chief: variables initialised (" + origin + ") at global step " + std::to_string(globalStep));
        else if (!response.initialized_now() && k == 0)
            m_log("chief: ps:0 already holds the variables at global step " + std::to_string(response.global_step())
                  + "; continuing from there");
    }
    return {};
}

CallResult ChiefDuties::callPs(int k, const std::function<CallResult(PsClient &, size_t process)> &call)
{
    PsClient &ps = *m_ps[size_t(k)];
    const size_t processes = ps.addresses().size();
    size_t process = 0;
    {
        std::lock_guard lock(m_psMutex);
        process = m_servingProcess[size_t(k)];
    }
    CallResult status;
    for (size_t attempt = 0; attempt < processes; ++attempt, process = (process + 1) % processes) {
        status = call(ps, process);
        if (status.code != CallResult::Code::Unavailable)
            break;
    }
    std::lock_guard lock(m_psMutex);
    m_servingProcess[size_t(k)] = process;
    return status;
}

bool ChiefDuties::evaluatesFullLoss(int64_t globalStep)
{
    const int64_t display = m_options.training.displayStep;
    if (!held() || display <= 0)
        return false;
    if (m_lastEvaluatedStep >= 0 && globalStep / display <= m_lastEvaluatedStep / display)
        return false;
    m_lastEvaluatedStep = globalStep;
    return true;
}

std::vector<VariableSummary> ChiefDuties::summarizeVariables(const Parameters &params, int64_t globalStep)
{
    return m_trajectory.measure(params, globalStep);
}

void ChiefDuties::afterStep(const proto::PushResponse &decision, float batchLoss, const ChiefMeasurement &measured,
                            const Parameters &params)
{
    if (!m_options.task.isChief())
        take(decision.acting_chief() == m_options.task.index);
    const bool counted = decision.outcome() == proto::APPLIED || decision.outcome() == proto::AGGREGATED;
    if (m_summaries && (counted || decision.done()))
        m_summaries->afterStep(decision.global_step(), batchLoss, measured, params, decision.done());
}

void ChiefDuties::saveCheckpoint(bool final)
{
    if (!m_checkpoints)
        return;
    std::lock_guard lock(m_checkpointMutex);
    proto::Checkpoint checkpoint;
    checkpoint.set_wall_time(wallTime());
    *checkpoint.mutable_signature() = m_signature;
    // ps:0 last, so the recorded global step counts every update the other
    // shards' values already contain.
    std::vector<proto::ShardState> shards(m_ps.size());
    // The final checkpoint is the run's result: a ps task that cannot answer
    // for a moment (a loaded machine, a failover) is waited for, up to a
    // minute, rather than leaving an older periodic checkpoint as the last.
    const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    Backoff backoff(std::chrono::milliseconds(500), std::chrono::seconds(4));
    for (int k = int(m_ps.size()) - 1; k >= 0; --k) {
        proto::SnapshotResponse snapshot;
        CallResult status;
        for (;;) {
            status = callPs(k, [&](PsClient &ps, size_t process) {
                return ps.snapshot(process, std::chrono::seconds(10), &snapshot);
            });
            const bool transient = status.code == CallResult::Code::Unavailable
                                   || status.code == CallResult::Code::DeadlineExceeded
                                   || status.code == CallResult::Code::Aborted;
            if (status.ok() || !final || !transient || std::chrono::steady_clock::now() > giveUp)
                break;
            backoff.wait("final checkpoint: cannot read ps:" + std::to_string(k) + " yet: " + status.description,
                         m_log);
        }
        if (!status.ok()) {
            m_log(std::string(final ? "final " : "") + "checkpoint skipped: cannot read ps:" + std::to_string(k) + ": "
                  + status.description);
            return;
        }
        shards[size_t(k)] = std::move(*snapshot.mutable_shard());
        if (k == 0) {
            checkpoint.set_global_step(snapshot.global_step());
            *checkpoint.mutable_mode() = snapshot.mode();
        }
    }
    try {
        // Whole variables: a run restores into any number of ps tasks.
        for (auto &variable : m_placement.join(shards))
            *checkpoint.add_variables() = std::move(variable);
        for (auto &table : joinTableStates(shards, m_signature))
            *checkpoint.add_tables() = std::move(table);
    } catch (const InputError &e) {
        m_log(std::string("checkpoint skipped: the ps tasks do not hold this cluster's variables: ") + e.what());
        return;
    }
    try {
        const int64_t step = checkpoint.global_step();
        const double taken = checkpoint.wall_time();
        // Moved: a model's rows may be gigabytes, written a piece at a time.
        const std::string path = m_checkpoints->save(std::move(checkpoint));
        m_log("chief: saved checkpoint " + path + " at global step " + std::to_string(step));
        proto::ReportCheckpointRequest report;
        report.mutable_checkpoint()->set_wall_time(taken);
        report.mutable_checkpoint()->set_global_step(step);
        report.mutable_checkpoint()->set_path(std::filesystem::path(path).filename().string());
        report.set_final(final);
        m_ps.front()->reportCheckpoint(0, report, std::chrono::seconds(5));
    } catch (const InputError &e) {
        m_log(std::string("chief: checkpoint not saved: ") + e.what());
    }
}

void ChiefDuties::checkpointLoop()
{
    const auto interval = std::chrono::seconds(std::max(1, m_options.training.saveCheckpointSecs));
    std::unique_lock lock(m_wakeMutex);
    const auto over = [this] { return m_stopping || !held(); };
    while (!over()) {
        if (m_wake.wait_for(lock, interval, over))
            return;
        // Unlocked while writing, so that a stop or a handover is not kept
        // waiting behind the ps calls to say so.
        lock.unlock();
        saveCheckpoint(false);
        lock.lock();
    }
}

void ChiefDuties::endCheckpointThread()
{
    {
        std::lock_guard lock(m_wakeMutex);
        m_stopping = true;
    }
    m_wake.notify_all();
    if (m_checkpointThread.joinable())
        m_checkpointThread.join();
}

void ChiefDuties::take(bool take)
{
    if (take == held())
        return;
    if (!take) {
        {
            std::lock_guard lock(m_wakeMutex);
            m_held = false;
        }
        m_wake.notify_all();
        if (m_checkpointThread.joinable())
            m_checkpointThread.join();
        if (!m_options.task.isChief())
            m_log(me() + ": the chief is back; its duties are its own again");
        return;
    }
    const auto &training = m_options.training;
    if (!m_checkpoints && !training.logdir.empty()) {
        try {
            m_checkpoints = std::make_unique<CheckpointStore>(training.logdir, training.maxToKeep);
        } catch (const InputError &e) {
            m_log(me() + ": cannot keep checkpoints for the chief: " + e.what());
        }
    }
    m_held = true;
    m_lastEvaluatedStep = -1;
    if (!m_options.task.isChief())
        m_log(me() + ": the chief worker:0 is dead; taking over its duties"
              + (m_checkpoints ? " (checkpoints to " + training.logdir + ")" : std::string()));
    if (m_checkpoints && training.saveCheckpointSecs > 0) {
        if (m_checkpointThread.joinable())
            m_checkpointThread.join();
        m_checkpointThread = std::thread([this] { checkpointLoop(); });
    }
}

void ChiefDuties::finish(bool finished)
{
    endCheckpointThread();
    if (finished && held())
        saveCheckpoint(true);
}

} // namespace parasync
