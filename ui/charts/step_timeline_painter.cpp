#include "ui/charts/step_timeline_painter.h"

#include "ui/models/chart_style.h"

#include <QFontMetricsF>
#include <QPaintDevice>
#include <QPainter>

#include <algorithm>
#include <cmath>

namespace parasync::ui {

namespace {

void drawCross(QPainter *painter, QPointF centre, double size)
{
    painter->drawLine(centre + QPointF(-size, -size), centre + QPointF(size, size));
    painter->drawLine(centre + QPointF(-size, size), centre + QPointF(size, -size));
}

} // namespace

StepTimelinePainter::StepTimelinePainter(const RunSnapshot *snapshot, const TimelineLanes &lanes)
    : m_snapshot(snapshot)
    , m_lanes(lanes)
{
}

void StepTimelinePainter::paint(QPainter *painter, const QRectF &rect, const TimelineMapping &range) const
{
    paint(painter, TimelineLayout::forRect(rect, m_lanes.laneCount()), range);
}

void StepTimelinePainter::paint(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &range) const
{
    const QRectF &rect = layout.bounds;
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing, false);
    const TimelineMapping map = layout.onPlot(range);
    const Fonts fonts = fontsFor(painter);

    paintTitle(painter, layout, fonts);
    const double legendEnd = paintLegend(painter, rect, layout, fonts);
    paintNotes(painter, layout, map, legendEnd);
    paintLanes(painter, layout, fonts);

    painter->setClipRect(layout.plot);
    // Spans first so that ticks sit on top of them.
    paintSpans(painter, layout, map);
    paintUpdates(painter, layout, map);
    paintMarkers(painter, layout, map, fonts);
    painter->setClipping(false);

    if (m_lanes.isEmpty()) {
        painter->setPen(QColor(0x80, 0x80, 0x80));
        painter->setFont(fonts.base);
        painter->drawText(layout.plot, Qt::AlignCenter | Qt::TextWordWrap,
                          tr("No steps yet: start the demo cluster, connect to a running cluster, or open a run "
                             "directory."));
    }
    paintAxis(painter, layout, map, fonts);
    painter->restore();
}

StepTimelinePainter::Fonts StepTimelinePainter::fontsFor(QPainter *painter)
{
    Fonts fonts;
    fonts.base = painter->font();
    // Text as large as on screen (96 dpi) on every device: a PDF or SVG at
    // 72 dpi would otherwise print it at 3/4 the size of the QChart charts'.
    if (const int dpi = painter->device() ? painter->device()->logicalDpiY() : 0;
        dpi > 0 && fonts.base.pointSizeF() > 0)
        fonts.base.setPointSizeF(fonts.base.pointSizeF() * 96.0 / dpi);
    fonts.title = fonts.base;
    fonts.title.setBold(true);
    fonts.title.setPointSizeF(fonts.base.pointSizeF() * 1.25);
    fonts.small = fonts.base;
    fonts.small.setPointSizeF(fonts.base.pointSizeF() * 0.85);
    fonts.text = QColor(0x30, 0x30, 0x30);
    return fonts;
}

void StepTimelinePainter::paintTitle(QPainter *painter, const TimelineLayout &layout, const Fonts &fonts) const
{
    painter->setFont(fonts.title);
    painter->setPen(fonts.text);
    const QString titleText = m_lanes.axis() == TimelineAxis::GlobalStep
                                  ? tr("Step interleaving: which worker did which global step")
                                  : tr("Step interleaving over wall time");
    painter->drawText(layout.title, Qt::AlignCenter, titleText);
}

double StepTimelinePainter::paintLegend(QPainter *painter, const QRectF &rect, const TimelineLayout &layout,
                                        const Fonts &fonts) const
{
    // What the marks mean. In a narrow chart (a report's grid cell) it
    // starts left of the plot, over the lane labels' column, with smaller
    // text, and leaves out the marks this run does not have rather than run
    // off the edge.
    enum class Mark { Applied, Sync, Staleness, Dropped, ModeChange, Failover, Straggler };
    struct LegendEntry
    {
        Mark mark;
        QString label;
        bool shown; // in this run
        double markWidth;
    };
    const auto anyItem = [this](const auto &predicate) {
        return std::any_of(m_lanes.items().begin(), m_lanes.items().end(), predicate);
    };
    std::vector<LegendEntry> legend{
        {Mark::Applied, tr("applied update (worker colour)"), true, 12},
        {Mark::Sync, tr("blocked by sync barrier"),
         anyItem([](const TimelineItem &i) { return i.waitReason == proto::BLOCKED_BY_SYNC; }), 22},
        {Mark::Staleness, tr("blocked by staleness bound"),
         anyItem([](const TimelineItem &i) { return i.waitReason == proto::BLOCKED_BY_STALENESS; }), 22},
        {Mark::Dropped, tr("dropped stale gradient"),
         anyItem([](const TimelineItem &i) { return i.outcome == proto::DROPPED_STALE; }), 14},
        {Mark::ModeChange, tr("mode change"), m_snapshot && !m_snapshot->modeChanges.empty(), 12},
    };
    // Only where ps:0 has a backup (--ps_backup_hosts): elsewhere it would puzzle.
    if (m_snapshot
        && (!m_snapshot->failovers.empty() || m_snapshot->psReplica.role() != proto::REPLICA_ROLE_UNSPECIFIED))
        legend.push_back({Mark::Failover, tr("ps:0 failover"), !m_snapshot->failovers.empty(), 12});
    if (m_snapshot && !m_snapshot->stragglerChanges.empty())
        legend.push_back({Mark::Straggler, tr("straggler flagged (solid) / recovered (dotted)"), true, 12});
    QFont legendFont = fonts.small;
    const auto legendWidth = [&legend, &legendFont, painter] {
        const QFontMetricsF metrics(legendFont, painter->device());
        double total = 0;
        for (const LegendEntry &entry : legend)
            total += entry.markWidth + metrics.horizontalAdvance(entry.label) + 18;
        return total;
    };
    const double roomWithLabels = layout.legend.right() - rect.left() - 8;
    if (const double needed = legendWidth(); needed > roomWithLabels)
        legendFont.setPointSizeF(legendFont.pointSizeF() * std::max(0.8, roomWithLabels / needed));
    if (legendWidth() > roomWithLabels)
        legend.erase(std::remove_if(legend.begin(), legend.end(), [](const LegendEntry &e) { return !e.shown; }),
                     legend.end());
    painter->setFont(legendFont);
    double x = layout.legend.left();
    if (const double needed = legendWidth(); needed > layout.legend.width())
        x = std::max(rect.left() + 8, layout.legend.right() - needed);
    const double ly = layout.legend.center().y();
    for (const LegendEntry &entry : legend) {
        switch (entry.mark) {
        case Mark::Applied:
            painter->setPen(QPen(workerColor(0), 2));
            painter->drawLine(QPointF(x + 4, ly - 6), QPointF(x + 4, ly + 6));
            break;
        case Mark::Sync: painter->fillRect(QRectF(x, ly - 6, 18, 12), waitColor(proto::BLOCKED_BY_SYNC)); break;
        case Mark::Staleness:
            painter->fillRect(QRectF(x, ly - 6, 18, 12), waitColor(proto::BLOCKED_BY_STALENESS));
            break;
        case Mark::Dropped:
            painter->setPen(QPen(droppedColor(), 2));
            drawCross(painter, QPointF(x + 5, ly), 4);
            break;
        case Mark::ModeChange:
        case Mark::Failover:
            painter->setPen(
                QPen(entry.mark == Mark::ModeChange ? modeMarkerColor() : failoverMarkerColor(), 1.5, Qt::DashLine));
            painter->drawLine(QPointF(x + 4, ly - 7), QPointF(x + 4, ly + 7));
            break;
        case Mark::Straggler:
            painter->setPen(QPen(stragglerMarkerColor(), 2));
            painter->drawLine(QPointF(x + 4, ly - 7), QPointF(x + 4, ly + 7));
            break;
        }
        x += entry.markWidth;
        painter->setPen(fonts.text);
        const double w = painter->fontMetrics().horizontalAdvance(entry.label);
        painter->drawText(QRectF(x, layout.legend.top(), w + 4, layout.legend.height()), Qt::AlignVCenter, entry.label);
        x += w + 18;
    }
    return x;
}

void StepTimelinePainter::paintNotes(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map,
                                     double x) const
{
    QStringList notes;
    if (m_lanes.axis() == TimelineAxis::GlobalStep && map.span() / std::max(map.width, 1.0) > 1.0)
        notes.append(tr("zoomed out: bar height = the worker's share of the updates in a pixel column"));
    // The detail is bounded: say where it begins rather than draw an empty past.
    const auto &items = m_lanes.items();
    if (!items.empty() && items.front().step > 1 && map.start < items.front().step)
        notes.append(tr("updates before step %1 are kept only in the other charts").arg(qint64(items.front().step)));
    // The notes take what room the legend leaves: cut short with an
    // ellipsis, or left out when only a few letters would show.
    const double noteRoom = layout.legend.right() - x;
    if (!notes.isEmpty() && noteRoom > 80) {
        painter->setPen(QColor(0x70, 0x70, 0x70));
        const QString note
            = painter->fontMetrics().elidedText(notes.join(QStringLiteral(" \u00b7 ")), Qt::ElideRight, int(noteRoom));
        painter->drawText(QRectF(x, layout.legend.top(), noteRoom, layout.legend.height()),
                          Qt::AlignVCenter | Qt::AlignRight, note);
    }
}

void StepTimelinePainter::paintLanes(QPainter *painter, const TimelineLayout &layout, const Fonts &fonts) const
{
    const QRectF plot = layout.plot;
    painter->fillRect(plot, QColor(0xfa, 0xfa, 0xfa));
    painter->setFont(fonts.base);
    const std::vector<int> &workers = m_lanes.laneWorkers();
    const int stride = layout.labelStride(QFontMetricsF(fonts.base, painter->device()).height());
    if (stride > 1) {
        paintLaneGroups(painter, layout, fonts, stride);
        return;
    }
    for (int lane = layout.firstLane; lane < layout.firstLane + layout.visibleLanes; ++lane) {
        const double top = layout.laneTop(lane);
        const QRectF laneRect(plot.left(), top, plot.width(), layout.laneHeight);
        if (lane % 2 == 1)
            painter->fillRect(laneRect, QColor(0xf0, 0xf0, 0xf0));
        const int worker = workers[size_t(lane)];
        QRectF label(layout.labels.left() + 6, top, layout.labels.width() - 10, layout.laneHeight);
        painter->setPen(workerColor(worker).darker(120));
        painter->setFont(fonts.base);
        const QString state = laneState(worker);
        if (layout.laneHeight >= 34 && !state.isEmpty()) {
            painter->drawText(label.adjusted(0, 0, 0, -layout.laneHeight / 2), Qt::AlignBottom | Qt::AlignLeft,
                              workerName(worker));
            painter->setFont(fonts.small);
            painter->setPen(fonts.text);
            painter->drawText(label.adjusted(0, layout.laneHeight / 2, 0, 0), Qt::AlignTop | Qt::AlignLeft, state);
        } else {
            painter->drawText(label, Qt::AlignVCenter | Qt::AlignLeft, workerName(worker));
        }
    }
}

void StepTimelinePainter::paintLaneGroups(QPainter *painter, const TimelineLayout &layout, const Fonts &fonts,
                                          int stride) const
{
    // Lanes too thin for a name each: neighbouring lanes share a band and
    // one name ("worker:8-15"), the bands shaded alternately, so that every
    // lane is still drawn (a straggler's lane thins out within its band)
    // and the names stay readable. The tooltip names a single lane.
    const std::vector<int> &workers = m_lanes.laneWorkers();
    const int shownEnd = layout.firstLane + layout.visibleLanes;
    painter->save();
    painter->setClipRect(layout.labels.united(layout.plot));
    for (int first = layout.firstLane / stride * stride; first < shownEnd; first += stride) {
        const int last = std::min(first + stride, layout.lanes) - 1;
        const double top = std::max(layout.laneTop(first), layout.plot.top());
        const double bottom = std::min(layout.laneTop(last + 1), layout.plot.bottom());
        if ((first / stride) % 2 == 1)
            painter->fillRect(QRectF(layout.plot.left(), top, layout.plot.width(), bottom - top),
                              QColor(0xf0, 0xf0, 0xf0));
        painter->setPen(QColor(0xdc, 0xdc, 0xdc));
        painter->drawLine(QPointF(layout.labels.left() + 4, top), QPointF(layout.labels.right() - 4, top));
        const QString name
            = first == last
                  ? workerName(workers[size_t(first)])
                  : QStringLiteral("%1\u2013%2").arg(workerName(workers[size_t(first)])).arg(workers[size_t(last)]);
        painter->setPen(fonts.text);
        painter->setFont(fonts.base);
        painter->drawText(QRectF(layout.labels.left() + 6, top, layout.labels.width() - 10, bottom - top),
                          Qt::AlignVCenter | Qt::AlignLeft, name);
    }
    painter->restore();
}

QString StepTimelinePainter::laneState(int worker) const
{
    if (!m_snapshot)
        return {};
    for (const auto &figures : m_snapshot->workers)
        if (figures.index == worker)
            return workerPhaseText(figures.phase) + QStringLiteral(" \u00b7 clock %1").arg(figures.clock);
    return {};
}

void StepTimelinePainter::paintSpans(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map) const
{
    const double inset = std::min(2.0, layout.laneHeight * 0.15);
    for (const TimelineSpan &span : m_lanes.spansIn(map)) {
        if (!layout.showsLane(span.lane))
            continue;
        const double top = layout.laneTop(span.lane);
        painter->fillRect(QRectF(span.x0, top + inset, std::max(1.0, span.x1 - span.x0), layout.laneHeight - 2 * inset),
                          waitColor(span.reason));
    }
}

void StepTimelinePainter::paintUpdates(QPainter *painter, const TimelineLayout &layout,
                                       const TimelineMapping &map) const
{
    const TimelineMarks marks = m_lanes.marksIn(map);
    // Thin lanes (many workers) keep most of their height for the mark.
    const double tickInset = std::max(layout.laneHeight >= 12 ? 2.0 : 0.5, layout.laneHeight * 0.18);
    const double tickWidth = std::clamp(map.width / std::max(map.span(), 1e-9) * 0.6, 1.0, 3.0);
    for (const TimelineMarks::Tick &tick : marks.ticks) {
        if (!layout.showsLane(tick.lane))
            continue;
        const double top = layout.laneTop(tick.lane);
        painter->setPen(QPen(workerColor(tick.worker), tickWidth));
        painter->drawLine(QPointF(tick.x, top + tickInset), QPointF(tick.x, top + layout.laneHeight - tickInset));
    }
    const double full = layout.laneHeight - 2 * tickInset;
    for (const TimelineMarks::Bar &bar : marks.bars) {
        if (!layout.showsLane(bar.lane))
            continue;
        const double bottom = layout.laneTop(bar.lane + 1) - tickInset;
        painter->setPen(QPen(workerColor(m_lanes.laneWorkers()[size_t(bar.lane)]), 1));
        painter->drawLine(QPointF(bar.x, bottom), QPointF(bar.x, bottom - std::max(1.0, bar.share * full)));
    }
    // Drops on top of the ticks.
    painter->setRenderHint(QPainter::Antialiasing, true);
    painter->setPen(QPen(droppedColor(), 2));
    const double crossSize = std::clamp(layout.laneHeight * 0.15, 3.0, 6.0);
    for (const TimelineMarks::Tick &drop : marks.drops)
        if (layout.showsLane(drop.lane))
            drawCross(painter, QPointF(drop.x, layout.laneTop(drop.lane) + layout.laneHeight / 2), crossSize);
}

void StepTimelinePainter::paintMarkers(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map,
                                       const Fonts &fonts) const
{
    if (!m_snapshot)
        return;
    const QRectF plot = layout.plot;
    const bool byStep = m_lanes.axis() == TimelineAxis::GlobalStep;
    painter->setFont(fonts.small);
    int slot = 0;
    const auto marker = [&](int64_t globalStep, double wallTime, const QString &label, const QColor &colour) {
        const double value = byStep ? double(globalStep) : wallTime - m_snapshot->startWallTime;
        if (!map.isVisible(value))
            return;
        const double px = map.mapToX(value);
        painter->setPen(QPen(colour, 1.5, Qt::DashLine));
        painter->drawLine(QPointF(px, plot.top()), QPointF(px, plot.bottom()));
        const double w = painter->fontMetrics().horizontalAdvance(label) + 8;
        const double h = painter->fontMetrics().height() + 2;
        double lx = px + 3;
        if (lx + w > plot.right())
            lx = px - 3 - w;
        // Staggered in three rows so neighbouring markers stay readable.
        const QRectF box(lx, plot.top() + 2 + (slot++ % 3) * (h + 1), w, h);
        painter->setPen(colour);
        painter->setBrush(QColor(255, 255, 255, 225));
        painter->drawRect(box);
        painter->drawText(box, Qt::AlignCenter, label);
    };
    for (const auto &change : m_snapshot->modeChanges)
        marker(change.globalStep, change.wallTime, modeChangeLabel(change), modeMarkerColor());
    for (const auto &failover : m_snapshot->failovers)
        marker(failover.globalStep, failover.wallTime, failoverLabel(failover), failoverMarkerColor());
    paintStragglerMarkers(painter, layout, map);
    painter->setBrush(QColor(0x75, 0x75, 0x75));
    painter->setPen(Qt::NoPen);
    for (const auto &[step, wallTime] : m_snapshot->checkpoints) {
        const double value = byStep ? double(step) : wallTime - m_snapshot->startWallTime;
        if (!map.isVisible(value))
            continue;
        const double px = map.mapToX(value);
        const QPointF tri[3]
            = {QPointF(px, plot.bottom() - 8), QPointF(px - 5, plot.bottom()), QPointF(px + 5, plot.bottom())};
        painter->drawPolygon(tri, 3);
    }
    painter->setBrush(Qt::NoBrush);
}

// In the worker's own lane, so that the flag sits beside the steps that
// earned it: a solid line where ps:0 flagged it, a dotted one where it
// recovered.
void StepTimelinePainter::paintStragglerMarkers(QPainter *painter, const TimelineLayout &layout,
                                                const TimelineMapping &map) const
{
    const bool byStep = m_lanes.axis() == TimelineAxis::GlobalStep;
    const auto &lanes = m_lanes.laneWorkers();
    const QColor colour = stragglerMarkerColor();
    for (const StragglerMarker &change : m_snapshot->stragglerChanges) {
        const int lane = int(std::find(lanes.begin(), lanes.end(), change.worker) - lanes.begin());
        const double value = byStep ? double(change.globalStep) : change.wallTime - m_snapshot->startWallTime;
        if (lane >= int(lanes.size()) || !layout.showsLane(lane) || !map.isVisible(value))
            continue;
        const double px = map.mapToX(value);
        const double top = layout.laneTop(lane);
        painter->setPen(QPen(colour, 2, change.flagged ? Qt::SolidLine : Qt::DotLine));
        painter->drawLine(QPointF(px, top + 1), QPointF(px, top + layout.laneHeight - 1));
        const QString label = change.flagged ? tr("straggler: %1 s a step").arg(change.secondsPerStep, 0, 'f', 3)
                                             : tr("no longer a straggler");
        const double w = painter->fontMetrics().horizontalAdvance(label) + 8;
        const double h = painter->fontMetrics().height() + 2;
        if (h > layout.laneHeight)
            continue; // lanes too thin for a label: the line says it
        double lx = px + 3;
        if (lx + w > layout.plot.right())
            lx = px - 3 - w;
        const QRectF box(lx, top + 2, w, h);
        painter->setPen(colour);
        painter->setBrush(QColor(255, 255, 255, 225));
        painter->drawRect(box);
        painter->drawText(box, Qt::AlignCenter, label);
        painter->setBrush(Qt::NoBrush);
    }
}

void StepTimelinePainter::paintAxis(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map,
                                    const Fonts &fonts) const
{
    const QRectF plot = layout.plot;
    painter->setRenderHint(QPainter::Antialiasing, false);
    painter->setPen(QColor(0xb0, 0xb0, 0xb0));
    painter->drawRect(plot);
    painter->setFont(fonts.small);
    painter->setPen(fonts.text);
    const int maxTicks = std::max(2, int(plot.width() / 90));
    for (const double tick : map.ticks(maxTicks)) {
        const double px = map.mapToX(tick);
        painter->drawLine(QPointF(px, plot.bottom()), QPointF(px, plot.bottom() + 4));
        painter->drawText(QRectF(px - 50, plot.bottom() + 5, 100, 14), Qt::AlignHCenter | Qt::AlignTop,
                          axisLabel(tick));
    }
    painter->setFont(fonts.base);
    painter->drawText(QRectF(layout.axis.left(), layout.axis.top() + 20, layout.axis.width(), 18), Qt::AlignCenter,
                      m_lanes.axis() == TimelineAxis::GlobalStep ? tr("global step")
                                                                 : tr("wall time (seconds since start)"));
}

QString StepTimelinePainter::axisLabel(double value) const
{
    if (m_lanes.axis() == TimelineAxis::GlobalStep)
        return QString::number(qint64(std::llround(value)));
    return QString::number(value, 'g', 4);
}

} // namespace parasync::ui
