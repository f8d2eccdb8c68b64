#pragma once

// The Qt logging categories of the app's side of a cluster, so that a user
// can turn its lines on for a bug report without a rebuild:
//   QT_LOGGING_RULES="parasync.*.debug=true" parasync --demo
// Debug lines (a task started with its command, a task's exit status, the
// watcher connecting, a mode asked for, sbatch's and squeue's answers, the
// ssh command of a remote task) are off by default; warnings (a task that
// died, ps:0 lost, a job refused) are on. The engine processes (node/,
// engine/) log without Qt and never include this.

#include <QLoggingCategory>

namespace parasync {

Q_DECLARE_LOGGING_CATEGORY(lcLauncher) // parasync.launcher: the tasks started here
Q_DECLARE_LOGGING_CATEGORY(lcWatcher)  // parasync.watcher: the telemetry stream from ps:0, control calls
Q_DECLARE_LOGGING_CATEGORY(lcSlurm)    // parasync.slurm: sbatch, squeue, sacct, scancel
Q_DECLARE_LOGGING_CATEGORY(lcRemote)   // parasync.remote: ssh, for remote tasks and the pre-flight

} // namespace parasync
