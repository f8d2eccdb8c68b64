#pragma once

// Asks every ps task of a sparse model what its embedding tables hold
// (TaskControl.GetTaskStatus, TaskStatusResponse.tables) about once a
// second, on a thread of its own, and hands each poll's figures
// (EmbeddingTablesSnapshot) to a callback. The ps tasks are asked at once,
// each call with a deadline, so one that does not answer (gone, frozen)
// delays no other's figures and stops nothing: it is marked as not
// answering, with its last figures. With --ps_backup_hosts both processes
// of a pair are asked once the pair is known, and the primary's answer
// counts. ClusterWatcher owns one per connection. Qt Core only.

#include "orchestration/embedding_tables.h"
#include "wire/rpc_settings.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace parasync {

class CallContext;
class ClusterClient;

class TableStatusPoller
{
public:
    // Called on the poller's thread after every poll (queue it to yours).
    using Deliver = std::function<void(EmbeddingTablesSnapshot)>;

    // Starts the thread; it asks nothing until setCluster says the model
    // has tables.
    TableStatusPoller(const RpcSettings &settings, Deliver deliver,
                      std::chrono::milliseconds interval = std::chrono::milliseconds(1000));
    // stop(): never blocks long.
    ~TableStatusPoller();
    TableStatusPoller(const TableStatusPoller &) = delete;
    TableStatusPoller &operator=(const TableStatusPoller &) = delete;

    // The cluster as ps:0 describes it: ps task i at psHosts[i], the other
    // process of ps:0's pair at `ps0Peer` (empty without one), and whether
    // the model declares tables (polls only then). Thread-safe; cheap when
    // nothing changed.
    void setCluster(std::vector<std::string> psHosts, const std::string &ps0Peer, bool hasTables);
    // Ends the polling: cancels the calls in flight and joins the thread
    // (promptly). No callback comes after it returns. Thread-safe, except
    // from the callback itself.
    void stop();

private:
    void run();
    // One poll of every ps task into `tracker`.
    void poll(EmbeddingTablesTracker &tracker, const std::vector<std::string> &psHosts, const std::string &ps0Peer);
    std::shared_ptr<ClusterClient> clientFor(const std::string &address);

    RpcSettings m_settings;
    Deliver m_deliver;
    std::chrono::milliseconds m_interval;

    std::mutex m_mutex; // guards the fields below, up to m_inFlight
    std::condition_variable m_wake;
    bool m_stop = false;
    std::vector<std::string> m_psHosts;
    std::string m_ps0Peer;
    bool m_hasTables = false;
    std::vector<std::shared_ptr<CallContext>> m_inFlight;
    std::mutex m_joinMutex; // stop() from two threads joins once
    std::thread m_thread;

    // The poller's thread only: a channel per process, dropped after a
    // failure (a refused channel waits out gRPC's back-off), and each ps
    // task's other process once an answer named it.
    std::map<std::string, std::shared_ptr<ClusterClient>> m_clients;
    std::map<size_t, std::string> m_peers;
};

} // namespace parasync
