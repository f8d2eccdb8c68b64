// What a user filing a bug report turns on with
// QT_LOGGING_RULES="parasync.*.debug=true": the launcher's lines (each task
// started with its command, each exit with its status) and the watcher's
// (connected to ps:0, the mode asked for), from a real cluster. Off, the
// same run says nothing.
#include "base/port_holder.h"
#include "config/update_modes.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/logging.h"
#include "support/demo_plan.h"

#include <QLoggingCategory>
#include <QMutex>
#include <QSignalSpy>
#include <QTest>

using namespace parasync;
using parasync::testing::demoOnFreePorts;

namespace {

struct Logged
{
    QString category;
    QtMsgType type;
    QString text;
};

QMutex g_mutex; // the watcher logs from its own thread
QList<Logged> g_logged;
QtMessageHandler g_previous = nullptr;

void keep(QtMsgType type, const QMessageLogContext &context, const QString &text)
{
    const QString category = QString::fromLatin1(context.category ? context.category : "");
    if (category.startsWith(QLatin1String("parasync."))) {
        const QMutexLocker lock(&g_mutex);
        g_logged.append({category, type, text});
    }
    g_previous(type, context, text);
}

QStringList lines(const QString &category)
{
    const QMutexLocker lock(&g_mutex);
    QStringList found;
    for (const Logged &line : std::as_const(g_logged))
        if (line.category == category)
            found << line.text;
    return found;
}

bool anyContains(const QStringList &lines, const QString &part)
{
    return std::any_of(lines.begin(), lines.end(), [&](const QString &line) { return line.contains(part); });
}

} // namespace

class TestOrchestrationLogging : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { g_previous = qInstallMessageHandler(keep); }
    void cleanupTestCase() { qInstallMessageHandler(g_previous); }
    void init()
    {
        const QMutexLocker lock(&g_mutex);
        g_logged.clear();
    }

    void offByDefault()
    {
        QLoggingCategory::setFilterRules(QString());
        for (const QLoggingCategory *category : {&lcLauncher(), &lcWatcher(), &lcSlurm(), &lcRemote()}) {
            QVERIFY2(!category->isDebugEnabled(), category->categoryName());
            QVERIFY2(category->isWarningEnabled(), category->categoryName());
        }
        runCluster(false);
        const QMutexLocker lock(&g_mutex);
        for (const Logged &line : std::as_const(g_logged))
            QVERIFY2(line.type != QtDebugMsg, qPrintable(line.category + QStringLiteral(": ") + line.text));
    }

    void theRuleTurnsOnTheLaunchersAndTheWatchersLines()
    {
        QLoggingCategory::setFilterRules(QStringLiteral("parasync.*.debug=true"));
        const ClusterPlan plan = runCluster(true);
        QLoggingCategory::setFilterRules(QString());

        const QStringList launcher = lines(QStringLiteral("parasync.launcher"));
        // Each task's start, with the command line it ran...
        for (const TaskId &task : plan.tasks()) {
            const QString name = QString::fromStdString(task.toString());
            QVERIFY2(anyContains(launcher, QStringLiteral("starting %1 on ").arg(name)),
                     qPrintable(launcher.join(QLatin1Char('\n'))));
            QVERIFY2(anyContains(launcher, QStringLiteral("%1 exited, exit code 0 -> finished").arg(name)),
                     qPrintable(launcher.join(QLatin1Char('\n'))));
        }
        QVERIFY2(anyContains(launcher, QStringLiteral("--job_name=ps --task_index=0")),
                 qPrintable(launcher.join(QLatin1Char('\n'))));
        QVERIFY2(anyContains(launcher, QStringLiteral("parasync-node")), qPrintable(launcher.join(QLatin1Char('\n'))));
        const QStringList watcher = lines(QStringLiteral("parasync.watcher"));
        const QString ps0 = QString::fromStdString(plan.cluster.ps.front().toString());
        QVERIFY2(anyContains(watcher, QStringLiteral("watching ps:0 at ") + ps0),
                 qPrintable(watcher.join(QLatin1Char('\n'))));
        QVERIFY2(anyContains(watcher, QStringLiteral("connected: connected to")),
                 qPrintable(watcher.join(QLatin1Char('\n'))));
        QVERIFY2(anyContains(watcher, QStringLiteral("asking ps:0 at %1 for sync").arg(ps0)),
                 qPrintable(watcher.join(QLatin1Char('\n'))));
        QVERIFY2(anyContains(watcher, QStringLiteral("ps:0 now runs mode sync")),
                 qPrintable(watcher.join(QLatin1Char('\n'))));
    }

private:
    // A short demo, watched, switched to sync while it trains.
    ClusterPlan runCluster(bool switchMode)
    {
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        const ClusterPlan plan = demoOnFreePorts(switchMode ? 4000 : 300);
        QString error;
        if (!launcher.launch(plan, &error)) {
            QTest::qFail(qPrintable(error), __FILE__, __LINE__);
            return plan;
        }
        QSignalSpy exited(&launcher, &ClusterLauncher::allExited);
        QSignalSpy state(&watcher, &ClusterWatcher::connectionStateChanged);
        QSignalSpy control(&watcher, &ClusterWatcher::controlFinished);
        watcher.connectTo(QString::fromStdString(plan.cluster.ps.front().toString()), {});
        if (switchMode) {
            if (!QTest::qWaitFor([&] { return !state.isEmpty() && state.last().at(0).toBool(); }, 30000)) {
                QTest::qFail("the watcher never connected", __FILE__, __LINE__);
                return plan;
            }
            watcher.setMode(parseModeSpec("sync"));
            if (!QTest::qWaitFor([&] { return !control.isEmpty(); }, 15000))
                QTest::qFail("ps:0 never answered the mode change", __FILE__, __LINE__);
        }
        if (!QTest::qWaitFor([&] { return !exited.isEmpty(); }, 60000))
            QTest::qFail("the cluster never finished", __FILE__, __LINE__);
        watcher.disconnectFromCluster();
        launcher.stopAll();
        return plan;
    }
};

QTEST_GUILESS_MAIN(TestOrchestrationLogging)
#include "tst_orchestration_logging.moc"
