#include "ui/windows/mode_controls.h"

#include "config/update_modes.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QToolButton>

namespace parasync::ui {

namespace {
// True when ps:0's report satisfies a request (0 replicas asks for "all
// live workers", which ps:0 may report as a number).
bool satisfies(const proto::ModeConfig &reported, const proto::ModeConfig &requested)
{
    if (reported.mode() != requested.mode()
        || reported.learning_rate_by_staleness() != requested.learning_rate_by_staleness())
        return false;
    const UpdateModeInfo *info = findUpdateMode(requested.mode());
    if (info && info->knobs.staleness && reported.staleness() != requested.staleness())
        return false;
    if (info && info->knobs.replicas && requested.replicas_to_aggregate() != 0
        && reported.replicas_to_aggregate() != requested.replicas_to_aggregate())
        return false;
    return true;
}

// Whether the mode ps:0 is in reads the number a spin box sets.
bool takes(const std::optional<proto::ModeConfig> &reported, bool ModeKnobs::*knob)
{
    const UpdateModeInfo *info = reported ? findUpdateMode(reported->mode()) : nullptr;
    return info && info->knobs.*knob;
}

// "modeAsync", "modeSsp": the buttons' object names, as tests find them.
QString buttonName(const UpdateModeInfo &info)
{
    QString name = QString::fromLatin1(info.name);
    name[0] = name[0].toUpper();
    return QStringLiteral("mode") + name;
}
} // namespace

ModeControls::ModeControls(QWidget *parent)
    : QWidget(parent)
    , m_staleness(new QSpinBox(this))
    , m_replicas(new QSpinBox(this))
    , m_byStaleness(new QCheckBox(tr("LR \u00f7 staleness"), this))
    , m_status(new QLabel(this))
{
    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(4, 0, 4, 0);
    layout->addWidget(new QLabel(tr("Mode:"), this));
    for (const UpdateModeInfo &info : updateModes()) {
        auto *button = new QToolButton(this);
        button->setText(QString::fromUtf8(info.label));
        // Ctrl+1, Ctrl+2, ...: the table's order (the first nine modes).
        QString tip = QString::fromUtf8(info.meaning);
        if (m_buttons.size() < 9) {
            const QKeySequence shortcut(QKeyCombination(Qt::CTRL, Qt::Key(Qt::Key_1 + int(m_buttons.size()))));
            button->setShortcut(shortcut);
            tip += QStringLiteral(" (") + shortcut.toString(QKeySequence::NativeText) + QLatin1Char(')');
        }
        button->setToolTip(tip);
        button->setCheckable(true);
        button->setObjectName(buttonName(info));
        button->setToolButtonStyle(Qt::ToolButtonTextOnly);
        const proto::UpdateMode mode = info.mode;
        connect(button, &QToolButton::clicked, this, [this, mode] { requestMode(mode); });
        layout->addWidget(button);
        m_buttons.emplace_back(mode, button);
    }
    m_staleness->setRange(0, 1000);
    m_staleness->setValue(10);
    m_staleness->setPrefix(tr("staleness "));
    m_staleness->setToolTip(tr("SSP bound: how many steps a worker may run ahead of the slowest (0 = lock-step)"));
    m_staleness->setKeyboardTracking(false);
    m_staleness->setObjectName(QStringLiteral("modeStaleness"));
    m_replicas->setRange(0, 1000);
    m_replicas->setValue(0);
    m_replicas->setPrefix(tr("replicas "));
    m_replicas->setSpecialValueText(tr("replicas: all live workers"));
    m_replicas->setToolTip(tr("Sync: gradients averaged per step (replicas_to_aggregate); 0 = all live workers"));
    m_replicas->setKeyboardTracking(false);
    m_replicas->setObjectName(QStringLiteral("modeReplicas"));
    layout->addSpacing(8);
    layout->addWidget(m_staleness);
    layout->addWidget(m_replicas);
    m_byStaleness->setToolTip(tr("Async and SSP: a gradient computed S global steps ago is applied at the learning "
                                 "rate divided by S (Zhang et al., staleness-aware async SGD). Sync's gradients are "
                                 "all fresh: it changes nothing there."));
    m_byStaleness->setObjectName(QStringLiteral("modeLearningRateByStaleness"));
    layout->addWidget(m_byStaleness);
    layout->addSpacing(8);
    layout->addWidget(m_status);
    m_status->setObjectName(QStringLiteral("modeStatus"));

    // A new number for the mode in force is sent at once.
    connect(m_staleness, &QSpinBox::valueChanged, this, [this] {
        if (m_connected && takes(m_reported, &ModeKnobs::staleness) && m_reported->staleness() != m_staleness->value())
            requestMode(m_reported->mode());
    });
    connect(m_replicas, &QSpinBox::valueChanged, this, [this] {
        if (m_connected && takes(m_reported, &ModeKnobs::replicas)
            && m_reported->replicas_to_aggregate() != m_replicas->value())
            requestMode(m_reported->mode());
    });
    // The rule applies to the mode in force, so a click changes it at once.
    connect(m_byStaleness, &QCheckBox::toggled, this, [this](bool on) {
        if (m_connected && m_reported && m_reported->learning_rate_by_staleness() != on)
            requestMode(m_reported->mode());
    });
    setConnected(false);
}

QToolButton *ModeControls::button(proto::UpdateMode mode) const
{
    for (const auto &[buttonMode, b] : m_buttons)
        if (buttonMode == mode)
            return b;
    return nullptr;
}

proto::ModeConfig ModeControls::modeFor(proto::UpdateMode mode) const
{
    proto::ModeConfig config;
    if (m_reported)
        config = *m_reported;
    config.set_mode(mode);
    config.set_staleness(m_staleness->value());
    config.set_replicas_to_aggregate(m_replicas->value());
    config.set_learning_rate_by_staleness(m_byStaleness->isChecked());
    return config;
}

void ModeControls::requestMode(proto::UpdateMode mode)
{
    if (!m_connected) {
        showReported();
        return;
    }
    const proto::ModeConfig config = modeFor(mode);
    m_pending = config;
    showReported();
    Q_EMIT modeRequested(config);
}

void ModeControls::setReportedMode(const proto::ModeConfig &mode, qint64 sinceStep)
{
    if (mode.mode() == proto::UPDATE_MODE_UNSPECIFIED)
        return;
    const bool changed = !m_reported || !sameMode(*m_reported, mode);
    m_reported = mode;
    m_sinceStep = sinceStep;
    if (m_pending && satisfies(mode, *m_pending))
        m_pending.reset();
    if (changed) {
        // Show ps:0's numbers, without echoing them back as a request.
        const QSignalBlocker blockStaleness(m_staleness);
        const QSignalBlocker blockReplicas(m_replicas);
        const QSignalBlocker blockRule(m_byStaleness);
        m_byStaleness->setChecked(mode.learning_rate_by_staleness());
        if (takes(mode, &ModeKnobs::staleness) || !m_staleness->hasFocus())
            m_staleness->setValue(mode.staleness());
        if (takes(mode, &ModeKnobs::replicas) || !m_replicas->hasFocus())
            m_replicas->setValue(mode.replicas_to_aggregate());
    }
    showReported();
}

void ModeControls::setConnected(bool connected)
{
    m_connected = connected;
    for (const auto &[mode, b] : m_buttons)
        b->setEnabled(connected);
    m_staleness->setEnabled(connected);
    m_replicas->setEnabled(connected);
    m_byStaleness->setEnabled(connected);
    if (!connected)
        m_pending.reset();
    showReported();
}

void ModeControls::requestFailed(const QString &message)
{
    m_pending.reset();
    showReported();
    m_status->setText(m_status->text() + QStringLiteral(" \u2014 ") + message);
}

QString ModeControls::statusText() const
{
    return m_status->text();
}

void ModeControls::showReported()
{
    for (const auto &[mode, b] : m_buttons)
        b->setChecked(m_reported && mode == m_reported->mode());
    QString text;
    if (!m_reported) {
        text = m_connected ? tr("waiting for ps:0 to report its mode") : tr("not connected");
    } else {
        text = tr("ps:0 reports %1").arg(QString::fromStdString(describeMode(*m_reported)));
        if (m_sinceStep > 0)
            text += tr(" since step %1").arg(m_sinceStep);
    }
    if (m_pending)
        text += tr("; asked for %1, waiting for ps:0").arg(QString::fromStdString(describeMode(*m_pending)));
    m_status->setText(text);
}

} // namespace parasync::ui
