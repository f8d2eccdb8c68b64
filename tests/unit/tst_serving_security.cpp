// The rule for who may serve what (wire/serving_security.h): a task serving
// an address other machines reach needs a cluster token or mutual TLS, or
// the user's --insecure; loopback needs neither. The refusal must name the
// ways out, since the user meets it before any task runs.
#include "config/cluster_spec.h"
#include "support/input_error_checks.h"
#include "wire/serving_security.h"

#include <QTest>

using namespace parasync;
using namespace parasync::testing;

namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

RpcSettings settings(bool token, bool mutualTls)
{
    RpcSettings rpc;
    if (token)
        rpc.clusterToken = kToken;
    rpc.tls.mutual = mutualTls;
    return rpc;
}

const TaskId kPs0{JobName::Ps, 0};

} // namespace

class TestServingSecurity : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void reachableAddressesWithoutATokenAreRefused_data()
    {
        QTest::addColumn<QString>("host");
        QTest::newRow("every address") << QStringLiteral("0.0.0.0");
        QTest::newRow("a LAN address") << QStringLiteral("192.168.1.20");
        QTest::newRow("a host name") << QStringLiteral("ps0.example.org");
        QTest::newRow("IPv6 everywhere") << QStringLiteral("::");
    }
    void reachableAddressesWithoutATokenAreRefused()
    {
        QFETCH(QString, host);
        const HostPort address{host.toStdString(), 2222};
        const QString message
            = inputErrorOf([&] { checkServingSecurity(kPs0, address, settings(false, false), false); });
        verifyMentions(message, {QStringLiteral("ps:0"), QString::fromStdString(address.toString()),
                                 QStringLiteral("not a loopback address"), QStringLiteral("--cluster_token_file"),
                                 QStringLiteral("PARASYNC_CLUSTER_TOKEN"), QStringLiteral("--tls_mutual"),
                                 QStringLiteral("--insecure")});
    }

    void loopbackNeedsNoToken_data()
    {
        QTest::addColumn<QString>("host");
        QTest::newRow("127.0.0.1") << QStringLiteral("127.0.0.1");
        QTest::newRow("localhost") << QStringLiteral("localhost");
        QTest::newRow("all of 127/8") << QStringLiteral("127.0.0.2");
        QTest::newRow("::1") << QStringLiteral("::1");
    }
    void loopbackNeedsNoToken()
    {
        QFETCH(QString, host);
        QCOMPARE(checkServingSecurity(kPs0, HostPort{host.toStdString(), 2222}, settings(false, false), false),
                 std::string());
    }

    void aTokenOrMutualTlsLetsATaskServeTheNetwork()
    {
        const HostPort lan{"192.168.1.20", 2223};
        const TaskId worker{JobName::Worker, 1};
        QCOMPARE(checkServingSecurity(worker, lan, settings(true, false), false), std::string());
        QCOMPARE(checkServingSecurity(worker, lan, settings(false, true), false), std::string());
    }

    void insecureServesTheNetworkWithAWarning()
    {
        const HostPort lan{"192.168.1.20", 2222};
        const std::string warning = checkServingSecurity(kPs0, lan, settings(false, false), true);
        QVERIFY2(warning.find("ps:0 serves 192.168.1.20:2222 without a cluster token (--insecure)")
                     != std::string::npos,
                 warning.c_str());
        // Only where the rule would refuse: --insecure on loopback says nothing.
        QCOMPARE(checkServingSecurity(kPs0, HostPort{"127.0.0.1", 2222}, settings(false, false), true), std::string());
    }
};

QTEST_GUILESS_MAIN(TestServingSecurity)
#include "tst_serving_security.moc"
