#pragma once

// The chief's duties, apart from a worker's step loop (as TensorFlow's
// Supervisor is apart from the training loop it wraps): initialise or restore
// the variables on every ps, save a checkpoint every --save_checkpoint_secs
// and at the end, evaluate the loss over the whole shard every
// --display_step, and write the TensorBoard summaries. worker:0 has them from
// the start; another worker holds them while ps:0 names it the acting chief
// (--chief_handover=1 and worker:0 is dead) and gives them back when worker:0
// returns. Every worker owns one ChiefDuties; it is idle until taken.

#include "config/task_options.h"
#include "engine/model.h"
#include "engine/variable_placement.h"
#include "node/chief_measurement.h"
#include "wire/ps_client.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace parasync {

class CheckpointStore;
class TrainingSummaries;
struct Dataset;

class ChiefDuties
{
public:
    using Log = std::function<void(const std::string &)>;

    // Called from WorkerTask::start(), once the worker knows its model and
    // its ps tasks. `variables` and `data` are the worker's and must outlive
    // this object; `ps` are the worker's own clients of ps:0..n-1 (each the
    // two processes of its pair, with --ps_backup_hosts), so checkpoints and
    // initialisation travel on the connections training uses. A stop requested through `stop` ends the checkpoint
    // thread. worker:0 with a --logdir opens its checkpoints and event file here (InputError when it cannot).
    ChiefDuties(const NodeOptions &options, proto::ModelSignature signature, const std::vector<Variable> &variables,
                VariablePlacement placement, const Dataset &data, std::vector<std::shared_ptr<PsClient>> ps,
                std::stop_token stop, Log log);
    // Ends the checkpoint thread; may block while a checkpoint is written.
    ~ChiefDuties();

    // Hands every ps its variables (whole or its slices of them, as the
    // placement says), fresh or from the newest checkpoint -- whatever the
    // number of ps tasks and the partitioning it was saved with. Without a
    // checkpoint, `lastValues` (the chief's own parameters, of global step
    // `lastGlobalStep`) stand in for fresh ones when given: a ps that lost
    // its memory mid-run goes on from where the chief last saw the model.
    // A ps that holds its variables keeps them.
    // Returns why it could not, for a ps that did not answer (then retry),
    // or empty when done; throws InputError when a ps refused them or the
    // newest checkpoint belongs to another model. Blocks up to 10 s per ps.
    // Called on run()'s thread, by worker:0 only.
    std::string initializeVariables(const Parameters *lastValues = nullptr, int64_t lastGlobalStep = 0);

    // Takes the duties (starting the checkpoint thread) or gives them back
    // (waiting for a checkpoint in progress). Called on run()'s thread.
    void take(bool take);
    bool held() const { return m_held.load(); }

    // Whether the push of the step computed from `globalStep` carries the
    // chief's measurements (the loss over its shard, the held-out scores):
    // the first step after the duties are taken, then each step that finds
    // the global step past another --display_step boundary. Counted in
    // global steps, not the chief's own: in async a slow chief takes few of
    // them, and its last measurement must still be of a trained model.
    bool evaluatesFullLoss(int64_t globalStep);
    // The variables' norms, distances from the start (the first call) and
    // update sizes, for the push of a step that evaluates; `params` belong
    // to `globalStep`.
    std::vector<VariableSummary> summarizeVariables(const Parameters &params, int64_t globalStep);

    // After each step, with ps:0's answer: follows the handover (ps:0 names
    // the acting chief) and writes worker:0's summaries. Called on run()'s
    // thread; blocks only to hand the duties back.
    void afterStep(const proto::PushResponse &decision, float batchLoss, const ChiefMeasurement &measured,
                   const Parameters &params);

    // At the end of run(): ends the checkpoint thread and, when training
    // `finished` with the duties held, saves the final checkpoint. Blocks.
    void finish(bool finished);

private:
    void saveCheckpoint(bool final);
    void checkpointLoop();
    void endCheckpointThread();
    std::string me() const;
    // One call to ps task k, made to the process of its pair that serves:
    // a process that answers UNAVAILABLE (a backup, or gone) passes the call
    // to the other.
    CallResult callPs(int k, const std::function<CallResult(PsClient &, size_t process)> &call);

    NodeOptions m_options;
    proto::ModelSignature m_signature;
    const std::vector<Variable> &m_variables;
    VariablePlacement m_placement; // the signature's, for the cluster's ps tasks
    std::vector<std::shared_ptr<PsClient>> m_ps;
    std::mutex m_psMutex;                 // guards m_servingProcess
    std::vector<size_t> m_servingProcess; // per ps task: which of its pair answered last
    Log m_log;

    std::unique_ptr<CheckpointStore> m_checkpoints;
    std::unique_ptr<TrainingSummaries> m_summaries; // worker:0's TensorBoard event file
    VariableTrajectory m_trajectory;

    std::atomic<bool> m_held{false};
    int64_t m_lastEvaluatedStep = -1; // run()'s thread only; -1: none since the duties were taken
    std::mutex m_checkpointMutex;     // one checkpoint at a time
    // Wakes the checkpoint thread when the duties are given back or the
    // worker stops; m_stopping and the wait are guarded by m_wakeMutex.
    std::mutex m_wakeMutex;
    std::condition_variable m_wake;
    bool m_stopping = false;
    std::thread m_checkpointThread;
    // Last: it may run at once, and must be gone before what it touches.
    std::stop_callback<std::function<void()>> m_onStop;
};

} // namespace parasync
