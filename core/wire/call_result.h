#pragma once

// How a call to another process ended, without gRPC's types: what the
// worker, the chief and the app's watcher decide by (wire/ps_client.h,
// wire/cluster_client.h).

#include <string>

namespace parasync {

// How a call ended: a code the caller decides by, the server's own message,
// and a line for a person ("connection refused", "deadline exceeded: ...").
struct CallResult
{
    enum class Code {
        Ok,
        Cancelled,          // this side ended it (a stop, a rejoin)
        Unavailable,        // the process cannot be reached, or does not serve the call now
        InvalidArgument,    // the request is wrong
        FailedPrecondition, // the cluster is not ready for it
        AlreadyExists,      // what it claims is another's (a worker index)
        Aborted,            // may succeed when asked again shortly
        DeadlineExceeded,
        Unimplemented,   // the process does not serve this service (a worker's address given for ps:0's)
        Unauthenticated, // the cluster token is wrong or missing
        Other,
    };
    Code code = Code::Ok;
    std::string message;     // the server's message, as it wrote it
    std::string description; // for a person: what failed and why

    bool ok() const { return code == Code::Ok; }
};

} // namespace parasync
