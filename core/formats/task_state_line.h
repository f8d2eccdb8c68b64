#pragma once

// How a task tells whoever reads its output -- the app's launcher, a
// terminal, ssh, a pod's log -- what it is doing: one line at each change of
// state, in the form defined here and nowhere else. The launcher learns a
// task's state from these lines alone (parseTaskStateLine), so every other
// line a task prints is prose, free to change.
//
//   ps:0 state waiting: waiting for the chief worker:0 to initialise the variables
//   worker:1 state training: joined the cluster at global step 0
//   worker:0 state finished: global step 2000 reached --last_step=2000 (local steps 1012)

#include "config/cluster_spec.h"

#include <optional>
#include <string>
#include <string_view>

namespace parasync {

enum class TaskPhase {
    Listening, // serving its address; connecting to the others
    Waiting,   // for a ps, the chief, or a reconnection (the detail says which)
    Training,  // a worker between its join and its last step
    Serving,   // a ps holding initialised variables
    Finished,  // the last step was reached
    Stopped,   // asked to stop before the last step
};

struct TaskStateReport
{
    TaskId task;
    TaskPhase phase = TaskPhase::Listening;
    std::string detail; // words for a person; may be empty
};

// "worker:1 state waiting: cannot reach ps:0 at 127.0.0.1:2222: ..."
std::string taskStateLine(const TaskStateReport &report);
// The report of a line taskStateLine wrote (a log timestamp before it is
// skipped); nothing for any other line.
std::optional<TaskStateReport> parseTaskStateLine(std::string_view line);
// "listening", "waiting", ...
const char *taskPhaseName(TaskPhase phase);

} // namespace parasync
