#pragma once

// The speed control beside the mode buttons: every worker's simulated
// compute time per step (WorkerPace), from full speed to a second a step,
// changed while the cluster trains. It only shows and asks; the window
// sends the request to the workers (ClusterWatcher::setPace).

#include <QWidget>

class QLabel;
class QSlider;

namespace parasync::ui {

class PaceControl : public QWidget
{
    Q_OBJECT

public:
    explicit PaceControl(QWidget *parent = nullptr);

    // Shows `computeMs` (the plan's, or what the workers answered) without
    // asking for it; a value between the slider's stops goes to the nearest.
    void setComputeMs(int computeMs);
    int computeMs() const;
    // For a cluster whose pace this app does not know (connected to, not
    // started here): the label says so until the user picks one.
    void setUnknown();
    // No cluster trains: shows the pace the next start (the demo) will run
    // at, and says so, rather than a pace that is not running.
    void setPlanned(int computeMs, const QString &whose);

    // The slider's stops, in ms per step; 0 is full speed.
    static const std::vector<int> &stops();
    // "Full speed", or "40 ms a step (about 25 steps/s per worker)".
    static QString describe(int computeMs);

Q_SIGNALS:
    // The user picked a pace (on release of the slider, or by keyboard).
    void paceRequested(int computeMs);

private:
    void showValue(int computeMs);

    QSlider *m_slider;
    QLabel *m_value;
};

} // namespace parasync::ui
