#pragma once

// The pre-flight check before a launch, as a grid: one row per host, one
// column per check (SSH, parasync-node, ports free, reaches every ps), each
// cell green, red, grey or pending, with the details as its tooltip; under
// it, each failure and the fix to try. "Use free ports" rewrites the plan
// with the free ports found on each host and checks again. Shows the
// results of a PreflightCheck (core) -- its own, or a LaunchSequence's -- and
// runs no check itself.

#include "config/cluster_plan.h"

#include <QDialog>

class QLabel;
class QPushButton;
class QTableWidget;
class QTextBrowser;

namespace parasync {
class PreflightCheck;
}

namespace parasync::ui {

class PreflightDialog : public QDialog
{
    Q_OBJECT

public:
    // Checks `plan` with a check of its own, started at once.
    PreflightDialog(const ClusterPlan &plan, const QString &nodeBinary, QWidget *parent = nullptr);
    // Shows `check`, already started on `plan` by its owner (a launch
    // sequence), which keeps it alive while the dialog is open. "Check
    // again" and "Use free ports" start it again.
    PreflightDialog(PreflightCheck *check, const ClusterPlan &plan, QWidget *parent = nullptr);
    ~PreflightDialog() override;

    // The plan to launch: the one given, with free ports if the user chose them.
    const ClusterPlan &plan() const { return m_plan; }
    bool portsRewritten() const { return m_portsRewritten; }
    PreflightCheck *check() const { return m_check; }
    QTableWidget *grid() const { return m_grid; }

private:
    void setUp();
    void refresh();
    void onFinished(bool passed);
    void useFreePorts();

    ClusterPlan m_plan;
    PreflightCheck *m_check; // a child of the dialog, or its owner's
    bool m_portsRewritten = false;
    QLabel *m_summary = nullptr;
    QTableWidget *m_grid = nullptr;
    QTextBrowser *m_problems = nullptr;
    QPushButton *m_again = nullptr;
    QPushButton *m_freePorts = nullptr;
    QPushButton *m_launch = nullptr;
};

} // namespace parasync::ui
