#pragma once

// The maths between an axis value (global step, or seconds since the run
// started) and a pixel column of the step timeline, kept apart from the
// widget so that zoom, pan and follow-the-head are tested on their own (as
// hotspot's TimeLineData::mapTimeToX).

#include <vector>

namespace parasync::ui {

struct TimelineMapping
{
    double start = 0; // axis value at the plot's left edge
    double end = 1;   // axis value at the plot's right edge
    double left = 0;  // pixel x of the plot's left edge
    double width = 1; // plot width in pixels

    double span() const { return end - start; }
    double mapToX(double value) const;
    double mapFromX(double x) const;
    bool isVisible(double value) const { return value >= start && value <= end; }

    // Zooms by `factor` (> 1 zooms in) keeping the value under pixel `x`
    // where it is, as a wheel zoom does. The span never shrinks below
    // `minSpan` (zooming into a single step is useless).
    TimelineMapping zoomedAt(double x, double factor, double minSpan) const;
    // Drags the contents `pixels` to the right (the view moves left in time).
    TimelineMapping pannedBy(double pixels) const;
    // Same span, with the right edge at `head` (follow the newest step).
    TimelineMapping endingAt(double head) const;
    // Shows [first, last] with a small margin on both sides.
    TimelineMapping fitted(double first, double last) const;

    // Round tick values (1, 2, 5 × 10^n apart) inside [start, end], at most
    // `maxTicks` of them.
    std::vector<double> ticks(int maxTicks) const;
};

// The step between round ticks for a span, as 1, 2 or 5 × 10^n.
double niceTickStep(double span, int maxTicks);

} // namespace parasync::ui
