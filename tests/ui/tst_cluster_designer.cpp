// Designing a cluster: the dialog's fields become a plan every task accepts,
// the plan round-trips through a cluster file, and a wrong address is named
// in the dialog instead of reaching the processes.
#include "base/error.h"
#include "config/cluster_file.h"
#include "config/cluster_plan_file.h"
#include "config/plan_from_flags.h"
#include "ui/dialogs/cluster_designer_dialog.h"
#include "ui/dialogs/tfjob_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
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
        plan.cluster.psBackups.push_back(parseHostPort("127.0.0.1:2232"));
        plan.training.mode.set_mode(proto::SSP);
        plan.training.mode.set_staleness(4);
        plan.training.learningRate = 0.02f;
        plan.training.lastStep = 1234;
        plan.training.optimizer = "adagrad";
        plan.training.pace.computeMs = 40;
        plan.workerPace[2] = plan.training.pace;
        plan.workerPace[2].stragglerMs = 60; // the designer does not show it, and keeps it
        // Nor the workers' own commands, which it keeps as well.
        plan.workerCommand = {"/usr/bin/python3", "train.py", "--batch_size=64"};
        plan.workerCommands[0] = {"./chief.sh"};
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
        QCOMPARE(loaded.training.pace.computeMs, 40);
        QCOMPARE(loaded.paceOf(2).stragglerMs, 60);
        QCOMPARE(loaded.paceOf(1).stragglerMs, 0);
        QCOMPARE(loaded.commandOf(1), plan.workerCommand);
        QCOMPARE(loaded.commandOf(0), std::vector<std::string>{"./chief.sh"});
        // And the launcher's flags for a task carry the same cluster.
        const QStringList args = loaded.arguments(TaskId{JobName::Worker, 2});
        QVERIFY2(args.join(QLatin1Char(' ')).contains(QStringLiteral("127.0.0.1:2225")),
                 qPrintable(args.join(QLatin1Char(' '))));
    }

    // Zhang et al.'s rule is a box in the designer, offered for the modes
    // whose row has it (async, ssp) and not for sync; it reaches the cluster
    // file and every task's flags.
    void theStalenessRuleIsOfferedWhereTheModeHasIt()
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.training.mode.set_mode(proto::ASYNC);
        plan.training.mode.set_learning_rate_by_staleness(true);
        ClusterDesignerDialog dialog(plan);
        auto *rule = dialog.findChild<QCheckBox *>(QStringLiteral("stalenessRule"));
        auto *mode = dialog.findChild<QComboBox *>(QStringLiteral("updateMode"));
        QVERIFY(rule && mode);
        QVERIFY(rule->isChecked());
        QVERIFY(rule->isEnabled());
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("rule.json"));
        QVERIFY(dialog.saveTo(path));
        ClusterPlan loaded = planFromClusterFile(readClusterFile(path.toStdString()));
        QVERIFY(loaded.training.mode.learning_rate_by_staleness());
        QVERIFY(loaded.arguments(TaskId{JobName::Ps, 0}).contains(QStringLiteral("--learning_rate_by_staleness=1")));

        // sync has no staleness to divide by: the box is off and not written.
        mode->setCurrentIndex(mode->findData(int(proto::SYNC)));
        QVERIFY(!rule->isEnabled());
        QVERIFY(dialog.saveTo(path));
        loaded = planFromClusterFile(readClusterFile(path.toStdString()));
        QVERIFY(!loaded.training.mode.learning_rate_by_staleness());
        mode->setCurrentIndex(mode->findData(int(proto::SSP)));
        QVERIFY(rule->isEnabled());
    }

    // Many async workers make stale gradients: the dialog says how stale and
    // what to do before the user launches a cluster whose loss will diverge.
    void manyAsyncWorkersGetAStalenessHint()
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.cluster.workers.clear();
        for (int i = 0; i < 32; ++i)
            plan.cluster.workers.push_back(parseHostPort("127.0.0.1:" + std::to_string(3000 + i)));
        plan.training.mode.set_mode(proto::ASYNC);
        ClusterDesignerDialog dialog(plan);
        auto *hint = dialog.findChild<QLabel *>(QStringLiteral("stalenessHint"));
        QVERIFY(hint);
        QVERIFY(!hint->isHidden());
        QVERIFY2(hint->text().contains(u"Async with 32 workers: a gradient can be up to 31 updates old"),
                 qPrintable(hint->text()));
        QVERIFY2(hint->text().contains(u"lower the learning rate (now 0.05)"), qPrintable(hint->text()));

        // Sync averages fresh gradients only: no hint.
        auto *mode = dialog.findChild<QComboBox *>(QStringLiteral("updateMode"));
        QVERIFY(mode);
        mode->setCurrentIndex(mode->findData(int(proto::SYNC)));
        QVERIFY(hint->isHidden());
        mode->setCurrentIndex(mode->findData(int(proto::ASYNC)));
        QVERIFY(!hint->isHidden());

        // Removing workers below 16 takes it away; adding one back brings it.
        auto *workers = dialog.findChild<QListWidget *>(QStringLiteral("workerHosts"));
        QVERIFY(workers);
        while (workers->count() > 15)
            delete workers->item(workers->count() - 1);
        QVERIFY(hint->isHidden());
        workers->addItem(QStringLiteral("127.0.0.1:3015"));
        QVERIFY(!hint->isHidden());
        QVERIFY2(hint->text().contains(u"Async with 16 workers: a gradient can be up to 15 updates old"),
                 qPrintable(hint->text()));

        // The demo's two workers: nothing to say.
        ClusterDesignerDialog demo(ClusterPlan::demo());
        QVERIFY(demo.findChild<QLabel *>(QStringLiteral("stalenessHint"))->isHidden());
    }

    void aWrongAddressIsNamedInTheDialog_data()
    {
        QTest::addColumn<QString>("address");
        QTest::addColumn<QString>("mentioned");
        QTest::newRow("no port") << QStringLiteral("127.0.0.1") << QStringLiteral("worker:1");
        QTest::newRow("port out of range") << QStringLiteral("127.0.0.1:99999") << QStringLiteral("99999");
        QTest::newRow("used twice") << QStringLiteral("127.0.0.1:2223") << QStringLiteral("127.0.0.1:2223");
    }

    // One backup per ps task: a second is refused before anything starts.
    void moreBackupsThanPsTasksAreRefusedInTheDialog()
    {
        ClusterDesignerDialog dialog(ClusterPlan::demo());
        auto *backups = dialog.findChild<QListWidget *>(QStringLiteral("psBackupHosts"));
        QVERIFY(backups);
        for (const char *address : {"127.0.0.1:2232", "127.0.0.1:2233"})
            backups->addItem(QString::fromLatin1(address));
        ClusterPlan plan;
        QString error;
        QVERIFY(!dialog.plan(&plan, &error));
        QVERIFY2(error.contains(QStringLiteral("--ps_backup_hosts lists 2 backups for 1 ps task")), qPrintable(error));
        delete backups->item(1);
        QVERIFY2(dialog.plan(&plan, &error), qPrintable(error));
        QCOMPARE(plan.cluster.psBackups.size(), size_t(1));
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

    void theTfJobDialogWritesTheDesignedClusterOnceAnImageIsGiven()
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.training.mode.set_mode(proto::SYNC);
        TfJobDialog dialog(plan);
        auto *image = dialog.findChild<QLineEdit *>(QStringLiteral("tfJobImage"));
        auto *save = dialog.findChild<QPushButton *>(QStringLiteral("tfJobSave"));
        auto *preview = dialog.findChild<QPlainTextEdit *>(QStringLiteral("tfJobPreview"));
        auto *error = dialog.findChild<QLabel *>(QStringLiteral("tfJobError"));
        QVERIFY(image && save && preview && error);
        // No image yet: nothing to save, and the dialog says what is missing.
        QVERIFY(!save->isEnabled());
        QVERIFY2(error->text().contains(QStringLiteral("image")), qPrintable(error->text()));
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("tfjob.yaml"));
        QVERIFY(!dialog.saveTo(path));
        QVERIFY(!QFile::exists(path));

        image->setText(QStringLiteral("registry.example.com/parasync:1"));
        QVERIFY(save->isEnabled());
        QVERIFY(error->text().isEmpty());
        QVERIFY(dialog.saveTo(path));
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QString yaml = QString::fromUtf8(file.readAll());
        QCOMPARE(yaml, preview->toPlainText());
        for (const char *text :
             {"kind: TFJob", "PS:", "Worker:", "replicas: 2", "--mode=sync", "image: registry.example.com/parasync:1"})
            QVERIFY2(yaml.contains(QLatin1String(text)), qPrintable(yaml));

        // Args that would make every pod the same task are refused by name.
        auto *args = dialog.findChild<QPlainTextEdit *>(QStringLiteral("tfJobArgs"));
        QVERIFY(args);
        args->appendPlainText(QStringLiteral("--job_name=worker"));
        QVERIFY(!save->isEnabled());
        QVERIFY2(error->text().contains(QStringLiteral("--job_name=worker")), qPrintable(error->text()));
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
