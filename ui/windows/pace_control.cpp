#include "ui/windows/pace_control.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>

#include <cmath>
#include <cstdlib>

namespace parasync::ui {

PaceControl::PaceControl(QWidget *parent)
    : QWidget(parent)
    , m_slider(new QSlider(Qt::Horizontal, this))
    , m_value(new QLabel(this))
{
    setObjectName(QStringLiteral("paceControl"));
    m_slider->setObjectName(QStringLiteral("paceSlider"));
    m_slider->setRange(0, int(stops().size()) - 1);
    m_slider->setPageStep(1);
    m_slider->setTickPosition(QSlider::TicksBelow);
    m_slider->setFixedWidth(160);
    // Slow on the left, full speed on the right, as a speed control reads.
    m_slider->setInvertedAppearance(true);
    // One request when the slider is let go, not one per pixel dragged.
    m_slider->setTracking(false);
    m_slider->setToolTip(tr("Simulated compute time of every worker's step. Slower steps make the lanes readable; "
                            "full speed shows what the engine does. A straggler's extra delay (process panel) "
                            "adds to it."));
    m_value->setObjectName(QStringLiteral("paceValue"));
    m_value->setMinimumWidth(260);

    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(12, 0, 0, 0);
    layout->addWidget(new QLabel(tr("Pace:"), this));
    layout->addWidget(m_slider);
    layout->addWidget(m_value);

    connect(m_slider, &QSlider::sliderMoved, this, [this](int position) { showValue(stops()[size_t(position)]); });
    connect(m_slider, &QSlider::valueChanged, this, [this](int position) {
        const int ms = stops()[size_t(position)];
        showValue(ms);
        Q_EMIT paceRequested(ms);
    });
    setComputeMs(0);
}

const std::vector<int> &PaceControl::stops()
{
    static const std::vector<int> values = {0, 5, 10, 20, 40, 80, 150, 300, 600, 1000};
    return values;
}

QString PaceControl::describe(int computeMs)
{
    if (computeMs <= 0)
        return tr("full speed");
    return tr("%1 ms a step (about %2 steps/s per worker)").arg(computeMs).arg(std::lround(1000.0 / computeMs));
}

void PaceControl::setComputeMs(int computeMs)
{
    size_t nearest = 0;
    for (size_t i = 1; i < stops().size(); ++i)
        if (std::abs(stops()[i] - computeMs) < std::abs(stops()[nearest] - computeMs))
            nearest = i;
    const QSignalBlocker quiet(m_slider);
    m_slider->setValue(int(nearest));
    showValue(computeMs);
}

int PaceControl::computeMs() const
{
    return stops()[size_t(m_slider->value())];
}

void PaceControl::setPlanned(int computeMs, const QString &whose)
{
    setComputeMs(computeMs);
    m_value->setText(tr("%1, %2").arg(describe(computeMs), whose));
}

void PaceControl::setUnknown()
{
    m_value->setText(tr("as the workers were started"));
}

void PaceControl::showValue(int computeMs)
{
    m_value->setText(describe(computeMs));
}

} // namespace parasync::ui
