#include "base/backoff.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace parasync {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds cap)
    : m_initial(initial)
    , m_cap(cap)
    , m_next(initial)
{
}

bool Backoff::wait(const std::string &what, const std::function<void(const std::string &)> &log,
                   const std::function<bool()> &stop)
{
    const auto now = std::chrono::steady_clock::now();
    if (!m_logged || now - m_lastLog >= std::chrono::seconds(3)) {
        if (m_next < std::chrono::milliseconds(100)) {
            log(what + ", asking again");
        } else {
            char seconds[32];
            std::snprintf(seconds, sizeof seconds, "%.1f", double(m_next.count()) / 1000.0);
            log(what + ", retrying in " + seconds + " s");
        }
        m_lastLog = now;
        m_logged = true;
    }
    // Sleep in short slices so a stop request is honoured promptly.
    const auto until = now + m_next;
    while (std::chrono::steady_clock::now() < until) {
        if (stop && stop())
            return false;
        std::this_thread::sleep_for(std::min(m_next, std::chrono::milliseconds(50)));
    }
    m_next = std::min(m_cap, m_next * 2);
    return !(stop && stop());
}

void Backoff::reset()
{
    m_next = m_initial;
    m_logged = false;
}

} // namespace parasync
