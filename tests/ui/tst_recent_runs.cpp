// Runs -> Recent runs without a window: the list the menu shows, kept in
// the app's settings (a test-mode folder here, never the user's); and a run
// the app made without a window, there for the window to offer.
#include "support/slurm_cluster.h"
#include "ui/models/recent_paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace parasync::ui;

class TestRecentRuns : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dirs;

    QString run(const QString &name)
    {
        QDir(m_dirs.path()).mkpath(name);
        return QDir(m_dirs.path()).filePath(name);
    }

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("ParasyncTests"));
        QCoreApplication::setApplicationName(QStringLiteral("tst_recent_runs"));
        QVERIFY(m_dirs.isValid());
    }
    void init() { QSettings().remove(QStringLiteral("recentRuns")); }

    void theNewestComesFirstOnceAndAtMostTen()
    {
        RecentPaths recent = RecentPaths::runs();
        QVERIFY(recent.isEmpty());
        recent.add(run(QStringLiteral("a")));
        recent.add(run(QStringLiteral("b")));
        QCOMPARE(recent.paths(), QStringList({run(QStringLiteral("b")), run(QStringLiteral("a"))}));
        // Opened again: to the front, not twice (a relative path as well).
        const QString previous = QDir::currentPath();
        QDir::setCurrent(m_dirs.path());
        recent.add(QStringLiteral("a"));
        QDir::setCurrent(previous);
        QCOMPARE(recent.paths(), QStringList({run(QStringLiteral("a")), run(QStringLiteral("b"))}));
        for (int i = 0; i < 12; ++i)
            recent.add(run(QStringLiteral("run-%1").arg(i)));
        QCOMPARE(recent.paths().size(), 10);
        QCOMPARE(recent.paths().front(), run(QStringLiteral("run-11")));
        QCOMPARE(recent.paths().back(), run(QStringLiteral("run-2")));
    }

    void theListOutlivesTheObjectAndTheSettingsFile()
    {
        RecentPaths::runs().add(run(QStringLiteral("kept")));
        QSettings().sync();
        // What a restarted app reads: the settings file, freshly opened.
        QSettings again;
        QCOMPARE(again.value(QStringLiteral("recentRuns")).toStringList().front(), run(QStringLiteral("kept")));
        QCOMPARE(RecentPaths::runs().paths().front(), run(QStringLiteral("kept")));
    }

    void aDeletedRunIsDroppedAndClearEmptiesTheList()
    {
        RecentPaths recent = RecentPaths::runs();
        recent.add(run(QStringLiteral("stays")));
        recent.add(run(QStringLiteral("goes")));
        QVERIFY(QDir(run(QStringLiteral("goes"))).removeRecursively());
        QCOMPARE(recent.paths(), QStringList({run(QStringLiteral("stays"))}));
        // Gone from the settings too once the list is written again.
        recent.add(run(QStringLiteral("new")));
        QVERIFY(!QSettings().value(QStringLiteral("recentRuns")).toStringList().contains(run(QStringLiteral("goes"))));
        recent.clear();
        QVERIFY(recent.paths().isEmpty());
        // Cleared is not "never written": the demo's runs do not come back.
        recent.seedOnce({run(QStringLiteral("stays"))});
        QVERIFY(recent.paths().isEmpty());
    }

    // A run's directory appears once its tasks start: it is kept meanwhile.
    void aRunNotYetOnDiskIsKeptUntilItIs()
    {
        RecentPaths recent = RecentPaths::runs();
        const QString later = QDir(m_dirs.path()).filePath(QStringLiteral("later"));
        recent.add(later);
        QVERIFY(recent.paths().isEmpty());
        QDir().mkpath(later);
        QCOMPARE(recent.paths(), QStringList({later}));
    }

    void theDemosEarlierRunsSeedAFirstList()
    {
        QDir(demoRunsDirectory()).removeRecursively();
        for (const char *name : {"demo-20260101-090000-000", "demo-20260301-090000-000", "demo-20260201-090000-000"})
            QVERIFY(QDir(demoRunsDirectory()).mkpath(QString::fromLatin1(name)));
        const QStringList demos = demoRuns();
        QCOMPARE(demos.size(), 3);
        QVERIFY(demos.front().endsWith(QStringLiteral("demo-20260301-090000-000")));
        QVERIFY(demos.back().endsWith(QStringLiteral("demo-20260101-090000-000")));
        RecentPaths recent = RecentPaths::runs();
        recent.seedOnce(demos);
        QCOMPARE(recent.paths(), demos);
        recent.seedOnce({run(QStringLiteral("other"))}); // once only
        QCOMPARE(recent.paths(), demos);
        QDir(demoRunsDirectory()).removeRecursively();
    }

    void aMenuShowsHomeAsTildeAndNoMnemonic()
    {
        QCOMPARE(RecentPaths::menuText(QDir::homePath() + QStringLiteral("/runs/a&b")), QStringLiteral("~/runs/a&&b"));
        QCOMPARE(RecentPaths::menuText(QStringLiteral("/srv/runs/x")), QStringLiteral("/srv/runs/x"));
    }

    // The cluster files' list is the same kind, under its own key.
    void clusterFilesAreAListOfTheirOwn()
    {
        QSettings().remove(QStringLiteral("recentClusterFiles"));
        RecentPaths::runs().add(run(QStringLiteral("r")));
        QVERIFY(RecentPaths::clusterFiles().paths().isEmpty());
    }

    // scripts/demo.sh's demo, headless, leaves its run in the list the
    // window's Runs -> Recent runs reads (the app's own settings file).
    void aHeadlessRunIsAmongTheRecentRuns()
    {
        QTemporaryDir home;
        QVERIFY(home.isValid());
        const uint16_t base = parasync::testing::freePortBase(3);
        QVERIFY(base > 0);
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
        environment.insert(QStringLiteral("PARASYNC_DEMO_PORTS"),
                           QStringLiteral("%1,%2,%3").arg(base).arg(base + 1).arg(base + 2));
        QProcess app;
        app.setProcessChannelMode(QProcess::MergedChannels);
        app.setProcessEnvironment(environment);
        const QString exportDir = home.filePath(QStringLiteral("export"));
        app.start(QStringLiteral(PARASYNC_APP),
                  {QStringLiteral("--headless"), QStringLiteral("--demo"), QStringLiteral("--last_step=100"),
                   QStringLiteral("--export=") + exportDir});
        QVERIFY2(app.waitForFinished(180000), "the headless demo did not end within 3 minutes");
        const QString output = QString::fromUtf8(app.readAll());
        QVERIFY2(app.exitStatus() == QProcess::NormalExit && app.exitCode() == 0, qPrintable(output));

        const QSettings written(home.filePath(QStringLiteral("config/Parasync/parasync.conf")), QSettings::IniFormat);
        const QStringList recent = written.value(QStringLiteral("recentRuns")).toStringList();
        QCOMPARE(recent.value(0), QDir(exportDir).filePath(QStringLiteral("run")));
        QVERIFY(QFileInfo::exists(recent.value(0) + QStringLiteral("/steps.jsonl")));
    }
};

QTEST_GUILESS_MAIN(TestRecentRuns)
#include "tst_recent_runs.moc"
