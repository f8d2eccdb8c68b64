#include "ui/models/process_table_model.h"

#include <QBrush>
#include <QColor>

#include <algorithm>

namespace parasync::ui {

namespace {

// A worker whose gradients are NaN or infinite (a diverged model, bad data)
// may look like it trains while ps:0 rejects every update it pushes: say so
// beside its state. ps:0's log says whether they were rejected or applied.
QString nonfiniteNote(const WorkerFigures &figures)
{
    if (figures.nonfinite <= 0)
        return {};
    return figures.nonfinite == 1
               ? QObject::tr(" \u00b7 1 gradient with NaN or infinite values")
               : QObject::tr(" \u00b7 %1 gradients with NaN or infinite values").arg(figures.nonfinite);
}

} // namespace

TaskState taskStateFromPhase(proto::WorkerPhase phase)
{
    switch (phase) {
    case proto::WAITING_FOR_CHIEF: return TaskState::WaitingFor;
    case proto::TRAINING: return TaskState::Training;
    case proto::BLOCKED_BY_SYNC: return TaskState::BlockedBySync;
    case proto::BLOCKED_BY_STALENESS: return TaskState::BlockedByStaleness;
    case proto::FINISHED: return TaskState::Finished;
    case proto::DEAD: return TaskState::Dead;
    case proto::STOPPED: return TaskState::Stopped;
    case proto::REJOINING: return TaskState::WaitingFor;
    default: return TaskState::Starting;
    }
}

QString describeTaskState(TaskState state, const QString &detail)
{
    const QString name = taskStateName(state);
    if (detail.isEmpty())
        return name;
    // The launcher's detail often starts with the state's own words.
    if (detail.startsWith(name))
        return detail;
    return name + QStringLiteral(": ") + detail;
}

std::vector<ProcessRow> buildProcessRows(const std::vector<TaskInfo> &tasks, const RunSnapshot *snapshot,
                                         const QString &psAddress, const std::map<QString, int> &stragglers)
{
    std::vector<ProcessRow> rows;
    const auto figuresOf = [snapshot](int worker) -> const WorkerFigures * {
        if (!snapshot)
            return nullptr;
        for (const auto &figures : snapshot->workers)
            if (figures.index == worker)
                return &figures;
        return nullptr;
    };
    const auto straggler = [&stragglers](const QString &address) {
        const auto it = stragglers.find(address);
        return it != stragglers.end() ? it->second : 0;
    };

    // Where the variables live: known once the chief declared them.
    const auto held = [snapshot, &tasks] {
        if (!snapshot)
            return std::vector<std::string>();
        int numPs = int(snapshot->psHosts.size());
        if (!tasks.empty())
            numPs = int(std::count_if(tasks.begin(), tasks.end(),
                                      [](const TaskInfo &info) { return info.task.job == JobName::Ps; }));
        return variablesHeldByPs(snapshot->signature, numPs);
    }();
    const auto holdsOf = [&held](int ps) {
        return ps >= 0 && size_t(ps) < held.size() ? QString::fromStdString(held[size_t(ps)]) : QString();
    };

    if (!tasks.empty()) {
        for (size_t i = 0; i < tasks.size(); ++i) {
            const TaskInfo &info = tasks[i];
            ProcessRow row;
            row.task = QString::fromStdString(info.task.toString());
            row.address = QString::fromStdString(info.address.toString());
            row.host = info.host;
            row.pid = info.pid;
            row.state = info.state;
            row.stateText = describeTaskState(info.state, info.detail);
            row.stepsPerSecond = info.stepsPerSecond;
            row.launcherRow = int(i);
            row.isWorker = info.task.job == JobName::Worker;
            row.stragglerMs = info.stragglerDelayMs;
            if (row.isWorker) {
                if (const WorkerFigures *figures = figuresOf(info.task.index)) {
                    row.clock = figures->clock;
                    row.dropped = figures->dropped;
                    row.stateText += nonfiniteNote(*figures);
                    if (row.stepsPerSecond == 0)
                        row.stepsPerSecond = figures->stepsPerSecond;
                }
            } else {
                row.holds = holdsOf(info.task.index);
                if (snapshot && info.task.index == 0)
                    row.clock = snapshot->globalStep; // ps:0 keeps the global step
            }
            rows.push_back(std::move(row));
        }
        return rows;
    }

    if (!snapshot)
        return rows;
    for (size_t i = 0; i < std::max<size_t>(1, snapshot->psHosts.size()); ++i) {
        ProcessRow ps;
        ps.task = QStringLiteral("ps:%1").arg(i);
        ps.address = i < snapshot->psHosts.size() ? QString::fromStdString(snapshot->psHosts[i]) : psAddress;
        ps.state = snapshot->finished ? TaskState::Finished : TaskState::Serving;
        ps.holds = holdsOf(int(i));
        if (i == 0) {
            ps.stateText = taskStateName(ps.state) + QStringLiteral(" (global step %1)").arg(snapshot->globalStep);
            ps.clock = snapshot->globalStep;
        } else {
            ps.stateText = taskStateName(ps.state);
        }
        rows.push_back(ps);
    }
    for (const auto &figures : snapshot->workers) {
        ProcessRow row;
        row.task = QStringLiteral("worker:%1").arg(figures.index);
        if (figures.index >= 0 && size_t(figures.index) < snapshot->workerHosts.size())
            row.address = QString::fromStdString(snapshot->workerHosts[size_t(figures.index)]);
        row.pid = figures.pid;
        row.state = taskStateFromPhase(figures.phase);
        QString detail = QString::fromStdString(figures.phase == proto::DEAD ? figures.reason : figures.waitingFor);
        if (!detail.isEmpty() && figures.phase != proto::DEAD)
            detail = QObject::tr("waiting for %1").arg(detail);
        if (figures.phase == proto::REJOINING)
            detail = QObject::tr("waiting for ps:0's new primary: rejoining after a failover");
        row.stateText = describeTaskState(row.state, detail) + nonfiniteNote(figures);
        if (figures.straggler)
            row.stateText += QObject::tr(" \u00b7 straggler, %1 s a step").arg(figures.secondsPerStep, 0, 'f', 3);
        row.stepsPerSecond = figures.stepsPerSecond;
        row.clock = figures.clock;
        row.dropped = figures.dropped;
        row.isWorker = true;
        row.stragglerMs = straggler(row.address);
        rows.push_back(std::move(row));
    }
    return rows;
}

ProcessTableModel::ProcessTableModel(QObject *parent) : QAbstractTableModel(parent) {}

void ProcessTableModel::setRows(std::vector<ProcessRow> rows)
{
    if (rows.size() != m_rows.size()) {
        beginResetModel();
        m_rows = std::move(rows);
        endResetModel();
        return;
    }
    // Same shape: the selection stays, and one signal spans the changed
    // rows. A signal per row made the view size its contents-sized columns
    // over every row once per changed row: with 64 workers, all changing
    // every refresh, that was most of the GUI thread's time.
    int first = -1, last = -1;
    for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i] == m_rows[i])
            continue;
        m_rows[i] = std::move(rows[i]);
        if (first < 0)
            first = int(i);
        last = int(i);
    }
    if (first >= 0)
        Q_EMIT dataChanged(index(first, 0), index(last, ColumnCount - 1));
}

const ProcessRow *ProcessTableModel::rowAt(int row) const
{
    return row >= 0 && size_t(row) < m_rows.size() ? &m_rows[size_t(row)] : nullptr;
}

int ProcessTableModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int ProcessTableModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

namespace {
QColor stateColor(TaskState state)
{
    switch (state) {
    case TaskState::Training:
    case TaskState::Serving: return QColor(0x2e, 0x7d, 0x32);
    case TaskState::BlockedBySync: return QColor(0x4e, 0x79, 0xa7);
    case TaskState::BlockedByStaleness: return QColor(0xe6, 0x7e, 0x22);
    case TaskState::Dead: return QColor(0xc6, 0x28, 0x28);
    case TaskState::Starting:
    case TaskState::WaitingFor: return QColor(0x8d, 0x6e, 0x00);
    default: return QColor(0x61, 0x61, 0x61);
    }
}
} // namespace

QVariant ProcessTableModel::data(const QModelIndex &index, int role) const
{
    const ProcessRow *row = rowAt(index.row());
    if (!row || index.column() < 0 || index.column() >= ColumnCount)
        return {};
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case TaskColumn: return row->task;
        case AddressColumn:
            if (row->address.isEmpty())
                return tr("(unknown)");
            // A remote task says so where its address is: its pid is on that host.
            return row->host.endsWith(QLatin1String("(ssh)")) ? row->address + tr(" via ssh") : row->address;
        case PidColumn: return row->pid > 0 ? QVariant(row->pid) : QVariant(QStringLiteral("\u2013"));
        case StateColumn: return row->stateText;
        case StepsPerSecondColumn: return row->isWorker ? QString::number(row->stepsPerSecond, 'f', 1) : QString();
        case ClockColumn: return row->clock >= 0 ? QVariant(row->clock) : QVariant(QString());
        case DroppedColumn: return row->isWorker ? QVariant(row->dropped) : QVariant(QString());
        case StragglerColumn:
            return row->isWorker ? (row->stragglerMs > 0 ? QStringLiteral("+%1 ms").arg(row->stragglerMs)
                                                         : QStringLiteral("\u2013"))
                                 : QString();
        case VariablesColumn: return row->holds;
        }
        break;
    case Qt::ForegroundRole:
        if (index.column() == StateColumn)
            return QBrush(stateColor(row->state));
        break;
    case Qt::ToolTipRole:
        if (index.column() == StateColumn)
            return row->stateText;
        if ((index.column() == AddressColumn || index.column() == PidColumn) && !row->host.isEmpty())
            return tr("runs on %1").arg(row->host);
        if (index.column() == ClockColumn)
            return row->isWorker ? tr("steps this worker finished") : tr("the global step (kept on ps:0)");
        if (index.column() == VariablesColumn && !row->holds.isEmpty())
            return tr("%1 holds %2. Variables larger than --min_slice_bytes are split by rows over the ps "
                      "tasks; the pieces are placed round-robin.")
                .arg(row->task, row->holds);
        break;
    case Qt::TextAlignmentRole:
        if (index.column() == PidColumn || index.column() == StepsPerSecondColumn || index.column() == ClockColumn
            || index.column() == DroppedColumn || index.column() == StragglerColumn)
            return QVariant(Qt::AlignRight | Qt::AlignVCenter);
        break;
    case TaskStateRole: return int(row->state);
    case LauncherRowRole: return row->launcherRow;
    case IsWorkerRole: return row->isWorker;
    }
    return {};
}

QVariant ProcessTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case TaskColumn: return tr("Task");
    case AddressColumn: return tr("Address");
    case PidColumn: return tr("PID");
    case StateColumn: return tr("State");
    case StepsPerSecondColumn: return tr("Steps/s");
    case ClockColumn: return tr("Clock / step");
    case DroppedColumn: return tr("Dropped");
    case StragglerColumn: return tr("Straggler");
    case VariablesColumn: return tr("Variables");
    }
    return {};
}

} // namespace parasync::ui
