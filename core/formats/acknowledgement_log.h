#pragma once

// A worker's own record of what the ps tasks acknowledged to it
// (--acknowledgement_log): one JSON line per step whose answers it took,
// appended as each step ends. It is the client's side of the history that
// the step log (ps:0's side) must hold: scripts/fault-schedule.py checks,
// after killing, pausing and partitioning a cluster on a seeded schedule,
// that every update a worker was told of is in the surviving step log
// exactly once, and that no two processes of a pair acknowledged under one
// lease epoch.
//
//   {"worker":1,"worker_clock":57,"update":412,"global_step":412,
//    "outcome":"applied","lease_epochs":[2,1],
//    "answered_by":["10.77.3.2:2222","10.77.2.2:2222"],"time":1796000000.123}
//
// Each line goes to the file in one write(2) on a descriptor opened with
// O_APPEND: a worker killed at any moment leaves whole lines, and one
// started again appends to the same file.

#include "proto/parasync.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parasync {

struct Acknowledgement
{
    int worker = 0;
    int64_t workerClock = 0; // the worker's clock after this step
    int64_t update = 0;      // ps:0's update the gradient went into (PushResponse.update)
    int64_t globalStep = 0;  // ps:0's global step in the answer
    proto::PushOutcome outcome = proto::PUSH_OUTCOME_UNSPECIFIED;
    // Per ps task, in --ps_hosts order: the lease epoch its answer carried
    // (0 without a lease) and the process that answered.
    std::vector<int64_t> leaseEpochs;
    std::vector<std::string> answeredBy;
    double time = 0; // the worker's wall clock when the last answer came, seconds since the epoch
};

class AcknowledgementLog
{
public:
    // Opens `path` for appending, creating it; throws InputError naming
    // --acknowledgement_log when it cannot.
    explicit AcknowledgementLog(const std::string &path);
    ~AcknowledgementLog();
    AcknowledgementLog(const AcknowledgementLog &) = delete;
    AcknowledgementLog &operator=(const AcknowledgementLog &) = delete;

    // Appends the line; a failed write is said once through the returned
    // words (empty when written), and the worker trains on.
    std::string record(const Acknowledgement &acknowledgement);

    static std::string line(const Acknowledgement &acknowledgement);

private:
    int m_fd = -1;
    std::string m_path;
    bool m_failed = false;
};

} // namespace parasync
