#include "ui/step_timeline_view.h"

#include "ui/models/chart_style.h"
#include "config/node_options.h"
#include "formats/run_log.h"
#include "ui/models/series_math.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFontMetricsF>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QPushButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace parasync::ui {

namespace {

QString phaseText(const WorkerFigures &worker)
{
    switch (worker.phase) {
    case proto::WAITING_FOR_CHIEF:
        return QObject::tr("waiting for the chief");
    case proto::TRAINING:
        return QObject::tr("training");
    case proto::BLOCKED_BY_SYNC:
        return QObject::tr("blocked by sync");
    case proto::BLOCKED_BY_STALENESS:
        return QObject::tr("blocked by staleness");
    case proto::FINISHED:
        return QObject::tr("finished");
    case proto::DEAD:
        return QObject::tr("dead");
    case proto::STOPPED:
        return QObject::tr("stopped");
    default:
        return QObject::tr("not seen yet");
    }
}

// The step log's own name, so the CSV and the run directory agree.
QString outcomeText(proto::PushOutcome outcome)
{
    return QLatin1String(outcomeName(outcome));
}

QString reasonText(proto::WorkerPhase reason)
{
    switch (reason) {
    case proto::BLOCKED_BY_SYNC:
        return QStringLiteral("sync_barrier");
    case proto::BLOCKED_BY_STALENESS:
        return QStringLiteral("staleness_bound");
    default:
        return QString();
    }
}

void drawCross(QPainter *painter, QPointF centre, double size)
{
    painter->drawLine(centre + QPointF(-size, -size), centre + QPointF(size, size));
    painter->drawLine(centre + QPointF(-size, size), centre + QPointF(size, -size));
}

} // namespace

StepTimelineView::StepTimelineView(QWidget *parent)
    : QWidget(parent)
{
    setMouseTracking(false);
    setMinimumHeight(180);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setFocusPolicy(Qt::WheelFocus);
    m_mapping.start = 0;
    m_mapping.end = m_stepSpan;
}

void StepTimelineView::setSnapshot(std::shared_ptr<const RunSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    m_items.clear();
    m_laneWorkers.clear();
    if (!m_snapshot) {
        update();
        return;
    }
    const RunSnapshot &run = *m_snapshot;
    for (const auto &worker : run.workers)
        m_laneWorkers.push_back(worker.index);
    for (const auto &step : run.recentSteps)
        if (std::find(m_laneWorkers.begin(), m_laneWorkers.end(), step.worker) == m_laneWorkers.end())
            m_laneWorkers.push_back(step.worker);
    std::sort(m_laneWorkers.begin(), m_laneWorkers.end());

    const StepClock clock(run);
    m_items.reserve(run.recentSteps.size());
    for (const auto &step : run.recentSteps) {
        Item item;
        item.step = double(step.globalStep);
        item.seconds = step.wallTime - run.startWallTime;
        item.waitUs = step.waitUs;
        item.waitStartSeconds = item.seconds - double(step.waitUs) / 1e6;
        // The span in steps: how far the cluster moved while this worker was held.
        item.waitStartStep = step.waitUs > 0 ? std::min(item.step, clock.stepAt(item.waitStartSeconds)) : item.step;
        item.worker = step.worker;
        item.lane = int(std::lower_bound(m_laneWorkers.begin(), m_laneWorkers.end(), step.worker)
                        - m_laneWorkers.begin());
        item.outcome = step.outcome;
        item.waitReason = step.waitReason;
        item.staleness = step.staleness;
        item.workerClock = step.workerClock;
        m_items.push_back(item);
    }
    sortItems();
    if (m_follow)
        applyFollow();
    update();
}

void StepTimelineView::sortItems()
{
    std::stable_sort(m_items.begin(), m_items.end(),
                     [this](const Item &a, const Item &b) { return valueOf(a) < valueOf(b); });
}

double StepTimelineView::headValue() const
{
    double head = 0;
    for (auto it = m_items.rbegin(); it != m_items.rend() && it - m_items.rbegin() < 64; ++it)
        head = std::max(head, valueOf(*it));
    if (m_snapshot && m_axis == Axis::GlobalStep)
        head = std::max(head, double(m_snapshot->globalStep));
    return head;
}

double StepTimelineView::firstValue() const
{
    return m_items.empty() ? 0 : valueOf(m_items.front());
}

double StepTimelineView::followedSpan() const
{
    if (m_axis != Axis::GlobalStep || !m_autoSpan)
        return m_mapping.span();
    const double span = m_stepSpan; // the default, while the user has not zoomed
    if (m_items.size() < 2)
        return span;
    // At a human pace 200 steps are some seconds of the run; at full speed
    // (thousands of steps a second) the same 200 would scroll past dozens
    // of times a second. Show at least kSeconds of steps -- at most all the
    // recent steps there are -- and the lanes turn into the workers' shares
    // of each pixel column, which is what can be read at that speed.
    constexpr double kSeconds = 4;
    double newest = m_items.front().seconds;
    for (auto it = m_items.rbegin(); it != m_items.rend() && it - m_items.rbegin() < 64; ++it)
        newest = std::max(newest, it->seconds);
    double stepsInWindow = 0;
    for (auto it = m_items.rbegin(); it != m_items.rend() && it->seconds >= newest - kSeconds; ++it)
        stepsInWindow = m_items.back().step - it->step;
    const double recent = m_items.back().step - m_items.front().step;
    return std::max(span, std::min(stepsInWindow, recent));
}

void StepTimelineView::applyFollow()
{
    const double head = headValue();
    const double span = followedSpan();
    const double margin = span * 0.02;
    // Early in a run the head is left of a full span: show from the start.
    const double end = std::max(head + margin, firstValue() + span);
    m_mapping.start = end - span;
    m_mapping.end = end;
}

void StepTimelineView::setAxis(Axis axis)
{
    if (axis == m_axis)
        return;
    // Remember the zoom of each axis.
    if (m_axis == Axis::GlobalStep && !m_autoSpan)
        m_stepSpan = m_mapping.span(); // the user's zoom, not the pace's
    else
        m_secondSpan = m_mapping.span();
    m_axis = axis;
    const double span = m_axis == Axis::GlobalStep ? m_stepSpan : m_secondSpan;
    m_mapping.start = 0;
    m_mapping.end = span;
    sortItems();
    if (m_follow)
        applyFollow();
    else
        m_mapping = fittedRange();
    update();
}

void StepTimelineView::setFollowHead(bool follow)
{
    if (follow == m_follow)
        return;
    m_follow = follow;
    if (m_follow)
        applyFollow();
    update();
    Q_EMIT followHeadChanged(m_follow);
}

TimelineMapping StepTimelineView::fittedRange() const
{
    TimelineMapping range = m_mapping;
    if (m_items.empty())
        return range;
    double first = valueOf(m_items.front());
    for (const Item &item : m_items)
        first = std::min(first, waitStartOf(item));
    range = range.fitted(first, headValue());
    if (range.span() < minimumSpan())
        range.end = range.start + minimumSpan();
    return range;
}

void StepTimelineView::fitAll()
{
    m_mapping = fittedRange();
    setFollowHead(false);
    update();
}

StepTimelineView::Layout StepTimelineView::layoutFor(const QRectF &rect) const
{
    Layout layout;
    const double titleHeight = 26;
    const double legendHeight = 20;
    const double axisHeight = 40;
    const double labelWidth = 130;
    layout.title = QRectF(rect.left(), rect.top(), rect.width(), titleHeight);
    layout.legend = QRectF(rect.left() + labelWidth, rect.top() + titleHeight, rect.width() - labelWidth - 10,
                           legendHeight);
    const double top = rect.top() + titleHeight + legendHeight + 4;
    const double bottom = rect.bottom() - axisHeight;
    layout.plot = QRectF(rect.left() + labelWidth, top, std::max(10.0, rect.width() - labelWidth - 16),
                         std::max(10.0, bottom - top));
    layout.labels = QRectF(rect.left(), top, labelWidth, layout.plot.height());
    layout.axis = QRectF(layout.plot.left(), bottom, layout.plot.width(), axisHeight);
    const int lanes = std::max<int>(1, int(m_laneWorkers.size()));
    layout.laneHeight = layout.plot.height() / lanes;
    return layout;
}

void StepTimelineView::updateMappingGeometry()
{
    const Layout layout = layoutFor(QRectF(rect()));
    m_mapping.left = layout.plot.left();
    m_mapping.width = layout.plot.width();
}

void StepTimelineView::resizeEvent(QResizeEvent *event)
{
    QWidget::resizeEvent(event);
    updateMappingGeometry();
}

QString StepTimelineView::axisLabel(double value) const
{
    if (m_axis == Axis::GlobalStep)
        return QString::number(qint64(std::llround(value)));
    return QString::number(value, 'g', 4);
}

int StepTimelineView::modeMarkerCount() const
{
    return m_snapshot ? int(m_snapshot->modeChanges.size()) : 0;
}

void StepTimelineView::paintEvent(QPaintEvent *)
{
    QPainter painter(this);
    painter.fillRect(rect(), palette().base());
    paintTimeline(&painter, QRectF(rect()));
}

void StepTimelineView::paintTimeline(QPainter *painter, const QRectF &rect, const TimelineMapping *range) const
{
    painter->save();
    painter->setRenderHint(QPainter::Antialiasing, false);
    const Layout layout = layoutFor(rect);
    TimelineMapping map = range ? *range : m_mapping;
    map.left = layout.plot.left();
    map.width = layout.plot.width();

    QFont base = painter->font();
    // Text as large as on screen (96 dpi) on every device: a PDF or SVG at
    // 72 dpi would otherwise print it at 3/4 the size of the QChart charts'.
    if (const int dpi = painter->device() ? painter->device()->logicalDpiY() : 0; dpi > 0 && base.pointSizeF() > 0)
        base.setPointSizeF(base.pointSizeF() * 96.0 / dpi);
    QFont titleFont = base;
    titleFont.setBold(true);
    titleFont.setPointSizeF(base.pointSizeF() * 1.25);
    QFont small = base;
    small.setPointSizeF(base.pointSizeF() * 0.85);
    const QColor text(0x30, 0x30, 0x30);

    // Title.
    painter->setFont(titleFont);
    painter->setPen(text);
    const QString titleText = m_axis == Axis::GlobalStep
        ? tr("Step interleaving: which worker did which global step")
        : tr("Step interleaving over wall time");
    painter->drawText(layout.title, Qt::AlignCenter, titleText);

    // Legend: what the marks mean. In a narrow chart (a report's grid cell)
    // it starts left of the plot, over the lane labels' column, with smaller
    // text, and leaves out the marks this run does not have rather than run
    // off the edge.
    enum class Mark { Applied, Sync, Staleness, Dropped, ModeChange };
    struct LegendEntry
    {
        Mark mark;
        QString label;
        bool shown; // in this run
        double markWidth;
    };
    const auto anyItem = [this](const auto &predicate) {
        return std::any_of(m_items.begin(), m_items.end(), predicate);
    };
    std::vector<LegendEntry> legend{
        {Mark::Applied, tr("applied update (worker colour)"), true, 12},
        {Mark::Sync, tr("blocked by sync barrier"),
         anyItem([](const Item &i) { return i.waitReason == proto::BLOCKED_BY_SYNC; }), 22},
        {Mark::Staleness, tr("blocked by staleness bound"),
         anyItem([](const Item &i) { return i.waitReason == proto::BLOCKED_BY_STALENESS; }), 22},
        {Mark::Dropped, tr("dropped stale gradient"),
         anyItem([](const Item &i) { return i.outcome == proto::DROPPED_STALE; }), 14},
        {Mark::ModeChange, tr("mode change"), m_snapshot && !m_snapshot->modeChanges.empty(), 12},
    };
    QFont legendFont = small;
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
        case Mark::Sync:
            painter->fillRect(QRectF(x, ly - 6, 18, 12), waitColor(proto::BLOCKED_BY_SYNC));
            break;
        case Mark::Staleness:
            painter->fillRect(QRectF(x, ly - 6, 18, 12), waitColor(proto::BLOCKED_BY_STALENESS));
            break;
        case Mark::Dropped:
            painter->setPen(QPen(droppedColor(), 2));
            drawCross(painter, QPointF(x + 5, ly), 4);
            break;
        case Mark::ModeChange:
            painter->setPen(QPen(modeMarkerColor(), 1.5, Qt::DashLine));
            painter->drawLine(QPointF(x + 4, ly - 7), QPointF(x + 4, ly + 7));
            break;
        }
        x += entry.markWidth;
        painter->setPen(text);
        const double w = painter->fontMetrics().horizontalAdvance(entry.label);
        painter->drawText(QRectF(x, layout.legend.top(), w + 4, layout.legend.height()), Qt::AlignVCenter, entry.label);
        x += w + 18;
    }
    QStringList notes;
    if (m_axis == Axis::GlobalStep && map.span() / std::max(map.width, 1.0) > 1.0)
        notes.append(tr("zoomed out: bar height = the worker's share of the updates in a pixel column"));
    // The detail is bounded: say where it begins rather than draw an empty past.
    if (!m_items.empty() && m_items.front().step > 1 && map.start < m_items.front().step)
        notes.append(tr("updates before step %1 are kept only in the other charts").arg(qint64(m_items.front().step)));
    // The notes take what room the legend leaves: cut short with an
    // ellipsis, or left out when only a few letters would show.
    const double noteRoom = layout.legend.right() - x;
    if (!notes.isEmpty() && noteRoom > 80) {
        painter->setPen(QColor(0x70, 0x70, 0x70));
        const QString note = painter->fontMetrics().elidedText(notes.join(QStringLiteral(" \u00b7 ")), Qt::ElideRight,
                                                               int(noteRoom));
        painter->drawText(QRectF(x, layout.legend.top(), noteRoom, layout.legend.height()),
                          Qt::AlignVCenter | Qt::AlignRight, note);
    }

    // Lanes.
    const QRectF plot = layout.plot;
    painter->fillRect(plot, QColor(0xfa, 0xfa, 0xfa));
    painter->setFont(base);
    for (size_t lane = 0; lane < m_laneWorkers.size(); ++lane) {
        const double top = plot.top() + double(lane) * layout.laneHeight;
        const QRectF laneRect(plot.left(), top, plot.width(), layout.laneHeight);
        if (lane % 2 == 1)
            painter->fillRect(laneRect, QColor(0xf0, 0xf0, 0xf0));
        const int worker = m_laneWorkers[lane];
        QRectF label(layout.labels.left() + 6, top, layout.labels.width() - 10, layout.laneHeight);
        painter->setPen(workerColor(worker).darker(120));
        painter->setFont(base);
        QString state;
        if (m_snapshot) {
            for (const auto &figures : m_snapshot->workers)
                if (figures.index == worker)
                    state = phaseText(figures) + QStringLiteral(" \u00b7 clock %1").arg(figures.clock);
        }
        if (layout.laneHeight >= 34 && !state.isEmpty()) {
            painter->drawText(label.adjusted(0, 0, 0, -layout.laneHeight / 2), Qt::AlignBottom | Qt::AlignLeft,
                              workerName(worker));
            painter->setFont(small);
            painter->setPen(text);
            painter->drawText(label.adjusted(0, layout.laneHeight / 2, 0, 0), Qt::AlignTop | Qt::AlignLeft, state);
        } else {
            painter->drawText(label, Qt::AlignVCenter | Qt::AlignLeft, workerName(worker));
        }
    }

    painter->setClipRect(plot);
    // Items overlapping the view: binary search on the sorted axis value;
    // wait spans start before their step, so look a little further left.
    const auto begin = std::lower_bound(m_items.begin(), m_items.end(), map.start,
                                        [this](const Item &item, double v) { return valueOf(item) < v; });
    auto first = begin;
    for (int back = 0; first != m_items.begin() && back < 4096; ++back) {
        const auto previous = first - 1;
        if (waitStartOf(*previous) > map.end || valueOf(*previous) < map.start - map.span())
            break;
        first = previous;
    }
    const size_t lanes = m_laneWorkers.size();
    std::vector<int> lastTickColumn(lanes, std::numeric_limits<int>::min());
    struct Span
    {
        double x0 = 0, x1 = -1;
        proto::WorkerPhase reason = proto::WORKER_PHASE_UNSPECIFIED;
    };
    std::vector<Span> openSpan(lanes);
    const auto flushSpan = [&](size_t lane) {
        Span &span = openSpan[lane];
        if (span.x1 >= span.x0) {
            const double top = plot.top() + double(lane) * layout.laneHeight;
            painter->fillRect(QRectF(span.x0, top + 2, std::max(1.0, span.x1 - span.x0), layout.laneHeight - 4),
                              waitColor(span.reason));
        }
        span = Span{};
    };
    // Spans first so that ticks sit on top of them.
    for (auto it = first; it != m_items.end() && waitStartOf(*it) <= map.end; ++it) {
        if (it->waitUs <= 0 || size_t(it->lane) >= lanes)
            continue;
        const double x0 = map.mapToX(waitStartOf(*it));
        const double x1 = map.mapToX(valueOf(*it));
        Span &span = openSpan[size_t(it->lane)];
        if (span.x1 >= span.x0 && span.reason == it->waitReason && x0 <= span.x1 + 1) {
            span.x1 = std::max(span.x1, x1);
            continue;
        }
        flushSpan(size_t(it->lane));
        span = Span{x0, std::max(x1, x0 + 1), it->waitReason};
    }
    for (size_t lane = 0; lane < lanes; ++lane)
        flushSpan(lane);

    // Ticks, one per update while steps are wider than a pixel; once many
    // updates share a pixel column, one bar per column and lane whose height
    // is this worker's share of the column's updates (so a straggler's lane
    // thins out). Drops are drawn on top.
    const double tickInset = std::max(2.0, layout.laneHeight * 0.18);
    const double unitsPerPixel = map.span() / std::max(map.width, 1.0);
    const bool dense = m_axis == Axis::GlobalStep ? unitsPerPixel > 1.0 : false;
    std::vector<const Item *> drops;
    const int columns = int(std::ceil(map.width)) + 1;
    std::vector<int> counts;
    if (dense)
        counts.assign(size_t(columns) * lanes, 0);
    for (auto it = begin; it != m_items.end() && valueOf(*it) <= map.end; ++it) {
        if (size_t(it->lane) >= lanes)
            continue;
        if (it->outcome == proto::DROPPED_STALE) {
            drops.push_back(&*it);
            continue;
        }
        const double px = map.mapToX(valueOf(*it));
        const int column = int(std::floor(px));
        if (dense) {
            const int c = std::clamp(column - int(std::floor(map.left)), 0, columns - 1);
            ++counts[size_t(it->lane) * size_t(columns) + size_t(c)];
            continue;
        }
        int &last = lastTickColumn[size_t(it->lane)];
        if (column == last)
            continue;
        last = column;
        const double top = plot.top() + double(it->lane) * layout.laneHeight;
        painter->setPen(QPen(workerColor(it->worker), std::clamp(map.width / std::max(map.span(), 1e-9) * 0.6, 1.0, 3.0)));
        painter->drawLine(QPointF(px, top + tickInset), QPointF(px, top + layout.laneHeight - tickInset));
    }
    if (dense) {
        const double full = layout.laneHeight - 2 * tickInset;
        for (size_t lane = 0; lane < lanes; ++lane) {
            const double bottom = plot.top() + double(lane + 1) * layout.laneHeight - tickInset;
            painter->setPen(QPen(workerColor(m_laneWorkers[lane]), 1));
            for (int c = 0; c < columns; ++c) {
                const int count = counts[lane * size_t(columns) + size_t(c)];
                if (count == 0)
                    continue;
                const double share = std::min(1.0, count / unitsPerPixel);
                const double x0 = std::floor(map.left) + c + 0.5;
                painter->drawLine(QPointF(x0, bottom), QPointF(x0, bottom - std::max(1.0, share * full)));
            }
        }
    }
    painter->setRenderHint(QPainter::Antialiasing, true);
    painter->setPen(QPen(droppedColor(), 2));
    const double crossSize = std::clamp(layout.laneHeight * 0.15, 3.0, 6.0);
    for (const Item *item : drops) {
        const double top = plot.top() + double(item->lane) * layout.laneHeight;
        drawCross(painter, QPointF(map.mapToX(valueOf(*item)), top + layout.laneHeight / 2), crossSize);
    }

    // Mode changes and checkpoints.
    if (m_snapshot) {
        painter->setFont(small);
        int slot = 0;
        for (const auto &change : m_snapshot->modeChanges) {
            const double value = m_axis == Axis::GlobalStep ? double(change.globalStep)
                                                            : change.wallTime - m_snapshot->startWallTime;
            if (!map.isVisible(value))
                continue;
            const double px = map.mapToX(value);
            painter->setPen(QPen(modeMarkerColor(), 1.5, Qt::DashLine));
            painter->drawLine(QPointF(px, plot.top()), QPointF(px, plot.bottom()));
            const QString label = QStringLiteral("\u2192 %1 @ %2").arg(shortModeLabel(change.current)).arg(change.globalStep);
            const double w = painter->fontMetrics().horizontalAdvance(label) + 8;
            const double h = painter->fontMetrics().height() + 2;
            double lx = px + 3;
            if (lx + w > plot.right())
                lx = px - 3 - w;
            const QRectF box(lx, plot.top() + 2 + (slot++ % 3) * (h + 1), w, h);
            painter->setPen(modeMarkerColor());
            painter->setBrush(QColor(255, 255, 255, 225));
            painter->drawRect(box);
            painter->drawText(box, Qt::AlignCenter, label);
        }
        painter->setBrush(QColor(0x75, 0x75, 0x75));
        painter->setPen(Qt::NoPen);
        for (const auto &[step, wallTime] : m_snapshot->checkpoints) {
            const double value = m_axis == Axis::GlobalStep ? double(step) : wallTime - m_snapshot->startWallTime;
            if (!map.isVisible(value))
                continue;
            const double px = map.mapToX(value);
            const QPointF tri[3] = {QPointF(px, plot.bottom() - 8), QPointF(px - 5, plot.bottom()),
                                    QPointF(px + 5, plot.bottom())};
            painter->drawPolygon(tri, 3);
        }
        painter->setBrush(Qt::NoBrush);
    }
    painter->setClipping(false);

    if (m_items.empty()) {
        painter->setPen(QColor(0x80, 0x80, 0x80));
        painter->setFont(base);
        painter->drawText(plot, Qt::AlignCenter | Qt::TextWordWrap,
                          tr("No steps yet: start the demo cluster, connect to a running cluster, or open a run "
                             "directory."));
    }

    // Frame and axis.
    painter->setRenderHint(QPainter::Antialiasing, false);
    painter->setPen(QColor(0xb0, 0xb0, 0xb0));
    painter->drawRect(plot);
    painter->setFont(small);
    painter->setPen(text);
    const int maxTicks = std::max(2, int(plot.width() / 90));
    for (const double tick : map.ticks(maxTicks)) {
        const double px = map.mapToX(tick);
        painter->drawLine(QPointF(px, plot.bottom()), QPointF(px, plot.bottom() + 4));
        const QString label = axisLabel(tick);
        painter->drawText(QRectF(px - 50, plot.bottom() + 5, 100, 14), Qt::AlignHCenter | Qt::AlignTop, label);
    }
    painter->setFont(base);
    painter->drawText(QRectF(layout.axis.left(), layout.axis.top() + 20, layout.axis.width(), 18), Qt::AlignCenter,
                      m_axis == Axis::GlobalStep ? tr("global step") : tr("wall time (seconds since start)"));
    painter->restore();
}

void StepTimelineView::wheelEvent(QWheelEvent *event)
{
    const double degrees = event->angleDelta().y() / 8.0;
    if (degrees == 0) {
        event->ignore();
        return;
    }
    const double factor = std::pow(1.25, degrees / 15.0);
    const double x = event->position().x();
    m_autoSpan = false; // the user's zoom from now on
    if (m_follow) {
        // Zooming while following keeps the head at the right edge.
        m_mapping = m_mapping.zoomedAt(m_mapping.left + m_mapping.width, factor, minimumSpan());
        applyFollow();
    } else {
        m_mapping = m_mapping.zoomedAt(x, factor, minimumSpan());
    }
    update();
    event->accept();
}

void StepTimelineView::mousePressEvent(QMouseEvent *event)
{
    if (event->button() == Qt::LeftButton) {
        m_dragging = true;
        m_dragLastX = event->position().x();
        setCursor(Qt::ClosedHandCursor);
    }
    QWidget::mousePressEvent(event);
}

void StepTimelineView::mouseMoveEvent(QMouseEvent *event)
{
    if (m_dragging) {
        const double dx = event->position().x() - m_dragLastX;
        m_dragLastX = event->position().x();
        if (dx != 0) {
            // Panning means looking at the past: stop following.
            setFollowHead(false);
            m_mapping = m_mapping.pannedBy(dx);
            update();
        }
    }
    QWidget::mouseMoveEvent(event);
}

void StepTimelineView::mouseReleaseEvent(QMouseEvent *event)
{
    if (event->button() == Qt::LeftButton) {
        m_dragging = false;
        unsetCursor();
    }
    QWidget::mouseReleaseEvent(event);
}

void StepTimelineView::mouseDoubleClickEvent(QMouseEvent *event)
{
    fitAll();
    QWidget::mouseDoubleClickEvent(event);
}

const StepTimelineView::Item *StepTimelineView::itemAt(const QPointF &pos) const
{
    const Layout layout = layoutFor(QRectF(rect()));
    if (!layout.plot.contains(pos) || m_laneWorkers.empty())
        return nullptr;
    const int lane = int((pos.y() - layout.plot.top()) / layout.laneHeight);
    TimelineMapping map = m_mapping;
    map.left = layout.plot.left();
    map.width = layout.plot.width();
    const double value = map.mapFromX(pos.x());
    const double tolerance = map.span() / map.width * 4;
    const auto it = std::lower_bound(m_items.begin(), m_items.end(), value - tolerance,
                                     [this](const Item &item, double v) { return valueOf(item) < v; });
    const Item *best = nullptr;
    double bestDistance = tolerance;
    for (auto i = it; i != m_items.end() && valueOf(*i) <= value + tolerance; ++i) {
        const double distance = std::abs(valueOf(*i) - value);
        if (i->lane == lane && distance <= bestDistance) {
            best = &*i;
            bestDistance = distance;
        }
    }
    return best;
}

bool StepTimelineView::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *help = static_cast<QHelpEvent *>(event);
        if (const Item *item = itemAt(help->pos())) {
            QString text = tr("%1: global step %2, worker clock %3, staleness %4, %5")
                               .arg(workerName(item->worker))
                               .arg(qint64(item->step))
                               .arg(item->workerClock)
                               .arg(item->staleness)
                               .arg(outcomeText(item->outcome));
            if (item->waitUs > 0)
                text += tr("\nheld %1 ms (%2)")
                            .arg(double(item->waitUs) / 1000.0, 0, 'f', 1)
                            .arg(item->waitReason == proto::BLOCKED_BY_SYNC ? tr("sync barrier")
                                                                             : tr("staleness bound"));
            QToolTip::showText(help->globalPos(), text, this);
        } else {
            QToolTip::hideText();
        }
        return true;
    }
    return QWidget::event(event);
}

CsvTable StepTimelineView::csv() const
{
    CsvTable table;
    table.header = {QStringLiteral("worker"),     QStringLiteral("global_step"), QStringLiteral("seconds_since_start"),
                    QStringLiteral("worker_clock"), QStringLiteral("staleness"), QStringLiteral("outcome"),
                    QStringLiteral("wait_us"),    QStringLiteral("wait_reason")};
    if (!m_snapshot)
        return table;
    for (const auto &step : m_snapshot->recentSteps)
        table.rows.push_back({workerName(step.worker), QString::number(step.globalStep),
                              QString::number(step.wallTime - m_snapshot->startWallTime, 'f', 6),
                              QString::number(step.workerClock), QString::number(step.staleness),
                              outcomeText(step.outcome), QString::number(step.waitUs), reasonText(step.waitReason)});
    return table;
}

StepTimelineChart::StepTimelineChart(QWidget *parent)
    : ChartWidget(parent)
    , m_view(new StepTimelineView(this))
    , m_axisChoice(new QComboBox(this))
    , m_follow(new QCheckBox(tr("Follow the newest step"), this))
{
    m_axisChoice->addItem(tr("x axis: global step"));
    m_axisChoice->addItem(tr("x axis: wall time"));
    m_axisChoice->setObjectName(QStringLiteral("timelineAxis"));
    m_follow->setChecked(m_view->followHead());
    m_follow->setObjectName(QStringLiteral("timelineFollow"));
    auto *fit = new QPushButton(tr("Fit all"), this);
    fit->setToolTip(tr("Show every recent step (double-click the timeline does the same)"));
    auto *hint = new QLabel(tr("Wheel: zoom \u00b7 drag: pan \u00b7 hover a tick for details"), this);
    hint->setStyleSheet(QStringLiteral("color: gray"));
    connect(m_axisChoice, &QComboBox::currentIndexChanged, this, [this](int index) {
        m_view->setAxis(index == 0 ? StepTimelineView::Axis::GlobalStep : StepTimelineView::Axis::WallTime);
    });
    connect(m_follow, &QCheckBox::toggled, m_view, &StepTimelineView::setFollowHead);
    connect(m_view, &StepTimelineView::followHeadChanged, m_follow, &QCheckBox::setChecked);
    connect(fit, &QPushButton::clicked, m_view, &StepTimelineView::fitAll);

    auto *controls = new QHBoxLayout;
    controls->addWidget(m_axisChoice);
    controls->addWidget(m_follow);
    controls->addWidget(fit);
    controls->addSpacing(12);
    controls->addWidget(hint);
    controls->addStretch(1);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(controls);
    layout->addWidget(m_view, 1);
}

QString StepTimelineChart::title() const
{
    return tr("Step interleaving");
}

void StepTimelineChart::setSnapshot(std::shared_ptr<const RunSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    markDirty();
}

void StepTimelineChart::rebuild()
{
    m_view->setSnapshot(m_snapshot);
}

void StepTimelineChart::renderTo(QPainter *painter, const QRectF &target)
{
    ensureUpToDate();
    painter->fillRect(target, Qt::white);
    m_view->paintTimeline(painter, target);
}

} // namespace parasync::ui
