#pragma once

#include "proto/parasync.pb.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace parasync {

// Fans telemetry events out to subscribers (the app's watcher, a monitoring
// CLI) without ever slowing training: publish() only appends to each
// subscriber's bounded queue; a subscriber that falls behind loses its oldest
// events and is told how many. Thread-safe.
class TelemetryHub
{
public:
    static constexpr size_t kDefaultCapacity = 65536;

    class Subscription
    {
    public:
        // Blocks until events are queued, the hub closes or `timeout` passes;
        // then lingers up to `linger` more while fewer than `maxEvents` are
        // queued, so that a busy cluster sends one batch per linger rather than
        // one message (and one wake-up of this thread) per step. Moves up to
        // `maxEvents` events into `batch`. Returns false once the hub is closed
        // and the queue is drained.
        bool next(proto::TelemetryBatch *batch, std::chrono::milliseconds timeout, size_t maxEvents = 4096,
                  std::chrono::milliseconds linger = std::chrono::milliseconds(20));

    private:
        friend class TelemetryHub;
        std::mutex m_mutex;
        std::condition_variable m_ready;
        std::deque<proto::TelemetryEvent> m_queue;
        size_t m_capacity = kDefaultCapacity;
        // publish() wakes the reader only when the queue stops being empty or
        // reaches this many events (the reader's batch size), not per event.
        size_t m_wakeAt = 4096;
        int64_t m_lost = 0;
        bool m_closed = false;
        // WatchRequest.resume_after_step: remembered events of later steps
        // come here too (they may be what the subscriber missed).
        std::optional<int64_t> m_resumeAfter;
    };

    // Events a subscriber that lost its stream can be sent again: the last
    // this many that belong to a global step.
    static constexpr size_t kRecentEvents = 4096;

    // With `resumeAfterStep`, the subscription starts with the recent events
    // of later global steps (WatchRequest.resume_after_step), in order.
    std::shared_ptr<Subscription> subscribe(size_t capacity = kDefaultCapacity,
                                            std::optional<int64_t> resumeAfterStep = std::nullopt);
    void unsubscribe(const std::shared_ptr<Subscription> &subscription);

    void publish(const proto::TelemetryEvent &event);
    // Keeps `event` for resumed subscriptions without sending it live: what
    // a ps that took over knows its predecessor sent already, though a
    // watcher may not have received it before it died. Subscriptions that
    // resume after an earlier step get it now.
    void remember(const proto::TelemetryEvent &event);
    // Wakes every subscriber and ends their streams after the queue drains.
    void close();
    int subscriberCount() const;

private:
    void rememberLocked(const proto::TelemetryEvent &event);
    static void enqueue(Subscription &subscription, const proto::TelemetryEvent &event);

    mutable std::mutex m_mutex;
    std::vector<std::shared_ptr<Subscription>> m_subscribers;
    std::deque<proto::TelemetryEvent> m_recent; // the last kRecentEvents with a global step
    bool m_closed = false;
};

} // namespace parasync
