#pragma once

// Paints the step timeline -- title, legend, lane names, held spans, ticks
// (bars per pixel column once zoomed out), dropped gradients, mode changes,
// checkpoints and the axis -- for one run and one visible range onto any
// QPainter. The widget, the PNG/SVG/PDF exports and the run report all paint
// through it, so an export shows what the screen shows. Where things go is
// TimelineLanes' and TimelineLayout's maths; this class only draws.

#include "orchestration/run_state.h"
#include "ui/models/timeline_lanes.h"

#include <QColor>
#include <QCoreApplication>
#include <QFont>

class QPainter;

namespace parasync::ui {

class StepTimelinePainter
{
    Q_DECLARE_TR_FUNCTIONS(StepTimelinePainter)

public:
    // Both must outlive the painter; `snapshot` may be null (no run yet).
    StepTimelinePainter(const RunSnapshot *snapshot, const TimelineLanes &lanes);

    // Paints into `rect`, from range.start to range.end (the range's pixel
    // extent is set to the plot's here), every lane: an export shows the
    // whole cluster.
    void paint(QPainter *painter, const QRectF &rect, const TimelineMapping &range) const;
    // Paints the lanes `layout` shows (a scrolled view shows some of them).
    void paint(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &range) const;

private:
    struct Fonts
    {
        QFont base;
        QFont title;
        QFont small;
        QColor text;
    };
    static Fonts fontsFor(QPainter *painter);
    void paintTitle(QPainter *painter, const TimelineLayout &layout, const Fonts &fonts) const;
    // Returns where the legend ends, for the notes after it.
    double paintLegend(QPainter *painter, const QRectF &rect, const TimelineLayout &layout, const Fonts &fonts) const;
    void paintNotes(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map, double x) const;
    void paintLanes(QPainter *painter, const TimelineLayout &layout, const Fonts &fonts) const;
    void paintLaneGroups(QPainter *painter, const TimelineLayout &layout, const Fonts &fonts, int stride) const;
    // "training · clock 12" for a worker the run lists; empty otherwise.
    QString laneState(int worker) const;
    void paintSpans(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map) const;
    void paintUpdates(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map) const;
    void paintMarkers(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map,
                      const Fonts &fonts) const;
    void paintStragglerMarkers(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map) const;
    void paintAxis(QPainter *painter, const TimelineLayout &layout, const TimelineMapping &map,
                   const Fonts &fonts) const;
    QString axisLabel(double value) const;

    const RunSnapshot *m_snapshot;
    const TimelineLanes &m_lanes;
};

} // namespace parasync::ui
