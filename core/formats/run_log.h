#pragma once

#include "proto/parasync.pb.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <thread>
#include <tuple>
#include <vector>

namespace parasync {

// Names of the files in a run directory (--logdir).
namespace run_files {
inline constexpr const char *kStepLog = "steps.jsonl";
inline constexpr const char *kMetrics = "metrics.csv";
inline constexpr const char *kCluster = "cluster.json";
inline constexpr const char *kModel = "model.json";
// What RunLog removed of the step log to keep within --logdir_max_mb.
inline constexpr const char *kRecords = "records.json";
// The output of each task the app started: logs/ps-0.log, logs/worker-1.log
// (orchestration/task_log.h).
inline constexpr const char *kTaskLogs = "logs";
} // namespace run_files

// Writes ps:0's record of a run into the run directory:
//   steps.jsonl  one JSON object per line: every applied, aggregated or
//                dropped gradient ("type":"step"), mode change, worker state
//                change and checkpoint;
//   metrics.csv  global_step,wall_time,worker,loss,full_loss[,w,b] per
//                applied gradient, then one column per metric the workers
//                report (ModelSignature.metric_names: heldout_loss, ...),
//                empty on rows where none was measured. New columns only
//                ever come last, so readers of the older columns keep
//                working.
// Files are appended to (a restarted run continues them) and flushed after
// every batch, so `tail -f` follows the run and a killed process leaves every
// record up to its last complete line. A write that fails (no space left, a
// removed directory, a read-only mount) takes back what it wrote of its
// batch, so the files end on a complete line, and is reported at once
// through the problem callback, naming the last global step kept; the
// records are tried again every kRetryAfter, and a resumption is reported
// with the steps missing between.
// With a budget (setMaxBytes) the step log is rotated when it reaches a
// sixteenth of it: steps.jsonl becomes steps.jsonl.N, which a thread of its
// own compresses to steps.jsonl.N.gz (StepLogReader reads them all as one);
// when the records outgrow the budget, the oldest segments are removed, and
// records.json says through which global step the log was cut and why. record() only queues: a background
// thread formats and writes, so training waits for the disk only when the
// writer is kMaxQueued events behind (memory stays bounded).
// The two processes of a replicated ps:0 write one run directory in turn,
// under flock() on it, each reading what the other appended: a step's
// record is written once, whichever of them logs it first.
// Thread-safe.
class RunLog
{
public:
    // `parameterNames` become metrics.csv columns (the linear model's w, b);
    // empty for large models. `metricNames` (the signature's metric_names)
    // become the columns after them and the step log's "metrics" object.
    // `variableNames` (the signature's variables) name the step log's
    // "variables" object, where the chief's variable summaries go.
    // Throws InputError when the directory or files cannot be created,
    // naming the path and the system's reason.
    RunLog(const std::string &directory, std::vector<std::string> parameterNames,
           std::vector<std::string> metricNames = {}, std::vector<std::string> variableNames = {});
    ~RunLog();
    RunLog(const RunLog &) = delete;
    RunLog &operator=(const RunLog &) = delete;

    // Words for the user when the records stop being written and when they
    // resume; called on the writer's thread. Set before the first record().
    using ProblemReport = std::function<void(const std::string &)>;
    void onProblem(ProblemReport report) { m_onProblem = std::move(report); }
    // Why the records stopped, from which step, and what was kept; empty
    // while they are written. Thread-safe.
    std::string problem() const;

    // The records' budget in bytes (the step log's segments, steps.jsonl and
    // metrics.csv); 0, the default, is unbounded. Call before record().
    void setMaxBytes(int64_t maxBytes);

    void record(const proto::TelemetryEvent &event);
    // For a process that takes over from another that wrote this log (a
    // replicated ps's backup): the step records near the log's end are
    // remembered, and record() skips any step the other already wrote (the
    // same global step, worker and worker clock), and any step older than
    // those (written long before the other died). Call before record().
    void skipStepsAlreadyLogged();
    // The takeover's replay of what the other process did is over: every
    // later record is this process's own and is written, whatever the log
    // holds (a deposed primary may have logged an update of the same global
    // step, worker and clock that did not survive; a takeover without the
    // state starts the global steps again below those logged).
    void stopSkipping();
    // Writes everything queued and waits until it is on disk (the files are
    // fflush'ed; the OS has them).
    void flush();

    const std::string &directory() const { return m_directory; }

    // One line of steps.jsonl for an event (exposed for tests and tools).
    static std::string formatStepLogLine(const proto::TelemetryEvent &event,
                                         const std::vector<std::string> &parameterNames,
                                         const std::vector<std::string> &metricNames = {},
                                         const std::vector<std::string> &variableNames = {});

    static constexpr std::chrono::seconds kRetryAfter{5};

private:
    void run();
    void writeBatch(std::vector<proto::TelemetryEvent> &batch);
    // Appends `text` to `file` and flushes it; on failure cuts the file back
    // to where it ended before and returns the system's reason.
    static std::string append(std::FILE *file, const std::string &text);
    static off_t fileSize(std::FILE *file);
    // Opens `path` to append to (and to read: what the other process of a
    // pair appended), after cutting a torn last line off. Throws InputError.
    static std::FILE *openForAppend(const std::string &path, bool *wasEmpty);
    // Drops what the stream buffers and truncates the file to `size`.
    static void cutBack(std::FILE *file, off_t size);
    // The writer's thread: steps.jsonl becomes segment N, handed to the
    // compressor; a new steps.jsonl is started.
    void rotate();
    // flock() on the run directory for the life of the object: the writers
    // of a replicated pair, one at a time.
    class DirectoryLock
    {
    public:
        explicit DirectoryLock(int fd);
        ~DirectoryLock();
        DirectoryLock(const DirectoryLock &) = delete;
        DirectoryLock &operator=(const DirectoryLock &) = delete;

    private:
        int m_fd;
        bool m_held = false;
    };
    static constexpr std::chrono::seconds kLockWait{2};
    // Called under the DirectoryLock: reads what another process appended
    // to the step log since this one last wrote (following the log when the
    // other rotated it), and removes from `batch` the steps it holds
    // already.
    void dropStepsWrittenByAnother(std::vector<proto::TelemetryEvent> &batch);
    // The compressor's thread: gzips the segments handed to it, then keeps
    // the records within the budget.
    void compressLoop();
    void compressSegment(int n);
    void keepWithinBudget();
    void report(const std::string &words) const;

    std::string m_directory;
    std::vector<std::string> m_parameterNames;
    std::vector<std::string> m_metricNames;
    std::vector<std::string> m_variableNames;
    int m_directoryFd = -1;
    std::FILE *m_stepLog = nullptr;
    // Where the step log ended after this writer's last write: beyond it is
    // what another process of the pair wrote meanwhile. The steps it wrote
    // (global step, worker, worker clock), and whether it wrote a failover
    // record since this log was opened (it took over from this process).
    off_t m_stepLogEnd = 0;
    static constexpr size_t kRememberedSteps = 1 << 20;
    std::set<std::tuple<int64_t, int, int64_t>> m_writtenByAnother;
    bool m_deposed = false;
    std::FILE *m_metrics = nullptr;
    // The writer thread's own: the newest global step written in full, and
    // while writes fail, when to try again and the steps dropped meanwhile.
    int64_t m_keptThrough = 0;
    std::chrono::steady_clock::time_point m_retryAt;
    int64_t m_droppedSince = 0;
    ProblemReport m_onProblem;
    int64_t m_maxBytes = 0;
    int64_t m_segmentBytes = 0;
    int m_nextSegment = 1;

    // The compressor's: segments to compress (index, the newest global step
    // it holds), and each kept segment's newest global step (-1: unknown, a
    // segment of an earlier process).
    std::mutex m_compressMutex;
    std::condition_variable m_compressWake;
    std::deque<std::pair<int, int64_t>> m_toCompress;
    bool m_compressorStopping = false;
    std::map<int, int64_t> m_segmentLastStep;
    int64_t m_removedThrough = -1;
    int m_removedSegments = 0;
    bool m_saidOverBudget = false;
    std::thread m_compressor;

    mutable std::mutex m_mutex;
    std::string m_problem;                     // guarded by m_mutex
    static constexpr size_t kMaxQueued = 8192; // ~2 MB of events, ~1 s at full speed
    std::condition_variable m_wake;
    std::condition_variable m_room; // the queue fell below kMaxQueued
    std::condition_variable m_flushed;
    std::vector<proto::TelemetryEvent> m_queue;
    uint64_t m_queuedSeq = 0;
    uint64_t m_writtenSeq = 0;
    bool m_stopping = false;
    // skipStepsAlreadyLogged(): global step, worker, worker clock.
    std::set<std::tuple<int64_t, int, int64_t>> m_alreadyLogged;
    // Between skipStepsAlreadyLogged() and stopSkipping() the steps recorded
    // are the other process's, replayed: they are dropped if it writes them
    // late (guarded by m_mutex).
    bool m_replaying = false;
    std::set<std::tuple<int64_t, int, int64_t>> m_replayed;
    // The oldest global step of the log's tail when the log is longer than
    // the tail: steps up to it were written (-1: none skipped by age).
    int64_t m_loggedThrough = -1;
    std::thread m_thread;
};

// Writes cluster.json: the cluster spec and the run's training flags, in the
// cluster-file format, so the run can be started again from it.
void writeRunClusterJson(const std::string &directory, const std::string &clusterJson, const std::string &trainingJson);

// Writes model.json: the model signature the chief initialised the ps tasks
// with (its model, variables, optimizer, metric names), as protobuf's JSON
// mapping. cluster.json has the ps's own flags, which say nothing of a model
// a worker declared (a Python worker's MLP): a replay learns it here.
void writeRunModelJson(const std::string &directory, const proto::ModelSignature &signature);
// The signature in a run directory's model.json; false when there is none or
// it does not parse (a run from before the file existed, a damaged file).
bool readRunModelJson(const std::string &directory, proto::ModelSignature *signature);

// The step log's one vocabulary for what happened to a gradient and what a
// worker was doing ("applied", "dropped_stale", "blocked_by_sync", ...):
// written here, read back by the replay, and used by the trace and the
// timeline's CSV, so a name cannot differ between them. Unknown names read
// back as UNSPECIFIED; unnamed values write as "unknown" / "".
const char *outcomeName(proto::PushOutcome outcome);
// The run records' JSON spelling of a wall time (seconds since the epoch,
// to the microsecond) and of a string (quoted, escaped).
std::string jsonSeconds(double seconds);
std::string jsonQuoted(const std::string &text);
proto::PushOutcome outcomeFromName(std::string_view name);
const char *phaseName(proto::WorkerPhase phase);
proto::WorkerPhase phaseFromName(std::string_view name);

} // namespace parasync
