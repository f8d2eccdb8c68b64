// The process panel's rows without a window: for a cluster watched from
// afar (ps:0's status names the tasks) and one this app launched, each ps
// row says which variables, or which slices of them, that ps task holds.
#include "ui/models/process_table_model.h"

#include <QTest>

#include <algorithm>

using namespace parasync;
using namespace parasync::ui;

namespace {

// The 784-feature softmax as a chief with two ps tasks declares it, W split
// in two by --min_slice_bytes.
RunSnapshot partitionedSoftmax()
{
    RunSnapshot snapshot;
    snapshot.psHosts = {"127.0.0.1:2222", "127.0.0.1:2225"};
    snapshot.workerHosts = {"127.0.0.1:2223"};
    auto *w = snapshot.signature.add_variables();
    w->set_name("W");
    w->add_shape(784);
    w->add_shape(10);
    w->add_slice_rows(392);
    w->add_slice_rows(392);
    auto *b = snapshot.signature.add_variables();
    b->set_name("b");
    b->add_shape(10);
    return snapshot;
}

QString holdsOf(const std::vector<ProcessRow> &rows, const QString &task)
{
    for (const auto &row : rows)
        if (row.task == task)
            return row.holds;
    return QStringLiteral("(no row for %1)").arg(task);
}

} // namespace

class TestProcessRows : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void watchedPsRowsSayWhichSlicesTheyHold()
    {
        const RunSnapshot snapshot = partitionedSoftmax();
        const auto rows = buildProcessRows({}, &snapshot, {}, {});
        QCOMPARE(holdsOf(rows, QStringLiteral("ps:0")), QStringLiteral("W rows 0-391 of 784 (15.3 KiB), b (40 bytes)"));
        QCOMPARE(holdsOf(rows, QStringLiteral("ps:1")), QStringLiteral("W rows 392-783 of 784 (15.3 KiB)"));
        QCOMPARE(holdsOf(rows, QStringLiteral("worker:0")), QStringLiteral("(no row for worker:0)"));

        ProcessTableModel model;
        model.setRows(rows);
        QCOMPARE(model.headerData(ProcessTableModel::VariablesColumn, Qt::Horizontal).toString(),
                 QStringLiteral("Variables"));
        QCOMPARE(model.data(model.index(1, ProcessTableModel::VariablesColumn)).toString(),
                 QStringLiteral("W rows 392-783 of 784 (15.3 KiB)"));
        QVERIFY(model.data(model.index(1, ProcessTableModel::VariablesColumn), Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("--min_slice_bytes")));
    }

    void psRowsNameTheTablesWhoseRowsTheyHold()
    {
        // sparse_lr as its chief declares it: a bias, and one table.
        RunSnapshot snapshot;
        snapshot.psHosts = {"127.0.0.1:2222", "127.0.0.1:2225"};
        auto *bias = snapshot.signature.add_variables();
        bias->set_name("bias");
        bias->add_shape(1);
        auto *table = snapshot.signature.add_tables();
        table->set_name("weights");
        table->set_row_width(1);
        const auto rows = buildProcessRows({}, &snapshot, {}, {});
        QCOMPARE(holdsOf(rows, QStringLiteral("ps:0")),
                 QStringLiteral("bias (4 bytes), table weights: 1/2 of its rows, by id hash"));
        QCOMPARE(holdsOf(rows, QStringLiteral("ps:1")), QStringLiteral("table weights: 1/2 of its rows, by id hash"));

        snapshot.psHosts.resize(1);
        QCOMPARE(holdsOf(buildProcessRows({}, &snapshot, {}, {}), QStringLiteral("ps:0")),
                 QStringLiteral("bias (4 bytes), table weights: every row"));
    }

    void launchedPsRowsCountTheLaunchersPsTasks()
    {
        // Three ps tasks launched here; ps:0's status has not named them yet.
        RunSnapshot snapshot = partitionedSoftmax();
        snapshot.psHosts.clear();
        auto *w = snapshot.signature.mutable_variables(0);
        w->clear_slice_rows();
        for (const int rows : {262, 261, 261})
            w->add_slice_rows(rows);
        std::vector<TaskInfo> tasks;
        for (int k = 0; k < 3; ++k)
            tasks.push_back(TaskInfo{TaskId{JobName::Ps, k}, {}, TaskState::Serving, {}, 0, {}, 0, 0, 0});
        tasks.push_back(TaskInfo{TaskId{JobName::Worker, 0}, {}, TaskState::Training, {}, 0, {}, 0, 0, 0});
        const auto rows = buildProcessRows(tasks, &snapshot, {}, {});
        QCOMPARE(holdsOf(rows, QStringLiteral("ps:2")), QStringLiteral("W rows 523-783 of 784 (10.2 KiB)"));
        QCOMPARE(holdsOf(rows, QStringLiteral("worker:0")), QString());

        // Before the chief declared the model, nothing is claimed.
        const RunSnapshot empty;
        QCOMPARE(holdsOf(buildProcessRows(tasks, &empty, {}, {}), QStringLiteral("ps:0")), QString());
    }

    void aWorkerPushingNaNSaysSoBesideItsState()
    {
        // 64 async workers at the demo's learning rate diverge: the loss
        // overflows and ps:0 rejects every gradient while the workers still
        // train. The panel must not read as if all were well.
        RunSnapshot snapshot;
        WorkerFigures diverged;
        diverged.index = 0;
        diverged.phase = proto::TRAINING;
        diverged.nonfinite = 1234;
        WorkerFigures healthy;
        healthy.index = 1;
        healthy.phase = proto::TRAINING;
        snapshot.workers = {diverged, healthy};
        const auto stateOf = [](const std::vector<ProcessRow> &rows, const QString &task) {
            for (const auto &row : rows)
                if (row.task == task)
                    return row.stateText;
            return QString();
        };
        const auto watched = buildProcessRows({}, &snapshot, {}, {});
        QCOMPARE(stateOf(watched, QStringLiteral("worker:0")),
                 QStringLiteral("training \u00b7 1234 gradients with NaN or infinite values"));
        QCOMPARE(stateOf(watched, QStringLiteral("worker:1")), QStringLiteral("training"));
        // The same for a cluster this app launched.
        const std::vector<TaskInfo> tasks{
            TaskInfo{TaskId{JobName::Worker, 0}, {}, TaskState::Training, {}, 0, {}, 0, 0, 0}};
        QCOMPARE(stateOf(buildProcessRows(tasks, &snapshot, {}, {}), QStringLiteral("worker:0")),
                 QStringLiteral("training \u00b7 1234 gradients with NaN or infinite values"));
    }

    void aWorkerRejoiningAfterAFailoverIsNotShownTraining()
    {
        // ps:0's new primary, a moment after it took over: worker:1 has not
        // turned to it yet.
        RunSnapshot snapshot;
        WorkerFigures back;
        back.index = 0;
        back.phase = proto::TRAINING;
        WorkerFigures rejoining;
        rejoining.index = 1;
        rejoining.phase = proto::REJOINING;
        snapshot.workers = {back, rejoining};
        const auto rows = buildProcessRows({}, &snapshot, {}, {});
        const auto row = std::find_if(rows.begin(), rows.end(),
                                      [](const ProcessRow &r) { return r.task == QStringLiteral("worker:1"); });
        QVERIFY(row != rows.end());
        QCOMPARE(row->state, TaskState::WaitingFor);
        QCOMPARE(row->stateText, QStringLiteral("waiting for ps:0's new primary: rejoining after a failover"));
    }
};

QTEST_APPLESS_MAIN(TestProcessRows)
#include "tst_process_rows.moc"
