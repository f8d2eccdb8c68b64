#pragma once

// Watches a running cluster through ps:0 — one started here or elsewhere —
// and steers it. A background thread holds the telemetry stream (reconnecting
// with back-off when ps:0 is not there yet or goes away), feeds a RunState,
// and hands value snapshots to the owner's thread through queued signals at
// a bounded rate. Control calls (mode, straggler, stop) run off the caller's
// thread too. A sparse model's tables are asked of every ps task about once
// a second (TableStatusPoller) and handed out the same way. Qt Core only.

#include "config/cluster_spec.h"
#include "orchestration/embedding_tables.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"
#include "proto/parasync.pb.h"
#include "wire/rpc_settings.h"

#include <QObject>
#include <QString>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace parasync {

class CallContext;
class ClusterClient;
class TableStatusPoller;
struct CallResult;

class ClusterWatcher : public QObject
{
    Q_OBJECT

public:
    explicit ClusterWatcher(QObject *parent = nullptr);
    ~ClusterWatcher() override; // stops the thread; never blocks long (cancels the stream and control calls)

    // All public functions are called from the owner's thread; signals are
    // delivered in the owner's thread (it must run an event loop), so
    // receivers there are called directly, never from the background thread.

    // Starts watching ps:0 at `address` ("host:port"). Replaces any previous
    // connection and clears the state. Without a token in `settings`, the
    // one in $PARASYNC_CLUSTER_TOKEN (if any) is used for this connection
    // and the control calls, as parasync-node does. Returns at once; the background
    // thread says how it goes through connectionStateChanged. Signals of the
    // previous connection that are still queued are dropped.
    void connectTo(const QString &address, const RpcSettings &settings = {});
    // The run's history for the next connectTo: when connected, the charts
    // are first rebuilt from `runDirectory`'s step log (steps.jsonl, as
    // replayRunDirectory reads it), then continue with the live telemetry
    // (events the log already held are not counted twice). With `discover`,
    // ps:0's own --logdir (from its status) is used when it can be read here
    // (same machine, or a shared file system). Empty and false: telemetry only
    // (the default).
    void setHistory(const QString &runDirectory, bool discover = false);
    // Cancels the stream and joins the thread (promptly: the blocking read is
    // cancelled). Emits connectionStateChanged(false, "disconnected ...").
    void disconnectFromCluster();
    QString address() const { return m_address; }
    bool isWatching() const { return m_thread.joinable(); }

    // Snapshots at most this often (default 50 ms: 20 refreshes a second).
    void setSnapshotInterval(int milliseconds) { m_intervalMs = milliseconds; }

    // Control calls; each answers through a signal (controlFinished /
    // modeChanged) and never blocks the caller.
    void setMode(const proto::ModeConfig &mode);
    // Worker tasks are addressed by their own cluster address
    // (RunSnapshot::workerHosts). Also emits stragglerChanged on success.
    void setStraggler(const QString &workerAddress, int delayMs);
    // Sets a worker's simulated compute time per step (0: full speed; see
    // WorkerPace), keeping its jitter. Emits paceChanged on success.
    void setPace(const QString &workerAddress, int computeMs);
    // Asks the task at `taskAddress` to stop cleanly (TaskControl.Stop): a
    // worker leaves its streams, a ps exits (ps:0 ends the cluster).
    void stopTask(const QString &taskAddress, const QString &reason = {});
    // ps:0's status once, outside the stream (answers with statusReceived,
    // or controlFinished(false, ...) when ps:0 cannot be reached).
    void requestStatus();

Q_SIGNALS:
    // A new snapshot of the run (queued to the owner's thread).
    void snapshotReady(const parasync::RunSnapshot &snapshot);
    // "connected to ps:0 at H:P", "cannot reach ps:0 at H:P: connection
    // refused, retrying in 2 s", "the cluster finished".
    void connectionStateChanged(bool connected, const QString &message);
    void modeChanged(const parasync::proto::ModeConfig &mode, qint64 globalStep);
    // Result of a control call: ok, or an error message a user can act on.
    void controlFinished(bool ok, const QString &message);
    void clusterFinished();
    // A worker's straggler delay after a successful setStraggler.
    void stragglerChanged(const QString &workerAddress, int delayMs);
    // A worker's compute time per step after a successful setPace.
    void paceChanged(const QString &workerAddress, int computeMs);
    // The answer to requestStatus().
    void statusReceived(const parasync::proto::ClusterStatusResponse &status);
    // What the ps tasks' embedding tables hold, about once a second while
    // connected to a cluster whose model has tables (queued to the owner's
    // thread): rows, memory, bytes per step, hot ids, row norms, and which
    // ps task does not answer.
    void tablesReady(const parasync::EmbeddingTablesSnapshot &tables);

private:
    // The watching thread's body; std::thread holds the copies of its
    // arguments for as long as it runs.
    void run(const std::string &address, const RpcSettings &settings, uint64_t generation,
             const std::string &historyDirectory, bool discoverHistory);
    // run()'s parts: one Watch stream, its first batch, the run directory's
    // history read then, events a resumed stream repeats, a snapshot out.
    struct Watch;
    struct StreamEnd;
    StreamEnd watchStream(Watch &watch);
    void onConnected(Watch &watch, const proto::TelemetryBatch &first);
    void readHistory(Watch &watch, const proto::TelemetryBatch &first);
    void dropRepeatedEvents(Watch &watch, proto::TelemetryBatch &batch);
    void publish(Watch &watch, bool force);
    // Tells the table poller what ps:0's status says of the ps tasks and
    // the model's tables.
    void noteTables(const proto::ClusterStatusResponse &status);
    void say(uint64_t generation, bool connected, const std::string &message);
    // Makes `cancel` what stopThread() calls to end the call under way;
    // false once stopping.
    bool track(std::function<void()> cancel);
    void stopThread();
    // Runs `call` on a background thread with a client to `address` and a
    // context that the destructor can cancel; `call` returns the function to
    // run on the owner's thread.
    void runControlCall(const std::string &address, std::chrono::milliseconds deadline,
                        std::function<std::function<void()>(ClusterClient &, CallContext &)> call);
    // One TaskControl call (`method`) to the worker at `workerAddress`
    // through runControlCall: `done` gets its answer on the owner's thread; a
    // failure says "cannot <failingTo> the worker at ...".
    template<typename Request, typename Response>
    void callWorker(const QString &workerAddress, const std::string &failingTo,
                    CallResult (ClusterClient::*method)(CallContext &, const Request &, Response *), Request request,
                    std::type_identity_t<std::function<void(const Response &)>> done);
    // A control call of ps:0 before any connectTo: says so (controlFinished)
    // and returns true.
    bool refuseUnlessConnected();
    // Queues `function` to the owner's thread; dropped when the connection
    // it belongs to (`generation`) has been replaced since.
    void post(uint64_t generation, std::function<void()> function);

    QString m_address;
    RpcSettings m_settings;
    QString m_historyDirectory;
    bool m_discoverHistory = false;
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_intervalMs{50};
    std::thread m_thread;
    // Asks the ps tasks for their tables; made by connectTo, told of the
    // cluster by the watching thread, gone after it joined.
    std::unique_ptr<TableStatusPoller> m_tables;
    // Ends the watching thread's call under way, so that disconnect can
    // cancel a blocking read.
    std::mutex m_callMutex;
    std::function<void()> m_cancelActive;
    // Bumped by connectTo/disconnect (owner's thread only): queued signals
    // of an older connection are not delivered.
    std::atomic<uint64_t> m_generation{0};
    // Snapshots queued to the owner's thread and not yet delivered: the
    // thread skips (and keeps for later) new ones while one is waiting, so a
    // busy GUI never builds up a backlog of multi-megabyte snapshots.
    std::atomic<int> m_queuedSnapshots{0};
    // Control calls in flight, cancelled and awaited by the destructor.
    struct ControlCall
    {
        std::shared_ptr<CallContext> context;
        std::future<void> done;
    };
    std::mutex m_controlMutex;
    std::vector<ControlCall> m_controlCalls;
};

} // namespace parasync

Q_DECLARE_METATYPE(parasync::proto::ModeConfig)
Q_DECLARE_METATYPE(parasync::proto::ClusterStatusResponse)
