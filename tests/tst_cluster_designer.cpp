// Designing a cluster: the dialog's fields become a plan every task accepts,
// the plan round-trips through a cluster file, and a wrong address is named
// in the dialog instead of reaching the processes.
#include "cluster_designer_dialog.h"
#include "cluster_plan_file.h"
#include "error.h"

#include <QLabel>
#include <QListWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync;
using namespace parasync::ui;

class TestClusterDesigner : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aDesignedClusterRoundTripsThroughItsFile()
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.cluster.workers.push_back(parseHostPort("127.0.0.1:2225"));
        plan.training.mode.set_mode(proto::SSP);
        plan.training.mode.set_staleness(4);
        plan.training.learningRate = 0.02f;
        plan.training.lastStep = 1234;
        plan.training.optimizer = "adagrad";
        ClusterDesignerDialog dialog(plan);

        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("three_workers.json"));
        QVERIFY(dialog.saveTo(path));
        const ClusterPlan loaded = planFromClusterFile(readClusterFile(path.toStdString()));
        QCOMPARE(loaded.cluster, plan.cluster);
        QCOMPARE(loaded.training.mode.mode(), proto::SSP);
        QCOMPARE(loaded.training.mode.staleness(), 4);
        QCOMPARE(loaded.training.learningRate, 0.02f);
        QCOMPARE(loaded.training.lastStep, int64_t(1234));
        QCOMPARE(loaded.training.optimizer, std::string("adagrad"));
        // And the launcher's flags for a task carry the same cluster.
        const QStringList args = loaded.arguments(TaskId{JobName::Worker, 2});
        QVERIFY2(args.join(QLatin1Char(' ')).contains(QStringLiteral("127.0.0.1:2225")), qPrintable(args.join(QLatin1Char(' '))));
    }

    void aWrongAddressIsNamedInTheDialog_data()
    {
        QTest::addColumn<QString>("address");
        QTest::addColumn<QString>("mentioned");
        QTest::newRow("no port") << QStringLiteral("127.0.0.1") << QStringLiteral("worker:1");
        QTest::newRow("port out of range") << QStringLiteral("127.0.0.1:99999") << QStringLiteral("99999");
        QTest::newRow("used twice") << QStringLiteral("127.0.0.1:2223") << QStringLiteral("127.0.0.1:2223");
    }

    void aWrongAddressIsNamedInTheDialog()
    {
        QFETCH(QString, address);
        QFETCH(QString, mentioned);
        ClusterDesignerDialog dialog(ClusterPlan::demo());
        auto *workers = dialog.findChild<QListWidget *>(QStringLiteral("workerHosts"));
        QVERIFY(workers);
        workers->item(1)->setText(address);
        ClusterPlan plan;
        QString error;
        QVERIFY(!dialog.plan(&plan, &error));
        QVERIFY2(error.contains(mentioned), qPrintable(error));
        QTemporaryDir dir;
        QVERIFY(!dialog.saveTo(dir.filePath(QStringLiteral("bad.json"))));
        QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("bad.json"))));
    }

    void demoPortsComeFromTheEnvironment()
    {
        qputenv("PARASYNC_DEMO_PORTS", "4001,4002,4003");
        const ClusterPlan plan = demoPlanFromEnvironment();
        qunsetenv("PARASYNC_DEMO_PORTS");
        QCOMPARE(plan.cluster.ps.front().port, uint16_t(4001));
        QCOMPARE(plan.cluster.workers.at(1).port, uint16_t(4003));
        QCOMPARE(demoPlanFromEnvironment().cluster.ps.front().port, uint16_t(2222));
    }
};

QTEST_MAIN(TestClusterDesigner)
#include "tst_cluster_designer.moc"
