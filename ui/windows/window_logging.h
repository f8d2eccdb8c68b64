#pragma once

// The window's Qt logging category, "parasync.ui": what the user asked of
// it (a run opened, a recent run chosen, a mode asked for), for a bug
// report. Off by default: QT_LOGGING_RULES="parasync.*.debug=true" turns it
// on with the launcher's, the watcher's, Slurm's and ssh's
// (orchestration/logging.h).

#include <QLoggingCategory>

namespace parasync::ui {

Q_DECLARE_LOGGING_CATEGORY(lcUi)

} // namespace parasync::ui
