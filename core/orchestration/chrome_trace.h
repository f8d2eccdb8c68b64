#pragma once

// The step timeline as Chrome Trace Event JSON (chrome://tracing, Perfetto,
// speedscope): one process for the cluster, one thread per task (ps:0, then
// worker:N), complete ("X") events for each worker step's compute, push and
// wait phases, and instant events for mode changes and checkpoints.
//
// What the step log records, and how the spans are laid out from it (all
// times are ps:0's wall clock, in microseconds from the trace's origin): a
// step record is stamped when ps:0 decided on the gradient, and carries the
// worker's compute time for that step, its sync-barrier wait (sync) or the
// staleness hold that followed its previous update (ssp), and the round trip
// of the worker's previous push excluding any hold. So each step is drawn as
// compute, ending when the gradient arrived at ps:0, then push, from the
// arrival until the worker computes again (its length is the round trip the
// worker measured plus the hold; the gradient's upload before the arrival is
// thus drawn after it), with any wait nested inside the push (a sync wait
// from the arrival to the decision, an ssp hold after it). A push never
// overlaps the next compute: it is cut where that compute starts. The last
// step's push has no measured round trip and is drawn only as long as its
// wait.

#include "orchestration/run_state.h"

#include <string>

namespace parasync {

// The trace for the steps a snapshot holds in detail (RunSnapshot::recentSteps).
std::string chromeTraceJson(const RunSnapshot &snapshot);

} // namespace parasync
