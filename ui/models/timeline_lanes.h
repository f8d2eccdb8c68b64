#pragma once

// The step timeline's contents as plain data: one lane per worker, each
// update it pushed as an item placed on both axes (global step and seconds
// since the start), and the maths between them and the plot -- where title,
// legend, lanes and axis sit in a rectangle, which item is under the cursor,
// the held spans merged per pixel, one tick per lane and pixel column or,
// zoomed out, each lane's share of a column. The painter and the view share
// it; no widget here, so it is tested without a window (tst_timeline_lanes).

#include "orchestration/run_state.h"
#include "ui/models/timeline_mapping.h"

#include <QPointF>
#include <QRectF>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace parasync::ui {

enum class TimelineAxis { GlobalStep, WallTime };

// One update a worker pushed, with the time it was held before it.
struct TimelineItem
{
    double step = 0;
    double seconds = 0; // since the run started
    // Where the hold began on each axis; the item's own place when not held.
    double waitStartStep = 0;
    double waitStartSeconds = 0;
    int worker = 0;
    int lane = 0;
    proto::PushOutcome outcome = proto::APPLIED;
    proto::WorkerPhase waitReason = proto::WORKER_PHASE_UNSPECIFIED;
    int64_t waitUs = 0;
    int64_t staleness = 0;
    int64_t workerClock = 0;
};

// Where the parts of the timeline sit in a rectangle: the title across the
// top, the legend under it, the lane names left of the plot, the axis under
// it; the lanes share the plot's height. With a minimum lane height, lanes
// that do not fit are scrolled to: the plot shows `visibleLanes` of them from
// `firstLane` (64 workers in a small window stay lanes a tick can be seen in,
// rather than sub-pixel slivers).
struct TimelineLayout
{
    QRectF bounds; // the whole rectangle
    QRectF title;
    QRectF legend;
    QRectF labels; // lane names, left of the plot
    QRectF plot;
    QRectF axis;
    double laneHeight = 0;
    int lanes = 0;
    int firstLane = 0;
    int visibleLanes = 0;

    // `firstLane` is clamped so that the last lane is at the plot's bottom at most.
    static TimelineLayout forRect(const QRectF &rect, int lanes, double minLaneHeight = 0, int firstLane = 0);
    double laneTop(int lane) const { return plot.top() + double(lane - firstLane) * laneHeight; }
    bool showsLane(int lane) const { return lane >= firstLane && lane < firstLane + visibleLanes; }
    // The lane shown at pixel row `y`; -1 above, below or between no lanes.
    int laneAt(double y) const;
    // The first lane that may be scrolled to, to show the last lane.
    int lastFirstLane() const { return std::max(0, lanes - visibleLanes); }
    // How many neighbouring lanes share one name so that names `textHeight`
    // tall do not overlap: 1 while each lane is tall enough, else a power of
    // two (workers 0-7, 8-15, ... as cluster sizes usually go).
    int labelStride(double textHeight) const;
    // `range` with its pixel extent set to the plot's.
    TimelineMapping onPlot(TimelineMapping range) const;
};

// Time a worker was held, in pixels: neighbouring holds of one reason less
// than a pixel apart are one span.
struct TimelineSpan
{
    int lane = 0;
    double x0 = 0;
    double x1 = 0;
    proto::WorkerPhase reason = proto::WORKER_PHASE_UNSPECIFIED;
};

// What the plot draws for the updates in view. While a step is wider than a
// pixel, one tick per lane and pixel column; once many steps share a column
// (on the step axis), one bar per lane and column instead, as high as the
// lane's share of the column's steps, so that a straggler's lane thins out.
struct TimelineMarks
{
    struct Tick
    {
        int lane = 0;
        int worker = 0;
        double x = 0;
    };
    struct Bar
    {
        int lane = 0;
        double x = 0;     // the column's centre
        double share = 0; // in (0, 1]
    };
    bool dense = false; // bars rather than ticks
    std::vector<Tick> ticks;
    std::vector<Bar> bars;   // lane by lane, left to right
    std::vector<Tick> drops; // dropped stale gradients, each one drawn
};

class TimelineLanes
{
public:
    explicit TimelineLanes(TimelineAxis axis = TimelineAxis::GlobalStep);
    // Every recent step of `run`; a lane for each worker the run lists or a
    // step names, in index order.
    TimelineLanes(const RunSnapshot &run, TimelineAxis axis);

    TimelineAxis axis() const { return m_axis; }
    // Sorts the items by their value on `axis`.
    void setAxis(TimelineAxis axis);
    double valueOf(const TimelineItem &item) const
    {
        return m_axis == TimelineAxis::GlobalStep ? item.step : item.seconds;
    }
    double waitStartOf(const TimelineItem &item) const
    {
        return m_axis == TimelineAxis::GlobalStep ? item.waitStartStep : item.waitStartSeconds;
    }

    const std::vector<TimelineItem> &items() const { return m_items; }    // by value on the axis
    const std::vector<int> &laneWorkers() const { return m_laneWorkers; } // worker index of each lane
    int laneCount() const { return int(m_laneWorkers.size()); }
    bool isEmpty() const { return m_items.empty(); }

    // The newest value on the axis: the largest of the last items (pushes
    // arrive a little out of order), on the step axis at least the run's
    // global step.
    double headValue() const;
    double firstValue() const;
    // Where the earliest item, or the hold before it, begins.
    double earliestValue() const;
    // On the step axis: how many global steps the last `seconds` of the run
    // took, at most all the recent steps there are.
    double stepsInLast(double seconds) const;

    // For a range whose pixel extent is the plot's (TimelineLayout::onPlot):
    std::vector<TimelineSpan> spansIn(const TimelineMapping &range) const;
    TimelineMarks marksIn(const TimelineMapping &range) const;
    // The item within 4 pixels of `pos` in the lane under it, nearest first;
    // null off the plot.
    const TimelineItem *itemAt(const TimelineLayout &layout, const TimelineMapping &range, QPointF pos) const;

private:
    using Iterator = std::vector<TimelineItem>::const_iterator;
    void sortItems();
    // The first item at or after `value`.
    Iterator lowerBound(double value) const;

    TimelineAxis m_axis;
    std::vector<TimelineItem> m_items;
    std::vector<int> m_laneWorkers;
    double m_globalStep = 0;
};

} // namespace parasync::ui
