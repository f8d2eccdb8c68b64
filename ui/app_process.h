#pragma once

// What the desktop app's process sets up around Qt before and after the
// QApplication exists: a private runtime folder where a session has none,
// the offscreen platform for runs that show no window, and quitting on
// SIGINT/SIGTERM through the event loop. Apart from the main so that it
// stays a list of what is wired to what. Main thread.

namespace parasync::ui {

// Qt keeps per-session sockets and locks in $XDG_RUNTIME_DIR; without one it
// makes <tmp>/runtime-USER itself and warns on every start. Makes that
// folder here (mode 0700, this user's) and sets $XDG_RUNTIME_DIR to it, or
// says on stderr why not. Does nothing when $XDG_RUNTIME_DIR is set. Call
// before the QApplication; does not block.
void ensureRuntimeDirectory();

// Whether the command line asks for no window (--headless, or --help and
// --version, which print and exit). With no display (and no platform
// chosen by QT_QPA_PLATFORM) it selects the offscreen platform either way:
// the chart export needs a QApplication all the same, and a bad flag is
// then said as such rather than as a missing display; main refuses a
// window there is no display for (lackedDisplay()). Call before the
// QApplication.
bool preparePlatformForArguments(int argc, char **argv);
// Whether preparePlatformForArguments found no display and chose offscreen.
bool lackedDisplay();

// SIGINT and SIGTERM quit the main window without its question and close
// the active window, and end the event loop with
// 130, so that the launcher stops the tasks it started instead of leaving
// them holding their ports. Call once, after the QApplication exists.
void quitOnTerminationSignals();

} // namespace parasync::ui
