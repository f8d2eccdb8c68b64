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
#include "ui/app_process.h"
#include "ui/headless/headless_mode_comparison.h"
#include "ui/headless/headless_runner.h"
#include "ui/windows/main_window.h"
#include "ui/windows/mode_comparison_window.h"
#include "wire/rpc.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QTimer>

#include <cstdio>
#include <optional>

using namespace parasync;

int main(int argc, char **argv)
{
    parasync::prepareGrpcProcess();
    ui::ensureRuntimeDirectory();
    const bool headless = ui::preparePlatformForArguments(argc, argv);

    // The category before each line of the app's own (parasync.launcher:
    // ...), where QT_LOGGING_RULES turns them on; QT_MESSAGE_PATTERN wins.
    qSetMessagePattern(QStringLiteral("%{if-category}%{category}: %{endif}%{message}"));
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("parasync"));
    QApplication::setOrganizationName(QStringLiteral("Parasync"));
    QApplication::setOrganizationDomain(QStringLiteral("parasync.github.io"));
    // "parasync 0.1.0 (protocol 1)", as parasync-node --version says its own.
    QApplication::setApplicationVersion(
        QStringLiteral("%1 (protocol %2)").arg(QLatin1String(parasync::version())).arg(parasync::kProtocolVersion));
    // The installed desktop entry's name (packaging/): Wayland compositors
    // and task bars match the window to it, and so to its icon.
    QGuiApplication::setDesktopFileName(QStringLiteral("io.github.parasync.Parasync"));
    QApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("io.github.parasync.Parasync"),
                                                 QIcon(QStringLiteral(":/icons/io.github.parasync.Parasync.svg"))));

    QCommandLineParser parser;
    const ui::AppFlags declared = ui::declareAppCommandLine(parser);
    if (const std::optional<int> exitCode = ui::parseAppCommandLine(parser, declared, QApplication::arguments()))
        return *exitCode;

    if (!headless && ui::lackedDisplay()) {
        std::fprintf(stderr, "parasync: there is no display to open the window on (DISPLAY and WAYLAND_DISPLAY are "
                             "unset): run it in a desktop session or over ssh -X, or add --headless (with "
                             "--export=DIR for the charts)\n");
        return 1;
    }
    qRegisterMetaType<parasync::RunSnapshot>();
    qRegisterMetaType<parasync::proto::ModeConfig>();
    ui::quitOnTerminationSignals();

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
        else
            ui::refuseComparisonFlagsAlone(parser);
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

    std::optional<SlurmSettings> slurm;
    if (parser.isSet(QStringLiteral("slurm"))) {
        try {
            if (!plan)
                throw InputError("--slurm runs a cluster: give --demo or --cluster_file=FILE too");
            slurm = ui::slurmSettingsFromArguments(parser);
        } catch (const InputError &error) {
            std::fprintf(stderr, "parasync: %s\n", error.what());
            return 2;
        }
    }

    ui::MainWindow window(&launcher, &watcher);
    window.show();
    if (slurm) {
        // As Cluster -> Run on Slurm... with the flags' settings.
        QTimer::singleShot(0, &window, [&window, &parser, plan = *plan, settings = *slurm] {
            window.submitToSlurm(plan, settings, parser.isSet(QStringLiteral("cancel_on_quit")));
        });
    } else if (modeComparison) {
        // The comparison starts its own clusters on the plan's ports: the
        // window starting the same plan beside them would take those ports.
    } else if (parser.isSet(QStringLiteral("cluster_file"))) {
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
            for (const QString &path : window.saveScreenshotsOfEveryWindow(dir))
                std::printf("wrote %s\n", qPrintable(path));
            std::fflush(stdout);
            window.quitWithoutAsking();
        });
    }
    return QApplication::exec();
}
