// `parasync-node --status` and `--set_mode=...` as the command line gives
// them (config/control_command.h's parseControlCommand): which command, whose
// ps:0, what mode; mistakes refused before anything is called, naming the
// flag and what to write instead.
#include "config/control_command.h"
#include "support/input_error_checks.h"
#include "support/node_arguments.h"

#include <QTest>

using namespace parasync;
using namespace parasync::testing;

namespace {

const QString kPs = QStringLiteral("--ps_hosts=10.0.0.5:2222,10.0.0.6:2222");

} // namespace

class TestControlCommand : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aTaskCommandLineIsNoControlCommand()
    {
        QVERIFY(!parseControlCommand(
            nodeArguments({kPs, QStringLiteral("--worker_hosts=10.0.0.7:2223"), QStringLiteral("--job_name=ps")})));
        QVERIFY(!parseControlCommand(nodeArguments({QStringLiteral("--help")})));
        // Only the flag itself: a value that merely mentions it is not one.
        QVERIFY(!parseControlCommand(nodeArguments({kPs, QStringLiteral("--logdir=--status")})));
    }

    void statusTalksToTheFirstPs()
    {
        const auto command = parseControlCommand(
            nodeArguments({kPs, QStringLiteral("--status"), QStringLiteral("--cluster_token_file=/run/token"),
                           QStringLiteral("--heartbeat_ms=500"),
                           // A task's own flags may stay on the line.
                           QStringLiteral("--job_name=worker")}));
        QVERIFY(command);
        QCOMPARE(command->action, ControlCommand::Action::Status);
        QCOMPARE(command->ps0, std::string("10.0.0.5:2222"));
        QCOMPARE(command->clusterTokenFile, std::string("/run/token"));
        QCOMPARE(command->connection.heartbeatMs, 500);
    }

    void setModeKeepsTheNumbersNotGiven()
    {
        const auto command = parseControlCommand(
            nodeArguments({kPs, QStringLiteral("--set_mode=SSP"), QStringLiteral("--staleness=2")}));
        QVERIFY(command);
        QCOMPARE(command->action, ControlCommand::Action::SetMode);
        proto::ModeConfig current;
        current.set_mode(proto::SYNC);
        current.set_staleness(10);
        current.set_replicas_to_aggregate(3);
        current.set_total_num_replicas(4);
        const proto::ModeConfig asked = command->modeFrom(current);
        QCOMPARE(asked.mode(), proto::SSP);
        QCOMPARE(asked.staleness(), 2);
        QCOMPARE(asked.replicas_to_aggregate(), 3);
        QCOMPARE(asked.total_num_replicas(), 4);
    }

    void setModeWinsOverStatus()
    {
        const auto command
            = parseControlCommand(nodeArguments({kPs, QStringLiteral("--status"), QStringLiteral("--set_mode=sync"),
                                                 QStringLiteral("--replicas_to_aggregate=2")}));
        QVERIFY(command);
        QCOMPARE(command->action, ControlCommand::Action::SetMode);
        QCOMPARE(command->modeFrom({}).replicas_to_aggregate(), 2);
    }

    void mistakesSayWhatToDo_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QStringList>("mentions");
        QTest::newRow("no ps") << QStringList{QStringLiteral("--status")}
                               << QStringList{QStringLiteral("--ps_hosts=HOST:PORT")};
        QTest::newRow("empty ps") << QStringList{QStringLiteral("--ps_hosts="), QStringLiteral("--set_mode=sync")}
                                  << QStringList{QStringLiteral("--ps_hosts=HOST:PORT")};
        QTest::newRow("unknown mode") << QStringList{kPs, QStringLiteral("--set_mode=fast")}
                                      << QStringList{QStringLiteral("--set_mode=fast"),
                                                     QStringLiteral("async, sync or ssp")};
        QTest::newRow("mode not given") << QStringList{kPs, QStringLiteral("--set_mode")}
                                        << QStringList{QStringLiteral("--set_mode="),
                                                       QStringLiteral("async, sync or ssp")};
        QTest::newRow("not a number") << QStringList{kPs, QStringLiteral("--set_mode=ssp"),
                                                     QStringLiteral("--staleness=two")}
                                      << QStringList{QStringLiteral("--staleness=two"), QStringLiteral("whole number")};
        QTest::newRow("trailing text") << QStringList{kPs, QStringLiteral("--set_mode=ssp"),
                                                      QStringLiteral("--staleness=3x")}
                                       << QStringList{QStringLiteral("--staleness=3x"), QStringLiteral("whole number")};
        QTest::newRow("negative") << QStringList{kPs, QStringLiteral("--set_mode=sync"),
                                                 QStringLiteral("--total_num_replicas=-1")}
                                  << QStringList{QStringLiteral("--total_num_replicas=-1"),
                                                 QStringLiteral("at least 0")};
        QTest::newRow("bad connection flag")
            << QStringList{kPs, QStringLiteral("--status"), QStringLiteral("--heartbeat_ms=5")}
            << QStringList{QStringLiteral("--heartbeat_ms=5"), QStringLiteral("at least 100")};
    }
    void mistakesSayWhatToDo()
    {
        QFETCH(QStringList, flags);
        QFETCH(QStringList, mentions);
        verifyMentions(inputErrorOf([&] { parseControlCommand(nodeArguments(flags)); }), mentions);
    }
};

QTEST_GUILESS_MAIN(TestControlCommand)
#include "tst_control_command.moc"
