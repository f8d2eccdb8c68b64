// Strangers: a cluster with a token refuses every call without it, and the
// token never shows on a command line.
#include "cluster_harness.h"
#include "cluster_token.h"
#include "port_holder.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

class TestSecurity : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aClusterWithATokenTrainsAndRefusesCallsWithoutIt()
    {
        const QString token = QString::fromStdString(generateClusterToken());
        QCOMPARE(token.size(), 64);
        LocalCluster cluster(1, 2, {QStringLiteral("--last_step=100000000")});
        cluster.setClusterToken(token);
        cluster.startAll();
        QVERIFY(cluster.waitForStatus([](const auto &s) { return s.global_step() > 100; }));

        // A stranger without the token, and one with a wrong token.
        for (const std::string &tried : {std::string(), std::string(64, 'a')}) {
            RpcSettings stranger;
            stranger.clusterToken = tried;
            auto stub = proto::ClusterControl::NewStub(makeChannel(cluster.psAddress(0).toStdString(), stranger));
            auto context = makeContext(stranger, 5s);
            proto::SetModeRequest request;
            request.mutable_mode()->set_mode(proto::SYNC);
            proto::SetModeResponse response;
            const auto status = stub->SetMode(context.get(), request, &response);
            QCOMPARE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
            QVERIFY(QString::fromStdString(status.error_message()).contains(QStringLiteral("cluster token")));
            auto workerStub = proto::TaskControl::NewStub(makeChannel(cluster.workerAddress(1).toStdString(), stranger));
            auto workerContext = makeContext(stranger, 5s);
            proto::StopResponse stopped;
            QCOMPARE(workerStub->Stop(workerContext.get(), {}, &stopped).error_code(), grpc::StatusCode::UNAUTHENTICATED);
        }
        // The attempts are logged, and nothing changed.
        QVERIFY(cluster.ps(0).waitForOutput(QStringLiteral("refused a call to SetMode from")));
        QVERIFY(cluster.worker(1).waitForOutput(QStringLiteral("refused a call to Stop from")));
        proto::ClusterStatusResponse status;
        QVERIFY(cluster.clusterStatus(&status));
        QCOMPARE(status.mode().mode(), proto::ASYNC);
        QVERIFY(cluster.worker(1).isRunning());

        // The token is in no task's command line, where `ps` would show it.
        for (auto *task : {&cluster.ps(0), &cluster.worker(0), &cluster.worker(1)}) {
            QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(task->pid()));
            QVERIFY(cmdline.open(QIODevice::ReadOnly));
            QVERIFY(!cmdline.readAll().contains(token.toLatin1()));
        }
        for (int i = 0; i < 2; ++i)
            cluster.worker(i).terminate();
        QCOMPARE(cluster.worker(0).waitForExit(), 0);
        QCOMPARE(cluster.worker(1).waitForExit(), 0);
        cluster.ps(0).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
    }

    void aTokenFileOthersCanReadIsRefused()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("token"));
        NodeProcess make(QStringLiteral("generate"), {QStringLiteral("--generate_token"), QStringLiteral("--cluster_token_file=") + path});
        make.start();
        QCOMPARE(make.waitForExit(), 0);
        struct stat st {};
        QCOMPARE(::stat(path.toLocal8Bit().constData(), &st), 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);
        QVERIFY(readClusterTokenFile(path.toStdString()).size() == 64);

        ::chmod(path.toLocal8Bit().constData(), 0644);
        NodeProcess ps(QStringLiteral("ps"), {QStringLiteral("--ps_hosts=127.0.0.1:%1").arg(pickFreePort()),
                                              QStringLiteral("--worker_hosts=127.0.0.1:%1").arg(pickFreePort()),
                                              QStringLiteral("--job_name=ps"), QStringLiteral("--cluster_token_file=") + path});
        ps.start();
        QCOMPARE(ps.waitForExit(), 2);
        QVERIFY2(ps.output().contains(QStringLiteral("chmod 600")), qPrintable(ps.output()));
    }

    void aNonLoopbackAddressWithoutATokenIsRefused()
    {
        // 192.0.2.1 is TEST-NET-1: never this machine's; nothing is bound or sent.
        NodeProcess ps(QStringLiteral("ps"), {QStringLiteral("--ps_hosts=192.0.2.1:2222"),
                                              QStringLiteral("--worker_hosts=127.0.0.1:2223"), QStringLiteral("--job_name=ps")});
        ps.start();
        QCOMPARE(ps.waitForExit(), 2);
        QVERIFY2(ps.output().contains(QStringLiteral("not a loopback address")) && ps.output().contains(QStringLiteral("--insecure")),
                 qPrintable(ps.output()));
    }
};

QTEST_GUILESS_MAIN(TestSecurity)
#include "tst_security.moc"
