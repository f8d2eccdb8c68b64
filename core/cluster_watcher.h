#pragma once

// Watches a running cluster through ps:0 — one started here or elsewhere —
// and steers it. A background thread holds the telemetry stream (reconnecting
// with back-off when ps:0 is not there yet or goes away), feeds a RunState,
// and hands value snapshots to the owner's thread through queued signals at
// a bounded rate. Control calls (mode, straggler, stop) run off the caller's
// thread too. Qt Core only.

#include "cluster_spec.h"
#include "parasync.pb.h"
#include "rpc.h"
#include "run_state.h"

#include <QObject>
#include <QString>

#include <atomic>
#include <memory>
#include <thread>

namespace parasync {

class ClusterWatcher : public QObject
{
    Q_OBJECT

public:
    explicit ClusterWatcher(QObject *parent = nullptr);
    ~ClusterWatcher() override; // stops the thread; never blocks long

    // Starts watching ps:0 at `address` ("host:port"). Replaces any previous
    // connection and clears the state.
    void connectTo(const QString &address, const RpcSettings &settings = {});
    void disconnectFromCluster();
    QString address() const { return m_address; }

    // Snapshots at most this often (default 50 ms: 20 refreshes a second).
    void setSnapshotInterval(int milliseconds) { m_intervalMs = milliseconds; }

    // Control calls; each answers through a signal (controlFinished /
    // modeChanged) and never blocks the caller.
    void setMode(const proto::ModeConfig &mode);
    // Worker tasks are addressed by their own cluster address.
    void setStraggler(const QString &workerAddress, int delayMs);

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

private:
    void run(std::string address, RpcSettings settings);
    void stopThread();

    QString m_address;
    RpcSettings m_settings;
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_intervalMs{50};
    std::thread m_thread;
    // The stream's context, so disconnect can cancel a blocking read.
    std::shared_ptr<void> m_activeCall;
};

} // namespace parasync

Q_DECLARE_METATYPE(parasync::proto::ModeConfig)
