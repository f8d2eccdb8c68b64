#include "orchestration/launch_sequence.h"

#include "orchestration/cluster_watcher.h"
#include "orchestration/preflight_check.h"

#include <QTimer>

namespace parasync {

namespace {
// A watcher started before ps:0 listens backs off and may miss a short run;
// one that never starts would never say why there is nothing to see.
constexpr int kWatchAtTheLatestMs = 3000;
} // namespace

LaunchSequence::LaunchSequence(ClusterLauncher *launcher, ClusterWatcher *watcher, QObject *parent)
    : QObject(parent)
    , m_launcher(launcher)
    , m_watcher(watcher)
{
    connect(m_launcher, &ClusterLauncher::taskChanged, this, &LaunchSequence::onTaskChanged);
    connect(m_watcher, &ClusterWatcher::connectionStateChanged, this,
            [this](bool connected) { onConnectionState(connected); });
}

LaunchSequence::~LaunchSequence() = default;

void LaunchSequence::setHoldWorkersUntilWatched(bool hold)
{
    m_holdWorkers = hold;
    m_launcher->holdWorkersUntilWatched(hold ? m_watcher : nullptr);
}

bool LaunchSequence::checksFirst(const ClusterPlan &plan) const
{
    return m_preflightWhen == Preflight::Always || (m_preflightWhen == Preflight::RemoteHosts && !plan.hosts.empty());
}

void LaunchSequence::start(const ClusterPlan &plan)
{
    ++m_generation;
    dropPreflight();
    m_plan = plan;
    m_conflicts.clear();
    m_watchStarted = false;
    if (!checksFirst(plan)) {
        checkPortsThenLaunch();
        return;
    }
    m_stage = Stage::Checking;
    m_preflight = std::make_unique<PreflightCheck>();
    m_preflight->setNodeBinary(m_launcher->nodeBinary());
    // A dialog may run the check again (other ports): each end is reported.
    connect(m_preflight.get(), &PreflightCheck::finished, this, [this](bool passed) {
        if (m_stage != Stage::Checking && m_stage != Stage::Checked)
            return;
        m_stage = Stage::Checked;
        Q_EMIT preflightFinished(passed, m_preflight->report());
    });
    m_preflight->start(m_plan);
    Q_EMIT preflightStarted();
}

void LaunchSequence::proceed(const ClusterPlan &plan)
{
    if (m_stage != Stage::Checked)
        return;
    m_plan = plan;
    checkPortsThenLaunch();
}

void LaunchSequence::useSuggestedPorts()
{
    if (m_stage != Stage::PortsTaken)
        return;
    m_plan = ClusterLauncher::withSuggestedPorts(m_plan, m_conflicts);
    // Not checked again: launch() refuses a port taken in the meantime, and says so.
    launch();
}

void LaunchSequence::cancel()
{
    ++m_generation;
    dropPreflight();
    m_stage = Stage::Idle;
}

void LaunchSequence::checkPortsThenLaunch()
{
    m_conflicts = m_launcher->checkPorts(m_plan);
    if (!m_conflicts.empty()) {
        m_stage = Stage::PortsTaken;
        Q_EMIT portsTaken(m_conflicts);
        return;
    }
    launch();
}

void LaunchSequence::launch()
{
    QString error;
    if (!m_launcher->launch(m_plan, &error)) {
        m_stage = Stage::Failed;
        Q_EMIT failed(error);
        return;
    }
    m_stage = Stage::Launched;
    m_watchStarted = false;
    // Whatever the watcher followed before, it follows this launch now.
    m_watcher->disconnectFromCluster();
    if (m_holdWorkers) {
        watchPs0();
    } else {
        const int generation = m_generation;
        QTimer::singleShot(kWatchAtTheLatestMs, this, [this, generation] {
            if (generation == m_generation)
                watchPs0();
        });
    }
    Q_EMIT launched(m_plan);
}

void LaunchSequence::onTaskChanged(int row)
{
    if (m_stage != Stage::Launched || m_watchStarted || row < 0 || size_t(row) >= m_launcher->tasks().size())
        return;
    const TaskInfo &info = m_launcher->tasks()[size_t(row)];
    if (info.task == TaskId{JobName::Ps, 0} && info.state != TaskState::NotStarted && info.state != TaskState::Starting)
        watchPs0();
}

void LaunchSequence::watchPs0()
{
    if (m_stage != Stage::Launched || m_watchStarted)
        return;
    m_watchStarted = true;
    // Watched from its first step: the telemetry is the whole story, no
    // run directory to read first.
    m_watcher->setHistory({}, false);
    m_watcher->connectTo(QString::fromStdString(m_plan.cluster.ps.front().toString()));
}

void LaunchSequence::onConnectionState(bool connected)
{
    if (!connected || m_stage != Stage::Launched || !m_watchStarted || m_plan.cluster.ps.empty())
        return;
    const QString ps0 = QString::fromStdString(m_plan.cluster.ps.front().toString());
    // Only a watcher of this launch's ps:0 counts (the driver may have
    // pointed it elsewhere since).
    if (m_watcher->address() != ps0)
        return;
    m_stage = Stage::Watching;
    Q_EMIT watching(ps0);
}

void LaunchSequence::dropPreflight()
{
    // A dialog showing the check may still hold it while its slot unwinds:
    // it goes once control is back in the event loop.
    if (m_preflight) {
        m_preflight->disconnect(this);
        m_preflight.release()->deleteLater();
    }
}

} // namespace parasync
