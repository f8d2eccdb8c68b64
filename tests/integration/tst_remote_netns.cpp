// Separate hosts with their own addresses: two network namespaces, each
// joined to this machine by a veth pair and running its own sshd, are the
// worker hosts; ps:0 runs here as a local task. The launcher starts the
// workers over ssh. Cutting one worker's link mid-run must be reported by
// ps:0 (keepalive) and by the launcher (its ssh session ends), and the
// cluster must carry on with the other worker. Needs root; skipped otherwise.
#include "base/port_holder.h"
#include "config/cluster_file.h"
#include "orchestration/cluster_launcher.h"
#include "support/cluster_harness.h"
#include "support/net_namespace.h"
#include "support/ssh_server.h"
#include "wire/cluster_control.h"
#include "wire/cluster_token.h"

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

using namespace parasync;
using namespace parasync::testing;

namespace {

constexpr int kTimeoutMs = 90000;

QString describe(const ClusterLauncher &launcher)
{
    QString text;
    for (int row = 0; row < int(launcher.tasks().size()); ++row) {
        const auto &info = launcher.tasks()[size_t(row)];
        text += QString::fromStdString(info.task.toString()) + QStringLiteral(" on ") + info.host + QStringLiteral(": ")
                + taskStateName(info.state) + QStringLiteral(" (") + info.detail + QStringLiteral(")\n")
                + launcher.output(row).right(800) + QLatin1Char('\n');
    }
    return text;
}

} // namespace

class TestRemoteNetns : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void cuttingAWorkersLinkIsReportedAndTheClusterCarriesOn()
    {
        // Declared first, destroyed last: whatever the outcome, every
        // process left in the namespaces ends with them.
        auto hostA = std::make_unique<NetNamespace>(51);
        auto hostB = std::make_unique<NetNamespace>(52);
        QString whyNot;
        if (!hostA->create(&whyNot) || !hostB->create(&whyNot))
            QSKIP(qPrintable(QStringLiteral("cannot create separate hosts (network namespaces): ") + whyNot));
        // Host B reaches ps:0 (on this machine, at host A's link address) through its gateway.
        QVERIFY(hostB->addRoute(QStringLiteral("default via ") + hostB->hostAddress()));
        SshServer sshdA(hostA->address(), hostA->name());
        SshServer sshdB(hostB->address(), hostB->name());
        if (!sshdA.start(&whyNot) || !sshdB.start(&whyNot))
            QSKIP(qPrintable(QStringLiteral("no sshd to run in the namespaces: ") + whyNot));

        QTemporaryDir dir;
        ClusterPlan plan;
        plan.cluster.ps = {parseHostPort(hostA->hostAddress().toStdString() + ":" + std::to_string(pickFreePort()))};
        plan.cluster.workers = {parseHostPort(hostA->address().toStdString() + ":2223"),
                                parseHostPort(hostB->address().toStdString() + ":2223")};
        plan.training.mode.set_mode(proto::SYNC);
        plan.training.lastStep = 100000000;
        plan.training.logdir = dir.filePath(QStringLiteral("run")).toStdString();
        for (SshServer *server : {&sshdA, &sshdB}) {
            const QString address = server == &sshdA ? hostA->address() : hostB->address();
            RemoteHost host = server->remoteHost(address.toStdString());
            host.node = nodeBinary().toStdString();
            plan.hosts.push_back(host);
        }
        // Non-loopback addresses: the cluster needs its token.
        const std::string token = generateClusterToken();
        RpcSettings rpc;
        rpc.clusterToken = token;
        const std::string ps0 = plan.cluster.ps.front().toString();

        auto launcher = std::make_unique<ClusterLauncher>();
        launcher->setClusterToken(token);
        QString error;
        QVERIFY2(launcher->launch(plan, &error), qPrintable(error));
        QCOMPARE(launcher->tasks()[0].host, QStringLiteral("this machine"));
        QVERIFY(launcher->tasks()[2].host.contains(hostB->address()));

        // Both workers train in sync: every step aggregates both.
        proto::ClusterStatusResponse status;
        const auto statusNow = [&] {
            try {
                status = getClusterStatus(ps0, rpc);
                return true;
            } catch (const std::exception &) {
                return false;
            }
        };
        const auto phase = [&](int worker) { return status.workers(worker).phase(); };
        const auto training
            = [&](int worker) { return phase(worker) == proto::TRAINING || phase(worker) == proto::BLOCKED_BY_SYNC; };
        QTRY_VERIFY2_WITH_TIMEOUT(statusNow() && status.workers_size() == 2 && status.global_step() > 50 && training(0)
                                      && training(1),
                                  qPrintable(describe(*launcher)), kTimeoutMs);

        // Unplug host B.
        QVERIFY(hostB->setLinkUp(false));
        QTRY_VERIFY2_WITH_TIMEOUT(statusNow() && phase(1) == proto::DEAD, qPrintable(describe(*launcher)), 30000);
        QVERIFY2(!status.workers(1).reason().empty(), "ps:0 says why worker:1 is dead");
        qInfo("ps:0 on worker:1: %s", status.workers(1).reason().c_str());

        // The cluster carries on with worker:0 alone.
        const int64_t stepAtCut = status.global_step();
        QTRY_VERIFY2_WITH_TIMEOUT(statusNow() && status.global_step() > stepAtCut + 100 && phase(0) != proto::DEAD,
                                  qPrintable(describe(*launcher)), 30000);

        // The launcher's view (the process panel): worker:1's ssh session
        // ends once ssh's keepalive gives up on the dead link.
        const int row = launcher->taskRow(TaskId{JobName::Worker, 1});
        QTRY_VERIFY2_WITH_TIMEOUT(launcher->tasks()[size_t(row)].state == TaskState::Dead,
                                  qPrintable(describe(*launcher)), 45000);
        qInfo("the launcher on worker:1: %s", qPrintable(launcher->tasks()[size_t(row)].detail));
        QVERIFY(launcher->tasks()[size_t(row)].detail.contains(QLatin1String("lost the ssh connection")));
        QVERIFY(launcher->tasks()[0].state != TaskState::Dead);

        // Quitting stops what it can reach; the namespaces take the rest.
        launcher.reset();
        hostB->setLinkUp(true);
    }
};

QTEST_GUILESS_MAIN(TestRemoteNetns)
#include "tst_remote_netns.moc"
