// The pre-flight grid (ui/) over a real check against a real sshd: a row per
// host, a red cell where a check failed with the fix listed under the grid,
// and "Use free ports" rewriting the plan until every cell is green.
#include "base/port_holder.h"
#include "config/cluster_file.h"
#include "orchestration/preflight_check.h"
#include "support/cluster_harness.h"
#include "support/ssh_server.h"
#include "ui/dialogs/preflight_dialog.h"

#include <QApplication>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QTextBrowser>

#include <memory>

using namespace parasync;
using namespace parasync::testing;
using parasync::ui::PreflightDialog;

namespace {

constexpr int kTimeoutMs = 60000;

} // namespace

class TestPreflightDialog : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void gridShowsEachHostAndUseFreePortsFixesATakenPort()
    {
        SshServer server;
        QString whyNot;
        if (!server.start(&whyNot))
            QSKIP(qPrintable(QStringLiteral("no sshd to test against: ") + whyNot));
        ClusterPlan plan = ClusterPlan::demo();
        for (auto *list : {&plan.cluster.ps, &plan.cluster.workers})
            for (auto &address : *list)
                address.port = pickFreePort();
        RemoteHost host = server.remoteHost("127.0.0.1");
        host.node = nodeBinary().toStdString();
        plan.hosts = {host};
        HeldPort stale(plan.cluster.ps.front().port);
        QVERIFY(stale.ok());

        PreflightDialog dialog(plan, nodeBinary());
        dialog.show();
        QSignalSpy finished(dialog.check(), &PreflightCheck::finished);
        QVERIFY(finished.wait(kTimeoutMs));
        QCOMPARE(finished.at(0).at(0).toBool(), false);

        QTableWidget *grid = dialog.grid();
        QCOMPARE(grid->rowCount(), 1);
        QCOMPARE(grid->verticalHeaderItem(0)->text(), QStringLiteral("127.0.0.1"));
        QCOMPARE(grid->columnCount(), 5); // the last, worker commands, is empty here
        QVERIFY(grid->item(0, 0)->text().startsWith(QStringLiteral("\u2713"))); // SSH
        QVERIFY(grid->item(0, 2)->text().startsWith(QStringLiteral("\u2717"))); // ports
        QVERIFY(grid->item(0, 2)->text().contains(QLatin1String("taken")));
        QVERIFY(grid->item(0, 2)->toolTip().contains(QLatin1String("worker:1 port"))); // every port in the tooltip
        const QString problems = dialog.findChild<QTextBrowser *>(QStringLiteral("preflightProblems"))->toPlainText();
        QVERIFY2(problems.contains(QLatin1String("use the free port")), qPrintable(problems));

        auto *useFree = dialog.findChild<QPushButton *>(QStringLiteral("useFreePorts"));
        auto *launch = dialog.findChild<QPushButton *>(QStringLiteral("launch"));
        QVERIFY(useFree->isEnabled());
        QCOMPARE(launch->text(), QStringLiteral("Launch anyway"));
        finished.clear();
        QTest::mouseClick(useFree, Qt::LeftButton);
        QVERIFY(finished.wait(kTimeoutMs));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(dialog.check()->report()));
        QVERIFY(dialog.portsRewritten());
        QVERIFY(dialog.plan().cluster.ps.front().port != plan.cluster.ps.front().port);
        QCOMPARE(dialog.plan().cluster.workers, plan.cluster.workers);
        QVERIFY(grid->item(0, 2)->text().startsWith(QStringLiteral("\u2713")));
        QCOMPARE(launch->text(), QStringLiteral("Launch"));
        QVERIFY(launch->isEnabled());
    }
};

QTEST_MAIN(TestPreflightDialog)
#include "tst_preflight_dialog.moc"
