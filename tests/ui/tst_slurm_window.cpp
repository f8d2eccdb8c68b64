// The window runs a cluster as a job of a real one-node Slurm (root only,
// skipped with the reason elsewhere): Cluster -> Run on Slurm's path
// submits it, the Slurm panel shows the job's state, nodes and every task's
// output, the charts follow ps:0 to convergence, Stop cancels the job and
// nothing of it is left; quitting cancels it only when asked to.
#include "base/port_holder.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "orchestration/slurm_backend.h"
#include "orchestration/slurm_job.h"
#include "support/quit_answers.h"
#include "support/slurm_cluster.h"
#include "ui/charts/run_charts_view.h"
#include "ui/windows/main_window.h"

#include <QAction>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <memory>

using namespace parasync;
using namespace parasync::testing;
using namespace parasync::ui;
using namespace Qt::StringLiterals;

namespace {

constexpr int kTimeoutMs = 120000;

double lastValue(const RunSnapshot &snapshot, const std::string &name)
{
    for (size_t i = 0; i < snapshot.parameterNames.size() && i < snapshot.parameterSeries.size(); ++i)
        if (snapshot.parameterNames[i] == name && !snapshot.parameterSeries[i].isEmpty())
            return double(snapshot.parameterSeries[i].buckets().back().last);
    return NAN;
}

// The Slurm job the window's back end submitted.
SlurmJob *slurmJobOf(const MainWindow &window)
{
    auto *backend = qobject_cast<SlurmBackend *>(window.clusterBackend());
    return backend ? backend->job() : nullptr;
}

bool converged(const MainWindow &window)
{
    const auto snapshot = window.charts()->snapshot();
    return snapshot && std::abs(lastValue(*snapshot, "w") - 2.0) < 0.15
           && std::abs(lastValue(*snapshot, "b") - 10.0) < 0.5;
}

} // namespace

class TestSlurmWindow : public QObject
{
    Q_OBJECT

private:
    std::unique_ptr<SlurmCluster> m_slurm;
    QTemporaryDir m_shared;

    SlurmSettings settingsFor(const QString &name, uint16_t portBase) const
    {
        SlurmSettings settings;
        settings.jobName = name.toStdString();
        settings.partition = m_slurm->partition().toStdString();
        settings.portBase = portBase;
        settings.node = qEnvironmentVariable("PARASYNC_NODE").toStdString();
        settings.outputDirectory = m_shared.filePath(name).toStdString();
        return settings;
    }

    ClusterPlan oneByThree(const QString &name) const
    {
        ClusterPlan plan = ClusterPlan::demo();
        plan.cluster.workers.push_back(HostPort{"127.0.0.1", 2225});
        plan.training.lastStep = 0; // until stopped
        plan.training.pace.computeMs = 5;
        plan.training.logdir = m_shared.filePath(name + u"/run"_s).toStdString();
        return plan;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        qRegisterMetaType<parasync::RunSnapshot>();
        qRegisterMetaType<parasync::proto::ModeConfig>();
        m_slurm = std::make_unique<SlurmCluster>();
        QString whyNot;
        if (!m_slurm->start(&whyNot)) {
            m_slurm.reset();
            QSKIP(qPrintable(u"no Slurm for this test: "_s + whyNot));
        }
    }

    void cleanupTestCase() { m_slurm.reset(); }

    void windowFollowsTheJobAndStopCancelsIt()
    {
        const uint16_t portBase = freePortBase(4);
        QVERIFY(portBase != 0);
        ClusterLauncher launcher;
        ClusterWatcher watcher;
        MainWindow window(&launcher, &watcher);
        window.show();
        QVERIFY(window.submitToSlurm(oneByThree(u"window"_s), settingsFor(u"window"_s, portBase), false));
        QTRY_VERIFY2_WITH_TIMEOUT(converged(window), qPrintable(window.jobLog().right(1500)), kTimeoutMs);

        // The Slurm panel told the story: checked, submitted, running on the node, ps:0 found, each task's output
        // (relayed from the tasks' log files as they grow: it may trail the telemetry, so it is waited for).
        for (const QString &said :
             {u"partition: ok"_s, u"Submitted Slurm job"_s, QString(u"RUNNING on "_s + m_slurm->nodeName()),
              u"ps:0 runs at %1:%2"_s.arg(m_slurm->nodeName()).arg(portBase), u"worker:2 | "_s, u"ps:0 | "_s})
            QTRY_VERIFY2_WITH_TIMEOUT(window.jobLog().contains(said),
                                      qPrintable(u"no '%1' in:\n%2"_s.arg(said, window.jobLog().right(2000))),
                                      kTimeoutMs);

        auto *stop = window.findChild<QAction *>(u"stopCluster"_s);
        QVERIFY(stop);
        QVERIFY(stop->isEnabled());
        stop->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(slurmJobOf(window)->isOver(), kTimeoutMs);
        QCOMPARE(slurmJobOf(window)->status().state, std::string("CANCELLED"));
        QVERIFY2(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).isEmpty(),
                 qPrintable(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).join(u'\n')));
        QTRY_VERIFY_WITH_TIMEOUT(m_slurm->idle(), 20000);
        QVERIFY(!stop->isEnabled());
    }

    void quittingCancelsTheJobOnlyWhenAsked()
    {
        for (const bool cancelOnQuit : {true, false}) {
            const uint16_t portBase = freePortBase(4);
            QVERIFY(portBase != 0);
            const QString name = cancelOnQuit ? u"quit-cancels"_s : u"quit-leaves"_s;
            QString jobId;
            {
                ClusterLauncher launcher;
                ClusterWatcher watcher;
                MainWindow window(&launcher, &watcher);
                window.show();
                QVERIFY(window.submitToSlurm(oneByThree(name), settingsFor(name, portBase), cancelOnQuit));
                QTRY_VERIFY2_WITH_TIMEOUT(window.charts()->snapshot() && window.charts()->snapshot()->globalStep > 50,
                                          qPrintable(window.jobLog().right(1500)), kTimeoutMs);
                jobId = slurmJobOf(window)->jobId();
                parasync::testing::quitAnsweringStop(&window);
            }
            const QString state
                = m_slurm
                      ->run(u"squeue"_s, {u"--noheader"_s, u"--states=all"_s, u"--jobs="_s + jobId, u"--format=%T"_s})
                      .trimmed();
            if (cancelOnQuit) {
                QCOMPARE(state, u"CANCELLED"_s);
                QVERIFY(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).isEmpty());
            } else {
                // It trains on without the app; the test cleans up after itself.
                QCOMPARE(state, u"RUNNING"_s);
                QCOMPARE(nodeProcessesWith(u"--slurm_port_base=%1"_s.arg(portBase)).size(), 4);
                m_slurm->run(u"scancel"_s, {jobId});
                QTRY_VERIFY_WITH_TIMEOUT(m_slurm->idle(), 30000);
            }
        }
    }
};

QTEST_MAIN(TestSlurmWindow)
#include "tst_slurm_window.moc"
