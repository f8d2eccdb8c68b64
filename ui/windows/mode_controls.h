#pragma once

// A button per update mode (config/update_modes' table), the numbers the
// modes read (staleness, replicas to aggregate) and the staleness-aware
// learning rate (learning rate / staleness). The buttons show the mode ps:0 reports, not the one last clicked: a click
// sends a request and marks it pending until ps:0's report says it is in
// force (or an error comes back).

#include "config/update_modes.h"

#include <QWidget>

#include <optional>
#include <utility>
#include <vector>

class QCheckBox;
class QLabel;
class QSpinBox;
class QToolButton;

namespace parasync::ui {

class ModeControls : public QWidget
{
    Q_OBJECT

public:
    explicit ModeControls(QWidget *parent = nullptr);

    // What ps:0 reports (from a snapshot or a modeChanged signal).
    void setReportedMode(const proto::ModeConfig &mode, qint64 sinceStep);
    std::optional<proto::ModeConfig> reportedMode() const { return m_reported; }
    // Enables the controls while a cluster is watched.
    void setConnected(bool connected);
    // A mode request failed: show the reported mode again.
    void requestFailed(const QString &message);

    // The mode the user asks for with the current numbers.
    proto::ModeConfig modeFor(proto::UpdateMode mode) const;
    void requestMode(proto::UpdateMode mode);

    QToolButton *button(proto::UpdateMode mode) const;
    QString statusText() const;

Q_SIGNALS:
    void modeRequested(const parasync::proto::ModeConfig &mode);

private:
    void showReported();

    std::vector<std::pair<proto::UpdateMode, QToolButton *>> m_buttons; // the table's order
    QSpinBox *m_staleness;
    QSpinBox *m_replicas;
    QCheckBox *m_byStaleness;
    QLabel *m_status;
    std::optional<proto::ModeConfig> m_reported;
    std::optional<proto::ModeConfig> m_pending;
    qint64 m_sinceStep = 0;
    bool m_connected = false;
};

} // namespace parasync::ui
