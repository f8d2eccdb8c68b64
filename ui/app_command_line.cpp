#include "ui/app_command_line.h"

#include "base/error.h"
#include "base/nearest_name.h"
#include "base/qt_text.h"
#include "config/flag_values.h"
#include "config/plan_from_flags.h"
#include "config/update_modes.h"
#include "orchestration/slurm_backend.h"

#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>

#include <cstdio>
#include <memory>
#include <set>

namespace parasync::ui {

namespace {

// A headless run with no last step (the demo) still has to end: a minute
// that shows the story. In the mode asked for, or 20 s each of async, sync
// and ssp, the order in which the seeds tell it.
std::vector<HeadlessOptions::TourStop> demoTour(const QCommandLineParser &parser, const ClusterPlan &plan)
{
    if (parser.isSet(QStringLiteral("mode")))
        return {{plan.training.mode, 60}};
    std::vector<HeadlessOptions::TourStop> tour;
    for (const UpdateModeInfo &mode : updateModes()) {
        proto::ModeConfig config = plan.training.mode;
        config.set_mode(mode.mode);
        tour.push_back({config, 20});
    }
    return tour;
}

std::optional<std::string> valueIfSet(const QCommandLineParser &parser, const char *name)
{
    const QString flag = QString::fromLatin1(name);
    if (!parser.isSet(flag))
        return std::nullopt;
    return parser.value(flag).toStdString();
}

// The end of --help: what the app reads besides its flags.
constexpr const char *kEnvironmentHelp
    = "\nA switch also takes --noNAME and --NAME=true|false|1|0 (--noheadless, --insecure=false).\n"
      "\nEnvironment:\n"
      "  PARASYNC_CLUSTER_TOKEN  the cluster token for the tasks it starts and the clusters it watches,\n"
      "                          when no --cluster_token_file is given\n"
      "  PARASYNC_NODE           the parasync-node the app starts (default: the one beside the app, else\n"
      "                          parasync-node on PATH)\n"
      "  PARASYNC_SSH            the ssh command for remote hosts (default: ssh on PATH)\n"
      "  PARASYNC_DEMO_PORTS     the demo's ports, ps first: 2222,2223,2224 by default\n"
      "  PARASYNC_TASK_NICE      the niceness increment of the tasks it starts, 0-19 (default 19: they\n"
      "                          yield to the window)\n"
      "  QT_LOGGING_RULES        Qt's logging rules; QT_LOGGING_RULES=\"parasync.*.debug=true\" logs on stderr\n"
      "                          what the app does, for a bug report: tasks started and exited\n"
      "                          (parasync.launcher), ps:0 watched (parasync.watcher), Slurm\n"
      "                          (parasync.slurm), ssh (parasync.remote), the window (parasync.ui)\n";

} // namespace

AppFlags declareAppCommandLine(QCommandLineParser &parser)
{
    AppFlags declared;
    parser.setApplicationDescription(QStringLiteral(
        "Parasync: start, watch and steer a parameter-server training cluster.\n"
        "  parasync --demo                      the three-port demo cluster, in the window\n"
        "  parasync --headless --demo --export=DIR   the same without a window; charts into DIR\n"
        "  parasync --open=RUN_DIR              replay a finished run (its --logdir)\n"
        "  parasync --headless --compare_modes --export=DIR   async, sync and ssp in turn; runs, "
        "figure, CSV into DIR\n"
        "  parasync --headless --compare_modes --workload=staleness --export=DIR   what staleness costs: "
        "16 workers, held-out loss and staleness per mode\n"
        "  parasync --headless --slurm --cluster_file=FILE --export=DIR   as a job of your Slurm"));
    parser.addHelpOption();
    parser.addVersionOption();
    // Qt's own two, for "Did you mean" (--versoin, as the node answers it).
    declared.names << QStringLiteral("help") << QStringLiteral("version");
    const auto option
        = [&parser, &declared](const char *name, const char *description, const char *valueName = nullptr) {
              declared.names << QString::fromLatin1(name);
              QCommandLineOption opt(QString::fromLatin1(name), QString::fromLatin1(description));
              if (valueName)
                  opt.setValueName(QString::fromLatin1(valueName));
              else
                  declared.switches << QString::fromLatin1(name);
              parser.addOption(opt);
          };
    option("demo", "Start the demo cluster: ps 127.0.0.1:2222, workers :2223 and :2224 (linear y = 2x + 10).");
    option("headless", "No window: run (or watch, or replay), then export every chart to --export and exit.");
    option("export", "Folder the charts are written to (PNG, SVG, CSV).", "DIR");
    option("connect", "Watch a running cluster by ps:0's address.", "HOST:PORT");
    option("run_dir",
           "With --connect: the run directory (--logdir) of that cluster, when this machine can read it; "
           "the charts start from its history, then continue live (default: ps:0's own, if readable here).",
           "RUN_DIR");
    option("cluster_token_file",
           "With --connect: a file (mode 0600) holding the cluster's token "
           "(default: $PARASYNC_CLUSTER_TOKEN).",
           "FILE");
    option("tls_ca", "With --connect: the CA that signed the cluster's certificates (PEM); turns TLS on.", "FILE");
    option("tls_cert", "With --connect to a cluster with --tls_mutual: this app's certificate (PEM).", "FILE");
    option("tls_key", "With --connect and --tls_cert: its private key (PEM).", "FILE");
    option("open", "Replay a finished run from its run directory (--logdir).", "RUN_DIR");
    option("compare", "Compare finished runs side by side (comma-separated run directories).", "DIRS");
    option("compare_modes", "Run the demo (or --cluster_file) once per update mode -- async, sync, ssp -- with the "
                            "same seed, data and straggler, and show the runs side by side; headless: print the "
                            "results and write the runs, the figure and comparison.csv into --export.");
    option("modes",
           "With --compare_modes: the contenders, comma-separated: async, sync, sync:R (R gradients a step), "
           "sync:R/T (R of T replicas: T - R backup workers), ssp:S (staleness bound S); async and ssp:S with "
           "+lr/staleness divide the learning rate by each gradient's staleness (Zhang et al.). Default: "
           "async,sync,ssp:10 (ssp at --staleness).",
           "LIST");
    option("compare_full_time",
           "With --compare_modes: every run trains its whole --compare_seconds, past the target (still timed), so "
           "that the runs' final held-out figures compare at one wall time (--workload=staleness does this).");
    option("compare_seconds", "With --compare_modes: the time limit of each mode's run (default 40).", "SECONDS");
    option("seeds",
           "With --compare_modes: run every contender once per seed, comma-separated (1,2,3); the figure draws "
           "each contender's median and its range over the seeds, and calls a difference out only where the "
           "ranges do not overlap. Default: the workload's seeds (1,2,3), else --seed once.",
           "LIST");
    option("target_loss",
           "With --compare_modes: the chief's full-shard loss each run goes to (default: 1.2 x "
           "the best loss the linear model can reach on the chief's data).",
           "LOSS");
    option("cluster_file", "Start the cluster described by a cluster file (JSON).", "FILE");
    option("workload",
           "Start a named training problem instead of the demo: staleness (16 workers, softmax with momentum on 10 "
           "blobs, where async's stale gradients cost accuracy; with --compare_modes, async, sync, sync:15/16, "
           "ssp:3 and ssp:10 train 20 s each, timed to a full loss of 0.3); mlp (the same with a hidden layer of 32 "
           "tanh units, a non-convex model, beside async with the learning rate divided by staleness); mf (a "
           "matrix factorization of a 50 x 50 matrix of rank 3 seen with noise, whose held-out loss cannot fall "
           "below 0.01). With --compare_modes each runs over seeds 1, 2, 3 (--seeds).",
           "NAME");
    option("ps_hosts", "ps addresses for the cluster started, e.g. 127.0.0.1:2222.", "HOSTS");
    option("worker_hosts", "worker addresses for the cluster started, e.g. 127.0.0.1:2223,127.0.0.1:2224.", "HOSTS");
    option("ps_backup_hosts",
           "A backup for each ps task of the cluster started, in --ps_hosts' order, e.g. 127.0.0.1:2232: it holds "
           "every acknowledged update and takes over when its ps task dies.",
           "HOSTS");
    option("mode", "Update mode to start with: async, sync or ssp.", "MODE");
    option("staleness", "SSP staleness bound.", "N");
    option("replicas_to_aggregate", "Sync: gradients averaged per step (0: all live workers).", "N");
    option("last_step",
           "Stop at this global step (the demo: none; headless, it tours the three modes for a "
           "minute, or runs a minute in --mode).",
           "N");
    option("learning_rate", "Learning rate.", "LR");
    option("optimizer", "Optimizer (sgd, adagrad, ...).", "NAME");
    option("batch_size", "Samples per worker step.", "N");
    option("model",
           "Model: linear, softmax, mlp[:HIDDEN], mf[:RANK], sparse_lr or fm[:RANK] (as parasync-node's --model).",
           "NAME");
    option("dataset",
           "Training data, as parasync-node's --dataset: linear, blobs:K:D, lowrank:ROWS:COLS:RANK[:NOISE], csv:FILE, "
           "mnist:DIR, idx:IMAGES,LABELS.",
           "SPEC");
    option("seed", "Seed of the data, the initial parameters and the simulated pace (default 1).", "N");
    option("eval_fraction", "Share of the chief's data held out for held-out loss and accuracy (0: none).", "X");
    option("compute_ms", "Simulated compute time per worker step, ms (the demo: 40; 0 is full speed).", "N");
    option("compute_jitter", "Spread of that time (coefficient of variation; the demo: 0.5).", "X");
    option("straggler_ms", "Extra delay per step for every worker, ms (the demo slows worker:1 by 40).", "N");
    option("logdir", "Run directory for checkpoints and the step log (replayable with --open).", "DIR");
    option("preflight", "Check a --cluster_file's hosts (ssh, parasync-node, ports, routes to the ps tasks) and "
                        "show the results (headless: print them and exit 0 if all passed).");
    option("skip_preflight", "Headless: launch a cluster with remote hosts without checking them first.");
    option("node", "The parasync-node binary to start (default: beside this app, then PATH).", "PATH");
    option("slurm", "Run the cluster (--demo or --cluster_file) as one job of your Slurm: a batch script submitted "
                    "with sbatch, followed with squeue, ps:0 watched once it runs, cancelled with scancel on stop.");
    option("slurm_partition", "With --slurm: the partition (default: the cluster's default one).", "NAME");
    option("slurm_account", "With --slurm: the account to charge (default: yours).", "NAME");
    option("slurm_nodes", "With --slurm: the number of nodes (default: as Slurm places the tasks).", "N");
    option("slurm_time", "With --slurm: the job's time limit, as sbatch --time takes it (default 01:00:00).", "TIME");
    option("slurm_port_base", "With --slurm: each task listens on this port plus its index on its node (default 8888).",
           "PORT");
    option("slurm_node", "With --slurm: parasync-node on the nodes (default: parasync-node on their PATH).", "PATH");
    option("slurm_dir",
           "With --slurm: a folder the nodes and this machine share, for the batch script, the tasks' logs and "
           "the run directory (default: <export>/slurm, else ~/parasync-slurm).",
           "DIR");
    option("slurm_script", "With --slurm: only write the batch script to FILE, to submit by hand with sbatch.", "FILE");
    option("cancel_on_quit", "With --slurm, in the window: quitting the app cancels the job (default: it runs on).");
    option("timeout", "Headless: give up after this many seconds (default 600).", "SECONDS");
    option("screenshots", "Save a picture of every tab of the window into DIR after --screenshot_delay, then quit.",
           "DIR");
    option("screenshot_delay", "Milliseconds before --screenshots are taken (default 6000).", "MS");
    return declared;
}

QString commandLineError(const QCommandLineParser &parser, const AppFlags &declared)
{
    QString message = parser.errorText();
    if (const QStringList unknown = parser.unknownOptionNames(); !unknown.isEmpty()) {
        std::vector<std::string> names;
        for (const QString &name : declared.names)
            names.push_back(ss(name));
        if (const std::string best = nearestName(ss(unknown.front()), names); !best.empty())
            message += QStringLiteral("%1 Did you mean --%2?")
                           .arg(message.endsWith(QLatin1Char('.')) ? QString() : QStringLiteral("."), qs(best));
    }
    return message;
}

std::optional<int> parseAppCommandLine(QCommandLineParser &parser, const AppFlags &declared,
                                       const QStringList &arguments)
{
    QStringList spelled;
    try {
        std::vector<std::string> args;
        for (const QString &argument : arguments)
            args.push_back(ss(argument));
        std::set<std::string> switches;
        for (const QString &name : declared.switches)
            switches.insert(ss(name));
        for (const std::string &argument : spellBooleanFlags(args, {}, switches))
            spelled << qs(argument);
    } catch (const InputError &e) {
        std::fprintf(stderr, "parasync: %s\nEvery flag: parasync --help\n", e.what());
        return 2;
    }
    if (!parser.parse(spelled)) {
        std::fprintf(stderr, "parasync: %s\nEvery flag: parasync --help\n",
                     qPrintable(commandLineError(parser, declared)));
        return 2;
    }
    if (parser.isSet(QStringLiteral("help"))) {
        std::fputs(qPrintable(parser.helpText() + QLatin1String(kEnvironmentHelp)), stdout);
        return 0;
    }
    if (parser.isSet(QStringLiteral("version")))
        parser.showVersion();
    return std::nullopt;
}

bool wantsCluster(const QCommandLineParser &parser)
{
    return parser.isSet(QStringLiteral("demo")) || parser.isSet(QStringLiteral("cluster_file"))
           || parser.isSet(QStringLiteral("workload"));
}

ClusterPlan planFromArguments(const QCommandLineParser &parser)
{
    PlanFlags flags;
    flags.clusterFile = valueIfSet(parser, "cluster_file");
    flags.workload = valueIfSet(parser, "workload");
    flags.psHosts = valueIfSet(parser, "ps_hosts");
    flags.workerHosts = valueIfSet(parser, "worker_hosts");
    flags.psBackupHosts = valueIfSet(parser, "ps_backup_hosts");
    for (const std::string &name : appTrainingFlags())
        if (auto value = valueIfSet(parser, name.c_str()))
            flags.training.emplace_back(name, std::move(*value));
    return planFromFlags(flags);
}

ConnectRequest connectRequestFromArguments(const QCommandLineParser &parser)
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

SlurmSettings slurmSettingsFromArguments(const QCommandLineParser &parser)
{
    SlurmSettings settings;
    const auto text = [&parser](const char *name) { return parser.value(QString::fromLatin1(name)); };
    const auto number = [&](const char *name, int minimum, int maximum, int fallback) {
        if (!parser.isSet(QString::fromLatin1(name)))
            return fallback;
        bool ok = false;
        const int value = text(name).toInt(&ok);
        if (!ok || value < minimum || value > maximum)
            throw InputError("--" + std::string(name) + "=" + text(name).toStdString() + ": give a whole number from "
                             + std::to_string(minimum) + " to " + std::to_string(maximum));
        return value;
    };
    settings.partition = text("slurm_partition").toStdString();
    settings.account = text("slurm_account").toStdString();
    settings.nodes = number("slurm_nodes", 0, 65535, 0);
    if (parser.isSet(QStringLiteral("slurm_time")))
        settings.timeLimit = text("slurm_time").toStdString();
    settings.portBase = uint16_t(number("slurm_port_base", 1, 65535, settings.portBase));
    settings.node = text("slurm_node").toStdString();
    QString directory = text("slurm_dir");
    if (directory.isEmpty())
        directory = parser.isSet(QStringLiteral("export")) ? QDir(text("export")).filePath(QStringLiteral("slurm"))
                                                           : QDir::home().filePath(QStringLiteral("parasync-slurm"));
    // The nodes see the same absolute path on the shared file system.
    settings.outputDirectory = QFileInfo(directory).absoluteFilePath().toStdString();
    return settings;
}

HeadlessOptions headlessOptionsFromArguments(const QCommandLineParser &parser, const std::optional<ClusterPlan> &plan)
{
    HeadlessOptions options;
    options.exportDirectory = parser.value(QStringLiteral("export"));
    options.preflightOnly = parser.isSet(QStringLiteral("preflight"));
    options.skipPreflight = parser.isSet(QStringLiteral("skip_preflight"));
    if (parser.isSet(QStringLiteral("timeout"))) {
        // A typo must not become "0 s" and end the run before it starts.
        bool ok = false;
        const QString text = parser.value(QStringLiteral("timeout"));
        options.timeoutSeconds = text.toInt(&ok);
        if (!ok || options.timeoutSeconds <= 0)
            throw InputError("--timeout=" + text.toStdString()
                             + " is not a number of seconds: give a whole number above 0, e.g. --timeout=600");
    }
    if (parser.isSet(QStringLiteral("open"))) {
        options.source = HeadlessOptions::Source::Open;
        options.runDirectory = parser.value(QStringLiteral("open"));
    } else if (parser.isSet(QStringLiteral("connect"))) {
        options.source = HeadlessOptions::Source::Connect;
        options.connect = connectRequestFromArguments(parser);
    } else if (plan) {
        options.plan = *plan;
        if (plan->training.lastStep == 0)
            options.tour = demoTour(parser, *plan);
    } else if (parser.isSet(QStringLiteral("slurm"))) {
        throw InputError("--slurm runs a cluster: give --demo or --cluster_file=FILE too");
    } else {
        throw InputError("--headless needs --demo, --cluster_file, --connect or --open");
    }
    if (parser.isSet(QStringLiteral("slurm")) && options.source == HeadlessOptions::Source::Launch) {
        options.backend
            = [settings = slurmSettingsFromArguments(parser)] { return std::make_unique<SlurmBackend>(settings); };
        options.tokenFile = parser.value(QStringLiteral("cluster_token_file"));
        options.jobScriptOnly = parser.value(QStringLiteral("slurm_script"));
        if (!options.plan.hosts.empty())
            throw InputError("--slurm places the tasks on the nodes Slurm gives: a cluster file with \"hosts\" "
                             "(ssh) cannot also run as a Slurm job; drop one or the other");
    }
    return options;
}

} // namespace parasync::ui
