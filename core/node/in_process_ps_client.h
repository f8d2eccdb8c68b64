#pragma once

// PsClient (wire/ps_client.h) into PsTasks of the same process, with no
// gRPC or socket in between: a WorkerTask given this client trains against
// in-process ps tasks exactly as over the wire -- joins, pushes, holds,
// leaves, the chief's Initialize and Snapshot, the telemetry its summaries
// follow -- so that the worker's loop and the chief's duties are tested as
// the ps task's logic is (tst_worker_task). The streams run PsTask::train and
// PsTask::watch on threads of their own, as gRPC runs each call on one of
// its threads. There is no data link in-process: a join that would open one
// carries the values on the stream, as a worker whose link failed does.

#include "wire/ps_client.h"

#include <memory>
#include <string>
#include <vector>

namespace parasync {

class PsTask;

// `processes`: the PsTask of each process of the ps task (one, or the
// pair's two, primary first), never start()ed or started, which must
// outlive the client and every stream it opened; `addresses` name them in
// messages.
std::unique_ptr<PsClient> makeInProcessPsClient(std::vector<PsTask *> processes, std::vector<std::string> addresses);

} // namespace parasync
