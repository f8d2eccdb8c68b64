// `parasync --connect` as a user types it, against a cluster that uses a
// cluster token and TLS: the app's command line takes what the Connect
// dialog takes (a token file, never the token; the TLS files), and every
// mistake gets a message that says what to do.
#include "support/cluster_harness.h"
#include "support/test_certificates.h"
#include "wire/cluster_token.h"

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync;
using namespace parasync::testing;
using namespace std::chrono_literals;

namespace {

struct AppRun
{
    int exitCode = -1;
    QString output;
};

// The app, headless, with a clean environment: no token reaches it except
// through the flags under test.
AppRun runApp(const QStringList &arguments, int timeoutMs = 180000)
{
    QProcess app;
    app.setProcessChannelMode(QProcess::MergedChannels);
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.remove(QStringLiteral("PARASYNC_CLUSTER_TOKEN"));
    app.setProcessEnvironment(environment);
    app.start(QStringLiteral(PARASYNC_APP), QStringList{QStringLiteral("--headless")} + arguments);
    AppRun run;
    if (!app.waitForFinished(timeoutMs)) {
        app.kill();
        app.waitForFinished();
        run.output
            = QString::fromUtf8(app.readAll()) + QStringLiteral("\n(killed: still running after %1 ms)").arg(timeoutMs);
        return run;
    }
    run.output = QString::fromUtf8(app.readAll());
    run.exitCode = app.exitStatus() == QProcess::NormalExit ? app.exitCode() : -1;
    return run;
}

} // namespace

class TestAppConnect : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_temporary;
    QDir m_dir;
    QString m_token;
    QString m_tokenFile;

    QString file(const QString &name) const { return m_dir.filePath(name); }

    // A token file as parasync-node --generate_token would leave it.
    QString writeTokenFile(const QString &name, const QString &token, QFile::Permissions permissions)
    {
        QFile out(file(name));
        if (!out.open(QIODevice::WriteOnly))
            return {};
        out.write(token.toLatin1() + '\n');
        out.close();
        out.setPermissions(permissions);
        return out.fileName();
    }

    QStringList clusterTlsFlags() const
    {
        return {QStringLiteral("--tls_cert=") + file(QStringLiteral("node.pem")),
                QStringLiteral("--tls_key=") + file(QStringLiteral("node.key")),
                QStringLiteral("--tls_ca=") + file(QStringLiteral("cluster-ca.pem"))};
    }

    std::unique_ptr<LocalCluster> startCluster(int64_t lastStep)
    {
        auto cluster = std::make_unique<LocalCluster>(
            1, 2, QStringList{QStringLiteral("--last_step=%1").arg(lastStep)} + clusterTlsFlags());
        cluster->setClusterToken(m_token);
        cluster->setClientTls(rpcSettingsFor(tlsFiles(m_dir, QStringLiteral("cluster-ca"), {}, false), false).tls);
        cluster->startAll();
        return cluster;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_temporary.isValid());
        m_dir = QDir(m_temporary.path());
        QVERIFY(makeCa(m_dir, QStringLiteral("cluster-ca")));
        QVERIFY(
            makeSigned(m_dir, QStringLiteral("node"), QStringLiteral("cluster-ca"), QStringLiteral("IP:127.0.0.1")));
        m_token = QString::fromStdString(generateClusterToken());
        m_tokenFile = writeTokenFile(QStringLiteral("cluster.token"), m_token, QFile::ReadOwner | QFile::WriteOwner);
        QVERIFY(!m_tokenFile.isEmpty());
    }

    void connectsWithATokenFileAndTheClustersCaAndWatchesToTheEnd()
    {
        const int64_t lastStep = 20000;
        auto cluster = startCluster(lastStep);
        QVERIFY2(cluster->waitForStatus([](const auto &s) { return s.global_step() > 0; }, 30s),
                 qPrintable(cluster->ps(0).output()));

        const QString out = file(QStringLiteral("watched"));
        const AppRun run = runApp({QStringLiteral("--connect=") + cluster->psAddress(0),
                                   QStringLiteral("--cluster_token_file=") + m_tokenFile,
                                   QStringLiteral("--tls_ca=") + file(QStringLiteral("cluster-ca.pem")),
                                   QStringLiteral("--export=") + out, QStringLiteral("--timeout=150")});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("done: global step %1").arg(lastStep)), qPrintable(run.output));
        for (const char *name : {"loss.png", "loss.csv", "parameters.csv", "run_report.pdf"})
            QVERIFY2(QFile::exists(out + QLatin1Char('/') + QLatin1String(name)), name);
        // Whatever the app saw of the run, it saw over TLS with the token:
        // the loss table has rows, one per step it drew.
        QFile loss(out + QStringLiteral("/loss.csv"));
        QVERIFY(loss.open(QIODevice::ReadOnly));
        QVERIFY(loss.readAll().count('\n') > 10);

        QString report;
        QVERIFY2(cluster->waitAllExitCleanly(&report), qPrintable(report));
    }

    void mistakesAreToldWithWhatToDo_data()
    {
        QTest::addColumn<QString>("mistake");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("says");
        // Refused before connecting: exit 2.
        QTest::newRow("CA file missing") << QStringLiteral("missing ca") << 2 << QStringLiteral("--tls_ca=");
        QTest::newRow("token file others can read")
            << QStringLiteral("open token file") << 2 << QStringLiteral("chmod 600");
        // Refused by the cluster: the watcher says why while it retries,
        // and the run ends at --timeout (exit 3) without stopping the cluster.
        QTest::newRow("plaintext to a TLS cluster") << QStringLiteral("no ca") << 3 << QStringLiteral("give --tls_ca");
        QTest::newRow("wrong token") << QStringLiteral("wrong token") << 3 << QStringLiteral("--cluster_token_file");
    }

    void mistakesAreToldWithWhatToDo()
    {
        QFETCH(QString, mistake);
        QFETCH(int, exitCode);
        QFETCH(QString, says);
        auto cluster = startCluster(1'000'000'000);
        QVERIFY2(cluster->waitForStatus([](const auto &s) { return s.global_step() > 0; }, 30s),
                 qPrintable(cluster->ps(0).output()));

        QString tokenFile = m_tokenFile;
        QString ca = file(QStringLiteral("cluster-ca.pem"));
        if (mistake == QLatin1String("missing ca"))
            ca = file(QStringLiteral("no-such-ca.pem"));
        else if (mistake == QLatin1String("no ca"))
            ca.clear();
        else if (mistake == QLatin1String("open token file"))
            tokenFile = writeTokenFile(QStringLiteral("open.token"), m_token,
                                       QFile::ReadOwner | QFile::WriteOwner | QFile::ReadGroup | QFile::ReadOther);
        else if (mistake == QLatin1String("wrong token"))
            tokenFile = writeTokenFile(QStringLiteral("wrong.token"), QString::fromStdString(generateClusterToken()),
                                       QFile::ReadOwner | QFile::WriteOwner);

        QStringList arguments{
            QStringLiteral("--connect=") + cluster->psAddress(0), QStringLiteral("--cluster_token_file=") + tokenFile,
            QStringLiteral("--export=") + file(QStringLiteral("refused")), QStringLiteral("--timeout=3")};
        if (!ca.isEmpty())
            arguments << QStringLiteral("--tls_ca=") + ca;
        const AppRun run = runApp(arguments, 60000);
        QVERIFY2(run.exitCode == exitCode, qPrintable(run.output));
        QVERIFY2(run.output.contains(says), qPrintable(run.output));
        QVERIFY2(!run.output.contains(m_token), "the token was printed");
        if (exitCode == 3)
            QVERIFY2(run.output.contains(QStringLiteral("the cluster keeps running")), qPrintable(run.output));

        // A watcher's mistakes never disturb the cluster.
        proto::ClusterStatusResponse before;
        QVERIFY(cluster->clusterStatus(&before));
        QVERIFY(cluster->waitForStatus([&](const auto &s) { return s.global_step() > before.global_step() + 100; }));
    }
};

QTEST_MAIN(TestAppConnect)
#include "tst_app_connect.moc"
