#include "ui/models/timeline_lanes.h"

#include "ui/models/series_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parasync::ui {

TimelineLayout TimelineLayout::forRect(const QRectF &rect, int lanes, double minLaneHeight, int firstLane)
{
    TimelineLayout layout;
    layout.bounds = rect;
    const double titleHeight = 26;
    const double legendHeight = 20;
    const double axisHeight = 40;
    const double labelWidth = 130;
    layout.title = QRectF(rect.left(), rect.top(), rect.width(), titleHeight);
    layout.legend
        = QRectF(rect.left() + labelWidth, rect.top() + titleHeight, rect.width() - labelWidth - 10, legendHeight);
    const double top = rect.top() + titleHeight + legendHeight + 4;
    const double bottom = rect.bottom() - axisHeight;
    layout.plot = QRectF(rect.left() + labelWidth, top, std::max(10.0, rect.width() - labelWidth - 16),
                         std::max(10.0, bottom - top));
    layout.labels = QRectF(rect.left(), top, labelWidth, layout.plot.height());
    layout.axis = QRectF(layout.plot.left(), bottom, layout.plot.width(), axisHeight);
    layout.lanes = std::max(0, lanes);
    layout.laneHeight = layout.plot.height() / std::max(1, lanes);
    layout.visibleLanes = layout.lanes;
    if (minLaneHeight > 0 && layout.laneHeight < minLaneHeight) {
        // As many whole lanes as fit, stretched to fill the plot.
        layout.visibleLanes = std::max(1, int(layout.plot.height() / minLaneHeight));
        layout.laneHeight = layout.plot.height() / layout.visibleLanes;
    }
    layout.firstLane = std::clamp(firstLane, 0, layout.lastFirstLane());
    return layout;
}

int TimelineLayout::laneAt(double y) const
{
    if (laneHeight <= 0 || y < plot.top() || y >= plot.bottom())
        return -1;
    const int lane = firstLane + int((y - plot.top()) / laneHeight);
    return lane < lanes ? lane : -1;
}

int TimelineLayout::labelStride(double textHeight) const
{
    int stride = 1;
    while (double(stride) * laneHeight < textHeight && stride < lanes)
        stride *= 2;
    return stride;
}

TimelineMapping TimelineLayout::onPlot(TimelineMapping range) const
{
    range.left = plot.left();
    range.width = plot.width();
    return range;
}

TimelineLanes::TimelineLanes(TimelineAxis axis) : m_axis(axis) {}

TimelineLanes::TimelineLanes(const RunSnapshot &run, TimelineAxis axis)
    : m_axis(axis)
    , m_globalStep(double(run.globalStep))
{
    for (const auto &worker : run.workers)
        m_laneWorkers.push_back(worker.index);
    for (const auto &step : run.recentSteps)
        if (std::find(m_laneWorkers.begin(), m_laneWorkers.end(), step.worker) == m_laneWorkers.end())
            m_laneWorkers.push_back(step.worker);
    std::sort(m_laneWorkers.begin(), m_laneWorkers.end());

    const StepClock clock(run);
    m_items.reserve(run.recentSteps.size());
    for (const auto &step : run.recentSteps) {
        TimelineItem item;
        item.step = double(step.globalStep);
        item.seconds = step.wallTime - run.startWallTime;
        item.waitUs = step.waitUs;
        item.waitStartSeconds = item.seconds - double(step.waitUs) / 1e6;
        // The span in steps: how far the cluster moved while this worker was held.
        item.waitStartStep = step.waitUs > 0 ? std::min(item.step, clock.stepAt(item.waitStartSeconds)) : item.step;
        item.worker = step.worker;
        item.lane
            = int(std::lower_bound(m_laneWorkers.begin(), m_laneWorkers.end(), step.worker) - m_laneWorkers.begin());
        item.outcome = step.outcome;
        item.waitReason = step.waitReason;
        item.staleness = step.staleness;
        item.workerClock = step.workerClock;
        m_items.push_back(item);
    }
    sortItems();
}

void TimelineLanes::setAxis(TimelineAxis axis)
{
    m_axis = axis;
    sortItems();
}

void TimelineLanes::sortItems()
{
    // Stable, from the order the items had: equal values keep it.
    std::stable_sort(m_items.begin(), m_items.end(),
                     [this](const TimelineItem &a, const TimelineItem &b) { return valueOf(a) < valueOf(b); });
}

TimelineLanes::Iterator TimelineLanes::lowerBound(double value) const
{
    return std::lower_bound(m_items.begin(), m_items.end(), value,
                            [this](const TimelineItem &item, double v) { return valueOf(item) < v; });
}

double TimelineLanes::headValue() const
{
    double head = 0;
    for (auto it = m_items.rbegin(); it != m_items.rend() && it - m_items.rbegin() < 64; ++it)
        head = std::max(head, valueOf(*it));
    if (m_axis == TimelineAxis::GlobalStep)
        head = std::max(head, m_globalStep);
    return head;
}

double TimelineLanes::firstValue() const
{
    return m_items.empty() ? 0 : valueOf(m_items.front());
}

double TimelineLanes::earliestValue() const
{
    double first = firstValue();
    for (const TimelineItem &item : m_items)
        first = std::min(first, waitStartOf(item));
    return first;
}

double TimelineLanes::stepsInLast(double seconds) const
{
    if (m_items.size() < 2)
        return 0;
    double newest = m_items.front().seconds;
    for (auto it = m_items.rbegin(); it != m_items.rend() && it - m_items.rbegin() < 64; ++it)
        newest = std::max(newest, it->seconds);
    double stepsInWindow = 0;
    for (auto it = m_items.rbegin(); it != m_items.rend() && it->seconds >= newest - seconds; ++it)
        stepsInWindow = m_items.back().step - it->step;
    const double recent = m_items.back().step - m_items.front().step;
    return std::min(stepsInWindow, recent);
}

std::vector<TimelineSpan> TimelineLanes::spansIn(const TimelineMapping &range) const
{
    std::vector<TimelineSpan> spans;
    // Holds start before their step: from the first item in view, look a
    // little further left for one whose hold reaches into it.
    auto first = lowerBound(range.start);
    for (int back = 0; first != m_items.begin() && back < 4096; ++back) {
        const auto previous = first - 1;
        if (waitStartOf(*previous) > range.end || valueOf(*previous) < range.start - range.span())
            break;
        first = previous;
    }
    const size_t lanes = m_laneWorkers.size();
    // Per lane, the span being extended; x1 < x0 while there is none.
    std::vector<TimelineSpan> open(lanes, TimelineSpan{0, 0, -1, proto::WORKER_PHASE_UNSPECIFIED});
    const auto flush = [&](size_t lane) {
        TimelineSpan &span = open[lane];
        if (span.x1 >= span.x0)
            spans.push_back(TimelineSpan{int(lane), span.x0, span.x1, span.reason});
        span = TimelineSpan{0, 0, -1, proto::WORKER_PHASE_UNSPECIFIED};
    };
    for (auto it = first; it != m_items.end() && waitStartOf(*it) <= range.end; ++it) {
        if (it->waitUs <= 0 || size_t(it->lane) >= lanes)
            continue;
        const double x0 = range.mapToX(waitStartOf(*it));
        const double x1 = range.mapToX(valueOf(*it));
        TimelineSpan &span = open[size_t(it->lane)];
        if (span.x1 >= span.x0 && span.reason == it->waitReason && x0 <= span.x1 + 1) {
            span.x1 = std::max(span.x1, x1);
            continue;
        }
        flush(size_t(it->lane));
        span = TimelineSpan{it->lane, x0, std::max(x1, x0 + 1), it->waitReason};
    }
    for (size_t lane = 0; lane < lanes; ++lane)
        flush(lane);
    return spans;
}

TimelineMarks TimelineLanes::marksIn(const TimelineMapping &range) const
{
    TimelineMarks marks;
    const size_t lanes = m_laneWorkers.size();
    const double unitsPerPixel = range.span() / std::max(range.width, 1.0);
    marks.dense = m_axis == TimelineAxis::GlobalStep && unitsPerPixel > 1.0;
    const int columns = int(std::ceil(range.width)) + 1;
    const double firstColumn = std::floor(range.left);
    std::vector<int> counts;
    if (marks.dense)
        counts.assign(size_t(columns) * lanes, 0);
    std::vector<int> lastTickColumn(lanes, std::numeric_limits<int>::min());
    for (auto it = lowerBound(range.start); it != m_items.end() && valueOf(*it) <= range.end; ++it) {
        if (size_t(it->lane) >= lanes)
            continue;
        const double x = range.mapToX(valueOf(*it));
        if (it->outcome == proto::DROPPED_STALE) {
            marks.drops.push_back({it->lane, it->worker, x});
            continue;
        }
        const int column = int(std::floor(x));
        if (marks.dense) {
            const int c = std::clamp(column - int(firstColumn), 0, columns - 1);
            ++counts[size_t(it->lane) * size_t(columns) + size_t(c)];
            continue;
        }
        int &last = lastTickColumn[size_t(it->lane)];
        if (column == last)
            continue;
        last = column;
        marks.ticks.push_back({it->lane, it->worker, x});
    }
    if (marks.dense) {
        for (size_t lane = 0; lane < lanes; ++lane) {
            for (int c = 0; c < columns; ++c) {
                const int count = counts[lane * size_t(columns) + size_t(c)];
                if (count > 0)
                    marks.bars.push_back({int(lane), firstColumn + c + 0.5, std::min(1.0, count / unitsPerPixel)});
            }
        }
    }
    return marks;
}

const TimelineItem *TimelineLanes::itemAt(const TimelineLayout &layout, const TimelineMapping &range, QPointF pos) const
{
    const int lane = layout.laneAt(pos.y());
    if (!layout.plot.contains(pos) || lane < 0)
        return nullptr;
    const TimelineMapping map = layout.onPlot(range);
    const double value = map.mapFromX(pos.x());
    const double tolerance = map.span() / map.width * 4;
    const TimelineItem *best = nullptr;
    double bestDistance = tolerance;
    for (auto i = lowerBound(value - tolerance); i != m_items.end() && valueOf(*i) <= value + tolerance; ++i) {
        const double distance = std::abs(valueOf(*i) - value);
        if (i->lane == lane && distance <= bestDistance) {
            best = &*i;
            bestDistance = distance;
        }
    }
    return best;
}

} // namespace parasync::ui
