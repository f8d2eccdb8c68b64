// The pre-flight check against real hosts: a real sshd on loopback (and, as
// root, a network namespace as a second host), and this machine itself. A
// taken port -- remote or local -- a missing binary, a worker command's
// missing program and an unreachable ps
// must each be reported as such, with a fix; what is checked is named as a
// person would ("this machine", not "0 hosts").
#include "base/port_holder.h"
#include "base/version.h"
#include "config/cluster_file.h"
#include "orchestration/preflight_check.h"
#include "support/cluster_harness.h"
#include "support/net_namespace.h"
#include "support/ssh_server.h"

#include <QSignalSpy>
#include <QTest>

#include <memory>

using namespace parasync;
using namespace parasync::testing;

namespace {

constexpr int kTimeoutMs = 60000;

ClusterPlan demoPlan()
{
    ClusterPlan plan = ClusterPlan::demo();
    for (auto *list : {&plan.cluster.ps, &plan.cluster.workers})
        for (auto &address : *list)
            address.port = pickFreePort();
    return plan;
}

const PreflightItem *find(const PreflightCheck &check, PreflightItem::Kind kind, const QString &subjectPart,
                          const QString &host = {})
{
    for (const auto &item : check.items())
        if (item.kind == kind && item.subject.contains(subjectPart) && (host.isEmpty() || item.host == host))
            return &item;
    return nullptr;
}

bool runCheck(PreflightCheck &check, const ClusterPlan &plan)
{
    QSignalSpy finished(&check, &PreflightCheck::finished);
    check.start(plan);
    return finished.wait(kTimeoutMs) || !finished.isEmpty();
}

} // namespace

class TestPreflight : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<SshServer> m_server;
    QString m_noSshd; // why the tests of remote hosts are skipped

    RemoteHost loopbackHost() const
    {
        RemoteHost host = m_server->remoteHost("127.0.0.1");
        host.node = nodeBinary().toStdString();
        return host;
    }

private Q_SLOTS:
    void initTestCase()
    {
        // Without sshd only the checks of remote hosts are skipped: this
        // machine is checked without ssh.
        m_server = std::make_unique<SshServer>();
        QString whyNot;
        if (!m_server->start(&whyNot)) {
            m_server.reset();
            m_noSshd = QStringLiteral("no sshd to test against: ") + whyNot;
        }
    }

    void cleanupTestCase() { m_server.reset(); }

    void whatIsCheckedIsNamed_data()
    {
        QTest::addColumn<QStringList>("remoteHosts");
        QTest::addColumn<QString>("workerHost");
        QTest::addColumn<QString>("named");
        QTest::newRow("all local") << QStringList{} << QStringLiteral("127.0.0.1") << QStringLiteral("this machine");
        // A "hosts" entry that no task's address names is not checked.
        QTest::newRow("unused hosts entry")
            << QStringList{QStringLiteral("10.0.0.9")} << QStringLiteral("127.0.0.1") << QStringLiteral("this machine");
        QTest::newRow("workers remote") << QStringList{QStringLiteral("10.0.0.2")} << QStringLiteral("10.0.0.2")
                                        << QStringLiteral("this machine and 1 remote host (10.0.0.2)");
    }

    void whatIsCheckedIsNamed()
    {
        QFETCH(QStringList, remoteHosts);
        QFETCH(QString, workerHost);
        QFETCH(QString, named);
        ClusterPlan plan = ClusterPlan::demo();
        for (HostPort &worker : plan.cluster.workers)
            worker.host = workerHost.toStdString();
        for (const QString &name : remoteHosts) {
            RemoteHost host;
            host.name = name.toStdString();
            plan.hosts.push_back(host);
        }
        QCOMPARE(PreflightCheck::describeHosts(plan), named);
    }

    void everyHostRemoteIsNamedByItsAddresses()
    {
        ClusterPlan plan;
        plan.cluster.ps = {parseHostPort("10.0.0.1:2222")};
        plan.cluster.workers
            = {parseHostPort("10.0.0.2:2223"), parseHostPort("10.0.0.3:2223"), parseHostPort("10.0.0.2:2224")};
        for (const char *name : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
            RemoteHost host;
            host.name = name;
            plan.hosts.push_back(host);
        }
        QCOMPARE(PreflightCheck::describeHosts(plan), QStringLiteral("3 remote hosts (10.0.0.1, 10.0.0.2, 10.0.0.3)"));
    }

    void aTakenLocalPortIsReportedWithAFreeOneThatTheRewrittenPlanUses()
    {
        // No "hosts": every task runs here, and is checked here, without ssh.
        const ClusterPlan plan = demoPlan();
        HeldPort stale(plan.cluster.workers[0].port);
        QVERIFY(stale.ok());
        PreflightCheck check;
        check.setNodeBinary(nodeBinary());
        QVERIFY(runCheck(check, plan));
        QVERIFY(!check.passed());
        QCOMPARE(find(check, PreflightItem::Kind::Ssh, QStringLiteral("this machine"))->outcome, CheckOutcome::Passed);
        const PreflightItem *port = find(check, PreflightItem::Kind::Port, QStringLiteral("worker:0"));
        QVERIFY(port);
        QCOMPARE(port->outcome, CheckOutcome::Failed);
        QVERIFY2(port->detail.contains(QStringLiteral("pid %1").arg(::getpid())), qPrintable(check.report()));
        // The same offer as for a remote host's port: a free one here.
        QVERIFY2(port->suggestedPort != 0 && port->suggestedPort != plan.cluster.workers[0].port,
                 qPrintable(check.report()));
        QVERIFY2(port->fix.contains(QStringLiteral("use the free port %1").arg(port->suggestedPort)),
                 qPrintable(port->fix));
        QVERIFY(check.report().contains(QStringLiteral("use the free port %1").arg(port->suggestedPort)));
        QVERIFY(check.hasPortSuggestions());

        const ClusterPlan rewritten = check.planWithFreePorts();
        QCOMPARE(rewritten.cluster.workers[0].port, port->suggestedPort);
        QCOMPARE(rewritten.cluster.ps, plan.cluster.ps);
        QVERIFY(runCheck(check, rewritten));
        QVERIFY2(check.passed(), qPrintable(check.report()));
    }

    void aGoodPlanPassesEveryCheck()
    {
        if (!m_server)
            QSKIP(qPrintable(m_noSshd));
        ClusterPlan plan = demoPlan();
        plan.hosts = {loopbackHost()};
        PreflightCheck check;
        QVERIFY(runCheck(check, plan));
        QVERIFY2(check.passed(), qPrintable(check.report()));
        // ssh, node, 3 ports, 2 workers x 1 ps reach -- one host.
        QCOMPARE(check.hosts(), QStringList{QStringLiteral("127.0.0.1")});
        QCOMPARE(check.items().size(), size_t(2 + 3 + 1));
        QVERIFY(find(check, PreflightItem::Kind::Node, QStringLiteral("parasync-node"))
                    ->detail.contains(QString::fromStdString(nodeVersionLine())));
        // Nothing holds the ps port once the check is over.
        const HostPort &ps = plan.cluster.ps.front();
        QTRY_VERIFY_WITH_TIMEOUT(isPortFree(ps.host, ps.port), 10000);
    }

    void aTakenPortIsReportedWithAFreeOneThatTheRewrittenPlanUses()
    {
        if (!m_server)
            QSKIP(qPrintable(m_noSshd));
        ClusterPlan plan = demoPlan();
        plan.hosts = {loopbackHost()};
        HeldPort stale(plan.cluster.workers[1].port);
        QVERIFY(stale.ok());
        PreflightCheck check;
        QVERIFY(runCheck(check, plan));
        QVERIFY(!check.passed());
        const PreflightItem *port = find(check, PreflightItem::Kind::Port, QStringLiteral("worker:1"));
        QVERIFY(port);
        QCOMPARE(port->outcome, CheckOutcome::Failed);
        QVERIFY2(port->detail.contains(QLatin1String("taken")), qPrintable(check.report()));
        // /proc names the holder: this test.
        QVERIFY2(port->detail.contains(QStringLiteral("pid %1").arg(::getpid())), qPrintable(port->detail));
        QVERIFY(port->suggestedPort != 0);
        QVERIFY(port->fix.contains(QString::number(port->suggestedPort)));
        QVERIFY(check.hasPortSuggestions());

        const ClusterPlan rewritten = check.planWithFreePorts();
        QCOMPARE(rewritten.cluster.workers[1].port, port->suggestedPort);
        QCOMPARE(rewritten.cluster.ps, plan.cluster.ps);
        QVERIFY(runCheck(check, rewritten));
        QVERIFY2(check.passed(), qPrintable(check.report()));
    }

    void aMissingBinaryIsReported()
    {
        if (!m_server)
            QSKIP(qPrintable(m_noSshd));
        ClusterPlan plan = demoPlan();
        RemoteHost host = loopbackHost();
        host.node = "/opt/nowhere/parasync-node";
        plan.hosts = {host};
        PreflightCheck check;
        QVERIFY(runCheck(check, plan));
        QVERIFY(!check.passed());
        const PreflightItem *ssh = find(check, PreflightItem::Kind::Ssh, QStringLiteral("ssh"));
        QCOMPARE(ssh->outcome, CheckOutcome::Passed);
        const PreflightItem *node = find(check, PreflightItem::Kind::Node, QStringLiteral("parasync-node"));
        QCOMPARE(node->outcome, CheckOutcome::Failed);
        QVERIFY2(node->detail.contains(QLatin1String("/opt/nowhere/parasync-node not found")),
                 qPrintable(node->detail));
        QVERIFY2(node->fix.contains(QLatin1String("install parasync-node")), qPrintable(node->fix));
        // What needs the binary is skipped, not failed a second time.
        QCOMPARE(find(check, PreflightItem::Kind::Port, QStringLiteral("ps:0"))->outcome, CheckOutcome::Skipped);
    }

    void aWorkerCommandsProgramIsLookedForOnItsHost()
    {
        if (!m_server)
            QSKIP(qPrintable(m_noSshd));
        ClusterPlan plan = demoPlan();
        plan.hosts = {loopbackHost()};
        plan.workerCommand = {"/bin/sh", "worker.sh"};
        plan.workerCommands[1] = {"/opt/nowhere/python3", "train.py"};
        PreflightCheck check;
        QVERIFY(runCheck(check, plan));
        QVERIFY(!check.passed());
        const PreflightItem *there = find(check, PreflightItem::Kind::Program, QStringLiteral("/bin/sh"));
        QVERIFY(there);
        QCOMPARE(there->outcome, CheckOutcome::Passed);
        const PreflightItem *missing
            = find(check, PreflightItem::Kind::Program, QStringLiteral("/opt/nowhere/python3"));
        QVERIFY(missing);
        QCOMPARE(missing->outcome, CheckOutcome::Failed);
        QVERIFY2(missing->detail.contains(QLatin1String("not found on")), qPrintable(check.report()));
        QVERIFY2(missing->fix.contains(QLatin1String("first word of \"worker_command\"")), qPrintable(check.report()));
        // The rest of the host's checks do not depend on it.
        QCOMPARE(find(check, PreflightItem::Kind::Node, QStringLiteral("parasync-node"))->outcome,
                 CheckOutcome::Passed);
        QCOMPARE(find(check, PreflightItem::Kind::Port, QStringLiteral("worker:1"))->outcome, CheckOutcome::Passed);
    }

    void anUnreachableSshHostIsReported()
    {
        if (!m_server)
            QSKIP(qPrintable(m_noSshd));
        ClusterPlan plan = demoPlan();
        RemoteHost host = loopbackHost();
        host.sshPort = pickFreePort(); // no sshd there
        plan.hosts = {host};
        PreflightCheck check;
        QVERIFY(runCheck(check, plan));
        const PreflightItem *ssh = find(check, PreflightItem::Kind::Ssh, QStringLiteral("ssh"));
        QCOMPARE(ssh->outcome, CheckOutcome::Failed);
        QVERIFY2(ssh->fix.contains(QLatin1String("start sshd")), qPrintable(check.report()));
    }

    void anUnreachablePsIsReported()
    {
        if (!m_server)
            QSKIP(qPrintable(m_noSshd));
        // The worker host is a network namespace with its own sshd; ps:0
        // is on this machine at an address the namespace has no route to,
        // as behind a misconfigured router or firewall.
        NetNamespace workerHost(41);
        QString whyNot;
        if (!workerHost.create(&whyNot))
            QSKIP(qPrintable(QStringLiteral("cannot create a second host (network namespace): ") + whyNot));
        const QString unroutable = QStringLiteral("10.232.41.1");
        QVERIFY(workerHost.addHostAddress(unroutable + QStringLiteral("/32")));
        SshServer workerSshd(workerHost.address(), workerHost.name());
        QVERIFY2(workerSshd.start(&whyNot), qPrintable(whyNot));

        ClusterPlan plan;
        plan.cluster.ps = {parseHostPort(unroutable.toStdString() + ":" + std::to_string(pickFreePort()))};
        plan.cluster.workers = {parseHostPort(workerHost.address().toStdString() + ":2223")};
        RemoteHost psHost = loopbackHost(); // this machine, by ssh, under the ps address's name
        psHost.name = unroutable.toStdString();
        RemoteHost remoteWorker = workerSshd.remoteHost(workerHost.address().toStdString());
        remoteWorker.node = nodeBinary().toStdString();
        plan.hosts = {psHost, remoteWorker};

        PreflightCheck check;
        QVERIFY(runCheck(check, plan));
        QCOMPARE(find(check, PreflightItem::Kind::Ssh, QStringLiteral("ssh"), workerHost.address())->outcome,
                 CheckOutcome::Passed);
        QCOMPARE(find(check, PreflightItem::Kind::Port, QStringLiteral("ps:0"))->outcome, CheckOutcome::Passed);
        const PreflightItem *reach = find(check, PreflightItem::Kind::Reach, QStringLiteral("ps:0"));
        QVERIFY(reach);
        QCOMPARE(reach->outcome, CheckOutcome::Failed);
        QVERIFY2(reach->detail.contains(QLatin1String("cannot connect to ") + unroutable), qPrintable(check.report()));
        QVERIFY2(reach->fix.contains(QLatin1String("firewall")), qPrintable(reach->fix));

        // Given a route, the same worker host reaches the held ps port.
        QVERIFY(workerHost.addRoute(QStringLiteral("default via ") + workerHost.hostAddress()));
        QVERIFY(runCheck(check, plan));
        QVERIFY2(check.passed(), qPrintable(check.report()));
    }
};

QTEST_GUILESS_MAIN(TestPreflight)
#include "tst_preflight.moc"
