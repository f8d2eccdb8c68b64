// Starting a cluster with a remote host from the window, against a real sshd:
// the pre-flight dialog shows the launch sequence's own check, "Use free
// ports" checks again on the ports it found, Launch starts the tasks over ssh
// on those ports and they train; Cancel starts nothing.
#include "base/port_holder.h"
#include "config/cluster_file.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/preflight_check.h"
#include "support/cluster_harness.h"
#include "support/quit_answers.h"
#include "support/ssh_server.h"
#include "ui/charts/run_charts_view.h"
#include "ui/dialogs/preflight_dialog.h"
#include "ui/windows/main_window.h"

#include <QApplication>
#include <QPushButton>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTest>
#include <QTimer>

#include <functional>
#include <memory>

using namespace parasync;
using namespace parasync::testing;
using namespace parasync::ui;

namespace {

constexpr int kTimeoutMs = 60000;

ui::PreflightDialog *shownPreflight()
{
    for (QWidget *widget : QApplication::topLevelWidgets())
        if (auto *dialog = qobject_cast<ui::PreflightDialog *>(widget); dialog && dialog->isVisible())
            return dialog;
    return nullptr;
}

// Answers the modal pre-flight dialog as a person would: `act` is called
// every 100 ms while it is shown, with the check over, until it returns true.
class PreflightAnswer
{
public:
    explicit PreflightAnswer(std::function<bool(ui::PreflightDialog *)> act) : m_act(std::move(act))
    {
        QObject::connect(&m_timer, &QTimer::timeout, &m_timer, [this] {
            ui::PreflightDialog *dialog = shownPreflight();
            if (!dialog || dialog->check()->isRunning())
                return;
            ++m_seen;
            if (m_act(dialog))
                m_timer.stop();
        });
        m_timer.start(100);
    }
    int timesSeen() const { return m_seen; }

private:
    std::function<bool(ui::PreflightDialog *)> m_act;
    QTimer m_timer;
    int m_seen = 0;
};

} // namespace

class TestWindowPreflight : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        qRegisterMetaType<parasync::RunSnapshot>();
        qRegisterMetaType<parasync::proto::ModeConfig>();
        m_server = std::make_unique<SshServer>();
        QString whyNot;
        if (!m_server->start(&whyNot)) {
            m_server.reset();
            QSKIP(qPrintable(QStringLiteral("no sshd to test against: ") + whyNot));
        }
    }

    void cleanupTestCase() { m_server.reset(); }

    void aRemoteClusterIsCheckedThenLaunchedOnTheFreePortsItFound()
    {
        ClusterPlan plan = remotePlan();
        HeldPort stale(plan.cluster.ps.front().port);
        QVERIFY(stale.ok());
        ClusterLauncher launcher;
        launcher.setNodeBinary(nodeBinary());
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();

        bool askedForFreePorts = false;
        QString firstReport;
        PreflightAnswer answer([&](ui::PreflightDialog *dialog) {
            if (!askedForFreePorts) {
                // The taken port is red, with a free one found there.
                firstReport = dialog->check()->report();
                askedForFreePorts = true;
                dialog->findChild<QPushButton *>(QStringLiteral("useFreePorts"))->click();
                return false;
            }
            dialog->findChild<QPushButton *>(QStringLiteral("launch"))->click();
            return true;
        });
        QVERIFY(window.startCluster(plan));
        QCOMPARE(answer.timesSeen(), 2);
        QVERIFY2(firstReport.contains(QStringLiteral("FAIL")) && firstReport.contains(QLatin1String("taken")),
                 qPrintable(firstReport));

        // Launched as the dialog last checked it: ps:0 elsewhere, over ssh.
        const uint16_t psPort = launcher.plan().cluster.ps.front().port;
        QVERIFY(psPort != plan.cluster.ps.front().port);
        QCOMPARE(launcher.plan().cluster.workers, plan.cluster.workers);
        QVERIFY2(launcher.tasks().front().host.contains(QLatin1String("ssh")),
                 qPrintable(launcher.tasks().front().host));
        QTRY_VERIFY_WITH_TIMEOUT(watcher.address() == QStringLiteral("127.0.0.1:%1").arg(psPort)
                                     && window.charts()->snapshot() && window.charts()->snapshot()->globalStep > 10,
                                 kTimeoutMs);
        parasync::testing::quitAnsweringStop(&window);
        QVERIFY(!launcher.anyRunning());
    }

    void cancellingThePreflightStartsNothing()
    {
        const ClusterPlan plan = remotePlan();
        ClusterLauncher launcher;
        launcher.setNodeBinary(nodeBinary());
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();

        PreflightAnswer answer([](ui::PreflightDialog *dialog) {
            dialog->reject();
            return true;
        });
        QVERIFY(!window.startCluster(plan));
        QCOMPARE(answer.timesSeen(), 1);
        QCOMPARE(window.statusBar()->currentMessage(), QStringLiteral("Not started (pre-flight check)."));
        QVERIFY(launcher.tasks().empty());
        QVERIFY(!watcher.isWatching());
        parasync::testing::quitAnsweringStop(&window);
    }

private:
    ClusterPlan remotePlan() const
    {
        ClusterPlan plan = ClusterPlan::demo();
        for (auto *list : {&plan.cluster.ps, &plan.cluster.workers})
            for (auto &address : *list)
                address.port = pickFreePort();
        plan.training.lastStep = 0;
        plan.training.pace.computeMs = 10;
        RemoteHost host = m_server->remoteHost("127.0.0.1");
        host.node = nodeBinary().toStdString();
        plan.hosts = {host};
        return plan;
    }

    std::unique_ptr<SshServer> m_server;
};

QTEST_MAIN(TestWindowPreflight)
#include "tst_window_preflight.moc"
