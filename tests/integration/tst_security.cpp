// Strangers: a cluster with a token refuses every call without it, and the
// token never shows on a command line.
#include "base/port_holder.h"
#include "support/cluster_harness.h"
#include "support/test_certificates.h"
#include "wire/cluster_token.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

grpc::Status statusCall(const QString &address, const RpcSettings &rpc)
{
    auto stub = proto::ClusterControl::NewStub(makeChannel(address.toStdString(), rpc));
    auto context = makeContext(rpc, 5s);
    proto::ClusterStatusResponse response;
    return stub->GetClusterStatus(context.get(), {}, &response);
}

} // namespace

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
        QVERIFY(cluster.waitForWorkerTraining(1)); // its control service is asked below

        // A stranger without the token, and one with a wrong token.
        for (const std::string &tried : {std::string(), std::string(64, 'a')}) {
            RpcSettings stranger;
            stranger.clusterToken = tried;
            // A loaded task may drop a fresh connection before it answers:
            // the refusal is what is under test, so ride that out.
            auto stub = proto::ClusterControl::NewStub(makeChannel(cluster.psAddress(0).toStdString(), stranger));
            proto::SetModeRequest request;
            request.mutable_mode()->set_mode(proto::SYNC);
            proto::SetModeResponse response;
            const auto status = callRidingOutDrops(stranger, 10s, [&](grpc::ClientContext *context) {
                return stub->SetMode(context, request, &response);
            });
            QCOMPARE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
            QVERIFY(QString::fromStdString(status.error_message()).contains(QStringLiteral("cluster token")));
            auto workerStub
                = proto::TaskControl::NewStub(makeChannel(cluster.workerAddress(1).toStdString(), stranger));
            proto::StopResponse stopped;
            const auto stop = callRidingOutDrops(
                stranger, 10s, [&](grpc::ClientContext *context) { return workerStub->Stop(context, {}, &stopped); });
            QVERIFY2(stop.error_code() == grpc::StatusCode::UNAUTHENTICATED, stop.error_message().c_str());
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
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    void aTokenFileOthersCanReadIsRefused()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("token"));
        NodeProcess make(QStringLiteral("generate"),
                         {QStringLiteral("--generate_token"), QStringLiteral("--cluster_token_file=") + path});
        make.start();
        QCOMPARE(make.waitForExit(), 0);
        struct stat st
        {
        };
        QCOMPARE(::stat(path.toLocal8Bit().constData(), &st), 0);
        QCOMPARE(int(st.st_mode & 0777), 0600);
        QVERIFY(readClusterTokenFile(path.toStdString()).size() == 64);

        ::chmod(path.toLocal8Bit().constData(), 0644);
        NodeProcess ps(QStringLiteral("ps"),
                       {QStringLiteral("--ps_hosts=127.0.0.1:%1").arg(pickFreePort()),
                        QStringLiteral("--worker_hosts=127.0.0.1:%1").arg(pickFreePort()),
                        QStringLiteral("--job_name=ps"), QStringLiteral("--cluster_token_file=") + path});
        ps.start();
        QCOMPARE(ps.waitForExit(), 2);
        QVERIFY2(ps.output().contains(QStringLiteral("chmod 600")), qPrintable(ps.output()));
    }

    void everyChannelCanBeTlsAndStrangersAreRefusedAtTheHandshake_data()
    {
        QTest::addColumn<bool>("mutual");
        QTest::newRow("server TLS") << false;
        QTest::newRow("mutual TLS") << true;
    }

    void everyChannelCanBeTlsAndStrangersAreRefusedAtTheHandshake()
    {
        QFETCH(bool, mutual);
        QTemporaryDir temporary;
        const QDir dir(temporary.path());
        QVERIFY(makeCa(dir, QStringLiteral("cluster-ca")) && makeCa(dir, QStringLiteral("other-ca")));
        QVERIFY(makeSigned(dir, QStringLiteral("node"), QStringLiteral("cluster-ca"), QStringLiteral("IP:127.0.0.1")));
        QVERIFY(
            makeSigned(dir, QStringLiteral("intruder"), QStringLiteral("other-ca"), QStringLiteral("IP:127.0.0.1")));

        QStringList flags{QStringLiteral("--last_step=100000000"),
                          QStringLiteral("--tls_cert=") + dir.filePath(QStringLiteral("node.pem")),
                          QStringLiteral("--tls_key=") + dir.filePath(QStringLiteral("node.key")),
                          QStringLiteral("--tls_ca=") + dir.filePath(QStringLiteral("cluster-ca.pem"))};
        if (mutual)
            flags << QStringLiteral("--tls_mutual");
        LocalCluster cluster(1, 2, flags);
        const RpcSettings member
            = rpcSettingsFor(tlsFiles(dir, QStringLiteral("cluster-ca"), QStringLiteral("node"), mutual), false);
        cluster.setClientTls(member.tls);
        cluster.startAll();
        QVERIFY2(cluster.waitForStatus([](const auto &s) { return s.global_step() > 200; }, 30s),
                 qPrintable(cluster.worker(0).output()));

        // A client that trusts another CA refuses the cluster's certificate.
        const auto wrongCa = statusCall(cluster.psAddress(0),
                                        rpcSettingsFor(tlsFiles(dir, QStringLiteral("other-ca"), {}, false), false));
        QVERIFY(!wrongCa.ok());
        QVERIFY2(describeRpcError(wrongCa).find("TLS handshake refused") != std::string::npos,
                 wrongCa.error_message().c_str());
        // A plaintext client gets nowhere.
        QVERIFY(!statusCall(cluster.psAddress(0), RpcSettings()).ok());
        if (mutual) {
            // Trusting the right CA is not enough: the server wants a client
            // certificate, and one signed by its CA.
            const auto anonymous = statusCall(
                cluster.psAddress(0), rpcSettingsFor(tlsFiles(dir, QStringLiteral("cluster-ca"), {}, false), false));
            QVERIFY2(!anonymous.ok(), "a client without a certificate was served under --tls_mutual");
            RpcSettings intruder;
            intruder.tls = member.tls;
            intruder.tls.certPem
                = rpcSettingsFor(tlsFiles(dir, QStringLiteral("other-ca"), QStringLiteral("intruder"), false), false)
                      .tls.certPem;
            intruder.tls.keyPem
                = rpcSettingsFor(tlsFiles(dir, QStringLiteral("other-ca"), QStringLiteral("intruder"), false), false)
                      .tls.keyPem;
            QVERIFY2(!statusCall(cluster.psAddress(0), intruder).ok(),
                     "a client certificate from another CA was accepted");
        }

        // The CLI, as a user types it, says why.
        NodeProcess status(QStringLiteral("status"),
                           {QStringLiteral("--ps_hosts=") + cluster.psAddress(0), QStringLiteral("--status"),
                            QStringLiteral("--tls_ca=") + dir.filePath(QStringLiteral("other-ca.pem"))});
        status.start();
        QCOMPARE(status.waitForExit(), 2);
        QVERIFY2(status.output().contains(QStringLiteral("TLS handshake refused")), qPrintable(status.output()));

        // None of it disturbed the cluster.
        proto::ClusterStatusResponse before;
        QVERIFY(cluster.clusterStatus(&before));
        QVERIFY(cluster.waitForStatus([&](const auto &s) { return s.global_step() > before.global_step() + 200; }));
        QString report;
        QVERIFY2(cluster.stopAllCleanly(&report), qPrintable(report));
    }

    // Data links are plain TCP (wire/data_link.h): under TLS the ps grants
    // none, so a client that offers one anyway keeps its values on the
    // encrypted stream. (parasync-node's and Python's workers do not even
    // offer one under TLS.)
    void underTlsNoDataLinkIsGranted()
    {
        QTemporaryDir temporary;
        const QDir dir(temporary.path());
        QVERIFY(makeCa(dir, QStringLiteral("cluster-ca")));
        QVERIFY(makeSigned(dir, QStringLiteral("node"), QStringLiteral("cluster-ca"), QStringLiteral("IP:127.0.0.1")));
        LocalCluster cluster(1, 2,
                             {QStringLiteral("--last_step=100000000"),
                              QStringLiteral("--tls_cert=") + dir.filePath(QStringLiteral("node.pem")),
                              QStringLiteral("--tls_key=") + dir.filePath(QStringLiteral("node.key")),
                              QStringLiteral("--tls_ca=") + dir.filePath(QStringLiteral("cluster-ca.pem"))});
        const RpcSettings member
            = rpcSettingsFor(tlsFiles(dir, QStringLiteral("cluster-ca"), QStringLiteral("node"), false), false);
        cluster.setClientTls(member.tls);
        cluster.startPs(0);
        cluster.startWorker(0);
        QVERIFY2(cluster.waitForStatus([](const auto &s) { return s.global_step() > 10; }, 60s),
                 qPrintable(cluster.worker(0).output()));

        proto::ClusterStatusResponse status;
        QVERIFY(cluster.clusterStatus(&status));
        auto stub = proto::ParameterService::NewStub(makeChannel(cluster.psAddress(0).toStdString(), member));
        auto context = makeContext(member, 30s);
        auto stream = stub->Train(context.get());
        proto::TrainRequest join;
        join.mutable_join()->set_worker_index(1);
        join.mutable_join()->set_offers_data_link(true);
        *join.mutable_join()->mutable_signature() = status.signature();
        proto::TrainResponse joined;
        QVERIFY(stream->Write(join) && stream->Read(&joined));
        QVERIFY(joined.join().ready());
        QVERIFY(!joined.join().has_data_link());
        stream->WritesDone();
        while (stream->Read(&joined)) {}
        const grpc::Status ended = stream->Finish();
        QVERIFY2(ended.ok(), ended.error_message().c_str());

        cluster.worker(0).terminate();
        QCOMPARE(cluster.worker(0).waitForExit(), 0);
        cluster.ps(0).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
    }

    void tlsMistakesAreReportedAtStart_data()
    {
        QTest::addColumn<QString>("cert");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("ca");
        QTest::addColumn<QString>("expected");
        QTest::newRow("key of another certificate")
            << QStringLiteral("node") << QStringLiteral("intruder") << QStringLiteral("cluster-ca")
            << QStringLiteral("is not the private key of");
        QTest::newRow("certificate from another CA")
            << QStringLiteral("intruder") << QStringLiteral("intruder") << QStringLiteral("cluster-ca")
            << QStringLiteral("does not verify against");
        QTest::newRow("certificate for another host")
            << QStringLiteral("elsewhere") << QStringLiteral("elsewhere") << QStringLiteral("cluster-ca")
            << QStringLiteral("does not name 127.0.0.1");
        QTest::newRow("missing CA file") << QStringLiteral("node") << QStringLiteral("node") << QStringLiteral("nope")
                                         << QStringLiteral("cannot read it");
    }

    void tlsMistakesAreReportedAtStart()
    {
        QFETCH(QString, cert);
        QFETCH(QString, key);
        QFETCH(QString, ca);
        QFETCH(QString, expected);
        QTemporaryDir temporary;
        const QDir dir(temporary.path());
        QVERIFY(makeCa(dir, QStringLiteral("cluster-ca")) && makeCa(dir, QStringLiteral("other-ca")));
        QVERIFY(makeSigned(dir, QStringLiteral("node"), QStringLiteral("cluster-ca"), QStringLiteral("IP:127.0.0.1")));
        QVERIFY(
            makeSigned(dir, QStringLiteral("intruder"), QStringLiteral("other-ca"), QStringLiteral("IP:127.0.0.1")));
        QVERIFY(makeSigned(dir, QStringLiteral("elsewhere"), QStringLiteral("cluster-ca"),
                           QStringLiteral("DNS:ps0.example.org")));
        const quint16 port = pickFreePort();
        NodeProcess ps(QStringLiteral("ps"),
                       {QStringLiteral("--ps_hosts=127.0.0.1:%1").arg(port),
                        QStringLiteral("--worker_hosts=127.0.0.1:1"), QStringLiteral("--job_name=ps"),
                        QStringLiteral("--tls_cert=") + dir.filePath(cert + QStringLiteral(".pem")),
                        QStringLiteral("--tls_key=") + dir.filePath(key + QStringLiteral(".key")),
                        QStringLiteral("--tls_ca=") + dir.filePath(ca + QStringLiteral(".pem"))});
        ps.start();
        QCOMPARE(ps.waitForExit(), 2);
        QVERIFY2(ps.output().contains(expected), qPrintable(ps.output()));
    }

    void aNonLoopbackAddressWithoutATokenIsRefused()
    {
        // 192.0.2.1 is TEST-NET-1: never this machine's; nothing is bound or sent.
        NodeProcess ps(QStringLiteral("ps"),
                       {QStringLiteral("--ps_hosts=192.0.2.1:2222"), QStringLiteral("--worker_hosts=127.0.0.1:2223"),
                        QStringLiteral("--job_name=ps")});
        ps.start();
        QCOMPARE(ps.waitForExit(), 2);
        QVERIFY2(ps.output().contains(QStringLiteral("not a loopback address"))
                     && ps.output().contains(QStringLiteral("--insecure")),
                 qPrintable(ps.output()));
    }
};

QTEST_GUILESS_MAIN(TestSecurity)
#include "tst_security.moc"
