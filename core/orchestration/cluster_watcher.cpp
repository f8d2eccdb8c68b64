#include "orchestration/cluster_watcher.h"

#include "base/backoff.h"
#include "base/error.h"
#include "base/qt_text.h"
#include "config/update_modes.h"
#include "formats/run_log.h"
#include "orchestration/logging.h"
#include "orchestration/table_status_poller.h"
#include "wire/cluster_client.h"
#include "wire/cluster_token.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMetaObject>

#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <tuple>

namespace parasync {

namespace {

using namespace std::chrono_literals;

constexpr auto kProbeDeadline = 2000ms; // a wrong host answers with a timeout, not a long silence
constexpr auto kControlDeadline = 5000ms;

// Why ps:0 cannot be watched, in words a user can act on.
std::string describeWatchFailure(const std::string &where, const CallResult &result, bool wasConnected)
{
    if (result.code == CallResult::Code::Unimplemented)
        return where + " does not serve the cluster's telemetry: is it ps:0's address, not a worker's?";
    if (result.code == CallResult::Code::Unauthenticated)
        return where
               + " refused the app: wrong or missing cluster token (give the cluster's token: in "
                 "Connect, with --cluster_token_file, or in PARASYNC_CLUSTER_TOKEN)";
    return (wasConnected ? "lost " : "cannot reach ") + where + ": " + result.description;
}

} // namespace

ClusterWatcher::ClusterWatcher(QObject *parent) : QObject(parent)
{
    qRegisterMetaType<parasync::RunSnapshot>();
    qRegisterMetaType<parasync::proto::ModeConfig>();
    qRegisterMetaType<parasync::proto::ClusterStatusResponse>();
    qRegisterMetaType<parasync::EmbeddingTablesSnapshot>();
    // Control calls before any connectTo (a straggler on a worker's
    // address) carry the environment's token too.
    m_settings.clusterToken = qEnvironmentVariable(kTokenEnvironmentVariable).toStdString();
}

ClusterWatcher::~ClusterWatcher()
{
    stopThread();
    std::vector<ControlCall> calls;
    {
        std::lock_guard lock(m_controlMutex);
        calls.swap(m_controlCalls);
    }
    // Cancelled calls return at once, so waiting for them is short.
    for (auto &call : calls)
        call.context->cancel();
    for (auto &call : calls)
        call.done.wait();
}

void ClusterWatcher::connectTo(const QString &address, const RpcSettings &settings)
{
    stopThread();
    m_address = address;
    m_settings = settings;
    if (m_settings.clusterToken.empty())
        m_settings.clusterToken = qEnvironmentVariable(kTokenEnvironmentVariable).toStdString();
    const uint64_t generation = ++m_generation;
    qCDebug(lcWatcher).noquote() << "watching ps:0 at" << address
                                 << (m_settings.tls.enabled() ? "over TLS" : "in plain text")
                                 << (m_settings.clusterToken.empty() ? "without a token" : "with a token")
                                 << (m_historyDirectory.isEmpty()
                                         ? QStringLiteral("(no run directory given)")
                                         : QStringLiteral("history from ") + m_historyDirectory);
    m_stop = false;
    m_tables = std::make_unique<TableStatusPoller>(m_settings, [this, generation](EmbeddingTablesSnapshot tables) {
        post(generation, [this, tables = std::move(tables)] { Q_EMIT tablesReady(tables); });
    });
    m_thread = std::thread(&ClusterWatcher::run, this, address.toStdString(), m_settings, generation,
                           m_historyDirectory.toStdString(), m_discoverHistory);
}

void ClusterWatcher::setHistory(const QString &runDirectory, bool discover)
{
    m_historyDirectory = runDirectory;
    m_discoverHistory = discover;
}

void ClusterWatcher::disconnectFromCluster()
{
    if (!m_thread.joinable())
        return;
    qCDebug(lcWatcher).noquote() << "disconnecting from ps:0 at" << m_address;
    stopThread();
    ++m_generation;
    Q_EMIT connectionStateChanged(false, tr("disconnected from ps:0 at %1").arg(m_address));
}

void ClusterWatcher::stopThread()
{
    m_stop = true;
    {
        std::lock_guard lock(m_callMutex);
        if (m_cancelActive)
            m_cancelActive();
    }
    if (m_thread.joinable())
        m_thread.join();
    m_tables.reset();
}

void ClusterWatcher::post(uint64_t generation, std::function<void()> function)
{
    QMetaObject::invokeMethod(
        this,
        [this, generation, function = std::move(function)] {
            if (generation == m_generation)
                function();
        },
        Qt::QueuedConnection);
}

namespace {

// ps:0's --logdir from its status, when this machine can read its step log.
std::string discoverRunDirectory(const proto::ClusterStatusResponse &status)
{
    const QJsonObject root = QJsonDocument::fromJson(QByteArray::fromStdString(status.cluster_json())).object();
    QString logdir = root.value(QStringLiteral("logdir")).toString();
    if (logdir.isEmpty())
        logdir = root.value(QStringLiteral("training")).toObject().value(QStringLiteral("logdir")).toString();
    // A relative path is relative to ps:0's working directory, unknown here.
    if (logdir.isEmpty() || QDir::isRelativePath(logdir) || !QDir(logdir).exists(QLatin1String(run_files::kStepLog)))
        return {};
    // The same path may hold another run here: it must be this cluster's.
    QFile clusterFile(QDir(logdir).filePath(QStringLiteral("cluster.json")));
    if (status.ps_hosts_size() > 0 && clusterFile.open(QIODevice::ReadOnly)
        && !clusterFile.readAll().contains(QByteArray::fromStdString(status.ps_hosts(0))))
        return {};
    return logdir.toStdString();
}

constexpr int64_t kNoStep = std::numeric_limits<int64_t>::max();

int64_t eventStep(const proto::TelemetryEvent &event)
{
    if (event.has_step())
        return event.step().global_step();
    if (event.has_mode_change())
        return event.mode_change().global_step();
    if (event.has_checkpoint())
        return event.checkpoint().global_step();
    if (event.has_failover())
        return event.failover().global_step();
    return kNoStep; // not ordered by step: always live
}

// The events a watcher has seen lately. A stream resumed after a loss
// (WatchRequest.resume_after_step) starts a little before the last step seen,
// and a new primary may send again the few events its predecessor published
// just before it died: those are not counted twice. A step is keyed as the
// step log's lines are (global step, worker, the worker's clock), other
// events by their kind and global step.
class RecentEvents
{
public:
    // True the first time `event` is seen among the last kKept.
    bool firstTime(const proto::TelemetryEvent &event)
    {
        const Key key = event.has_step() ? Key{event.kind_case(), event.step().global_step(), event.step().worker(),
                                               event.step().worker_clock()}
                                         : Key{event.kind_case(), eventStep(event), 0, 0};
        if (!m_seen.insert(key).second)
            return false;
        m_order.push_back(key);
        if (m_order.size() > kKept) {
            m_seen.erase(m_order.front());
            m_order.pop_front();
        }
        return true;
    }

private:
    using Key = std::tuple<int, int64_t, int32_t, int64_t>;
    // More than a resumed stream sends again (TelemetryHub::kRecentEvents).
    static constexpr size_t kKept = 4096;
    std::set<Key> m_seen;
    std::deque<Key> m_order;
};

} // namespace

// What one watch keeps from stream to stream (run()'s thread only): ps:0's
// processes, where the next stream resumes, and the run state it draws.
struct ClusterWatcher::Watch
{
    uint64_t generation = 0;
    RpcSettings settings;
    std::string historyDirectory;
    bool discoverHistory = false;
    // Events up to this global step came from the run directory's history.
    int64_t historyStep = -1;
    // ps:0's processes: the address given, then the other one of its pair
    // once a status names it (--ps_backup_hosts). When the one watched dies,
    // the other takes over, and the watcher turns to it.
    std::vector<std::string> addresses;
    size_t current = 0;
    RecentEvents recentEvents;
    // After a lost stream, the next one resumes after this global step (-1: live only).
    int64_t resumeAfter = -1;
    // The newest global step an event showed. Not the status's: a primary
    // counts steps its backup may not hold yet, and those die with it.
    int64_t lastEventStep = -1;
    // The next stream is the other process of the same pair, the same run:
    // a lower global step there is no new run.
    bool turnedWithinPair = false;
    std::unique_ptr<ClusterClient> client; // to addresses[current]
    RunState state;
    bool everConnected = false;
    bool changed = false; // since the last snapshot went out
    std::string lastStatus;
    std::chrono::steady_clock::time_point lastPublish = std::chrono::steady_clock::now() - 1h;
    std::chrono::steady_clock::time_point lastStatusRequest = lastPublish;

    std::string where() const { return "ps:0 at " + addresses[current]; }
    void turnToOther()
    {
        current = (current + 1) % addresses.size();
        turnedWithinPair = true;
    }
};

// How one Watch stream ended.
struct ClusterWatcher::StreamEnd
{
    bool stopped = false;       // the watcher is stopping
    bool connected = false;     // a first batch arrived
    bool finished = false;      // the cluster finished
    bool turnToPrimary = false; // the process watched is a backup whose primary lives
    CallResult status;
};

void ClusterWatcher::say(uint64_t generation, bool connected, const std::string &message)
{
    // Every state the status line shows: connecting, connected, each retry.
    qCDebug(lcWatcher).noquote() << (connected ? "connected:" : "not connected:") << qs(message);
    post(generation, [this, connected, text = qs(message)] { Q_EMIT connectionStateChanged(connected, text); });
}

bool ClusterWatcher::track(std::function<void()> cancel)
{
    std::lock_guard lock(m_callMutex);
    m_cancelActive = std::move(cancel);
    return !m_stop.load();
}

void ClusterWatcher::publish(Watch &watch, bool force)
{
    const auto now = std::chrono::steady_clock::now();
    if (!watch.changed)
        return;
    if (!force
        && (now - watch.lastPublish < std::chrono::milliseconds(m_intervalMs.load()) || m_queuedSnapshots.load() > 0))
        return;
    watch.changed = false;
    watch.lastPublish = now;
    ++m_queuedSnapshots;
    auto snapshot = std::make_shared<const RunSnapshot>(watch.state.snapshot());
    QMetaObject::invokeMethod(
        this,
        [this, generation = watch.generation, snapshot] {
            --m_queuedSnapshots;
            if (generation == m_generation)
                Q_EMIT snapshotReady(*snapshot);
        },
        Qt::QueuedConnection);
}

void ClusterWatcher::run(const std::string &address, const RpcSettings &settings, uint64_t generation,
                         const std::string &historyDirectory, bool discoverHistory)
{
    Watch watch;
    watch.generation = generation;
    watch.settings = settings;
    watch.historyDirectory = historyDirectory;
    watch.discoverHistory = discoverHistory;
    watch.addresses = {address};
    Backoff backoff(100ms, 2000ms);

    while (!m_stop) {
        const std::string where = watch.where();
        // A fresh client for every attempt: a channel whose connection was
        // refused waits out gRPC's own reconnect back-off (seconds) before it
        // tries again, even after ps:0 came up; a new one connects at once.
        watch.client = std::make_unique<ClusterClient>(watch.addresses[watch.current], settings);
        std::string failure;
        // A short unary call first: a wrong or firewalled host answers with a
        // timeout in 2 s instead of a stream that hangs while connecting.
        {
            auto context = std::make_shared<CallContext>(settings, kProbeDeadline);
            if (!track([context] { context->cancel(); }))
                break;
            proto::ClusterStatusResponse ignored;
            const CallResult result = watch.client->clusterStatus(*context, &ignored);
            track(nullptr);
            if (!result.ok())
                failure = describeWatchFailure(where, result, false);
        }
        if (failure.empty()) {
            const StreamEnd end = watchStream(watch);
            if (end.stopped)
                break;
            if (end.connected)
                backoff.reset();
            if (end.finished) {
                watch.state.setFinished(true);
                watch.changed = true;
                publish(watch, true);
                m_tables->stop(); // its tasks exit: their last figures stand
                const std::string message
                    = "the cluster finished at global step " + std::to_string(watch.state.globalStep());
                qCDebug(lcWatcher).noquote() << qs(message);
                post(generation, [this, text = qs(message)] {
                    Q_EMIT clusterFinished();
                    Q_EMIT connectionStateChanged(false, text);
                });
                return;
            }
            if (m_stop)
                break;
            publish(watch, true);
            if (end.turnToPrimary) {
                watch.turnToOther();
                say(generation, false,
                    where + " is the backup of ps:0's pair; watching its primary at " + watch.addresses[watch.current]);
                continue;
            }
            failure = describeWatchFailure(where, end.status, end.connected);
            if (end.connected)
                qCWarning(lcWatcher).noquote() << "lost ps:0:" << qs(failure);
            // The next stream fills the gap: it starts with the events after
            // the last step seen that ps:0 still holds (the last step's
            // too: in sync mode not every worker's may have arrived).
            if (end.connected && watch.lastEventStep > 0)
                watch.resumeAfter = watch.lastEventStep - 1;
            if (end.connected && watch.addresses.size() > 1) {
                // The watched process died: its partner takes over (or
                // already has). Turn to it at once rather than after a pause.
                watch.turnToOther();
                say(generation, false,
                    failure + "; turning to the other process of ps:0's pair, at " + watch.addresses[watch.current]);
                continue;
            }
        }
        // Neither process may answer for a while (both restarting): try
        // them in turn.
        if (watch.addresses.size() > 1)
            watch.current = (watch.current + 1) % watch.addresses.size();
        if (!backoff.wait(
                failure, [&](const std::string &line) { say(generation, false, line); },
                [this] { return m_stop.load(); }))
            break;
    }
}

ClusterWatcher::StreamEnd ClusterWatcher::watchStream(Watch &watch)
{
    StreamEnd end;
    proto::WatchRequest request;
    request.set_include_status(true);
    if (watch.resumeAfter >= 0)
        request.set_resume_after_step(watch.resumeAfter);
    const std::unique_ptr<TelemetryStream> reader = watch.client->watch(request);
    const auto cancelStream = [stream = reader.get()] { stream->cancel(); };
    if (!track(cancelStream)) {
        reader->cancel();
        reader->finish();
        track(nullptr);
        end.stopped = true;
        return end;
    }
    proto::TelemetryBatch batch;
    while (reader->read(&batch)) {
        if (batch.has_status() && batch.status().has_replica()) {
            const proto::ReplicaStatus &replica = batch.status().replica();
            if (watch.addresses.size() == 1 && !replica.peer().empty() && replica.peer() != watch.addresses[0])
                watch.addresses.push_back(replica.peer());
            // A backup that follows a live primary sends no events: watch
            // the primary. One whose primary is gone stays watched; it takes
            // over when a worker turns to it.
            if (replica.role() == proto::REPLICA_BACKUP && replica.peer_attached() && watch.addresses.size() > 1) {
                end.turnToPrimary = true;
                break;
            }
        }
        if (!end.connected) {
            end.connected = true;
            onConnected(watch, batch);
        }
        dropRepeatedEvents(watch, batch);
        if (batch.events_size() > 0 || batch.lost_events() > 0 || batch.cluster_finished())
            watch.changed = true;
        if (batch.has_status()) {
            noteTables(batch.status());
            // ps:0 repeats its status every 0.5 s; only a new one is news.
            std::string serialized = batch.status().SerializeAsString();
            if (serialized != watch.lastStatus) {
                watch.lastStatus = std::move(serialized);
                watch.changed = true;
            }
        }
        watch.state.apply(batch);
        // Steps arrived before a status that names the parameters (ps:0
        // repeats it only every 0.5 s): ask for it now.
        if (watch.state.wantsSignature() && std::chrono::steady_clock::now() - watch.lastStatusRequest > 1s) {
            watch.lastStatusRequest = std::chrono::steady_clock::now();
            auto statusContext = std::make_shared<CallContext>(watch.settings, kProbeDeadline);
            proto::ClusterStatusResponse status;
            if (track([statusContext] { statusContext->cancel(); })
                && watch.client->clusterStatus(*statusContext, &status).ok()) {
                watch.state.applyStatus(status);
                noteTables(status);
            }
            // Stopping meanwhile cancelled the status call, not the stream.
            if (!track(cancelStream))
                reader->cancel();
        }
        if (batch.cluster_finished()) {
            end.finished = true;
            break;
        }
        // ps:0 sends a batch at least every 50 ms, even an empty one, so a
        // change held back here goes out at the next one.
        publish(watch, false);
        batch.Clear();
    }
    if (end.finished || end.turnToPrimary)
        reader->cancel(); // we leave before the stream's end
    end.status = reader->finish();
    track(nullptr);
    return end;
}

void ClusterWatcher::noteTables(const proto::ClusterStatusResponse &status)
{
    // The signature is empty until the chief initialised the variables.
    m_tables->setCluster({status.ps_hosts().begin(), status.ps_hosts().end()}, status.replica().peer(),
                         status.signature().tables_size() > 0);
}

void ClusterWatcher::onConnected(Watch &watch, const proto::TelemetryBatch &first)
{
    // A ps:0 that restarted from step 0 runs a new run: do not draw it over
    // the old one.
    if (watch.everConnected && !watch.turnedWithinPair && first.has_status()
        && first.status().global_step() < watch.state.globalStep()) {
        watch.state.clear();
        watch.recentEvents = RecentEvents();
        watch.resumeAfter = -1;
        watch.lastEventStep = -1;
        watch.changed = true;
    }
    if (!watch.everConnected)
        readHistory(watch, first);
    watch.everConnected = true;
    watch.turnedWithinPair = false;
    say(watch.generation, true, "connected to " + watch.where());
}

void ClusterWatcher::readHistory(Watch &watch, const proto::TelemetryBatch &first)
{
    std::string directory = watch.historyDirectory;
    if (directory.empty() && watch.discoverHistory && first.has_status())
        directory = discoverRunDirectory(first.status());
    if (directory.empty())
        return;
    // Read after the stream is up, so no event falls between the log's end
    // and the first live one. ps:0 writes the log from a queue, a little
    // behind its telemetry: read until the log reaches the step the stream
    // started at (bounded: a run without a log there would never get there).
    const int64_t streamStart = first.has_status() ? first.status().global_step() : 0;
    try {
        RunState fromDisk;
        RunDirectoryInfo info = replayRunDirectory(directory, &fromDisk);
        for (int attempt = 0; attempt < 40 && fromDisk.globalStep() < streamStart && !m_stop; ++attempt) {
            std::this_thread::sleep_for(50ms);
            fromDisk = RunState();
            info = replayRunDirectory(directory, &fromDisk);
        }
        watch.state = std::move(fromDisk);
        watch.historyStep = watch.state.globalStep();
        watch.changed = true;
        say(watch.generation, false,
            "read the run's history from " + directory + ": " + std::to_string(info.records)
                + " records up to global step " + std::to_string(watch.historyStep) + "; continuing live");
    } catch (const InputError &e) {
        say(watch.generation, false, std::string("the run's history is not shown: ") + e.what());
    }
}

void ClusterWatcher::dropRepeatedEvents(Watch &watch, proto::TelemetryBatch &batch)
{
    if (batch.events_size() == 0)
        return;
    auto *events = batch.mutable_events();
    // A resumed stream sends again what the last one may have delivered.
    events->erase(std::remove_if(events->begin(), events->end(),
                                 [&](const auto &event) {
                                     return eventStep(event) != kNoStep && !watch.recentEvents.firstTime(event);
                                 }),
                  events->end());
    for (const auto &event : *events)
        if (event.has_step())
            watch.lastEventStep = std::max(watch.lastEventStep, event.step().global_step());
    if (watch.historyStep >= 0 && batch.events_size() > 0) {
        // The first live events may repeat the log's last ones.
        const int64_t historyStep = watch.historyStep;
        const auto old = std::remove_if(events->begin(), events->end(),
                                        [historyStep](const auto &event) { return eventStep(event) <= historyStep; });
        if (old != events->begin())
            watch.historyStep = -1; // live events past the history: no more to filter
        events->erase(old, events->end());
    }
}

void ClusterWatcher::runControlCall(const std::string &address, std::chrono::milliseconds deadline,
                                    std::function<std::function<void()>(ClusterClient &, CallContext &)> call)
{
    auto context = std::make_shared<CallContext>(m_settings, deadline);
    std::lock_guard lock(m_controlMutex);
    // Forget the calls that are done.
    std::erase_if(m_controlCalls, [](const ControlCall &c) {
        return c.done.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
    auto done = std::async(std::launch::async, [this, address, settings = m_settings, context, call = std::move(call)] {
        ClusterClient client(address, settings);
        auto deliver = call(client, *context);
        if (deliver)
            QMetaObject::invokeMethod(this, std::move(deliver), Qt::QueuedConnection);
    });
    m_controlCalls.push_back(ControlCall{std::move(context), std::move(done)});
}

bool ClusterWatcher::refuseUnlessConnected()
{
    if (!m_address.isEmpty())
        return false;
    QMetaObject::invokeMethod(
        this, [this] { Q_EMIT controlFinished(false, tr("not connected to a cluster: connect to ps:0 first")); },
        Qt::QueuedConnection);
    return true;
}

void ClusterWatcher::setMode(const proto::ModeConfig &mode)
{
    if (refuseUnlessConnected())
        return;
    const std::string address = m_address.toStdString();
    qCDebug(lcWatcher).noquote() << "asking ps:0 at" << m_address << "for" << qs(describeMode(mode));
    runControlCall(address, kControlDeadline,
                   [this, address, mode](ClusterClient &client, CallContext &context) -> std::function<void()> {
                       proto::SetModeRequest request;
                       *request.mutable_mode() = mode;
                       request.set_requested_by("parasync app");
                       proto::SetModeResponse response;
                       const CallResult result = client.setMode(context, request, &response);
                       if (!result.ok()) {
                           const QString message
                               = qs("cannot change the mode on ps:0 at " + address + ": " + result.description);
                           qCWarning(lcWatcher).noquote() << message;
                           return [this, message] { Q_EMIT controlFinished(false, message); };
                       }
                       const QString message = qs("mode " + describeMode(response.mode()) + " from global step "
                                                  + std::to_string(response.global_step()));
                       qCDebug(lcWatcher).noquote() << "ps:0 now runs" << message;
                       return [this, response, message] {
                           Q_EMIT modeChanged(response.mode(), qint64(response.global_step()));
                           Q_EMIT controlFinished(true, message);
                       };
                   });
}

template<typename Request, typename Response>
void ClusterWatcher::callWorker(const QString &workerAddress, const std::string &failingTo,
                                CallResult (ClusterClient::*method)(CallContext &, const Request &, Response *),
                                Request request, std::type_identity_t<std::function<void(const Response &)>> done)
{
    const std::string address = workerAddress.toStdString();
    runControlCall(address, kControlDeadline,
                   [this, address, failingTo, method, request = std::move(request),
                    done = std::move(done)](ClusterClient &client, CallContext &context) -> std::function<void()> {
                       auto response = std::make_shared<Response>();
                       const CallResult result = (client.*method)(context, request, response.get());
                       if (!result.ok()) {
                           const QString message
                               = qs("cannot " + failingTo + " the worker at " + address + ": " + result.description);
                           qCWarning(lcWatcher).noquote() << message;
                           return [this, message] { Q_EMIT controlFinished(false, message); };
                       }
                       return [done, response] { done(*response); };
                   });
}

void ClusterWatcher::setStraggler(const QString &workerAddress, int delayMs)
{
    proto::SetStragglerRequest request;
    request.set_delay_ms(delayMs);
    callWorker(workerAddress, "slow down", &ClusterClient::setStraggler, request,
               [this, workerAddress](const proto::SetStragglerResponse &response) {
                   const int now = response.delay_ms();
                   const std::string address = workerAddress.toStdString();
                   const QString message = now > 0 ? qs("the worker at " + address + " now takes " + std::to_string(now)
                                                        + " ms longer per step")
                                                   : qs("the worker at " + address + " runs at full speed again");
                   Q_EMIT stragglerChanged(workerAddress, now);
                   Q_EMIT controlFinished(true, message);
               });
}

void ClusterWatcher::setPace(const QString &workerAddress, int computeMs)
{
    proto::SetPaceRequest request;
    request.set_compute_ms(computeMs);
    qCDebug(lcWatcher).noquote() << "asking the worker at" << workerAddress << "for" << computeMs << "ms a step";
    callWorker(workerAddress, "change the pace of", &ClusterClient::setPace, request,
               [this, workerAddress](const proto::SetPaceResponse &response) {
                   Q_EMIT paceChanged(workerAddress, response.compute_ms());
               });
}

void ClusterWatcher::stopTask(const QString &taskAddress, const QString &reason)
{
    const std::string address = taskAddress.toStdString();
    proto::StopRequest request;
    request.set_reason(reason.isEmpty() ? std::string("stopped from the parasync app") : reason.toStdString());
    runControlCall(address, kControlDeadline,
                   [this, address, request](ClusterClient &client, CallContext &context) -> std::function<void()> {
                       proto::StopResponse response;
                       const CallResult result = client.stop(context, request, &response);
                       const QString message
                           = result.ok() ? qs("asked the task at " + address + " to stop")
                                         : qs("cannot stop the task at " + address + ": " + result.description);
                       return [this, ok = result.ok(), message] { Q_EMIT controlFinished(ok, message); };
                   });
}

void ClusterWatcher::requestStatus()
{
    if (refuseUnlessConnected())
        return;
    const std::string address = m_address.toStdString();
    runControlCall(address, kProbeDeadline,
                   [this, address](ClusterClient &client, CallContext &context) -> std::function<void()> {
                       proto::ClusterStatusResponse status;
                       const CallResult result = client.clusterStatus(context, &status);
                       if (!result.ok()) {
                           const QString message = qs("cannot reach ps:0 at " + address + ": " + result.description);
                           return [this, message] { Q_EMIT controlFinished(false, message); };
                       }
                       return [this, status] { Q_EMIT statusReceived(status); };
                   });
}

} // namespace parasync
