// The one form in which a task says what it is doing: what a node writes,
// the launcher reads back -- and nothing else it prints is taken for a state.
#include "formats/task_state_line.h"

#include <QTest>

using namespace parasync;

class TestTaskStateLine : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void everyPhaseReadsBackAsWritten()
    {
        for (const TaskPhase phase : {TaskPhase::Listening, TaskPhase::Waiting, TaskPhase::Training, TaskPhase::Serving,
                                      TaskPhase::Finished, TaskPhase::Stopped}) {
            const TaskStateReport written{TaskId{JobName::Worker, 12}, phase,
                                          "cannot reach ps:0 at 127.0.0.1:2222: connection refused: is it running?"};
            const auto read = parseTaskStateLine(taskStateLine(written));
            QVERIFY(read);
            QVERIFY(read->task == written.task);
            QCOMPARE(read->phase, phase);
            QCOMPARE(read->detail, written.detail);
        }
    }

    void theLogTimestampAndAnEmptyDetailAreFine()
    {
        const auto read = parseTaskStateLine("03:24:23.442 ps:1 state serving");
        QVERIFY(read);
        QVERIFY((read->task == TaskId{JobName::Ps, 1}));
        QCOMPARE(read->phase, TaskPhase::Serving);
        QVERIFY(read->detail.empty());
        QCOMPARE(taskStateLine({TaskId{JobName::Ps, 1}, TaskPhase::Serving, {}}), std::string("ps:1 state serving"));
    }

    void proseIsNotAState_data()
    {
        QTest::addColumn<QString>("line");
        // Lines a task prints that once told the launcher its state: now prose.
        QTest::newRow("joined") << QStringLiteral("worker:0 joined the cluster at global step 0");
        QTest::newRow("listening") << QStringLiteral("ps:0 listening on 127.0.0.1:2222, mode async");
        QTest::newRow("initialised") << QStringLiteral(
            "ps:0: variables initialised by the chief (fresh) at global step 0");
        QTest::newRow("unknown phase") << QStringLiteral("worker:0 state dancing: no");
        QTest::newRow("another task's words") << QStringLiteral("chief: worker:0 state training");
        QTest::newRow("no index") << QStringLiteral("worker state training");
    }
    void proseIsNotAState()
    {
        QFETCH(QString, line);
        QVERIFY(!parseTaskStateLine(line.toStdString()));
    }
};

QTEST_GUILESS_MAIN(TestTaskStateLine)
#include "tst_task_state_line.moc"
