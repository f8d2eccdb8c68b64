#include "ui/windows/process_panel.h"

#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMenu>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace parasync::ui {

ProcessPanel::ProcessPanel(ClusterLauncher *launcher, ClusterWatcher *watcher, QWidget *parent)
    : QWidget(parent)
    , m_launcher(launcher)
    , m_watcher(watcher)
    , m_model(new ProcessTableModel(this))
    , m_table(new QTableView(this))
    , m_stop(new QPushButton(tr("Stop"), this))
    , m_kill(new QPushButton(tr("Kill"), this))
    , m_restart(new QPushButton(tr("Restart"), this))
    , m_delay(new QSpinBox(this))
    , m_slowDown(new QPushButton(tr("Slow down"), this))
    , m_addWorker(new QPushButton(tr("Add worker"), this))
    , m_logTitle(new QLabel(this))
    , m_log(new QPlainTextEdit(this))
{
    m_table->setModel(m_model);
    m_table->setObjectName(QStringLiteral("processTable"));
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setAlternatingRowColors(true);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(22);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(ProcessTableModel::StateColumn, QHeaderView::Stretch);
    // What a ps holds can be long ("W rows 0-49999 of 100000 (1.9 MiB), ..."):
    // a column of its own width, elided, with the whole text in its tooltip,
    // so that it never widens the window beyond the screen.
    m_table->horizontalHeader()->setSectionResizeMode(ProcessTableModel::VariablesColumn, QHeaderView::Interactive);
    m_table->setColumnWidth(ProcessTableModel::VariablesColumn, 260);
    m_table->setContextMenuPolicy(Qt::CustomContextMenu);
    m_table->setWordWrap(false);

    m_stop->setToolTip(tr("Ask the task to stop cleanly (SIGTERM): a worker leaves its streams, a ps exits"));
    m_kill->setToolTip(tr("Kill the task (SIGKILL), as a crash would"));
    m_restart->setToolTip(tr("Start the task again with the same flags"));
    m_delay->setRange(0, 10000);
    m_delay->setSingleStep(50);
    m_delay->setValue(100);
    m_delay->setSuffix(tr(" ms"));
    m_delay->setToolTip(tr("Extra time per step for the selected worker: a straggler"));
    m_slowDown->setToolTip(tr("Make the selected worker a straggler (0 ms removes the delay)"));
    m_stop->setObjectName(QStringLiteral("stopTask"));
    m_kill->setObjectName(QStringLiteral("killTask"));
    m_restart->setObjectName(QStringLiteral("restartTask"));
    m_slowDown->setObjectName(QStringLiteral("slowDownTask"));
    m_addWorker->setObjectName(QStringLiteral("addWorker"));

    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000); // the launcher keeps the full (bounded) log
    m_log->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_log->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_log->setObjectName(QStringLiteral("taskLog"));
    m_logTitle->setText(tr("Select a task to see its log."));

    auto *buttons = new QHBoxLayout;
    buttons->addWidget(m_stop);
    buttons->addWidget(m_kill);
    buttons->addWidget(m_restart);
    buttons->addSpacing(16);
    buttons->addWidget(new QLabel(tr("Straggler:"), this));
    buttons->addWidget(m_delay);
    buttons->addWidget(m_slowDown);
    buttons->addSpacing(16);
    buttons->addWidget(m_addWorker);
    buttons->addStretch(1);

    auto *left = new QWidget(this);
    auto *leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addLayout(buttons);
    leftLayout->addWidget(m_table, 1);
    auto *right = new QWidget(this);
    auto *rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    rightLayout->addWidget(m_logTitle);
    rightLayout->addWidget(m_log, 1);
    auto *splitter = new QSplitter(Qt::Horizontal, this);
    splitter->addWidget(left);
    splitter->addWidget(right);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(splitter);

    connect(m_stop, &QPushButton::clicked, this, &ProcessPanel::stopSelected);
    connect(m_kill, &QPushButton::clicked, this, &ProcessPanel::killSelected);
    connect(m_restart, &QPushButton::clicked, this, &ProcessPanel::restartSelected);
    connect(m_slowDown, &QPushButton::clicked, this, [this] { slowDownSelected(m_delay->value()); });
    connect(m_addWorker, &QPushButton::clicked, this, &ProcessPanel::addWorker);
    connect(m_table, &QTableView::customContextMenuRequested, this, &ProcessPanel::showContextMenu);
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        updateButtons();
        showLogOfSelection();
    });
    connect(m_model, &QAbstractItemModel::modelReset, this, [this] {
        updateButtons();
        showLogOfSelection();
    });
    connect(m_model, &QAbstractItemModel::dataChanged, this, [this] {
        updateButtons();
        showLogOfSelection();
    });
    connect(m_launcher, &ClusterLauncher::taskChanged, this, &ProcessPanel::refresh);
    connect(m_launcher, &ClusterLauncher::outputAppended, this, &ProcessPanel::appendOutput);
    connect(m_watcher, &ClusterWatcher::stragglerChanged, this, [this](const QString &address, int delayMs) {
        m_stragglers[address] = delayMs;
        for (const TaskInfo &task : m_launcher->tasks())
            if (QString::fromStdString(task.address.toString()) == address)
                m_launcher->setStragglerDelay(task.task, delayMs); // refreshes through taskChanged
        refresh();
    });
    updateButtons();
}

void ProcessPanel::setSnapshot(std::shared_ptr<const RunSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    refresh();
}

void ProcessPanel::reset()
{
    m_stragglers.clear();
    m_snapshot.reset();
    refresh();
}

void ProcessPanel::refresh()
{
    const int selected = selectedRow();
    m_model->setRows(buildProcessRows(m_launcher->tasks(), m_snapshot.get(), m_watcher->address(), m_stragglers));
    if (selected >= 0 && selectedRow() < 0 && selected < m_model->rowCount())
        selectRow(selected);
    else if (selected < 0 && m_model->rowCount() > 0)
        selectRow(0); // a log to read from the start: ps:0's
}

int ProcessPanel::selectedRow() const
{
    const QModelIndexList rows = m_table->selectionModel()->selectedRows();
    return rows.isEmpty() ? -1 : rows.first().row();
}

void ProcessPanel::selectRow(int row)
{
    m_table->selectRow(row);
}

void ProcessPanel::updateButtons()
{
    const ProcessRow *row = m_model->rowAt(selectedRow());
    const bool local = row && row->launcherRow >= 0;
    const bool alive = row && row->state != TaskState::Finished && row->state != TaskState::Stopped
                       && row->state != TaskState::Dead && row->state != TaskState::NotStarted;
    const bool running = local && alive;
    // A task of a watched cluster can be asked to stop through its address.
    m_stop->setEnabled(running || (row && !local && alive && !row->address.isEmpty()));
    m_kill->setEnabled(running);
    m_restart->setEnabled(local && !running);
    const bool canSlow = row && row->isWorker && !row->address.isEmpty();
    m_slowDown->setEnabled(canSlow);
    m_delay->setEnabled(canSlow);
    QString noRoom;
    m_addWorker->setEnabled(m_launcher->canAddWorker(&noRoom));
    m_addWorker->setToolTip(noRoom.isEmpty() ? tr("Start one more worker while the cluster trains (an elastic "
                                                  "cluster, --max_workers); Stop takes one away")
                                             : tr("Cannot add a worker: %1").arg(noRoom));
    const QString why = !row     ? tr("Select a task first")
                        : !local ? tr("Tasks this app did not start can be asked to stop, not killed or restarted")
                                 : QString();
    for (QPushButton *button : {m_stop, m_kill, m_restart})
        button->setStatusTip(why);
}

void ProcessPanel::showLogOfSelection()
{
    const ProcessRow *row = m_model->rowAt(selectedRow());
    const int launcherRow = row ? row->launcherRow : -1;
    if (!row) {
        m_logRow = -1;
        m_logTitle->setText(tr("Select a task to see its log."));
        m_log->clear();
        return;
    }
    if (launcherRow < 0) {
        m_logRow = -1;
        m_logTitle->setText(tr("%1: no log here").arg(row->task));
        m_log->setPlainText(tr("This task was not started by this app (the cluster is watched through ps:0), "
                               "so its output is on the machine that runs it."));
        return;
    }
    // The title follows the pid (a task starts, or is restarted).
    m_logTitle->setText(row->pid > 0 ? tr("Log of %1 (%2, pid %3)").arg(row->task, row->address).arg(row->pid)
                                     : tr("Log of %1 (%2)").arg(row->task, row->address));
    if (launcherRow == m_logRow)
        return;
    m_logRow = launcherRow;
    m_log->setPlainText(m_launcher->output(launcherRow));
    m_log->verticalScrollBar()->setValue(m_log->verticalScrollBar()->maximum());
}

void ProcessPanel::appendOutput(int launcherRow, const QString &text)
{
    if (launcherRow != m_logRow)
        return;
    QScrollBar *bar = m_log->verticalScrollBar();
    const bool atEnd = bar->value() >= bar->maximum() - 2;
    QString chunk = text;
    if (chunk.endsWith(QLatin1Char('\n')))
        chunk.chop(1);
    m_log->appendPlainText(chunk);
    // Stay at the end unless the user scrolled up to read.
    if (atEnd)
        bar->setValue(bar->maximum());
}

void ProcessPanel::stopSelected()
{
    const ProcessRow *row = m_model->rowAt(selectedRow());
    if (!row)
        return;
    if (row->launcherRow < 0) {
        // Not our process: ask the task itself (TaskControl.Stop).
        if (row->address.isEmpty())
            return;
        Q_EMIT statusMessage(tr("Asking %1 (%2) to stop...").arg(row->task, row->address));
        m_watcher->stopTask(row->address, tr("stopped from the Parasync app"));
        return;
    }
    Q_EMIT statusMessage(tr("Stopping %1 (pid %2)...").arg(row->task).arg(row->pid));
    m_launcher->stopTask(row->launcherRow);
}

void ProcessPanel::addWorker()
{
    QString error;
    const int row = m_launcher->addWorker(&error);
    if (row < 0) {
        Q_EMIT statusMessage(tr("Cannot add a worker: %1").arg(error));
        return;
    }
    const TaskInfo &task = m_launcher->tasks()[size_t(row)];
    Q_EMIT statusMessage(
        tr("Starting %1 at %2: it joins the training cluster")
            .arg(QString::fromStdString(task.task.toString()), QString::fromStdString(task.address.toString())));
}

void ProcessPanel::killSelected()
{
    const ProcessRow *row = m_model->rowAt(selectedRow());
    if (!row || row->launcherRow < 0)
        return;
    Q_EMIT statusMessage(tr("Killing %1 (pid %2)").arg(row->task).arg(row->pid));
    m_launcher->killTask(row->launcherRow);
}

void ProcessPanel::restartSelected()
{
    const ProcessRow *row = m_model->rowAt(selectedRow());
    if (!row || row->launcherRow < 0)
        return;
    Q_EMIT statusMessage(tr("Restarting %1 on %2").arg(row->task, row->address));
    m_launcher->restartTask(row->launcherRow);
    m_logRow = -1; // the restarted task's log starts over
    showLogOfSelection();
}

void ProcessPanel::slowDownSelected(int delayMs)
{
    const ProcessRow *row = m_model->rowAt(selectedRow());
    if (!row || !row->isWorker || row->address.isEmpty())
        return;
    // The table shows the delay once the worker confirms it (stragglerChanged).
    m_watcher->setStraggler(row->address, delayMs);
    Q_EMIT statusMessage(
        delayMs > 0 ? tr("Asked %1 (%2) to take %3 ms longer per step").arg(row->task, row->address).arg(delayMs)
                    : tr("Asked %1 (%2) to run at full speed again").arg(row->task, row->address));
    refresh();
}

void ProcessPanel::showContextMenu(const QPoint &pos)
{
    const QModelIndex index = m_table->indexAt(pos);
    if (!index.isValid())
        return;
    selectRow(index.row());
    QMenu menu(this);
    QAction *stop = menu.addAction(tr("Stop"), this, &ProcessPanel::stopSelected);
    stop->setEnabled(m_stop->isEnabled());
    QAction *kill = menu.addAction(tr("Kill"), this, &ProcessPanel::killSelected);
    kill->setEnabled(m_kill->isEnabled());
    QAction *restart = menu.addAction(tr("Restart"), this, &ProcessPanel::restartSelected);
    restart->setEnabled(m_restart->isEnabled());
    menu.addSeparator();
    for (const int delay : {50, 100, 200, 500}) {
        QAction *slow = menu.addAction(tr("Slow down by %1 ms per step").arg(delay), this,
                                       [this, delay] { slowDownSelected(delay); });
        slow->setEnabled(m_slowDown->isEnabled());
    }
    QAction *clear = menu.addAction(tr("Run at full speed"), this, [this] { slowDownSelected(0); });
    clear->setEnabled(m_slowDown->isEnabled());
    menu.exec(m_table->viewport()->mapToGlobal(pos));
}

} // namespace parasync::ui
