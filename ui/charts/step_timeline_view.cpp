#include "ui/charts/step_timeline_view.h"

#include "config/update_modes.h"
#include "formats/run_log.h"
#include "ui/charts/step_timeline_painter.h"
#include "ui/models/chart_style.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QScrollBar>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace parasync::ui {

namespace {

// The step log's own name, so the CSV and the run directory agree.
QString outcomeText(proto::PushOutcome outcome)
{
    return QLatin1String(outcomeName(outcome));
}

QString reasonText(proto::WorkerPhase reason)
{
    switch (reason) {
    case proto::BLOCKED_BY_SYNC: return QStringLiteral("sync_barrier");
    case proto::BLOCKED_BY_STALENESS: return QStringLiteral("staleness_bound");
    default: return QString();
    }
}

} // namespace

StepTimelineView::StepTimelineView(QWidget *parent) : QWidget(parent)
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
    if (!m_snapshot) {
        m_lanes = TimelineLanes(m_lanes.axis());
        announceLaneScroll();
        update();
        return;
    }
    m_lanes = TimelineLanes(*m_snapshot, m_lanes.axis());
    if (m_follow)
        applyFollow();
    announceLaneScroll();
    update();
}

double StepTimelineView::followedSpan() const
{
    if (axis() != Axis::GlobalStep || !m_autoSpan)
        return m_mapping.span();
    // At a human pace 200 steps (the default, while the user has not
    // zoomed) are some seconds of the run; at full speed (thousands of steps
    // a second) the same 200 would scroll past dozens of times a second.
    // Show at least kSeconds of steps -- at most all the recent steps there
    // are -- and the lanes turn into the workers' shares of each pixel
    // column, which is what can be read at that speed.
    constexpr double kSeconds = 4;
    return std::max(m_stepSpan, m_lanes.stepsInLast(kSeconds));
}

void StepTimelineView::applyFollow()
{
    const double head = m_lanes.headValue();
    const double span = followedSpan();
    const double margin = span * 0.02;
    // Early in a run the head is left of a full span: show from the start.
    const double end = std::max(head + margin, m_lanes.firstValue() + span);
    m_mapping.start = end - span;
    m_mapping.end = end;
}

void StepTimelineView::setAxis(Axis axis)
{
    if (axis == this->axis())
        return;
    // Remember the zoom of each axis.
    if (this->axis() == Axis::GlobalStep && !m_autoSpan)
        m_stepSpan = m_mapping.span(); // the user's zoom, not the pace's
    else
        m_secondSpan = m_mapping.span();
    m_lanes.setAxis(axis);
    const double span = axis == Axis::GlobalStep ? m_stepSpan : m_secondSpan;
    m_mapping.start = 0;
    m_mapping.end = span;
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
    if (m_lanes.isEmpty())
        return range;
    range = range.fitted(m_lanes.earliestValue(), m_lanes.headValue());
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

TimelineLayout StepTimelineView::layout() const
{
    return TimelineLayout::forRect(QRectF(rect()), m_lanes.laneCount(), kMinLaneHeight, m_firstLane);
}

void StepTimelineView::setFirstLane(int lane)
{
    const int clamped = std::clamp(lane, 0, lastFirstLane());
    if (clamped == m_firstLane)
        return;
    m_firstLane = clamped;
    announceLaneScroll();
    update();
}

void StepTimelineView::announceLaneScroll()
{
    // A run that gains or loses workers, or a resize, moves the bounds; the
    // remembered first lane is clamped to them rather than lost.
    const TimelineLayout shown = layout();
    m_firstLane = shown.firstLane;
    const std::tuple<int, int, int> scroll{shown.firstLane, shown.lastFirstLane(), shown.visibleLanes};
    if (scroll == m_announcedLaneScroll)
        return;
    m_announcedLaneScroll = scroll;
    Q_EMIT laneScrollChanged(shown.firstLane, shown.lastFirstLane(), shown.visibleLanes);
}

void StepTimelineView::updateMappingGeometry()
{
    m_mapping = layout().onPlot(m_mapping);
}

void StepTimelineView::resizeEvent(QResizeEvent *event)
{
    QWidget::resizeEvent(event);
    updateMappingGeometry();
    announceLaneScroll();
}

int StepTimelineView::modeMarkerCount() const
{
    return m_snapshot ? int(m_snapshot->modeChanges.size()) : 0;
}

void StepTimelineView::paintEvent(QPaintEvent *)
{
    QPainter painter(this);
    painter.fillRect(rect(), palette().base());
    StepTimelinePainter(m_snapshot.get(), m_lanes).paint(&painter, layout(), m_mapping);
}

void StepTimelineView::wheelEvent(QWheelEvent *event)
{
    const double degrees = event->angleDelta().y() / 8.0;
    if (degrees == 0) {
        event->ignore();
        return;
    }
    if (event->modifiers() & Qt::ShiftModifier) {
        // Shift+wheel scrolls the lanes, three a notch, as a list scrolls.
        const int lanes = -int(std::lround(degrees / 15.0 * 3));
        if (lastFirstLane() == 0) {
            event->ignore();
            return;
        }
        setFirstLane(m_firstLane + (lanes != 0 ? lanes : (degrees > 0 ? -1 : 1)));
        event->accept();
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

bool StepTimelineView::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *help = static_cast<QHelpEvent *>(event);
        const TimelineLayout shown = layout();
        if (const int lane = shown.laneAt(help->pos().y()); lane >= 0 && shown.labels.contains(help->pos())) {
            // Names are shared by several lanes when lanes are thin: hovering names the one.
            QToolTip::showText(help->globalPos(), laneToolTip(m_lanes.laneWorkers()[size_t(lane)]), this);
        } else if (const TimelineItem *item = m_lanes.itemAt(layout(), m_mapping, help->pos())) {
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

QString StepTimelineView::laneToolTip(int worker) const
{
    QString text = workerName(worker);
    if (!m_snapshot)
        return text;
    for (const WorkerFigures &figures : m_snapshot->workers) {
        if (figures.index != worker)
            continue;
        text += tr(": %1, clock %2, %3 applied, %4 dropped")
                    .arg(workerPhaseText(figures.phase))
                    .arg(figures.clock)
                    .arg(figures.applied)
                    .arg(figures.dropped);
        if (figures.stepsPerSecond > 0)
            text += tr(", %1 steps/s").arg(figures.stepsPerSecond, 0, 'f', 1);
    }
    return text;
}

CsvTable StepTimelineView::csv() const
{
    CsvTable table;
    table.header
        = {QStringLiteral("worker"),       QStringLiteral("global_step"), QStringLiteral("seconds_since_start"),
           QStringLiteral("worker_clock"), QStringLiteral("staleness"),   QStringLiteral("outcome"),
           QStringLiteral("wait_us"),      QStringLiteral("wait_reason")};
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
    : RunChart(parent)
    , m_view(new StepTimelineView(this))
    , m_laneScroll(new QScrollBar(Qt::Vertical, this))
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
    // Shown only while the lanes do not all fit (many workers, a small window).
    m_laneScroll->setObjectName(QStringLiteral("timelineLaneScroll"));
    m_laneScroll->setToolTip(tr("More workers than fit: scroll the lanes (or Shift+wheel over the timeline)"));
    m_laneScroll->hide();
    connect(m_view, &StepTimelineView::laneScrollChanged, this, [this, hint](int first, int last, int visible) {
        const QSignalBlocker blocker(m_laneScroll);
        m_laneScroll->setRange(0, last);
        m_laneScroll->setPageStep(visible);
        m_laneScroll->setValue(first);
        m_laneScroll->setVisible(last > 0);
        hint->setText(last > 0 ? tr("Wheel: zoom \u00b7 Shift+wheel: scroll lanes \u00b7 drag: pan \u00b7 hover a tick "
                                    "for details")
                               : tr("Wheel: zoom \u00b7 drag: pan \u00b7 hover a tick for details"));
    });
    connect(m_laneScroll, &QScrollBar::valueChanged, m_view, &StepTimelineView::setFirstLane);
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
    auto *lanes = new QHBoxLayout;
    lanes->setSpacing(0);
    lanes->addWidget(m_view, 1);
    lanes->addWidget(m_laneScroll);
    layout->addLayout(lanes, 1);
}

QString StepTimelineChart::title() const
{
    return tr("Step interleaving");
}

void StepTimelineChart::rebuild()
{
    m_view->setSnapshot(m_snapshot);
}

void StepTimelineChart::renderTo(QPainter *painter, const QRectF &target)
{
    ensureUpToDate();
    painter->fillRect(target, Qt::white);
    StepTimelinePainter(m_view->snapshot(), m_view->lanes()).paint(painter, target, m_view->mapping());
}

} // namespace parasync::ui
