#include "orchestration/table_status_poller.h"

#include "base/qt_text.h"
#include "orchestration/logging.h"
#include "proto/parasync.pb.h"
#include "wire/cluster_client.h"

#include <algorithm>
#include <future>

namespace parasync {

namespace {

using namespace std::chrono_literals;

// Longer than a loaded machine takes to answer, short enough that a frozen
// ps task holds the others' figures back by a poll or two at most.
constexpr auto kCallDeadline = 2000ms;

double secondsNow()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One process's answer (or why none came).
struct Reply
{
    size_t ps = 0;
    std::string address;
    CallResult result;
    proto::TaskStatusResponse status;
    double seconds = 0;
};

// Which reply of a ps task's processes counts: the pair's primary's, else a
// process without a pair, else a backup (its primary gone, it holds the
// rows); null when none answered.
const Reply *chosenReply(const std::vector<Reply> &replies, size_t ps)
{
    const Reply *chosen = nullptr;
    const auto rank = [](const Reply &reply) {
        switch (reply.status.replica_role()) {
        case proto::REPLICA_PRIMARY: return 3;
        case proto::REPLICA_ROLE_UNSPECIFIED: return 2;
        default: return 1;
        }
    };
    for (const Reply &reply : replies)
        if (reply.ps == ps && reply.result.ok() && (!chosen || rank(reply) > rank(*chosen)))
            chosen = &reply;
    return chosen;
}

} // namespace

TableStatusPoller::TableStatusPoller(const RpcSettings &settings, Deliver deliver, std::chrono::milliseconds interval)
    : m_settings(settings)
    , m_deliver(std::move(deliver))
    , m_interval(interval)
{
    m_thread = std::thread(&TableStatusPoller::run, this);
}

TableStatusPoller::~TableStatusPoller()
{
    stop();
}

void TableStatusPoller::setCluster(std::vector<std::string> psHosts, const std::string &ps0Peer, bool hasTables)
{
    std::lock_guard lock(m_mutex);
    const bool wake = hasTables && !m_hasTables;
    m_psHosts = std::move(psHosts);
    m_ps0Peer = ps0Peer;
    m_hasTables = hasTables;
    if (wake)
        m_wake.notify_all();
}

void TableStatusPoller::stop()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        for (const auto &context : m_inFlight)
            context->cancel();
        m_wake.notify_all();
    }
    std::lock_guard joining(m_joinMutex);
    if (m_thread.joinable())
        m_thread.join();
}

void TableStatusPoller::run()
{
    EmbeddingTablesTracker tracker;
    std::vector<std::string> knownHosts;
    std::unique_lock lock(m_mutex);
    while (!m_stop) {
        if (!m_hasTables || m_psHosts.empty()) {
            m_wake.wait(lock, [this] { return m_stop || (m_hasTables && !m_psHosts.empty()); });
            continue;
        }
        const auto next = std::chrono::steady_clock::now() + m_interval;
        const std::vector<std::string> psHosts = m_psHosts;
        const std::string ps0Peer = m_ps0Peer;
        lock.unlock();
        if (psHosts != knownHosts) {
            // Another cluster behind the same ps:0 address: start afresh.
            knownHosts = psHosts;
            tracker.setPsCount(int(psHosts.size()));
            tracker.clear();
            m_peers.clear();
        }
        poll(tracker, psHosts, ps0Peer);
        lock.lock();
        if (m_stop)
            break;
        lock.unlock();
        m_deliver(tracker.snapshot());
        lock.lock();
        m_wake.wait_until(lock, next, [this] { return m_stop; });
    }
}

std::shared_ptr<ClusterClient> TableStatusPoller::clientFor(const std::string &address)
{
    auto &client = m_clients[address];
    if (!client)
        client = std::make_shared<ClusterClient>(address, m_settings);
    return client;
}

void TableStatusPoller::poll(EmbeddingTablesTracker &tracker, const std::vector<std::string> &psHosts,
                             const std::string &ps0Peer)
{
    if (!ps0Peer.empty())
        m_peers[0] = ps0Peer;
    std::vector<Reply> replies;
    for (size_t ps = 0; ps < psHosts.size(); ++ps) {
        replies.push_back(Reply{ps, psHosts[ps], {}, {}, 0});
        const auto peer = m_peers.find(ps);
        if (peer != m_peers.end() && peer->second != psHosts[ps])
            replies.push_back(Reply{ps, peer->second, {}, {}, 0});
    }
    // Every process at once: the slowest answer bounds the poll, not their sum.
    std::vector<std::shared_ptr<ClusterClient>> clients;
    std::vector<std::shared_ptr<CallContext>> contexts;
    for (const Reply &reply : replies) {
        clients.push_back(clientFor(reply.address));
        contexts.push_back(std::make_shared<CallContext>(m_settings, kCallDeadline));
    }
    std::vector<std::future<void>> calls;
    {
        // Registered before they start: stop() cancels every one.
        std::lock_guard lock(m_mutex);
        if (m_stop)
            return;
        m_inFlight.insert(m_inFlight.end(), contexts.begin(), contexts.end());
    }
    for (size_t i = 0; i < replies.size(); ++i)
        calls.push_back(
            std::async(std::launch::async, [&reply = replies[i], client = clients[i], context = contexts[i]] {
                reply.result = client->taskStatus(*context, &reply.status);
                reply.seconds = secondsNow();
            }));
    for (auto &call : calls)
        call.wait();
    {
        std::lock_guard lock(m_mutex);
        std::erase_if(m_inFlight, [&](const auto &context) {
            return std::find(contexts.begin(), contexts.end(), context) != contexts.end();
        });
        if (m_stop)
            return;
    }
    for (const Reply &reply : replies) {
        if (!reply.result.ok())
            m_clients.erase(reply.address); // the next poll connects afresh
        else if (!reply.status.replica_peer().empty())
            m_peers[reply.ps] = reply.status.replica_peer();
    }
    for (size_t ps = 0; ps < psHosts.size(); ++ps) {
        if (const Reply *reply = chosenReply(replies, ps)) {
            tracker.recordAnswer(int(ps), reply->address, reply->seconds, tableFiguresOf(reply->status));
            continue;
        }
        // Why the task's own address failed says most (a backup that is
        // not there yet is no news).
        const auto own = std::find_if(replies.begin(), replies.end(), [ps](const Reply &r) { return r.ps == ps; });
        const std::string problem = "ps:" + std::to_string(ps) + " at " + own->address + ": " + own->result.description;
        qCDebug(lcWatcher).noquote() << "no tables from" << qs(problem);
        tracker.recordSilence(int(ps), own->address, secondsNow(), problem);
    }
    tracker.finishPoll();
}

} // namespace parasync
