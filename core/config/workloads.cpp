#include "config/workloads.h"

#include "base/error.h"

namespace parasync {

namespace {

// Staleness that matters: 16 workers push into one softmax classifier with
// momentum at a learning rate near the edge of stability, so that a gradient
// computed tens of updates ago (async's median is ~14 here, its tail over
// 100) pushes the model the wrong way, and the held-out loss jumps by two
// orders of magnitude before it settles -- while sync, averaging 16 fresh
// gradients an update, falls steadily. The anchors: Chen et al., 2016
// (sync, with backup workers, beats async in time and accuracy as workers
// grow) and Ho et al., 2013 (a staleness bound between the two). Ten
// overlapping 2-D blobs (a built-in dataset: nothing to download), 100
// samples a worker, a fifth of the chief's held out. Measured on a two-core
// machine (docs/app.md, "Compare modes"): sync reaches the target in about a
// second, async and ssp:10 in ten.
Workload stalenessWorkload()
{
    Workload w;
    w.name = "staleness";
    w.title = "the price of staleness";
    w.description = "16 workers, softmax with momentum on 10 blobs: async's stale gradients cost accuracy";
    ClusterPlan &plan = w.plan;
    plan.cluster.ps = {HostPort{"127.0.0.1", 2222}};
    for (uint16_t i = 0; i < 16; ++i)
        plan.cluster.workers.push_back(HostPort{"127.0.0.1", uint16_t(2223 + i)});
    TrainingOptions &t = plan.training;
    t.model = "softmax";
    t.dataset = "blobs:10:2";
    t.optimizer = "momentum";
    t.learningRate = 0.5f;
    t.batchSize = 10;
    t.evalFraction = 0.2;
    t.lastStep = 0; // until stopped, as the demo
    // As the demo: a pace a person can follow, long-tailed step times.
    t.pace.computeMs = 20;
    t.pace.computeJitter = 0.5f;
    w.contenders = "async,sync,sync:15/16,ssp:3,ssp:10";
    w.targetLoss = 0.3;
    w.compareSeconds = 20;
    w.stopAtTarget = false;
    w.seeds = {1, 2, 3};
    return w;
}

// The same cluster and data with a hidden layer: a non-convex model, on
// which a stale gradient does not only slow training down but can push the
// model somewhere worse (Chen et al., 2016, measured their async's accuracy
// falling with workers on deep networks; Dean et al., 2012, needed Adagrad
// to make Downpour tolerable). A smaller learning rate than the softmax
// workload's, which sends every mode but sync astray here.
Workload mlpWorkload()
{
    Workload w = stalenessWorkload();
    w.name = "mlp";
    w.title = "a non-convex model (MLP)";
    w.description = "16 workers, an MLP (32 tanh units) with momentum on 10 blobs: stale gradients lead it astray";
    w.plan.training.model = "mlp";
    w.plan.training.learningRate = 0.1f;
    // Zhang et al.'s rule beside plain async: does dividing the learning
    // rate by each gradient's staleness buy back what staleness costs?
    w.contenders = "async,async+lr/staleness,sync,sync:15/16,ssp:10";
    return w;
}

// A non-convex problem with a known answer: a 50 x 50 matrix of rank 3,
// seen one noisy entry at a time (noise 0.1), fitted by a rank-3
// factorization. Whatever the mode, no model can do better on entries it
// never saw than the noise's variance, 0.01: the held-out loss says how
// close each mode's model came to the best there is, not only which mode
// is ahead. The classic asynchronous-SGD workload (Hogwild!, Recht et al.,
// 2011: each gradient touches two rows, so stale ones rarely collide).
Workload matrixFactorizationWorkload()
{
    Workload w = stalenessWorkload();
    w.name = "mf";
    w.title = "a matrix factorization with a known floor";
    w.description = "16 workers fit a 50 x 50 matrix of rank 3 from noisy entries: the held-out loss's floor is 0.01";
    TrainingOptions &t = w.plan.training;
    t.model = "mf:3";
    t.dataset = "lowrank:50:50:3:0.1";
    t.samplesPerShard = 200;
    // At 0.2 plain async and ssp diverge on their stale gradients while
    // sync and Zhang's rule do not; at 0.05 async reaches the floor first
    // (docs/price-of-staleness.md has both).
    t.learningRate = 0.2f;
    w.contenders = "async,async+lr/staleness,sync,sync:15/16,ssp:10";
    // Twice the floor: the chief's loss is near the noise there.
    w.targetLoss = 0.02;
    return w;
}

} // namespace

std::vector<std::string> workloadNames()
{
    return {"staleness", "mlp", "mf"};
}

Workload workload(const std::string &name)
{
    if (name == "staleness")
        return stalenessWorkload();
    if (name == "mlp")
        return mlpWorkload();
    if (name == "mf")
        return matrixFactorizationWorkload();
    std::string names;
    for (const std::string &known : workloadNames())
        names += (names.empty() ? "" : ", ") + known;
    throw InputError("unknown workload '" + name + "': the workloads are " + names + " (without --workload, the demo)");
}

} // namespace parasync
