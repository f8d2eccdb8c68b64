#include "ui/app_process.h"

#include "ui/windows/main_window.h"

#include <QApplication>
#include <QByteArray>
#include <QDir>
#include <QSocketNotifier>
#include <QWidget>

#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace parasync::ui {

namespace {
// Written by the signal handler, read in the event loop: a handler may do
// little more than write(2).
int g_signalPipe[2] = {-1, -1};
// preparePlatformForArguments found no display and chose offscreen.
bool g_lackedDisplay = false;
} // namespace

void ensureRuntimeDirectory()
{
    if (!qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR"))
        return;
    const QByteArray path = QDir::tempPath().toLocal8Bit() + "/runtime-" + QByteArray::number(::getuid());
    struct stat info
    {
    };
    if (::mkdir(path.constData(), 0700) != 0 && errno != EEXIST)
        return; // Qt will say what it thinks
    if (::lstat(path.constData(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::getuid()
        || (info.st_mode & 0077) != 0) {
        std::fprintf(stderr, "parasync: %s is not a private folder of this user: set XDG_RUNTIME_DIR to one\n",
                     path.constData());
        return;
    }
    qputenv("XDG_RUNTIME_DIR", path);
}

bool preparePlatformForArguments(int argc, char **argv)
{
    bool windowless = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        windowless = windowless || arg == "--headless" || arg == "--help" || arg == "-h" || arg == "--version";
    }
    g_lackedDisplay = qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")
                      && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
    if (g_lackedDisplay)
        qputenv("QT_QPA_PLATFORM", "offscreen");
    return windowless;
}

bool lackedDisplay()
{
    return g_lackedDisplay;
}

void quitOnTerminationSignals()
{
    if (::pipe(g_signalPipe) != 0)
        return;
    auto *notifier = new QSocketNotifier(g_signalPipe[0], QSocketNotifier::Read, qApp);
    QObject::connect(notifier, &QSocketNotifier::activated, qApp, [notifier] {
        char byte = 0;
        if (::read(g_signalPipe[0], &byte, 1) == 1)
            std::fprintf(stderr, "parasync: received %s, stopping the cluster's tasks\n",
                         byte == 2 ? "SIGINT" : "SIGTERM");
        notifier->setEnabled(false);
        // A signal is the user's answer already: no question before the
        // tasks are stopped.
        for (QWidget *window : QApplication::topLevelWidgets())
            if (auto *main = qobject_cast<MainWindow *>(window))
                main->quitWithoutAsking();
        if (QWidget *window = QApplication::activeWindow())
            window->close();
        QCoreApplication::exit(130);
    });
    const auto handler = [](int signal) {
        const char byte = char(signal);
        [[maybe_unused]] const auto written = ::write(g_signalPipe[1], &byte, 1);
    };
    std::signal(SIGINT, handler);
    std::signal(SIGTERM, handler);
}

} // namespace parasync::ui
