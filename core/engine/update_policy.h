#pragma once

#include "engine/model.h"
#include "engine/sparse_rows.h"
#include "proto/parasync.pb.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

// Why a worker is held after pushing a gradient.
enum class HoldReason {
    None,
    SyncBarrier,    // its gradient waits in a sync step that has not closed yet
    StalenessBound, // its clock is more than `staleness` ahead of the slowest live worker
};

struct Hold
{
    HoldReason reason = HoldReason::None;
    // In words, for status displays: "sync step 41: 1 of 2 gradients (waiting
    // for worker:1)", "clock 23 > slowest worker:1 clock 12 + staleness 10".
    std::string waitingFor;
};

// What the policy did with one pushed gradient.
struct PushDecision
{
    proto::PushOutcome outcome = proto::PUSH_OUTCOME_UNSPECIFIED;
    // The update the gradient went into (the global step it produced); for a
    // pending sync gradient, filled in when its step closes.
    int64_t update = 0;
    // Gradients averaged into `update`.
    int contributions = 0;
    // Global step when applied minus computed_from_step.
    int64_t staleness = 0;
    // What the learning rate was multiplied by for this gradient
    // (learningRateScale()); 1 for every gradient of a sync step.
    float learningRateScale = 1.0f;
};

// ps:0's update policy: the global step, each worker's clock, and what the
// mode in force does with each pushed gradient (docs/reference.md, "Update modes"):
//   async  apply on arrival, global step +1 per gradient;
//   sync   average replicas_to_aggregate gradients computed against the
//          current step, apply once, global step +1; older gradients are
//          dropped and counted; contributors are held until their step closes;
//   ssp    apply on arrival, then hold a worker while its clock exceeds the
//          slowest live worker's clock + staleness. Clocks count from when
//          ssp began: a switch into ssp starts every worker level, so the
//          worker that ran ahead under async is bounded from then on instead
//          of frozen until the others have made up the whole async phase.
// With ModeConfig.learning_rate_by_staleness, async and ssp apply a gradient
// `staleness` updates old at the learning rate / max(1, staleness) (Zhang et
// al., IJCAI 2016): a gradient computed where the model no longer is moves it
// less. The decision carries the factor, so that the other ps tasks apply
// their slices by the same rule.
//
// A plain state machine with no threads or clocks of its own, so that tests
// drive it step by step. Not thread-safe: the ps service calls it under its
// own mutex and re-checks hold() when woken.
class UpdatePolicy
{
public:
    // Applies an (averaged) gradient of ps:0's variables and of the rows of
    // its tables that it touched, its share of the step multiplied by
    // `learningRateScale` (ParameterShard::apply, applyRows). Called
    // synchronously from push() or setMode(); `contributions` gradients were
    // averaged (a sync step's row gradients summed id by id, then divided by
    // the contributions, as its dense ones: the mean of the workers' batch
    // means, in which a row a worker did not touch has a zero gradient).
    using ApplyFn = std::function<void(const GradientView &gradient, const RowGradientView &rows, int contributions,
                                       float learningRateScale)>;

    // Called once for every gradient when its fate is known, in global-step
    // order: on arrival (applied, dropped) or when its sync step closes.
    using DecisionFn = std::function<void(int worker, int64_t computedFromStep, const PushDecision &)>;

    UpdatePolicy(int numWorkers, proto::ModeConfig mode, ApplyFn apply, DecisionFn decided = {});

    // A worker pushes the gradient it computed from `computedFromStep`.
    // Returns the decision; for sync the outcome is AGGREGATED with `update`
    // still 0 while the step is open (see result()). async and ssp apply the
    // gradient where it lies; an open sync step keeps a copy. `rows`: the
    // row gradients of a sparse model's tables, checked by the caller.
    PushDecision push(int worker, int64_t computedFromStep, const GradientView &gradient,
                      const RowGradientView &rows = {});

    // Whether `worker` must still wait after its last push, and for what.
    Hold hold(int worker) const;

    // Whether no live worker's clock is behind this worker's (in ssp, counted
    // from when ssp began). Only such a worker's push can move the slowest
    // clock, and so release a worker held by the staleness bound.
    bool atSlowestClock(int worker) const;

    // The final decision of the worker's last push (complete once hold() is None).
    const PushDecision &result(int worker) const { return m_workers.at(size_t(worker)).last; }

    struct ModeChange
    {
        proto::ModeConfig previous;
        proto::ModeConfig current;
        int64_t globalStep = 0;
    };
    // Changes the mode at a step boundary: an open sync step is closed first
    // with the gradients it has (averaged and applied, nothing lost), then the
    // new mode holds from the returned global step. Held workers must re-check.
    // Throws InputError for numbers that make no sense (negative staleness,
    // replicas_to_aggregate > total_num_replicas, unspecified mode).
    ModeChange setMode(const proto::ModeConfig &mode);

    // A worker's stream broke (or it came back). Dead workers are not waited
    // for: an open sync step may close, the ssp minimum may move.
    void setAlive(int worker, bool alive);
    // A worker left cleanly after the last step: like dead for waiting purposes.
    void setFinished(int worker);
    // A worker (re)joined: it counts as live and training again. With
    // LevelWithSlowest (an elastic cluster's newcomer), one that has never
    // pushed starts level with the slowest live worker in ssp: counted from
    // 0 it would hold every other worker until it had made up the whole run.
    // Kept: its clock counts from 0 (the workers of the initial list).
    enum class JoinClock { Kept, LevelWithSlowest };
    void join(int worker, JoinClock clock = JoinClock::Kept);

    // Restores the global step (chief initialisation or checkpoint restore).
    void setGlobalStep(int64_t step) { m_globalStep = step; }

    int64_t globalStep() const { return m_globalStep; }
    const proto::ModeConfig &mode() const { return m_mode; }
    int64_t workerClock(int worker) const { return m_workers.at(size_t(worker)).clock; }
    int64_t dropped(int worker) const { return m_workers.at(size_t(worker)).dropped; }
    int64_t applied(int worker) const { return m_workers.at(size_t(worker)).applied; }
    int64_t droppedTotal() const;
    bool isLive(int worker) const;
    int liveWorkers() const;
    int numWorkers() const { return int(m_workers.size()); }
    // Gradients a sync step needs to close now: replicas_to_aggregate, or the
    // live workers when that is 0 or fewer are alive.
    int replicasToAggregate() const;
    // Gradients in the open sync step.
    int pendingContributions() const { return int(m_pending.size()); }

    // All of the policy's state, for a backup of ps:0 (proto::PolicyState),
    // and the same read back: a policy that imports another's export makes
    // the same decisions from then on. importState throws InputError when the
    // state does not fit (another number of workers, an invalid mode).
    proto::PolicyState exportState() const;
    void importState(const proto::PolicyState &state);

    // Checks a mode's numbers; throws InputError. Exposed for the control call.
    static void validate(const proto::ModeConfig &mode, int numWorkers);

    // The factor on the learning rate for a gradient `staleness` updates old
    // under `mode`: 1 / max(1, staleness) with learning_rate_by_staleness,
    // else 1. A fresh gradient (staleness 0) keeps the whole learning rate,
    // as one a single update old does: the rule divides by the staleness,
    // never multiplies.
    static float learningRateScale(const proto::ModeConfig &mode, int64_t staleness);

private:
    struct WorkerState
    {
        int64_t clock = 0;
        int64_t sspBase = 0; // its clock when ssp began (0: ssp from the start)
        int64_t applied = 0;
        int64_t dropped = 0;
        bool alive = false;
        bool finished = false;
        // Open sync step this worker's gradient waits in, if any.
        bool inPendingStep = false;
        PushDecision last;
    };
    struct Contribution
    {
        int worker;
        int64_t computedFromStep;
        Parameters gradient;
        RowGradients rows;
    };

    void closeSyncStep();
    void maybeCloseSyncStep();
    int64_t sspClock(int worker) const;
    std::optional<int> slowestLiveWorker(int except) const;

    std::vector<WorkerState> m_workers;
    proto::ModeConfig m_mode;
    ApplyFn m_apply;
    DecisionFn m_decided;
    int64_t m_globalStep = 0;
    std::vector<Contribution> m_pending;
};

} // namespace parasync
