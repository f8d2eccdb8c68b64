#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace parasync {

// Capped exponential back-off for reconnecting to another task, with a line
// every few seconds that names whom we wait for and why ("cannot reach ps:0
// at 127.0.0.1:2222: connection refused, retrying in 2 s"). Never silent.
class Backoff
{
public:
    Backoff(std::chrono::milliseconds initial = std::chrono::milliseconds(100),
            std::chrono::milliseconds cap = std::chrono::milliseconds(2000));
    // Sleeps for the next interval, logging `what` through `log` if the last
    // line was long enough ago (every ~3 s). Returns false if `stop()` is true.
    bool wait(const std::string &what, const std::function<void(const std::string &)> &log,
              const std::function<bool()> &stop = {});
    void reset();
    std::chrono::milliseconds next() const { return m_next; }

private:
    std::chrono::milliseconds m_initial;
    std::chrono::milliseconds m_cap;
    std::chrono::milliseconds m_next;
    std::chrono::steady_clock::time_point m_lastLog;
    bool m_logged = false;
};

} // namespace parasync
