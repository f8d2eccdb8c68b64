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

std::shared_ptr<TelemetryHub::Subscription> TelemetryHub::subscribe(size_t capacity)
{
    auto subscription = std::make_shared<Subscription>();
    subscription->m_capacity = capacity > 0 ? capacity : kDefaultCapacity;
    std::lock_guard lock(m_mutex);
    subscription->m_closed = m_closed;
    m_subscribers.push_back(subscription);
    return subscription;
}

void TelemetryHub::unsubscribe(const std::shared_ptr<Subscription> &subscription)
{
    std::lock_guard lock(m_mutex);
    m_subscribers.erase(std::remove(m_subscribers.begin(), m_subscribers.end(), subscription), m_subscribers.end());
}

void TelemetryHub::publish(const proto::TelemetryEvent &event)
{
    std::lock_guard lock(m_mutex);
    for (const auto &s : m_subscribers) {
        bool wake = false;
        {
            std::lock_guard subscriberLock(s->m_mutex);
            if (s->m_queue.size() >= s->m_capacity) {
                s->m_queue.pop_front();
                ++s->m_lost;
            }
            s->m_queue.push_back(event);
            wake = s->m_queue.size() == 1 || s->m_queue.size() == s->m_wakeAt;
        }
        if (wake)
            s->m_ready.notify_one();
    }
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
