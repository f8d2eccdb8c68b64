#include "ui/models/timeline_mapping.h"

#include <algorithm>
#include <cmath>

namespace parasync::ui {

double TimelineMapping::mapToX(double value) const
{
    const double s = span();
    if (s <= 0)
        return left;
    return left + (value - start) / s * width;
}

double TimelineMapping::mapFromX(double x) const
{
    if (width <= 0)
        return start;
    return start + (x - left) / width * span();
}

TimelineMapping TimelineMapping::zoomedAt(double x, double factor, double minSpan) const
{
    if (factor <= 0)
        return *this;
    const double anchor = mapFromX(x);
    const double newSpan = std::max(span() / factor, minSpan);
    // The anchor keeps its fraction of the width.
    const double fraction = width > 0 ? (x - left) / width : 0.5;
    TimelineMapping result = *this;
    result.start = anchor - fraction * newSpan;
    result.end = result.start + newSpan;
    return result;
}

TimelineMapping TimelineMapping::pannedBy(double pixels) const
{
    if (width <= 0)
        return *this;
    const double delta = pixels / width * span();
    TimelineMapping result = *this;
    result.start -= delta;
    result.end -= delta;
    return result;
}

TimelineMapping TimelineMapping::endingAt(double head) const
{
    TimelineMapping result = *this;
    const double s = span();
    result.end = head;
    result.start = head - s;
    return result;
}

TimelineMapping TimelineMapping::fitted(double first, double last) const
{
    TimelineMapping result = *this;
    if (!(last > first)) {
        // One point (or none): centre it in a span of one unit.
        result.start = first - 0.5;
        result.end = first + 0.5;
        return result;
    }
    const double margin = (last - first) * 0.02;
    result.start = first - margin;
    result.end = last + margin;
    return result;
}

double niceTickStep(double span, int maxTicks)
{
    if (!(span > 0) || maxTicks < 1 || !std::isfinite(span))
        return 1;
    const double raw = span / maxTicks;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (const double multiple : {1.0, 2.0, 5.0, 10.0}) {
        // With a little tolerance: 2.09 - 2.01 is 0.0800000000000001.
        if (multiple * magnitude >= raw * (1 - 1e-9))
            return multiple * magnitude;
    }
    return 10 * magnitude;
}

std::vector<double> TimelineMapping::ticks(int maxTicks) const
{
    std::vector<double> result;
    if (!(span() > 0) || maxTicks < 1)
        return result;
    const double step = niceTickStep(span(), maxTicks);
    const double first = std::ceil(start / step) * step;
    for (double value = first; value <= end + step * 1e-9; value += step) {
        // Avoid "-0" and accumulated error on round values.
        result.push_back(std::abs(value) < step * 1e-9 ? 0.0 : std::round(value / step) * step);
        if (result.size() > size_t(maxTicks) + 1)
            break;
    }
    return result;
}

} // namespace parasync::ui
