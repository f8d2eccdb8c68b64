#pragma once

// The step-interleaving timeline: one lane per worker, a tick at the global
// step (or wall time) of each of its applied updates, the time it was held
// by the sync barrier or the staleness bound as shaded spans, dropped stale
// gradients as red crosses and every mode change as a labelled vertical
// line. Zoom with the wheel, pan by dragging, double-click to fit, and
// follow the newest step. Custom painted: thousands of ticks per lane are
// drawn once per pixel column. The view does the widget's part -- input,
// following the head, tooltips; StepTimelinePainter draws, and
// TimelineLanes (ui/models) holds the lanes and their maths.

#include "orchestration/run_state.h"
#include "ui/charts/run_chart.h"
#include "ui/models/timeline_lanes.h"
#include "ui/models/timeline_mapping.h"

#include <memory>
#include <tuple>

class QCheckBox;
class QComboBox;
class QLabel;
class QScrollBar;

namespace parasync::ui {

class StepTimelineView : public QWidget
{
    Q_OBJECT

public:
    using Axis = TimelineAxis;

    explicit StepTimelineView(QWidget *parent = nullptr);

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);
    // What the view shows, for painting it elsewhere (StepTimelinePainter).
    const RunSnapshot *snapshot() const { return m_snapshot.get(); }
    const TimelineLanes &lanes() const { return m_lanes; }

    Axis axis() const { return m_lanes.axis(); }
    void setAxis(Axis axis);
    bool followHead() const { return m_follow; }
    void setFollowHead(bool follow);
    void fitAll();
    const TimelineMapping &mapping() const { return m_mapping; }
    // The range that shows every recent step.
    TimelineMapping fittedRange() const;

    // Lanes scroll when they do not all fit at their minimum height.
    int firstLane() const { return layout().firstLane; }
    int visibleLanes() const { return layout().visibleLanes; }
    int lastFirstLane() const { return layout().lastFirstLane(); }
    void setFirstLane(int lane);

    int modeMarkerCount() const;
    int itemCount() const { return int(m_lanes.items().size()); }
    CsvTable csv() const;

    QSize sizeHint() const override { return QSize(900, 360); }

Q_SIGNALS:
    void followHeadChanged(bool follow);
    // The lanes scrolled to, or how many can be: for a scroll bar.
    void laneScrollChanged(int firstLane, int lastFirstLane, int visibleLanes);

protected:
    void paintEvent(QPaintEvent *event) override;
    void resizeEvent(QResizeEvent *event) override;
    void wheelEvent(QWheelEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    void mouseMoveEvent(QMouseEvent *event) override;
    void mouseReleaseEvent(QMouseEvent *event) override;
    void mouseDoubleClickEvent(QMouseEvent *event) override;
    bool event(QEvent *event) override;

private:
    // Below this a lane's tick is hard to see and its colour to tell.
    static constexpr double kMinLaneHeight = 6;

    TimelineLayout layout() const;
    void updateMappingGeometry();
    void announceLaneScroll();
    // The hover text of a lane's name: its phase, clock and counts.
    QString laneToolTip(int worker) const;
    void applyFollow();
    // The span the followed view shows: the user's, widened on the step
    // axis so the head crosses a screen in no less than a few seconds.
    double followedSpan() const;
    double minimumSpan() const { return axis() == Axis::GlobalStep ? 10 : 0.01; }

    std::shared_ptr<const RunSnapshot> m_snapshot;
    TimelineLanes m_lanes;
    bool m_follow = true;
    TimelineMapping m_mapping;
    double m_stepSpan = 200; // remembered per axis when switching
    double m_secondSpan = 2;
    // Until the user zooms, a followed step axis widens with the pace (see
    // followedSpan); after, their zoom holds.
    bool m_autoSpan = true;
    bool m_dragging = false;
    double m_dragLastX = 0;
    int m_firstLane = 0;
    std::tuple<int, int, int> m_announcedLaneScroll{-1, -1, -1};
};

// The timeline with its controls (axis, follow, fit), as a chart the
// exporter knows.
class StepTimelineChart : public RunChart
{
    Q_OBJECT

public:
    explicit StepTimelineChart(QWidget *parent = nullptr);

    StepTimelineView *view() const { return m_view; }

    QString exportName() const override { return QStringLiteral("step_timeline"); }
    QString title() const override;
    QSize exportSize() const override { return QSize(1400, 600); }
    void renderTo(QPainter *painter, const QRectF &target) override;
    CsvTable csv() const override { return m_view->csv(); }
    int modeMarkerCount() const override { return m_view->modeMarkerCount(); }
    int pointCount() const override { return m_view->itemCount(); }

protected:
    void rebuild() override;

private:
    StepTimelineView *m_view;
    QScrollBar *m_laneScroll;
    QComboBox *m_axisChoice;
    QCheckBox *m_follow;
};

} // namespace parasync::ui
