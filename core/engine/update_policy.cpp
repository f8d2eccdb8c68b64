#include "engine/update_policy.h"

#include "base/error.h"
#include "engine/parameter_shard.h"

#include <algorithm>
#include <limits>

namespace parasync {

namespace {

std::string workerName(int index)
{
    return "worker:" + std::to_string(index);
}

// What a sync step keeps of a gradient until it closes: its own copy, since
// the request the view points into is reused for the worker's next message.
Parameters copyOf(const GradientView &gradient)
{
    Parameters copy;
    copy.reserve(gradient.size());
    for (std::span<const float> values : gradient)
        copy.emplace_back(asVector(values));
    return copy;
}

} // namespace

UpdatePolicy::UpdatePolicy(int numWorkers, proto::ModeConfig mode, ApplyFn apply, DecisionFn decided)
    : m_workers(size_t(std::max(numWorkers, 1)))
    , m_mode(std::move(mode))
    , m_apply(std::move(apply))
    , m_decided(std::move(decided))
{
    validate(m_mode, numWorkers);
}

void UpdatePolicy::validate(const proto::ModeConfig &mode, int numWorkers)
{
    if (mode.mode() != proto::ASYNC && mode.mode() != proto::SYNC && mode.mode() != proto::SSP)
        throw InputError("update mode is not set: use async, sync or ssp");
    if (mode.staleness() < 0)
        throw InputError("staleness " + std::to_string(mode.staleness()) + " is negative: use 0 (lock-step) or more");
    if (mode.replicas_to_aggregate() < 0 || mode.total_num_replicas() < 0)
        throw InputError("replicas_to_aggregate and total_num_replicas must be 0 (automatic) or positive");
    if (mode.replicas_to_aggregate() > numWorkers)
        throw InputError("replicas_to_aggregate=" + std::to_string(mode.replicas_to_aggregate())
                         + " but the cluster has " + std::to_string(numWorkers)
                         + " workers: a sync step could never close");
    if (mode.total_num_replicas() > 0 && mode.replicas_to_aggregate() > mode.total_num_replicas())
        throw InputError("replicas_to_aggregate=" + std::to_string(mode.replicas_to_aggregate())
                         + " is more than total_num_replicas=" + std::to_string(mode.total_num_replicas()));
}

float UpdatePolicy::learningRateScale(const proto::ModeConfig &mode, int64_t staleness)
{
    if (!mode.learning_rate_by_staleness() || staleness <= 1)
        return 1.0f;
    return 1.0f / float(staleness);
}

int UpdatePolicy::liveWorkers() const
{
    return int(
        std::count_if(m_workers.begin(), m_workers.end(), [](const WorkerState &w) { return w.alive && !w.finished; }));
}

bool UpdatePolicy::isLive(int worker) const
{
    const auto &w = m_workers.at(size_t(worker));
    return w.alive && !w.finished;
}

int64_t UpdatePolicy::droppedTotal() const
{
    int64_t total = 0;
    for (const auto &w : m_workers)
        total += w.dropped;
    return total;
}

int UpdatePolicy::replicasToAggregate() const
{
    const int live = std::max(liveWorkers(), 1);
    const int wanted = m_mode.replicas_to_aggregate();
    return wanted > 0 ? std::min(wanted, live) : live;
}

void UpdatePolicy::join(int worker, JoinClock clock)
{
    auto &w = m_workers.at(size_t(worker));
    if (clock == JoinClock::LevelWithSlowest && m_mode.mode() == proto::SSP && w.clock == 0 && w.applied == 0
        && w.dropped == 0)
        if (const auto slowest = slowestLiveWorker(worker))
            w.sspBase = w.clock - sspClock(*slowest);
    w.alive = true;
    w.finished = false;
}

void UpdatePolicy::setAlive(int worker, bool alive)
{
    auto &w = m_workers.at(size_t(worker));
    w.alive = alive;
    // A dead worker's gradient already in the open step stays there: it was
    // computed against the current step and is as good as the others.
    if (m_mode.mode() == proto::SYNC)
        maybeCloseSyncStep();
}

void UpdatePolicy::setFinished(int worker)
{
    m_workers.at(size_t(worker)).finished = true;
    if (m_mode.mode() == proto::SYNC)
        maybeCloseSyncStep();
}

PushDecision UpdatePolicy::push(int worker, int64_t computedFromStep, const GradientView &gradient,
                                const RowGradientView &rows)
{
    auto &w = m_workers.at(size_t(worker));
    w.alive = true;
    ++w.clock;
    PushDecision decision;
    decision.staleness = m_globalStep - computedFromStep;

    if (m_mode.mode() == proto::SYNC) {
        if (computedFromStep < m_globalStep) {
            // As SyncReplicasOptimizer: a gradient of an older step is not
            // applied. It is counted and the worker continues at once.
            ++w.dropped;
            decision.outcome = proto::DROPPED_STALE;
            decision.update = m_globalStep;
            w.last = decision;
            if (m_decided)
                m_decided(worker, computedFromStep, decision);
            return decision;
        }
        decision.outcome = proto::AGGREGATED;
        w.last = decision;
        if (w.inPendingStep) {
            // Its earlier gradient waits in this step unanswered: the worker
            // lost the answer (its stream broke, or its ps failed over to a
            // backup) and computed another from the same step. One
            // contribution per worker and step, as SyncReplicasOptimizer
            // counts them: the new one takes the old one's place.
            for (Contribution &c : m_pending)
                if (c.worker == worker) {
                    c.gradient = copyOf(gradient);
                    c.rows = copyOf(rows);
                }
            return w.last;
        }
        w.inPendingStep = true;
        m_pending.push_back({worker, computedFromStep, copyOf(gradient), copyOf(rows)});
        maybeCloseSyncStep();
        return w.last;
    }

    // async and ssp apply on arrival; ssp holds afterwards (see hold()).
    decision.learningRateScale = learningRateScale(m_mode, decision.staleness);
    m_apply(gradient, rows, 1, decision.learningRateScale);
    ++m_globalStep;
    ++w.applied;
    decision.outcome = proto::APPLIED;
    decision.update = m_globalStep;
    decision.contributions = 1;
    w.last = decision;
    if (m_decided)
        m_decided(worker, computedFromStep, decision);
    return decision;
}

void UpdatePolicy::maybeCloseSyncStep()
{
    if (!m_pending.empty() && int(m_pending.size()) >= replicasToAggregate())
        closeSyncStep();
}

void UpdatePolicy::closeSyncStep()
{
    if (m_pending.empty())
        return;
    const int n = int(m_pending.size());
    Parameters average = m_pending.front().gradient;
    for (size_t i = 1; i < m_pending.size(); ++i)
        for (size_t v = 0; v < average.size(); ++v)
            average[v] += m_pending[i].gradient[v];
    for (auto &v : average)
        v /= float(n);
    RowGradients rows;
    for (const auto &c : m_pending)
        addRows(&rows, viewOf(c.rows));
    scaleRows(&rows, 1.0f / float(n));
    m_apply(viewOf(average), viewOf(rows), n, 1.0f); // every contribution is fresh
    ++m_globalStep;
    for (const auto &c : m_pending) {
        auto &w = m_workers[size_t(c.worker)];
        w.inPendingStep = false;
        ++w.applied;
        w.last.outcome = proto::AGGREGATED;
        w.last.update = m_globalStep;
        w.last.contributions = n;
        w.last.staleness = m_globalStep - 1 - c.computedFromStep;
        if (m_decided)
            m_decided(c.worker, c.computedFromStep, w.last);
    }
    m_pending.clear();
}

int64_t UpdatePolicy::sspClock(int worker) const
{
    const auto &w = m_workers[size_t(worker)];
    return w.clock - w.sspBase;
}

std::optional<int> UpdatePolicy::slowestLiveWorker(int except) const
{
    std::optional<int> slowest;
    for (int i = 0; i < int(m_workers.size()); ++i) {
        if (i == except || !isLive(i))
            continue;
        if (!slowest || sspClock(i) < sspClock(*slowest))
            slowest = i;
    }
    return slowest;
}

bool UpdatePolicy::atSlowestClock(int worker) const
{
    const auto slowest = slowestLiveWorker(worker);
    return !slowest || sspClock(worker) <= sspClock(*slowest);
}

Hold UpdatePolicy::hold(int worker) const
{
    const auto &w = m_workers.at(size_t(worker));
    if (w.inPendingStep) {
        std::string missing;
        for (int i = 0; i < int(m_workers.size()); ++i) {
            const bool contributed
                = std::any_of(m_pending.begin(), m_pending.end(), [i](const Contribution &c) { return c.worker == i; });
            if (!contributed && isLive(i))
                missing += (missing.empty() ? "" : ", ") + workerName(i);
        }
        return {HoldReason::SyncBarrier, "sync step " + std::to_string(m_globalStep + 1) + ": "
                                             + std::to_string(m_pending.size()) + " of "
                                             + std::to_string(replicasToAggregate()) + " gradients"
                                             + (missing.empty() ? std::string() : " (waiting for " + missing + ")")};
    }
    if (m_mode.mode() == proto::SSP) {
        // The worker itself counts towards the minimum, so a lone worker is
        // never held by its own clock.
        const auto slowest = slowestLiveWorker(worker);
        if (!slowest)
            return {};
        const auto &s = m_workers[size_t(*slowest)];
        const int64_t own = w.clock - w.sspBase;
        const int64_t slowestClock = s.clock - s.sspBase;
        if (own > slowestClock + m_mode.staleness()) {
            const bool switched = w.sspBase != 0 || s.sspBase != 0;
            return {HoldReason::StalenessBound,
                    "clock " + std::to_string(own) + " > slowest " + workerName(*slowest) + " clock "
                        + std::to_string(slowestClock) + " + staleness " + std::to_string(m_mode.staleness())
                        + (switched ? std::string(" (steps since ssp began)") : std::string())};
        }
    }
    return {};
}

UpdatePolicy::ModeChange UpdatePolicy::setMode(const proto::ModeConfig &mode)
{
    validate(mode, numWorkers());
    ModeChange change;
    change.previous = m_mode;
    // The step boundary: gradients already waiting in an open sync step are
    // applied together, so switching never loses or strands a gradient.
    closeSyncStep();
    // Into ssp: every worker starts level (see the class comment).
    if (mode.mode() == proto::SSP && m_mode.mode() != proto::SSP)
        for (auto &w : m_workers)
            w.sspBase = w.clock;
    m_mode = mode;
    change.current = m_mode;
    change.globalStep = m_globalStep;
    return change;
}

proto::PolicyState UpdatePolicy::exportState() const
{
    proto::PolicyState state;
    *state.mutable_mode() = m_mode;
    state.set_global_step(m_globalStep);
    for (const auto &w : m_workers) {
        auto *out = state.add_workers();
        out->set_clock(w.clock);
        out->set_ssp_base(w.sspBase);
        out->set_applied(w.applied);
        out->set_dropped(w.dropped);
        out->set_alive(w.alive);
        out->set_finished(w.finished);
        out->set_in_pending_step(w.inPendingStep);
        out->set_last_outcome(w.last.outcome);
        out->set_last_update(w.last.update);
        out->set_last_contributions(w.last.contributions);
        out->set_last_staleness(w.last.staleness);
    }
    for (const auto &c : m_pending) {
        auto *out = state.add_pending();
        out->set_worker(c.worker);
        out->set_computed_from_step(c.computedFromStep);
        // Flat: the policy knows sizes, not shapes; importState reads them back as they are.
        for (const auto &g : c.gradient)
            toTensor(g, {int64_t(g.size())}, out->add_gradient());
        for (const TableRows &t : c.rows)
            toSparseRows(t, out->add_row_gradients());
    }
    return state;
}

void UpdatePolicy::importState(const proto::PolicyState &state)
{
    if (state.workers_size() != numWorkers())
        throw InputError("the policy state has " + std::to_string(state.workers_size()) + " workers, this cluster "
                         + std::to_string(numWorkers()) + ": give both processes of a ps pair the same --worker_hosts");
    validate(state.mode(), numWorkers());
    std::vector<WorkerState> workers(m_workers.size());
    for (int i = 0; i < state.workers_size(); ++i) {
        const auto &in = state.workers(i);
        auto &w = workers[size_t(i)];
        w.clock = in.clock();
        w.sspBase = in.ssp_base();
        w.applied = in.applied();
        w.dropped = in.dropped();
        w.alive = in.alive();
        w.finished = in.finished();
        w.inPendingStep = in.in_pending_step();
        w.last.outcome = in.last_outcome();
        w.last.update = in.last_update();
        w.last.contributions = in.last_contributions();
        w.last.staleness = in.last_staleness();
    }
    std::vector<Contribution> pending;
    for (const auto &c : state.pending()) {
        if (c.worker() < 0 || c.worker() >= numWorkers())
            throw InputError("the policy state's open sync step holds a gradient of worker:"
                             + std::to_string(c.worker()) + ", which is not in the cluster");
        Parameters gradient;
        for (const auto &t : c.gradient())
            gradient.push_back(fromTensor(t));
        RowGradients rows;
        for (const auto &r : c.row_gradients())
            rows.push_back(fromSparseRows(r));
        pending.push_back({c.worker(), c.computed_from_step(), std::move(gradient), std::move(rows)});
    }
    m_mode = state.mode();
    m_globalStep = state.global_step();
    m_workers = std::move(workers);
    m_pending = std::move(pending);
}

} // namespace parasync
