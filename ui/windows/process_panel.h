#pragma once

// The process panel: every task of the cluster in a table (role, address,
// pid, state, steps/s, straggler delay), stop / kill / restart / slow-down
// for the selected task (buttons and context menu), and the selected task's
// live log.

#include "orchestration/run_state.h"
#include "ui/models/process_table_model.h"

#include <QWidget>

#include <map>
#include <memory>

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableView;

namespace parasync {
class ClusterLauncher;
class ClusterWatcher;
} // namespace parasync

namespace parasync::ui {

class ProcessPanel : public QWidget
{
    Q_OBJECT

public:
    ProcessPanel(ClusterLauncher *launcher, ClusterWatcher *watcher, QWidget *parent = nullptr);

    void setSnapshot(std::shared_ptr<const RunSnapshot> snapshot);
    // Rebuilds the rows from the launcher's tasks and the latest snapshot.
    void refresh();
    // Forgets per-run state (straggler delays) when a new cluster starts.
    void reset();

    ProcessTableModel *model() const { return m_model; }
    QTableView *table() const { return m_table; }
    int selectedRow() const;
    void selectRow(int row);

    void stopSelected();
    void killSelected();
    void restartSelected();
    // Slows the selected worker down by `delayMs` per step (0 removes it).
    void slowDownSelected(int delayMs);
    // An elastic cluster this app launched: one more worker joins while it
    // trains (ClusterLauncher::addWorker). Stop removes one.
    void addWorker();

Q_SIGNALS:
    // A message for the status bar.
    void statusMessage(const QString &message);

private:
    void updateButtons();
    void showLogOfSelection();
    void appendOutput(int launcherRow, const QString &text);
    void showContextMenu(const QPoint &pos);

    ClusterLauncher *m_launcher;
    ClusterWatcher *m_watcher;
    std::shared_ptr<const RunSnapshot> m_snapshot;
    std::map<QString, int> m_stragglers;
    ProcessTableModel *m_model;
    QTableView *m_table;
    QPushButton *m_stop;
    QPushButton *m_kill;
    QPushButton *m_restart;
    QSpinBox *m_delay;
    QPushButton *m_slowDown;
    QPushButton *m_addWorker;
    QLabel *m_logTitle;
    QPlainTextEdit *m_log;
    int m_logRow = -1; // launcher row whose log is shown
};

} // namespace parasync::ui
