// PsTask: a worker's push -- its gradient checked, handed to the update
// policy (ps:0) or applied to this shard as ps:0 decided (ps:k), and the
// worker held at the sync barrier or the staleness bound until it may go on.

#include "node/ps_task.h"

#include "base/clock.h"
#include "engine/staleness_cost.h"
#include "node/ps_signature_check.h"

#include <algorithm>
#include <chrono>

namespace parasync {

namespace {

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
                              proto::PushResponse *response, ValuesSnapshot *values, bool *wakeHeld,
                              const TrainStream &stream)
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
    const RowGradientView rows = error.empty() ? parseRowGradients(push, &error) : RowGradientView{};
    if (error.empty())
        error = pullProblem(push.pull());
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
    if (!takeGradientLocked(worker, push, gradient, rows)) {
        response->set_outcome(proto::REJECTED_NONFINITE);
        response->set_global_step(m_policy->globalStep());
        response->set_done(doneLocked());
        *response->mutable_mode() = m_policy->mode();
        m_shard.share(response->mutable_parameters(), values);
        gatherRowsLocked(push.pull(), false, response->mutable_rows());
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
        if (!info.heldFrom)
            info.heldFrom = holdStart;
        info.phase = heldBy;
        info.waitingFor = hold.waitingFor;
        // A worker killed while held ends its call without a word: looked at
        // a few times a second, so that its index is free for the process
        // started again in its place (claimIndexLocked takes a held worker
        // for alive).
        m_changed.wait_for(lock, kHeldWorkerLook);
        if (stream.gone()) {
            info.phase = proto::TRAINING;
            info.waitingFor.clear();
            info.heldFrom.reset();
            return CallStatus::failedPrecondition("worker:" + std::to_string(worker) + "'s call ended while " + psName()
                                                  + " held it (process killed, or its connection closed)");
        }
    }
    info.phase = proto::TRAINING;
    info.waitingFor.clear();
    const int64_t heldUs = heldBy == proto::WORKER_PHASE_UNSPECIFIED ? 0 : microsSince(holdStart);
    info.heldTotal += std::chrono::microseconds(heldUs);
    info.heldFrom.reset();
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
    // The next batch's rows, at their values after this update.
    gatherRowsLocked(push.pull(), false, response->mutable_rows());
    return {};
}

bool PsTask::takeGradientLocked(int worker, const proto::PushRequest &push, const GradientView &gradient,
                                const RowGradientView &rows)
{
    auto &info = m_workers[size_t(worker)];
    m_meters.countGradient(gradient);
    const bool finite
        = std::all_of(gradient.begin(), gradient.end(), [](std::span<const float> g) { return allFinite(g); })
          && std::all_of(rows.begin(), rows.end(), [](const TableRowsView &t) { return allFinite(t.rows.values); });
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
    m_policy->push(worker, push.computed_from_step(), gradient, rows);
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
    if (!push.staged() && holdsStaged && (push.gradients_size() > 0 || push.row_gradients_size() > 0))
        return CallStatus::invalidArgument("the decision on a staged push brings "
                                           + std::to_string(push.gradients_size() + push.row_gradients_size())
                                           + " gradients of its own: it carries update and contributions only");
    if (push.staged() && push.pull_size() > 0)
        return CallStatus::invalidArgument("a staged push asks for rows (pull): ask with the decision that follows "
                                           "it, which is answered");
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
    // Checked before anything is applied: the answer gathers them after.
    if (std::string problem = pullProblem(push.pull()); !problem.empty())
        return CallStatus::invalidArgument(std::move(problem));
    if (push.contributions() > 0 && m_incompleteUpdates.contains(update)) {
        note(psName() + ": a late contribution to update " + std::to_string(update)
             + " arrived after it was applied without it; not applied");
    } else if (push.contributions() == 1 && !m_pendingUpdates.contains(update)) {
        // async, ssp, a sync step of one: applied where the gradient lies.
        std::string error;
        const GradientView gradient = parseGradients(staged ? *staged : push, &error);
        const RowGradientView rows
            = error.empty() ? parseRowGradients(staged ? *staged : push, &error) : RowGradientView{};
        if (!error.empty())
            return CallStatus::invalidArgument(error);
        m_meters.countGradient(gradient);
        applyShardUpdateLocked(update, gradient, rows, false, learningRateScale);
        m_changed.notify_all();
    } else if (push.contributions() > 0) {
        std::string error;
        const GradientView gradient = parseGradients(staged ? *staged : push, &error);
        const RowGradientView rows
            = error.empty() ? parseRowGradients(staged ? *staged : push, &error) : RowGradientView{};
        if (!error.empty())
            return CallStatus::invalidArgument(error);
        m_meters.countGradient(gradient);
        auto &pending = m_pendingUpdates[update];
        if (pending.received == 0)
            for (std::span<const float> g : gradient)
                pending.sum.emplace_back(asVector(g));
        else
            for (size_t v = 0; v < pending.sum.size(); ++v)
                pending.sum[v] += asVector(gradient[v]);
        addRows(&pending.rows, rows);
        pending.expected = push.contributions();
        if (++pending.received >= pending.expected) {
            for (auto &v : pending.sum)
                v /= float(pending.received);
            scaleRows(&pending.rows, 1.0f / float(pending.received));
            applyShardUpdateLocked(update, viewOf(pending.sum), viewOf(pending.rows), false, 1.0f);
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
                scaleRows(&partial.rows, 1.0f / float(partial.received));
                applyShardUpdateLocked(update, viewOf(partial.sum), viewOf(partial.rows), true, 1.0f);
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
    // The next batch's rows, at their values after this update.
    gatherRowsLocked(push.pull(), false, response->mutable_rows());
    return {};
}

void PsTask::applyShardUpdateLocked(int64_t update, const GradientView &average, const RowGradientView &rows,
                                    bool incomplete, float learningRateScale)
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
        for (const TableRowsView &block : rows) {
            proto::SparseRows *out = applied->add_row_gradients();
            out->set_table(block.table);
            out->mutable_ids()->Add(block.rows.ids.begin(), block.rows.ids.end());
            out->mutable_values()->Add(block.rows.values.begin(), block.rows.values.end());
        }
        recordLocked(std::move(record));
    }
    m_shard.apply(average, learningRateScale);
    applyRowsLocked(rows, learningRateScale);
    ++m_updatesApplied;
    if (incomplete) {
        m_incompleteUpdates.insert(update);
        // Remember a bounded number: late arrivals come soon or never.
        while (m_incompleteUpdates.size() > 1000)
            m_incompleteUpdates.erase(m_incompleteUpdates.begin());
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
    if (leased())
        step->set_lease_epoch(m_epoch);
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

} // namespace parasync
