// parasync: the desktop app. Starts (or connects to) a parameter-server
// cluster and shows it training; with --headless, runs the same
// orchestration without a window and exports the charts:
//   parasync --demo
//   parasync --headless --demo --mode=ssp --last_step=2000 --export=charts/
//   parasync --open=RUN_DIR
//   parasync --headless --compare_modes --export=DIR
#include "orchestration/cluster_launcher.h"
#include "base/version.h"
#include "ui/cluster_plan_file.h"
#include "orchestration/cluster_watcher.h"
#include "ui/connect_dialog.h"
#include "base/error.h"
#include "ui/headless_mode_comparison.h"
#include "ui/headless_runner.h"
#include "ui/main_window.h"
#include "ui/mode_comparison_window.h"
#include "config/node_options.h"
#include "wire/rpc.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QSocketNotifier>
#include <QTimer>

#include <QDir>

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

// The plan from --cluster_file or the demo, with the training flags given on
// the command line applied, checked by parasync-node's own parser.
ClusterPlan planFromArguments(const QCommandLineParser &parser)
{
    ClusterPlan base = parser.isSet(QStringLiteral("cluster_file"))
        ? ui::planFromClusterFile(readClusterFile(parser.value(QStringLiteral("cluster_file")).toStdString()))
        : ui::demoPlanFromEnvironment();
    ClusterFile file = ui::clusterFileFromPlan(base);
    if (parser.isSet(QStringLiteral("ps_hosts")))
        file.cluster.ps = parseHostList(parser.value(QStringLiteral("ps_hosts")).toStdString(), "--ps_hosts");
    if (parser.isSet(QStringLiteral("worker_hosts")))
        file.cluster.workers
            = parseHostList(parser.value(QStringLiteral("worker_hosts")).toStdString(), "--worker_hosts");
    for (const char *flag : {"mode", "staleness", "replicas_to_aggregate", "last_step", "logdir", "learning_rate",
                             "optimizer", "batch_size", "compute_ms", "compute_jitter", "straggler_ms"}) {
        const QString name = QString::fromLatin1(flag);
        if (!parser.isSet(name))
            continue;
        // A flag on the command line is for every task: it replaces the
        // workers' own values too.
        for (auto &[index, flags] : file.perWorker)
            std::erase_if(flags, [flag](const auto &entry) { return entry.first == flag; });
        auto it = std::find_if(file.training.begin(), file.training.end(),
                               [flag](const auto &entry) { return entry.first == flag; });
        if (it == file.training.end())
            file.training.emplace_back(flag, parser.value(name).toStdString());
        else
            it->second = parser.value(name).toStdString();
    }
    return ui::planFromClusterFile(file);
}

// --connect with what the Connect dialog takes: the run directory, a token
// file (never the token itself: a command line is visible to every user) and
// the TLS files. The token otherwise comes from $PARASYNC_CLUSTER_TOKEN.
ConnectRequest connectRequest(const QCommandLineParser &parser)
{
    ConnectRequest request;
    request.address = parser.value(QStringLiteral("connect"));
    request.runDirectory = parser.value(QStringLiteral("run_dir"));
    request.tokenFile = parser.value(QStringLiteral("cluster_token_file"));
    request.connection.tlsCa = parser.value(QStringLiteral("tls_ca")).toStdString();
    request.connection.tlsCert = parser.value(QStringLiteral("tls_cert")).toStdString();
    request.connection.tlsKey = parser.value(QStringLiteral("tls_key")).toStdString();
    return request;
}

// A headless run with no last step (the demo) still has to end: a minute
// that shows the story. In the mode asked for, or 20 s each of async, sync
// and ssp, the order in which the seeds tell it.
std::vector<ui::HeadlessOptions::TourStop> demoTour(const QCommandLineParser &parser, const ClusterPlan &plan)
{
    if (parser.isSet(QStringLiteral("mode")))
        return {{plan.training.mode, 60}};
    std::vector<ui::HeadlessOptions::TourStop> tour;
    for (const proto::UpdateMode mode : {proto::ASYNC, proto::SYNC, proto::SSP}) {
        proto::ModeConfig config = plan.training.mode;
        config.set_mode(mode);
        tour.push_back({config, 20});
    }
    return tour;
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
    parser.setApplicationDescription(QStringLiteral(
        "Parasync: start, watch and steer a parameter-server training cluster.\n"
        "  parasync --demo                      the three-port demo cluster, in the window\n"
        "  parasync --headless --demo --export=DIR   the same without a window; charts into DIR\n"
        "  parasync --open=RUN_DIR              replay a finished run (its --logdir)\n"
        "  parasync --headless --compare_modes --export=DIR   async, sync and ssp in turn; runs, figure, CSV into DIR"));
    parser.addHelpOption();
    parser.addVersionOption();
    const auto option = [&parser](const char *name, const char *description, const char *valueName = nullptr) {
        QCommandLineOption opt(QString::fromLatin1(name), QString::fromLatin1(description));
        if (valueName)
            opt.setValueName(QString::fromLatin1(valueName));
        parser.addOption(opt);
    };
    option("demo", "Start the demo cluster: ps 127.0.0.1:2222, workers :2223 and :2224 (linear y = 2x + 10).");
    option("headless", "No window: run (or watch, or replay), then export every chart to --export and exit.");
    option("export", "Folder the charts are written to (PNG, SVG, CSV).", "DIR");
    option("connect", "Watch a running cluster by ps:0's address.", "HOST:PORT");
    option("run_dir", "With --connect: the run directory (--logdir) of that cluster, when this machine can read it; "
                      "the charts start from its history, then continue live (default: ps:0's own, if readable here).",
           "RUN_DIR");
    option("cluster_token_file", "With --connect: a file (mode 0600) holding the cluster's token "
                                 "(default: $PARASYNC_CLUSTER_TOKEN).", "FILE");
    option("tls_ca", "With --connect: the CA that signed the cluster's certificates (PEM); turns TLS on.", "FILE");
    option("tls_cert", "With --connect to a cluster with --tls_mutual: this app's certificate (PEM).", "FILE");
    option("tls_key", "With --connect and --tls_cert: its private key (PEM).", "FILE");
    option("open", "Replay a finished run from its run directory (--logdir).", "RUN_DIR");
    option("compare", "Compare finished runs side by side (comma-separated run directories).", "DIRS");
    option("compare_modes", "Run the demo (or --cluster_file) once per update mode -- async, sync, ssp -- with the "
                            "same seed, data and straggler, and show the runs side by side; headless: print the "
                            "results and write the runs, the figure and comparison.csv into --export.");
    option("compare_seconds", "With --compare_modes: the time limit of each mode's run (default 40).", "SECONDS");
    option("target_loss", "With --compare_modes: the chief's full-shard loss each run goes to (default: 1.2 x "
                          "the best loss the linear model can reach on the chief's data).", "LOSS");
    option("cluster_file", "Start the cluster described by a cluster file (JSON).", "FILE");
    option("ps_hosts", "ps addresses for the cluster started, e.g. 127.0.0.1:2222.", "HOSTS");
    option("worker_hosts", "worker addresses for the cluster started, e.g. 127.0.0.1:2223,127.0.0.1:2224.", "HOSTS");
    option("mode", "Update mode to start with: async, sync or ssp.", "MODE");
    option("staleness", "SSP staleness bound.", "N");
    option("replicas_to_aggregate", "Sync: gradients averaged per step (0: all live workers).", "N");
    option("last_step", "Stop at this global step (the demo: none; headless, it tours the three modes for a "
                        "minute, or runs a minute in --mode).", "N");
    option("learning_rate", "Learning rate.", "LR");
    option("optimizer", "Optimizer (sgd, adagrad, ...).", "NAME");
    option("batch_size", "Samples per worker step.", "N");
    option("compute_ms", "Simulated compute time per worker step, ms (the demo: 40; 0 is full speed).", "N");
    option("compute_jitter", "Spread of that time (coefficient of variation; the demo: 0.5).", "X");
    option("straggler_ms", "Extra delay per step for every worker, ms (the demo slows worker:1 by 40).", "N");
    option("logdir", "Run directory for checkpoints and the step log (replayable with --open).", "DIR");
    option("preflight", "Check a --cluster_file's hosts (ssh, parasync-node, ports, routes to the ps tasks) and "
                        "show the results (headless: print them and exit 0 if all passed).");
    option("skip_preflight", "Headless: launch a cluster with remote hosts without checking them first.");
    option("node", "The parasync-node binary to start (default: beside this app, then PATH).", "PATH");
    option("timeout", "Headless: give up after this many seconds (default 600).", "SECONDS");
    option("screenshots", "Save a picture of every tab of the window into DIR after --screenshot_delay, then quit.",
           "DIR");
    option("screenshot_delay", "Milliseconds before --screenshots are taken (default 6000).", "MS");
    parser.process(app);

    qRegisterMetaType<parasync::RunSnapshot>();
    qRegisterMetaType<parasync::proto::ModeConfig>();
    installQuitOnSignal();

    const bool wantsCluster = parser.isSet(QStringLiteral("demo")) || parser.isSet(QStringLiteral("cluster_file"));
    ClusterPlan plan;
    if (wantsCluster) {
        try {
            plan = planFromArguments(parser);
        } catch (const InputError &error) {
            std::fprintf(stderr, "parasync: %s\n", error.what());
            return 2;
        }
    }

    // --compare_modes: the demo (or the cluster file) once per update mode.
    std::optional<ModeComparisonOptions> modeComparison;
    if (parser.isSet(QStringLiteral("compare_modes"))) {
        try {
            modeComparison = ui::modeComparisonOptionsFromArguments(parser, planFromArguments(parser));
        } catch (const InputError &error) {
            std::fprintf(stderr, "parasync: %s\n", error.what());
            return 2;
        }
    }

    ClusterLauncher launcher;
    if (parser.isSet(QStringLiteral("node")))
        launcher.setNodeBinary(parser.value(QStringLiteral("node")));
    ClusterWatcher watcher;

    if (headless) {
        if (modeComparison)
            return ui::runHeadlessModeComparison(*modeComparison, launcher.nodeBinary());
        ui::HeadlessOptions options;
        options.exportDirectory = parser.value(QStringLiteral("export"));
        options.preflightOnly = parser.isSet(QStringLiteral("preflight"));
        options.skipPreflight = parser.isSet(QStringLiteral("skip_preflight"));
        if (parser.isSet(QStringLiteral("timeout")))
            options.timeoutSeconds = parser.value(QStringLiteral("timeout")).toInt();
        if (parser.isSet(QStringLiteral("open"))) {
            options.source = ui::HeadlessOptions::Source::Open;
            options.runDirectory = parser.value(QStringLiteral("open"));
        } else if (parser.isSet(QStringLiteral("connect"))) {
            options.source = ui::HeadlessOptions::Source::Connect;
            options.connect = connectRequest(parser);
        } else if (wantsCluster) {
            options.plan = plan;
            if (plan.training.lastStep == 0)
                options.tour = demoTour(parser, plan);
        } else {
            std::fprintf(stderr, "parasync: --headless needs --demo, --cluster_file, --connect or --open\n");
            return 2;
        }
        ui::HeadlessRunner runner(&launcher, &watcher, options);
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
        QTimer::singleShot(0, &window, [&window, plan] { window.startCluster(plan); });
    } else if (wantsCluster) {
        // --demo with its flags: the toolbar's demo button does the same.
        window.setDemoPlan(plan);
        QTimer::singleShot(0, &window, &ui::MainWindow::startDemo);
    }
    else if (parser.isSet(QStringLiteral("connect")))
        window.connectToCluster(connectRequest(parser));
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
