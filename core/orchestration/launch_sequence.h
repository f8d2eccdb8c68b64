#pragma once

// One launch of a cluster, the way the window and `parasync --headless` both
// start one: the pre-flight check of the plan's hosts, the ports of its local
// tasks, the launch, then the watcher on ps:0. Written once here so that the
// two cannot drift apart; each stage's outcome is a signal. Where the way on
// is a choice -- after the check, when ports are taken -- the sequence stops
// and waits for its driver: the window asks the user, the headless runner
// decides by its flags. Qt Core only.
//
// All functions are called on the thread the launcher and the watcher live
// on (it runs an event loop); none blocks it but for the port check, which
// reads /proc briefly. Signals are emitted on that thread, some before the
// call that caused them returns (start() of a plan with free ports launches
// at once), so a slot may call back into the sequence -- the window runs its
// modal dialogs there.

#include "config/cluster_plan.h"
#include "orchestration/cluster_launcher.h"

#include <QObject>
#include <QString>

#include <memory>
#include <vector>

namespace parasync {

class ClusterWatcher;
class PreflightCheck;

class LaunchSequence : public QObject
{
    Q_OBJECT

public:
    enum class Stage {
        Idle,       // not started, or cancelled
        Checking,   // the pre-flight check runs (preflight())
        Checked,    // the check is over: waiting for proceed() or cancel()
        PortsTaken, // waiting for useSuggestedPorts() or cancel()
        Launched,   // the tasks are started; the watcher follows once ps:0 listens
        Watching,   // the watcher is connected to the launched ps:0
        Failed,     // the launcher refused the plan (failed() said why)
    };
    // When to run the pre-flight check: for plans with remote hosts (the
    // default: a local task says itself what is wrong), for every plan, or
    // never.
    enum class Preflight { RemoteHosts, Always, Never };

    // Neither is owned; both outlive the sequence.
    LaunchSequence(ClusterLauncher *launcher, ClusterWatcher *watcher, QObject *parent = nullptr);
    ~LaunchSequence() override; // ends a check still running

    void setPreflight(Preflight when) { m_preflightWhen = when; }
    // Whether start(plan) begins with the pre-flight check.
    bool checksFirst(const ClusterPlan &plan) const;
    // Holds the workers of each launch until the watcher follows ps:0 (see
    // ClusterLauncher::holdWorkersUntilWatched) and connects the watcher
    // right after the launch: a run of a few hundred steps is watched from
    // its first. Off (the default), the workers start once the ps tasks
    // listen, and the watcher connects when ps:0 listens, or after 3 s at the
    // latest so that it says why not.
    void setHoldWorkersUntilWatched(bool hold);

    // Begins with `plan`, dropping a sequence still under way (tasks already
    // launched keep running: stopping them is the launcher's). The first
    // signal may come before this returns.
    void start(const ClusterPlan &plan);
    // After preflightFinished: goes on to the ports and the launch with
    // `plan` -- the one checked, or the driver's change of it (free ports
    // the check found, a run directory). Ignored in any other stage.
    void proceed(const ClusterPlan &plan);
    // After portsTaken: launches with every taken port replaced by the free
    // one suggested. Ignored in any other stage.
    void useSuggestedPorts();
    // Stops where it is: nothing is launched if nothing was yet, and the
    // watcher is not connected if it was not yet. Tasks started keep
    // running; a watcher already connected stays connected.
    void cancel();

    Stage stage() const { return m_stage; }
    // The plan as it stands: the one given, then the driver's, then with
    // free ports.
    const ClusterPlan &plan() const { return m_plan; }
    // The check of this sequence, from preflightStarted until the next
    // start() or cancel() (for a dialog to show); nullptr without one.
    PreflightCheck *preflight() const { return m_preflight.get(); }
    // The ports portsTaken reported.
    const std::vector<PortConflict> &conflicts() const { return m_conflicts; }

Q_SIGNALS:
    // The check of the plan's hosts began; preflight() follows it as it goes.
    void preflightStarted();
    // It is over; `report` has one line per check, with its fix. The
    // sequence waits for proceed() or cancel(), passed or not.
    void preflightFinished(bool passed, const QString &report);
    // Local tasks' ports are taken, each with its holder (when /proc tells)
    // and a free port to use instead. Waits for useSuggestedPorts() or cancel().
    void portsTaken(const std::vector<parasync::PortConflict> &conflicts);
    // The launcher started `plan`'s tasks (the ps tasks at once, the workers
    // once these listen).
    void launched(const parasync::ClusterPlan &plan);
    // The watcher is connected to the launched ps:0 at `address`.
    void watching(const QString &address);
    // The launcher refused the plan: `message` says why and what to try.
    void failed(const QString &message);

private:
    void checkPortsThenLaunch();
    void launch();
    void onTaskChanged(int row);
    void onConnectionState(bool connected);
    void watchPs0();
    void dropPreflight();

    ClusterLauncher *m_launcher;
    ClusterWatcher *m_watcher;
    Preflight m_preflightWhen = Preflight::RemoteHosts;
    bool m_holdWorkers = false;
    Stage m_stage = Stage::Idle;
    ClusterPlan m_plan;
    std::unique_ptr<PreflightCheck> m_preflight;
    std::vector<PortConflict> m_conflicts;
    bool m_watchStarted = false;
    // Bumped by start() and cancel(): a timer of an earlier launch does nothing.
    int m_generation = 0;
};

} // namespace parasync
