#pragma once

// A finished (or running, or killed) run read back from its directory into a
// RunState, so the window shows a past run as it showed a live one. Apart
// from RunState itself, which knows only live telemetry, and from the file
// formats, which know nothing of a RunState.

#include "orchestration/run_state.h"

#include <cstdint>
#include <string>

namespace parasync {

// Reads a run directory (--logdir) written by ps:0 and replays it into a
// RunState: steps.jsonl (steps, mode changes, worker states, checkpoints),
// falling back to metrics.csv when there is no step log; cluster.json for the
// flags. Stops at the last complete line (a run killed mid-write is fine).
// Throws InputError when the directory has none of these files, naming it.
struct RunDirectoryInfo
{
    std::string directory;
    std::string clusterJson;  // contents of cluster.json, or empty
    int64_t records = 0;      // lines read
    int64_t skippedLines = 0; // lines that did not parse (a torn last line)
    // records.json's words when ps:0 removed the step log's oldest segments
    // to keep within --logdir_max_mb; empty when it kept all.
    std::string recordsNote;
};
RunDirectoryInfo replayRunDirectory(const std::string &directory, RunState *state);

// Replays a run directory's event files into `state`: each summary becomes a
// step of the chief (worker 0) with its loss, full-shard loss and parameter
// scalars, so a run made without a step log can be viewed. Throws InputError
// (from readEventFile) for a damaged file.
void replayEventFiles(const std::string &directory, RunState *state, RunDirectoryInfo *info);

} // namespace parasync
