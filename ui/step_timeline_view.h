#pragma once

// The step-interleaving timeline: one lane per worker, a tick at the global
// step (or wall time) of each of its applied updates, the time it was held
// by the sync barrier or the staleness bound as shaded spans, dropped stale
// gradients as red crosses and every mode change as a labelled vertical
// line. Zoom with the wheel, pan by dragging, double-click to fit, and
// follow the newest step. Custom painted: thousands of ticks per lane are
// drawn once per pixel column.

#include "ui/chart_widget.h"
#include "orchestration/run_state.h"
#include "ui/models/timeline_mapping.h"

#include <memory>
#include <vector>

class QCheckBox;
class QComboBox;
class QLabel;

namespace parasync::ui {

class StepTimelineView : public QWidget
{
    Q_OBJECT

public:
    enum class Axis { GlobalStep, WallTime };

    explicit StepTimelineView(QWidget *parent = nullptr);

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);

    Axis axis() const { return m_axis; }
    void setAxis(Axis axis);
    bool followHead() const { return m_follow; }
    void setFollowHead(bool follow);
    void fitAll();
    const TimelineMapping &mapping() const { return m_mapping; }

    // Paints title, legend, lanes, markers and the axis into `rect`; the
    // widget's paint event and the exporter share it.
    // `range` overrides the visible range (start/end) when given, e.g. to
    // export the whole recent window whatever the screen shows.
    void paintTimeline(QPainter *painter, const QRectF &rect, const TimelineMapping *range = nullptr) const;
    // The range that shows every recent step.
    TimelineMapping fittedRange() const;

    int modeMarkerCount() const;
    int itemCount() const { return int(m_items.size()); }
    CsvTable csv() const;

    QSize sizeHint() const override { return QSize(900, 360); }

Q_SIGNALS:
    void followHeadChanged(bool follow);

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
    struct Item
    {
        double step = 0;
        double seconds = 0;
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
    struct Layout
    {
        QRectF title;
        QRectF legend;
        QRectF labels; // lane names, left of the plot
        QRectF plot;
        QRectF axis;
        double laneHeight = 0;
    };
    Layout layoutFor(const QRectF &rect) const;
    double valueOf(const Item &item) const { return m_axis == Axis::GlobalStep ? item.step : item.seconds; }
    double waitStartOf(const Item &item) const
    {
        return m_axis == Axis::GlobalStep ? item.waitStartStep : item.waitStartSeconds;
    }
    void sortItems();
    void updateMappingGeometry();
    void applyFollow();
    // The span the followed view shows: the user's, widened on the step
    // axis so the head crosses a screen in no less than a few seconds.
    double followedSpan() const;
    double headValue() const;
    double firstValue() const;
    double minimumSpan() const { return m_axis == Axis::GlobalStep ? 10 : 0.01; }
    const Item *itemAt(const QPointF &pos) const;
    QString axisLabel(double value) const;

    std::shared_ptr<const RunSnapshot> m_snapshot;
    std::vector<Item> m_items;     // sorted by the axis value
    std::vector<int> m_laneWorkers; // worker index of each lane
    Axis m_axis = Axis::GlobalStep;
    bool m_follow = true;
    TimelineMapping m_mapping;
    double m_stepSpan = 200;  // remembered per axis when switching
    double m_secondSpan = 2;
    // Until the user zooms, a followed step axis widens with the pace (see
    // followedSpan); after, their zoom holds.
    bool m_autoSpan = true;
    bool m_dragging = false;
    double m_dragLastX = 0;
};

// The timeline with its controls (axis, follow, fit), as a chart the
// exporter knows.
class StepTimelineChart : public ChartWidget
{
    Q_OBJECT

public:
    explicit StepTimelineChart(QWidget *parent = nullptr);

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);
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
    std::shared_ptr<const RunSnapshot> m_snapshot;
    StepTimelineView *m_view;
    QComboBox *m_axisChoice;
    QCheckBox *m_follow;
};

} // namespace parasync::ui
