#pragma once

// The pre-flight check before a launch, as a grid: one row per host, one
// column per check (SSH, parasync-node, ports free, reaches every ps), each
// cell green, red, grey or pending, with the details as its tooltip; under
// it, each failure and the fix to try. "Use free ports" rewrites the plan
// with the free ports found on each host and checks again. Shows the
// results of a PreflightCheck (core); runs no check itself.

#include "config/cluster_plan.h"

#include <QDialog>

#include <memory>

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
    PreflightDialog(const ClusterPlan &plan, const QString &nodeBinary, QWidget *parent = nullptr);
    ~PreflightDialog() override;

    // The plan to launch: the one given, with free ports if the user chose them.
    const ClusterPlan &plan() const { return m_plan; }
    bool portsRewritten() const { return m_portsRewritten; }
    PreflightCheck *check() const { return m_check.get(); }
    QTableWidget *grid() const { return m_grid; }

private:
    void refresh();
    void onFinished(bool passed);
    void useFreePorts();

    ClusterPlan m_plan;
    std::unique_ptr<PreflightCheck> m_check;
    bool m_portsRewritten = false;
    QLabel *m_summary;
    QTableWidget *m_grid;
    QTextBrowser *m_problems;
    QPushButton *m_again;
    QPushButton *m_freePorts;
    QPushButton *m_launch;
};

} // namespace parasync::ui
