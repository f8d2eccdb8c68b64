#pragma once

// `parasync`'s command line: its flags with their help, and what they ask
// for -- the cluster to start, the cluster to connect to, the headless run.
// Declared and read in one place, so that a flag is read by the name it was
// declared with, and tests parse the real command line. The app's main only
// declares, parses and hands the results on. Main thread, before the event
// loop runs; nothing blocks but reading a cluster file.

#include "config/cluster_plan.h"
#include "orchestration/connect_request.h"
#include "slurm/slurm_batch_script.h"
#include "ui/headless/headless_runner.h"

#include <QStringList>

#include <optional>

class QCommandLineParser;

namespace parasync::ui {

// The flags declared: every name ("demo", "learning_rate", ...), and those
// of them that are switches, given bare ("headless", "insecure").
struct AppFlags
{
    QStringList names;
    QStringList switches;
};

// The description, --help, --version and every flag of `parasync`.
AppFlags declareAppCommandLine(QCommandLineParser &parser);

// Parses `arguments` (the program's name first) with the declared flags;
// a switch also takes --noname and --name=true|false|1|0, as the node's
// booleans do. --help (with the environment variables the app reads) and
// --version print and give 0. A wrong
// or unknown flag is said on stderr with the nearest declared one ("Did
// you mean --learning_rate?") and where to see them all, and gives 2, the
// exit status of bad input in both programs; nullopt when all is well.
std::optional<int> parseAppCommandLine(QCommandLineParser &parser, const AppFlags &declared,
                                       const QStringList &arguments);
// After a parse that failed: Qt's words for it, and for an unknown flag the
// declared one it nearly is ("Did you mean --version?").
QString commandLineError(const QCommandLineParser &parser, const AppFlags &declared);

// --demo or --cluster_file: a cluster to start.
bool wantsCluster(const QCommandLineParser &parser);
// The plan of --cluster_file or the demo, with --ps_hosts, --worker_hosts
// and the training flags given applied (planFromFlags). Throws InputError
// naming the flag to fix.
ClusterPlan planFromArguments(const QCommandLineParser &parser);
// --connect with what the Connect dialog takes: the run directory, a token
// file (never the token itself: a command line is visible to every user)
// and the TLS files. The token otherwise comes from $PARASYNC_CLUSTER_TOKEN.
ConnectRequest connectRequestFromArguments(const QCommandLineParser &parser);
// --slurm's job settings: --slurm_partition, --slurm_nodes, ... with the
// output directory made absolute (the nodes see the same path) and the
// version the nodes must run. Throws InputError naming the flag to fix.
SlurmSettings slurmSettingsFromArguments(const QCommandLineParser &parser);
// --headless: replay --open, else watch --connect, else start `plan` (the
// cluster wantsCluster asks for; as a Slurm job with --slurm). A plan without a last step (the demo)
// gets a tour of the modes, so that the run ends. Throws InputError when
// there is nothing to run.
HeadlessOptions headlessOptionsFromArguments(const QCommandLineParser &parser, const std::optional<ClusterPlan> &plan);

} // namespace parasync::ui
