#include "engine/telemetry_hub.h"

#include <algorithm>

namespace parasync {

bool TelemetryHub::Subscription::next(proto::TelemetryBatch *batch, std::chrono::milliseconds timeout, size_t maxEvents,
                                      std::chrono::milliseconds linger)
{
    std::unique_lock lock(m_mutex);
    m_wakeAt = std::max<size_t>(1, maxEvents);
    m_ready.wait_for(lock, timeout, [this] { return !m_queue.empty() || m_closed; });
    if (!m_queue.empty() && linger.count() > 0)
        m_ready.wait_for(lock, linger, [&] { return m_queue.size() >= maxEvents || m_closed; });
    const size_t n = std::min(maxEvents, m_queue.size());
    for (size_t i = 0; i < n; ++i) {
        *batch->add_events() = std::move(m_queue.front());
        m_queue.pop_front();
    }
    batch->set_lost_events(m_lost);
    m_lost = 0;
    return !(m_closed && m_queue.empty());
}

namespace {

// The global step an event belongs to; none for a worker's state change.
std::optional<int64_t> globalStepOf(const proto::TelemetryEvent &event)
{
    switch (event.kind_case()) {
    case proto::TelemetryEvent::kStep: return event.step().global_step();
    case proto::TelemetryEvent::kModeChange: return event.mode_change().global_step();
    case proto::TelemetryEvent::kCheckpoint: return event.checkpoint().global_step();
    case proto::TelemetryEvent::kFailover: return event.failover().global_step();
    default: return std::nullopt;
    }
}

} // namespace

std::shared_ptr<TelemetryHub::Subscription> TelemetryHub::subscribe(size_t capacity,
                                                                    std::optional<int64_t> resumeAfterStep)
{
    auto subscription = std::make_shared<Subscription>();
    subscription->m_capacity = capacity > 0 ? capacity : kDefaultCapacity;
    std::lock_guard lock(m_mutex);
    subscription->m_closed = m_closed;
    subscription->m_resumeAfter = resumeAfterStep;
    // Under the hub's lock: no event falls between the replay and the live ones.
    if (resumeAfterStep)
        for (const auto &event : m_recent)
            if (*globalStepOf(event) > *resumeAfterStep && subscription->m_queue.size() < subscription->m_capacity)
                subscription->m_queue.push_back(event);
    m_subscribers.push_back(subscription);
    return subscription;
}

void TelemetryHub::unsubscribe(const std::shared_ptr<Subscription> &subscription)
{
    std::lock_guard lock(m_mutex);
    m_subscribers.erase(std::remove(m_subscribers.begin(), m_subscribers.end(), subscription), m_subscribers.end());
}

void TelemetryHub::enqueue(Subscription &subscription, const proto::TelemetryEvent &event)
{
    bool wake = false;
    {
        std::lock_guard subscriberLock(subscription.m_mutex);
        if (subscription.m_queue.size() >= subscription.m_capacity) {
            subscription.m_queue.pop_front();
            ++subscription.m_lost;
        }
        subscription.m_queue.push_back(event);
        wake = subscription.m_queue.size() == 1 || subscription.m_queue.size() == subscription.m_wakeAt;
    }
    if (wake)
        subscription.m_ready.notify_one();
}

void TelemetryHub::publish(const proto::TelemetryEvent &event)
{
    std::lock_guard lock(m_mutex);
    rememberLocked(event);
    for (const auto &s : m_subscribers)
        enqueue(*s, event);
}

void TelemetryHub::remember(const proto::TelemetryEvent &event)
{
    std::lock_guard lock(m_mutex);
    rememberLocked(event);
    const std::optional<int64_t> step = globalStepOf(event);
    if (!step)
        return;
    for (const auto &s : m_subscribers)
        if (s->m_resumeAfter && *step > *s->m_resumeAfter)
            enqueue(*s, event);
}

void TelemetryHub::rememberLocked(const proto::TelemetryEvent &event)
{
    if (!globalStepOf(event))
        return;
    if (m_recent.size() == kRecentEvents)
        m_recent.pop_front();
    m_recent.push_back(event);
}

void TelemetryHub::close()
{
    std::lock_guard lock(m_mutex);
    m_closed = true;
    for (const auto &s : m_subscribers) {
        {
            std::lock_guard subscriberLock(s->m_mutex);
            s->m_closed = true;
        }
        s->m_ready.notify_all();
    }
}

int TelemetryHub::subscriberCount() const
{
    std::lock_guard lock(m_mutex);
    return int(m_subscribers.size());
}

} // namespace parasync
