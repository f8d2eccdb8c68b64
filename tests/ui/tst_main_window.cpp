// The desktop app as a person uses it, offscreen, with real parasync-node
// processes on free ports: start the demo from the toolbar, watch steps
// arrive, slow a worker down, switch the mode and see the buttons follow
// what ps:0 reports and a marker appear on the charts, export everything,
// and quit without leaving a process behind.
#include "base/port_holder.h"
#include "base/version.h"
#include "config/update_modes.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "support/cluster_harness.h"
#include "support/quit_answers.h"
#include "ui/charts/chart_exporter.h"
#include "ui/charts/run_charts_view.h"
#include "ui/charts/step_timeline_view.h"
#include "ui/dialogs/connect_dialog.h"
#include "ui/models/recent_paths.h"
#include "ui/windows/main_window.h"
#include "ui/windows/mode_controls.h"
#include "ui/windows/pace_control.h"
#include "ui/windows/process_panel.h"
#include "ui/windows/run_replay_window.h"
#include "wire/cluster_token.h"

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSignalSpy>
#include <QSlider>
#include <QStandardPaths>
#include <QTableView>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QToolButton>
#include <QXmlStreamReader>

#include <cerrno>
#include <csignal>
#include <set>

using namespace parasync;
using namespace parasync::ui;
using namespace std::chrono_literals;

namespace {

ClusterPlan planOnFreePorts(int64_t lastStep)
{
    ClusterPlan plan = ClusterPlan::demo();
    plan.cluster.ps.front().port = pickFreePort();
    for (HostPort &worker : plan.cluster.workers)
        worker.port = pickFreePort();
    plan.training.lastStep = lastStep;
    return plan;
}

bool processExists(qint64 pid)
{
    return pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno != ESRCH);
}

std::shared_ptr<const RunSnapshot> latest(MainWindow &window)
{
    window.charts()->flush();
    return window.charts()->snapshot();
}

// Runs -> Recent runs as it shows when opened: each entry's run directory.
QStringList recentRunsShown(MainWindow &window)
{
    auto *menu = window.findChild<QMenu *>(QStringLiteral("recentRuns"));
    if (!menu)
        return {QStringLiteral("no Recent runs menu")};
    Q_EMIT menu->aboutToShow();
    QStringList shown;
    for (QAction *action : menu->actions())
        if (action->objectName() == QStringLiteral("recentRun"))
            shown << action->data().toString();
    return shown;
}

QAction *menuEntry(QMenu *menu, const QString &name)
{
    for (QAction *action : menu->actions())
        if (action->objectName() == name)
            return action;
    return nullptr;
}

int rowOf(ProcessPanel *panel, const QString &task)
{
    for (int row = 0; row < panel->model()->rowCount(); ++row)
        if (panel->model()->rowAt(row)->task == task)
            return row;
    return -1;
}

} // namespace

class TestMainWindow : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true); // recent files etc. not in the user's settings
        QCoreApplication::setOrganizationName(QStringLiteral("ParasyncTests"));
        qRegisterMetaType<parasync::RunSnapshot>();
        qRegisterMetaType<parasync::proto::ModeConfig>();
    }

    void demoFromTheToolbarTrainsSwitchesModeExportsAndQuitsClean()
    {
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        auto window = std::make_unique<MainWindow>(&launcher, &watcher);
        window->setDemoPlan(planOnFreePorts(100000000)); // trains until we quit
        window->show();

        auto *start = window->findChild<QAction *>(QStringLiteral("startDemo"));
        QVERIFY(start);
        start->trigger();

        // Steps arrive and the process panel lists the three tasks with pids.
        QTRY_VERIFY_WITH_TIMEOUT(latest(*window) && latest(*window)->globalStep > 200, 30000);
        ProcessPanel *panel = window->processes();
        QCOMPARE(panel->model()->rowCount(), 3);
        QTRY_VERIFY_WITH_TIMEOUT(
            panel->model()->rowAt(rowOf(panel, QStringLiteral("worker:1")))->state == TaskState::Training, 20000);
        std::vector<qint64> pids;
        for (const TaskInfo &task : launcher.tasks()) {
            QVERIFY2(task.pid > 0, qPrintable(QString::fromStdString(task.task.toString())));
            pids.push_back(task.pid);
        }

        // Slow both workers down from the panel, so that the recent-step
        // window spans the mode change below (and to try the straggler row).
        QSignalSpy controls(&watcher, &ClusterWatcher::controlFinished);
        for (const QString &worker : {QStringLiteral("worker:0"), QStringLiteral("worker:1")}) {
            panel->selectRow(rowOf(panel, worker));
            panel->slowDownSelected(3);
        }
        QTRY_VERIFY_WITH_TIMEOUT(controls.size() >= 2, 10000);
        for (const auto &call : controls)
            QVERIFY2(call.at(0).toBool(), qPrintable(call.at(1).toString()));
        // The table shows the delay the workers confirmed.
        QTRY_COMPARE_WITH_TIMEOUT(panel->model()->rowAt(rowOf(panel, QStringLiteral("worker:1")))->stragglerMs, 3,
                                  5000);
        QCOMPARE(panel->model()->rowAt(rowOf(panel, QStringLiteral("worker:0")))->stragglerMs, 3);

        // The buttons show ps:0's mode, not the click.
        ModeControls *modes = window->modeControls();
        QTRY_VERIFY_WITH_TIMEOUT(modes->reportedMode() && modes->reportedMode()->mode() == proto::ASYNC, 10000);
        QVERIFY(modes->button(proto::ASYNC)->isChecked());
        const int64_t stepBeforeSwitch = latest(*window)->globalStep;
        modes->button(proto::SYNC)->click();
        QVERIFY2(modes->button(proto::ASYNC)->isChecked() && !modes->button(proto::SYNC)->isChecked(),
                 "a click alone must not change what the buttons show");
        QVERIFY(modes->statusText().contains(QStringLiteral("waiting for ps:0")));
        QTRY_VERIFY_WITH_TIMEOUT(modes->button(proto::SYNC)->isChecked(), 15000);
        QVERIFY(!modes->button(proto::ASYNC)->isChecked());
        QCOMPARE(modes->reportedMode()->mode(), proto::SYNC);

        // The change is in the telemetry and marked on every chart.
        QTRY_VERIFY_WITH_TIMEOUT(!latest(*window)->modeChanges.empty(), 15000);
        QVERIFY(latest(*window)->modeChanges.back().globalStep >= stepBeforeSwitch);
        QTRY_VERIFY_WITH_TIMEOUT(latest(*window)->globalStep > latest(*window)->modeChanges.back().globalStep + 50,
                                 30000);
        for (ExportableChart *chart : window->charts()->charts()) {
            QTemporaryDir scratch;
            QString error;
            // Rendering brings hidden tabs up to date, as an export does.
            QVERIFY(ChartExporter::exportPng(chart, scratch.filePath(QStringLiteral("c.png")), &error));
            QVERIFY2(chart->pointCount() > 0, qPrintable(chart->exportName()));
            // The staleness cost's axis is the staleness itself: a gradient
            // so many steps old costs what it costs whichever mode made it.
            if (chart->exportName() == QStringLiteral("staleness_cost"))
                continue;
            QVERIFY2(chart->modeMarkerCount() >= 1,
                     qPrintable(chart->exportName() + QStringLiteral(": no mode marker")));
        }

        // Export all.
        QTemporaryDir dir;
        QStringList written;
        QString error;
        QVERIFY2(window->exportAllTo(dir.path(), &written, &error), qPrintable(error));
        QCOMPARE(written.size(), window->charts()->charts().size() * 4 + 3);
        for (const QString &path : std::as_const(written)) {
            QVERIFY2(QFile(path).size() > 0, qPrintable(path));
            if (path.endsWith(QStringLiteral(".png"))) {
                QVERIFY2(!QImage(path).isNull(), qPrintable(path));
            } else if (path.endsWith(QStringLiteral(".svg"))) {
                QFile file(path);
                QVERIFY(file.open(QIODevice::ReadOnly));
                QXmlStreamReader xml(&file);
                while (!xml.atEnd())
                    xml.readNext();
                QVERIFY2(!xml.hasError(), qPrintable(path + QStringLiteral(": ") + xml.errorString()));
            } else if (path.endsWith(QStringLiteral(".pdf"))) {
                QFile file(path);
                QVERIFY(file.open(QIODevice::ReadOnly));
                QVERIFY2(file.read(5) == "%PDF-", qPrintable(path));
            } else if (path.endsWith(QStringLiteral(".json"))) {
                QFile file(path);
                QVERIFY(file.open(QIODevice::ReadOnly));
                QVERIFY2(QJsonDocument::fromJson(file.readAll()).object().contains(QStringLiteral("traceEvents")),
                         qPrintable(path));
            } else {
                QFile file(path);
                QVERIFY(file.open(QIODevice::ReadOnly));
                QVERIFY2(file.readLine().contains(','), qPrintable(path));
            }
        }

        // Quitting stops the processes it started.
        parasync::testing::quitAnsweringStop(window.get());
        window.reset();
        for (const qint64 pid : pids)
            QVERIFY2(!processExists(pid), qPrintable(QStringLiteral("pid %1 still running").arg(pid)));
        QVERIFY(!launcher.anyRunning());
    }

    // Production-like operations in the window: ps:0 flags the slow worker
    // (the banner says who and what it costs in the mode; the worker's lane
    // and process row are marked), and Add worker grows the cluster while it
    // trains (a fourth row, a third lane). With PARASYNC_SCREENSHOT_DIR, the
    // window is saved at both moments.
    void aStragglerIsFlaggedAndAWorkerAddedWhileItTrains()
    {
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        auto window = std::make_unique<MainWindow>(&launcher, &watcher);
        ClusterPlan plan = planOnFreePorts(100000000);
        plan.training.maxWorkers = 3;
        plan.training.pace.computeMs = 20;
        plan.training.pace.computeJitter = 0;
        plan.workerPace[1] = plan.training.pace;
        plan.workerPace[1].stragglerMs = 60; // 4 times worker:0's time a step
        window->setDemoPlan(plan);
        window->resize(1400, 900);
        window->show();
        window->findChild<QAction *>(QStringLiteral("startDemo"))->trigger();

        auto *alert = window->findChild<QLabel *>(QStringLiteral("stallAlert"));
        QVERIFY(alert);
        QTRY_VERIFY2_WITH_TIMEOUT(alert->isVisible() && alert->text().contains(QStringLiteral("is a straggler")),
                                  qPrintable(alert->text()), 60000);
        QVERIFY2(alert->text().startsWith(QStringLiteral("worker:1 (0.")), qPrintable(alert->text()));
        QVERIFY2(alert->text().contains(QStringLiteral("In async nobody waits for it")), qPrintable(alert->text()));
        QVERIFY(!latest(*window)->stragglerChanges.empty());
        QCOMPARE(latest(*window)->stragglerChanges.front().worker, 1);
        ProcessPanel *panel = window->processes();
        QTRY_VERIFY_WITH_TIMEOUT(panel->model()
                                     ->rowAt(rowOf(panel, QStringLiteral("worker:1")))
                                     ->stateText.contains(QStringLiteral("a straggler")),
                                 10000);
        auto *timeline = window->findChild<StepTimelineView *>();
        QVERIFY(timeline);
        const QString shots = qEnvironmentVariable("PARASYNC_SCREENSHOT_DIR");
        const auto save = [&](const QString &name) {
            if (shots.isEmpty())
                return;
            timeline->fitAll(); // the flag's mark in worker:1's lane in view
            QCoreApplication::processEvents();
            QVERIFY(QDir().mkpath(shots));
            QVERIFY(window->grab().save(QDir(shots).filePath(name)));
        };
        save(QStringLiteral("straggler_flagged.png"));

        auto *add = window->findChild<QPushButton *>(QStringLiteral("addWorker"));
        QVERIFY(add);
        QVERIFY2(add->isEnabled(), qPrintable(add->toolTip()));
        add->click();
        QTRY_COMPARE_WITH_TIMEOUT(panel->model()->rowCount(), 4, 5000);
        QTRY_VERIFY_WITH_TIMEOUT(latest(*window)->workers.size() == 3 && latest(*window)->workers[2].applied > 50,
                                 30000);
        QTRY_VERIFY_WITH_TIMEOUT(!add->isEnabled(), 5000); // no room for a fourth
        save(QStringLiteral("worker_added.png"));

        parasync::testing::quitAnsweringStop(window.get());
        window.reset();
        QVERIFY(!launcher.anyRunning());
    }

    // Before the demo starts, the Pace control shows the pace the demo will
    // run at (it once read "full speed", and the demo then ran at 40 ms a
    // step); moved while nothing trains, it goes back to that pace.
    void thePaceShowsTheDemosPaceBeforeItStarts()
    {
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        auto *slider = window.paceControl()->findChild<QSlider *>(QStringLiteral("paceSlider"));
        auto *label = window.paceControl()->findChild<QLabel *>(QStringLiteral("paceValue"));
        QVERIFY(slider && label);
        QCOMPARE(window.demoPlan().training.pace.computeMs, 40); // the README's demo
        QCOMPARE(label->text(), QStringLiteral("40 ms a step (about 25 steps/s per worker), the demo's pace"));
        QCOMPARE(window.paceControl()->computeMs(), 40);

        ClusterPlan plan = planOnFreePorts(0);
        plan.training.pace.computeMs = 150;
        window.setDemoPlan(plan);
        QCOMPARE(label->text(), QStringLiteral("150 ms a step (about 7 steps/s per worker), the demo's pace"));
        const auto &stops = PaceControl::stops();
        slider->setValue(int(std::find(stops.begin(), stops.end(), 5) - stops.begin())); // as a drag ends
        QCOMPARE(window.paceControl()->computeMs(), 150);
        QCOMPARE(label->text(), QStringLiteral("150 ms a step (about 7 steps/s per worker), the demo's pace"));
    }

    // Quitting while the cluster this window started trains asks first:
    // Cancel keeps it training, "Stop and quit" stops its tasks. The next
    // window opens at the size the user left; with nothing saved, at a
    // size that fits the screen.
    void quittingATrainingClusterAsksFirstAndTheWindowComesBackAsLeft()
    {
        QSettings().remove(QStringLiteral("window"));
        {
            ClusterLauncher launcher;
            launcher.setNodeBinary(testing::nodeBinary());
            ClusterWatcher watcher;
            MainWindow fresh(&launcher, &watcher);
            fresh.show();
            // Never larger than the screen unless it cannot be narrower, and
            // it can always be made to fit a 1366x768 laptop's screen.
            const QSize screen = fresh.screen()->availableGeometry().size();
            const QSize least = fresh.minimumSizeHint();
            QVERIFY2(fresh.width() <= std::max(screen.width(), least.width())
                         && fresh.height() <= std::max(screen.height(), least.height()),
                     qPrintable(QStringLiteral("%1x%2 on a %3x%4 screen")
                                    .arg(fresh.width())
                                    .arg(fresh.height())
                                    .arg(screen.width())
                                    .arg(screen.height())));
            QVERIFY2(least.width() <= 1366 && least.height() <= 768 - 40,
                     qPrintable(QStringLiteral("at least %1x%2").arg(least.width()).arg(least.height())));
            fresh.close();
        }
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        auto window = std::make_unique<MainWindow>(&launcher, &watcher);
        window->setDemoPlan(planOnFreePorts(0)); // until stopped
        window->show();
        window->resize(1250, 700); // the user's size
        window->startDemo();
        QTRY_VERIFY_WITH_TIMEOUT(latest(*window) && latest(*window)->globalStep > 20, 30000);

        // The keyboard reaches the modes (Ctrl+1, 2, 3: the table's order)
        // and Stop and Connect have keys of their own.
        QVERIFY(QTest::qWaitForWindowActive(window.get()));
        QTest::keyClick(window.get(), Qt::Key_3, Qt::ControlModifier);
        QTRY_VERIFY_WITH_TIMEOUT(window->modeControls()->reportedMode()
                                     && window->modeControls()->reportedMode()->mode() == updateModes()[2].mode,
                                 15000);
        QCOMPARE(window->findChild<QAction *>(QStringLiteral("stopCluster"))->shortcut(),
                 QKeySequence(QStringLiteral("Ctrl+.")));
        QCOMPARE(window->findChild<QAction *>(QStringLiteral("connectCluster"))->shortcut(),
                 QKeySequence(QStringLiteral("Ctrl+K")));

        const QSize left = window->size();
        window->close();
        auto *question = window->findChild<QMessageBox *>(QStringLiteral("quitQuestion"));
        QVERIFY(question && question->isVisible());
        QVERIFY2(question->text().contains(QStringLiteral("training")), qPrintable(question->text()));
        QVERIFY(window->isVisible());
        question->findChild<QAbstractButton *>(QStringLiteral("keepTraining"))->click();
        QVERIFY(window->isVisible());
        QVERIFY(launcher.anyRunning());
        const int64_t asked = latest(*window)->globalStep;
        QTRY_VERIFY_WITH_TIMEOUT(latest(*window)->globalStep > asked + 20, 20000); // still training

        std::vector<qint64> pids;
        for (const TaskInfo &task : launcher.tasks())
            pids.push_back(task.pid);
        QVERIFY(parasync::testing::quitAnsweringStop(window.get()));
        QVERIFY(!window->isVisible());
        QVERIFY(!launcher.anyRunning());
        for (const qint64 pid : pids)
            QVERIFY2(!processExists(pid), qPrintable(QStringLiteral("pid %1 still running").arg(pid)));
        window.reset();

        // Nothing trains now: the window closes without a question.
        MainWindow again(&launcher, &watcher);
        QCOMPARE(again.size(), left);
        again.show();
        QVERIFY(!parasync::testing::quitAnsweringStop(&again));
        QVERIFY(!again.isVisible());
    }

    // Runs -> Recent runs: the demo's runs as they are launched, a run
    // opened moved to the front, the list in a new window (the settings),
    // a deleted run gone, an entry opening its run, and Clear.
    void recentRunsOfferTheDemosAndOpenedRunsAndOpenThem()
    {
        RecentPaths::runs().clear(); // and not seeded with earlier tests' demo runs
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        QStringList demos;
        {
            MainWindow window(&launcher, &watcher);
            window.show();
            QCOMPARE(recentRunsShown(window), QStringList());
            for (int run = 0; run < 2; ++run) {
                window.setDemoPlan(planOnFreePorts(500));
                window.startDemo();
                demos.prepend(QString::fromStdString(launcher.plan().training.logdir));
                // The demo's runs live among the app's data, where the README says.
                QVERIFY2(demos.front().startsWith(demoRunsDirectory() + QStringLiteral("/demo-")),
                         qPrintable(demos.front()));
                QTRY_VERIFY_WITH_TIMEOUT(!launcher.anyRunning() && latest(window) && latest(window)->globalStep == 500,
                                         60000);
                QCOMPARE(recentRunsShown(window).front(), demos.front());
            }
            QCOMPARE(recentRunsShown(window), demos);
            // Opened (as File -> Open run does): first now.
            window.openRunDirectory(demos.back());
            QTRY_VERIFY_WITH_TIMEOUT(window.findChildren<RunReplayWindow *>().size() == 1, 20000);
            QCOMPARE(recentRunsShown(window), QStringList({demos.back(), demos.front()}));
            window.close();
        }
        const QString opened = demos.back();
        const QString deleted = demos.front();

        // A new window (as after a restart) offers the same runs, less one deleted since.
        MainWindow again(&launcher, &watcher);
        again.show();
        QCOMPARE(recentRunsShown(again), QStringList({opened, deleted}));
        QVERIFY(QDir(deleted).removeRecursively());
        QCOMPARE(recentRunsShown(again), QStringList({opened}));

        // Choosing the entry opens that run, as Open run does.
        auto *menu = again.findChild<QMenu *>(QStringLiteral("recentRuns"));
        Q_EMIT menu->aboutToShow();
        QAction *entry = menuEntry(menu, QStringLiteral("recentRun"));
        QVERIFY(entry);
        QVERIFY2(entry->text().contains(QFileInfo(opened).fileName()), qPrintable(entry->text()));
        entry->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(again.findChildren<RunReplayWindow *>().size() == 1, 20000);
        RunChartsView *replay = again.findChildren<RunReplayWindow *>().front()->charts();
        replay->flush();
        const auto replayed = replay->snapshot();
        QVERIFY(replayed);
        QCOMPARE(replayed->globalStep, int64_t(500));

        // Connecting with a run directory names it too.
        QTemporaryDir watched;
        again.connectToCluster(QStringLiteral("127.0.0.1:%1").arg(pickFreePort()), watched.path());
        watcher.disconnectFromCluster();
        QCOMPARE(recentRunsShown(again), QStringList({watched.path(), opened}));

        // Clear empties it, here and for the next window.
        menuEntry(menu, QStringLiteral("recentRunClear"))->trigger();
        QCOMPARE(recentRunsShown(again), QStringList());
        QCOMPARE(RecentPaths::runs().paths(), QStringList());
        QDir(opened).removeRecursively();
    }

    // Help -> About says which version and protocol this is, and the licence.
    void theAboutBoxNamesTheVersionProtocolAndLicence()
    {
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();
        window.findChild<QAction *>(QStringLiteral("aboutParasync"))->trigger();
        auto *box = window.findChild<QMessageBox *>(QStringLiteral("aboutBox"));
        QVERIFY(box && box->isVisible());
        for (const QString &part : {QString::fromLatin1(version()), QStringLiteral("Protocol %1").arg(kProtocolVersion),
                                    QStringLiteral("Apache License 2.0")})
            QVERIFY2(box->text().contains(part), qPrintable(part + QStringLiteral(" not in ") + box->text()));
        box->close();
    }

    void thePaceSliderSetsEveryWorkersStepTimeWhileItTrains()
    {
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        ClusterPlan plan = planOnFreePorts(0); // until stopped, at full speed
        window.setDemoPlan(plan);
        window.show();
        window.startDemo();
        QTRY_VERIFY_WITH_TIMEOUT(latest(window) && latest(window)->globalStep > 200, 30000);

        auto *slider = window.paceControl()->findChild<QSlider *>(QStringLiteral("paceSlider"));
        auto *label = window.paceControl()->findChild<QLabel *>(QStringLiteral("paceValue"));
        QVERIFY(slider && label);
        QCOMPARE(label->text(), QStringLiteral("full speed"));
        QSignalSpy changed(&watcher, &ClusterWatcher::paceChanged);
        const auto &stops = PaceControl::stops();
        slider->setValue(int(std::find(stops.begin(), stops.end(), 300) - stops.begin())); // as a drag ends
        QTRY_COMPARE_WITH_TIMEOUT(changed.size(), 2, 10000);
        QCOMPARE(label->text(), QStringLiteral("300 ms a step (about 3 steps/s per worker)"));
        // Each worker says so itself.
        for (const HostPort &worker : plan.cluster.workers) {
            auto stub = proto::TaskControl::NewStub(makeChannel(worker.toString(), {}));
            proto::TaskStatusResponse status;
            QVERIFY(callRidingOutDrops({}, 10s, [&](grpc::ClientContext *context) {
                        return stub->GetTaskStatus(context, {}, &status);
                    }).ok());
            QCOMPARE(status.compute_ms(), 300);
        }
        parasync::testing::quitAnsweringStop(&window);
    }

    void aShortDemoIsCompletedFromItsRunDirectory()
    {
        // 3000 steps take well under a second: the live stream sees part of
        // it at best; the charts must show all of it once it ends.
        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.setDemoPlan(planOnFreePorts(3000));
        window.show();
        window.findChild<QAction *>(QStringLiteral("startDemo"))->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(!launcher.anyRunning() && latest(window) && latest(window)->globalStep == 3000
                                     && latest(window)->recentSteps.size() >= 3000,
                                 60000);
        // Every applied update is on the timeline: the steps interleave.
        std::set<int64_t> steps;
        for (const StepRecord &step : latest(window)->recentSteps)
            if (step.outcome != proto::DROPPED_STALE)
                steps.insert(step.globalStep);
        QCOMPARE(int64_t(steps.size()), int64_t(3000));
        QVERIFY(window.charts()->timeline()->pointCount() >= 3000);
        QVERIFY(!launcher.plan().training.logdir.empty());
        QDir(QString::fromStdString(launcher.plan().training.logdir)).removeRecursively();
        parasync::testing::quitAnsweringStop(&window);
    }

    void takenPortIsNamedAndFreePortsOffered()
    {
        // Hold ps:0's port as an old process would.
        QTcpServer squatter;
        QVERIFY(squatter.listen(QHostAddress::LocalHost, 0));
        ClusterPlan plan = planOnFreePorts(100000000);
        plan.cluster.ps.front().port = squatter.serverPort();

        ClusterLauncher launcher;
        launcher.setNodeBinary(testing::nodeBinary());
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();

        QString shownText;
        // The question is modal: answer it as a person would.
        QTimer::singleShot(500, this, [&shownText] {
            for (QWidget *widget : QApplication::topLevelWidgets()) {
                auto *box = qobject_cast<QMessageBox *>(widget);
                if (!box || !box->isVisible())
                    continue;
                shownText = box->text();
                for (QAbstractButton *button : box->buttons())
                    if (button->text().startsWith(QStringLiteral("Use free ports")))
                        button->click();
            }
        });
        QVERIFY(window.startCluster(plan));
        QVERIFY2(shownText.contains(QString::number(squatter.serverPort())), qPrintable(shownText));
        QVERIFY2(shownText.contains(QStringLiteral("pid %1").arg(QCoreApplication::applicationPid())),
                 qPrintable(shownText));
        QVERIFY(launcher.plan().cluster.ps.front().port != squatter.serverPort());
        QTRY_VERIFY_WITH_TIMEOUT(latest(window) && latest(window)->globalStep > 0, 30000);
        parasync::testing::quitAnsweringStop(&window);
    }

    void connectsToAClusterItDidNotStart()
    {
        testing::LocalCluster cluster(1, 2, {QStringLiteral("--last_step=100000000")});
        cluster.startAll();
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();
        window.connectToCluster(cluster.psAddress(0));
        QTRY_VERIFY_WITH_TIMEOUT(latest(window) && latest(window)->globalStep > 100, 30000);
        // The panel lists ps:0 and the workers from ps:0's report.
        ProcessPanel *panel = window.processes();
        QTRY_COMPARE_WITH_TIMEOUT(panel->model()->rowCount(), 3, 10000);
        QCOMPARE(panel->model()->rowAt(0)->address, cluster.psAddress(0));
        // The pid comes with ps:0's periodic status, not with every step.
        QTRY_VERIFY_WITH_TIMEOUT(panel->model()->rowAt(rowOf(panel, QStringLiteral("worker:1")))->pid > 0, 15000);
        const ProcessRow *worker = panel->model()->rowAt(rowOf(panel, QStringLiteral("worker:1")));
        QCOMPARE(worker->address, cluster.workerAddress(1));
        QCOMPARE(worker->launcherRow, -1); // not ours: no kill or restart

        // Quitting the app does not stop a cluster it only watches.
        parasync::testing::quitAnsweringStop(&window);
        QVERIFY(cluster.ps(0).isRunning());
    }

    void connectDialogTakesATokenNeverSavesItAndTheWindowShowsAHang()
    {
        const QString token = QString::fromStdString(generateClusterToken());
        testing::LocalCluster cluster(1, 2,
                                      {QStringLiteral("--mode=sync"), QStringLiteral("--hang_timeout_secs=1"),
                                       QStringLiteral("--last_step=100000000")});
        cluster.setClusterToken(token);
        cluster.startAll();
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();

        ConnectDialog dialog(&window);
        dialog.findChild<QLineEdit *>(QStringLiteral("connectAddress"))->setText(cluster.psAddress(0));
        auto *tokenField = dialog.findChild<QLineEdit *>(QStringLiteral("connectToken"));
        QCOMPARE(tokenField->echoMode(), QLineEdit::Password);
        QPushButton *ok = dialog.findChild<QDialogButtonBox *>()->button(QDialogButtonBox::Ok);
        // A mistyped token is caught while the dialog is open.
        tokenField->setText(QStringLiteral("not-a-token"));
        ok->click();
        auto *error = dialog.findChild<QLabel *>(QStringLiteral("connectError"));
        QVERIFY(error->isVisibleTo(&dialog));
        QVERIFY2(error->text().contains(QStringLiteral("is not a cluster token")), qPrintable(error->text()));
        QCOMPARE(dialog.result(), int(QDialog::Rejected));
        tokenField->setText(token);
        ok->click();
        QCOMPARE(dialog.result(), int(QDialog::Accepted));
        window.connectToCluster(dialog.request());
        QTRY_VERIFY_WITH_TIMEOUT(latest(window) && latest(window)->globalStep > 100, 30000);

        // The token is nowhere in the app's settings; the address is.
        QSettings settings;
        settings.sync();
        bool addressSaved = false;
        for (const QString &key : settings.allKeys()) {
            const QString value = settings.value(key).toString();
            QVERIFY2(!value.contains(token), qPrintable(key));
            addressSaved = addressSaved || value == cluster.psAddress(0);
        }
        QVERIFY(addressSaved);
        QFile file(settings.fileName());
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVERIFY(!file.readAll().contains(token.toUtf8()));

        QVERIFY(cluster.waitForWorkerTraining(1)); // it is slowed through its control service
        // worker:1 takes 4 s a step: sync stands still, ps:0's watchdog
        // says whom it waits for, and the window shows it above the charts.
        RpcSettings member;
        member.clusterToken = token.toStdString();
        auto stub = proto::TaskControl::NewStub(makeChannel(cluster.workerAddress(1).toStdString(), member));
        proto::SetStragglerRequest slow;
        slow.set_delay_ms(4000);
        proto::SetStragglerResponse ignored;
        const grpc::Status slowed = callRidingOutDrops(
            member, 10s, [&](grpc::ClientContext *context) { return stub->SetStraggler(context, slow, &ignored); });
        QVERIFY2(slowed.ok(), slowed.error_message().c_str());
        auto *alert = window.findChild<QLabel *>(QStringLiteral("stallAlert"));
        QVERIFY(alert);
        QTRY_VERIFY_WITH_TIMEOUT(alert->isVisible(), 15000);
        QVERIFY2(alert->text().contains(QStringLiteral("worker:1")), qPrintable(alert->text()));
        parasync::testing::quitAnsweringStop(&window);
        for (int i = 0; i < 2; ++i)
            cluster.worker(i).kill();
        cluster.ps(0).terminate();
        QCOMPARE(cluster.ps(0).waitForExit(), 0);
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
