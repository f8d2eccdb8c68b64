// parasync: the desktop app. Starts (or connects to) a parameter-server
// cluster and shows it training; with --headless, runs the same
// orchestration without a window and exports the charts:
//   parasync --demo
//   parasync --headless --demo --mode=ssp --last_step=2000 --export=charts/
//   parasync --open=RUN_DIR
//   parasync --headless --compare_modes --export=DIR
#include "base/error.h"
#include "base/version.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "ui/app_command_line.h"
#include "ui/headless_mode_comparison.h"
#include "ui/headless_runner.h"
#include "ui/main_window.h"
#include "ui/mode_comparison_window.h"
#include "wire/rpc.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QIcon>
#include <QSocketNotifier>
#include <QTimer>

#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <optional>
#include <unistd.h>

using namespace parasync;

namespace {

int g_signalPipe[2] = {-1, -1};

// SIGINT/SIGTERM quit through the event loop, so the launcher stops the
// tasks it started instead of leaving them holding their ports.
void installQuitOnSignal()
{
    if (::pipe(g_signalPipe) != 0)
        return;
    auto *notifier = new QSocketNotifier(g_signalPipe[0], QSocketNotifier::Read, qApp);
    QObject::connect(notifier, &QSocketNotifier::activated, qApp, [notifier] {
        char byte = 0;
        if (::read(g_signalPipe[0], &byte, 1) == 1)
            std::fprintf(stderr, "parasync: received %s, stopping the cluster's tasks\n", byte == 2 ? "SIGINT" : "SIGTERM");
        notifier->setEnabled(false);
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

// Qt keeps per-session sockets and locks in $XDG_RUNTIME_DIR, which a login
// session sets; a root shell on a server or a CI job has none, and Qt then
// makes /tmp/runtime-USER itself -- with a warning on every start that reads
// as a failure. Make the same private folder here (mode 0700, ours), as the
// XDG spec asks, and say so only if that fails.
void ensureRuntimeDirectory()
{
    if (!qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR"))
        return;
    const QByteArray path = QDir::tempPath().toLocal8Bit() + "/runtime-" + QByteArray::number(::getuid());
    struct stat info {};
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

} // namespace

int main(int argc, char **argv)
{
    parasync::prepareGrpcProcess();
    ensureRuntimeDirectory();
    // The chart export needs a QApplication (Qt Charts are widgets); without
    // a display, headless mode paints offscreen.
    // --help and --version print and exit: they need no display either.
    bool headless = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        headless = headless || arg == "--headless" || arg == "--help" || arg == "-h" || arg == "--version";
    }
    if (headless && qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")
        && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("parasync"));
    QApplication::setOrganizationName(QStringLiteral("Parasync"));
    QApplication::setOrganizationDomain(QStringLiteral("parasync.github.io"));
    QApplication::setApplicationVersion(QLatin1String(parasync::version()));
    // The installed desktop entry's name (packaging/): Wayland compositors
    // and task bars match the window to it, and so to its icon.
    QGuiApplication::setDesktopFileName(QStringLiteral("io.github.parasync.Parasync"));
    QApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("io.github.parasync.Parasync"),
                                                 QIcon(QStringLiteral(":/icons/io.github.parasync.Parasync.svg"))));

    QCommandLineParser parser;
    ui::declareAppCommandLine(parser);
    parser.process(app);

    qRegisterMetaType<parasync::RunSnapshot>();
    qRegisterMetaType<parasync::proto::ModeConfig>();
    installQuitOnSignal();

    // What the flags ask for; a wrong one ends the app here, before anything starts.
    std::optional<ClusterPlan> plan;
    std::optional<ModeComparisonOptions> modeComparison;
    std::optional<ui::HeadlessOptions> headlessOptions;
    try {
        if (ui::wantsCluster(parser))
            plan = ui::planFromArguments(parser);
        // --compare_modes: the demo (or the cluster file) once per update mode.
        if (parser.isSet(QStringLiteral("compare_modes")))
            modeComparison = ui::modeComparisonOptionsFromArguments(parser, ui::planFromArguments(parser));
        if (headless && !modeComparison)
            headlessOptions = ui::headlessOptionsFromArguments(parser, plan);
    } catch (const InputError &error) {
        std::fprintf(stderr, "parasync: %s\n", error.what());
        return 2;
    }

    ClusterLauncher launcher;
    if (parser.isSet(QStringLiteral("node")))
        launcher.setNodeBinary(parser.value(QStringLiteral("node")));
    ClusterWatcher watcher;

    if (headless) {
        if (modeComparison)
            return ui::runHeadlessModeComparison(*modeComparison, launcher.nodeBinary());
        ui::HeadlessRunner runner(&launcher, &watcher, *headlessOptions);
        QObject::connect(&runner, &ui::HeadlessRunner::finished, &app, [](int code) { QCoreApplication::exit(code); });
        QTimer::singleShot(0, &runner, &ui::HeadlessRunner::start);
        const int code = QApplication::exec();
        watcher.disconnectFromCluster();
        return code;
    }

    ui::MainWindow window(&launcher, &watcher);
    window.show();
    if (parser.isSet(QStringLiteral("cluster_file"))) {
        // With remote hosts, startCluster shows the pre-flight check first.
        QTimer::singleShot(0, &window, [&window, plan = *plan] { window.startCluster(plan); });
    } else if (plan) {
        // --demo with its flags: the toolbar's demo button does the same.
        window.setDemoPlan(*plan);
        QTimer::singleShot(0, &window, &ui::MainWindow::startDemo);
    } else if (parser.isSet(QStringLiteral("connect"))) {
        window.connectToCluster(ui::connectRequestFromArguments(parser));
    }
    if (parser.isSet(QStringLiteral("open")))
        window.openRunDirectory(parser.value(QStringLiteral("open")));
    if (parser.isSet(QStringLiteral("compare")))
        window.compareRuns(parser.value(QStringLiteral("compare")).split(QLatin1Char(','), Qt::SkipEmptyParts));
    if (modeComparison)
        QTimer::singleShot(0, &window, [&window, &launcher, options = *modeComparison] {
            ui::ModeComparisonWindow::open(&window, options, launcher.nodeBinary());
        });
    if (parser.isSet(QStringLiteral("screenshots"))) {
        const QString dir = parser.value(QStringLiteral("screenshots"));
        const int delay = parser.isSet(QStringLiteral("screenshot_delay"))
            ? parser.value(QStringLiteral("screenshot_delay")).toInt()
            : 6000;
        QTimer::singleShot(delay, &window, [&window, dir] {
            const QStringList written = window.saveScreenshots(dir);
            // Other top-level windows (replay, comparison) too.
            int n = 0;
            for (QWidget *top : QApplication::topLevelWidgets()) {
                if (top == &window || !top->isVisible())
                    continue;
                const QString path = dir + QStringLiteral("/other_window_%1.png").arg(n++);
                if (top->grab().save(path))
                    std::printf("wrote %s\n", qPrintable(path));
                // A modal dialog (the pre-flight) would keep the app from quitting.
                top->close();
            }
            for (const QString &path : written)
                std::printf("wrote %s\n", qPrintable(path));
            std::fflush(stdout);
            window.close();
        });
    }
    return QApplication::exec();
}
