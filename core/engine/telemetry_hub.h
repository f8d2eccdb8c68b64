#pragma once

#include "proto/parasync.pb.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
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
    };

    std::shared_ptr<Subscription> subscribe(size_t capacity = kDefaultCapacity);
    void unsubscribe(const std::shared_ptr<Subscription> &subscription);

    void publish(const proto::TelemetryEvent &event);
    // Wakes every subscriber and ends their streams after the queue drains.
    void close();
    int subscriberCount() const;

private:
    mutable std::mutex m_mutex;
    std::vector<std::shared_ptr<Subscription>> m_subscribers;
    bool m_closed = false;
};

} // namespace parasync
