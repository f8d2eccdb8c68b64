#include "engine/straggler_detector.h"

#include <algorithm>
#include <optional>

namespace parasync {

namespace {

double seconds(std::chrono::steady_clock::duration d)
{
    return std::chrono::duration<double>(d).count();
}

double median(std::vector<double> values)
{
    const size_t middle = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(middle), values.end());
    const double upper = values[middle];
    if (values.size() % 2 == 1)
        return upper;
    const double lower = *std::max_element(values.begin(), values.begin() + std::ptrdiff_t(middle));
    return 0.5 * (lower + upper);
}

} // namespace

StragglerDetector::StragglerDetector() : StragglerDetector(Settings{}) {}

StragglerDetector::StragglerDetector(Settings settings) : m_settings(settings) {}

std::optional<double> StragglerDetector::paceOf(const Worker &worker) const
{
    if (worker.points.size() < 2)
        return std::nullopt;
    const Point &first = worker.points.front();
    const Point &last = worker.points.back();
    const auto span = last.at - first.at;
    if (span < m_settings.window / 2)
        return std::nullopt;
    const double busy = std::max(0.0, seconds(span) - seconds(last.held - first.held));
    // A worker that finished no step in the window takes at least all of it
    // for the one it is in: a frozen worker is the slowest there is.
    return busy / double(std::max<int64_t>(last.steps - first.steps, 1));
}

std::vector<StragglerDetector::Change> StragglerDetector::look(Clock::time_point now, const std::vector<Sample> &live)
{
    for (auto it = m_workers.begin(); it != m_workers.end();) {
        const bool present
            = std::any_of(live.begin(), live.end(), [&](const Sample &sample) { return sample.worker == it->first; });
        it = present ? std::next(it) : m_workers.erase(it);
    }
    std::map<int, double> paces;
    for (const Sample &sample : live) {
        Worker &worker = m_workers[sample.worker];
        // Counts that went back are a new process under the index: its pace
        // starts afresh.
        if (!worker.points.empty()
            && (sample.steps < worker.points.back().steps || sample.held < worker.points.back().held))
            worker.points.clear();
        worker.points.push_back({now, sample.steps, sample.held});
        // Keep the newest point at or before the window's start, so that the
        // points span the whole window once there is that much history.
        while (worker.points.size() > 2 && worker.points[1].at <= now - m_settings.window)
            worker.points.pop_front();
        const std::optional<double> pace = paceOf(worker);
        worker.secondsPerStep = pace.value_or(0.0);
        if (pace)
            paces[sample.worker] = *pace;
    }

    std::vector<Change> changes;
    for (auto &[index, worker] : m_workers) {
        const auto own = paces.find(index);
        std::vector<double> others;
        for (const auto &[other, pace] : paces)
            if (other != index)
                others.push_back(pace);
        if (own == paces.end() || others.empty()) {
            // Not to be judged at this look (too new, or alone): no run of
            // looks goes on through it.
            worker.slowLooks = worker.fineLooks = 0;
            continue;
        }
        const double othersPace = median(std::move(others));
        const double limit = worker.flagged ? 1 + (m_settings.threshold - 1) / 2 : m_settings.threshold;
        if (own->second > limit * othersPace) {
            ++worker.slowLooks;
            worker.fineLooks = 0;
        } else {
            ++worker.fineLooks;
            worker.slowLooks = 0;
        }
        const int persistence = std::max(1, m_settings.persistence);
        if (worker.flagged ? worker.fineLooks >= persistence : worker.slowLooks >= persistence) {
            worker.flagged = !worker.flagged;
            changes.push_back({index, worker.flagged, own->second, othersPace});
        }
    }
    return changes;
}

bool StragglerDetector::flagged(int worker) const
{
    const auto it = m_workers.find(worker);
    return it != m_workers.end() && it->second.flagged;
}

std::vector<int> StragglerDetector::stragglers() const
{
    std::vector<int> flaggedWorkers;
    for (const auto &[index, worker] : m_workers)
        if (worker.flagged)
            flaggedWorkers.push_back(index);
    return flaggedWorkers;
}

double StragglerDetector::secondsPerStep(int worker) const
{
    const auto it = m_workers.find(worker);
    return it == m_workers.end() ? 0.0 : it->second.secondsPerStep;
}

} // namespace parasync
