#pragma once

// The process panel's table: one row per task of the cluster, with what the
// launcher knows (pid, process state, exit) merged with what ps:0 reports
// (phase, steps/s, clock). Rows are plain values rebuilt from the launcher's
// tasks and the latest snapshot; the model only diffs and displays them.

#include "orchestration/cluster_launcher.h"
#include "orchestration/run_state.h"

#include <QAbstractTableModel>

#include <vector>

namespace parasync::ui {

struct ProcessRow
{
    QString task;    // "ps:0", "worker:1"
    QString address; // "127.0.0.1:2223", or empty when unknown
    QString host;    // where the launcher runs it: "this machine", "alice@10.0.0.2 (ssh)"; empty when not started here
    qint64 pid = 0;  // on that host
    TaskState state = TaskState::NotStarted;
    QString stateText; // "blocked by staleness: waiting for worker:1 (clock 12)"
    double stepsPerSecond = 0;
    int stragglerMs = 0;
    qint64 clock = -1; // worker clock, -1 for ps tasks
    qint64 dropped = 0;
    QString holds;        // ps tasks: which variables and slices it holds, in words
    int launcherRow = -1; // index into ClusterLauncher::tasks(), -1 when not started here
    bool isWorker = false;

    friend bool operator==(const ProcessRow &, const ProcessRow &) = default;
};

// Maps ps:0's view of a worker to the panel's state.
TaskState taskStateFromPhase(proto::WorkerPhase phase);
QString describeTaskState(TaskState state, const QString &detail);

// Rows for the tasks the launcher started (when any), else for the tasks
// ps:0 reports (watching a cluster started elsewhere; `psAddress` names ps:0
// when the snapshot does not). `stragglers` holds the delays workers
// confirmed, by address, for clusters the launcher did not start.
std::vector<ProcessRow> buildProcessRows(const std::vector<TaskInfo> &tasks, const RunSnapshot *snapshot,
                                         const QString &psAddress, const std::map<QString, int> &stragglers);

class ProcessTableModel : public QAbstractTableModel
{
    Q_OBJECT

public:
    enum Column {
        TaskColumn,
        AddressColumn,
        PidColumn,
        StateColumn,
        StepsPerSecondColumn,
        ClockColumn,
        DroppedColumn,
        StragglerColumn,
        VariablesColumn,
        ColumnCount
    };
    enum Role { TaskStateRole = Qt::UserRole + 1, LauncherRowRole, IsWorkerRole };

    explicit ProcessTableModel(QObject *parent = nullptr);

    void setRows(std::vector<ProcessRow> rows);
    const std::vector<ProcessRow> &rows() const { return m_rows; }
    const ProcessRow *rowAt(int row) const;

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<ProcessRow> m_rows;
};

} // namespace parasync::ui
