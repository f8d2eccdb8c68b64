#include "orchestration/logging.h"

namespace parasync {

// QtInfoMsg: debug off unless QT_LOGGING_RULES turns it on.
Q_LOGGING_CATEGORY(lcLauncher, "parasync.launcher", QtInfoMsg)
Q_LOGGING_CATEGORY(lcWatcher, "parasync.watcher", QtInfoMsg)
Q_LOGGING_CATEGORY(lcSlurm, "parasync.slurm", QtInfoMsg)
Q_LOGGING_CATEGORY(lcRemote, "parasync.remote", QtInfoMsg)

} // namespace parasync
