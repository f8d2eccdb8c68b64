#include "config/node_options.h"

#include "config/cluster_file.h"
#include "config/flag_values.h"

#include "base/error.h"
#include "base/nearest_name.h"
#include "base/qt_text.h"
#include "config/slurm_environment.h"

#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QStringList>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>

namespace parasync {

namespace {

enum class FlagGroup { Cluster, Mode, ModelAndData, Training, Pace, RunDirectory, Faults, Security, Other };

struct FlagInfo
{
    const char *name;
    const char *valueName; // empty for switches
    FlagGroup group;
    const char *meaning;
    const char *defaultText; // shown in --help; nullptr: taken from TrainingOptions()
};

// One table drives the parser and --help, so neither can forget a flag.
constexpr FlagInfo kFlags[] = {
    {"ps_hosts", "HOST:PORT,...", FlagGroup::Cluster, "comma-separated addresses of the ps tasks", "none"},
    {"ps_backup_hosts", "HOST:PORT,...", FlagGroup::Cluster,
     "addresses of the ps tasks' backups, one per ps task in --ps_hosts' order: each ps task becomes a "
     "replicated pair that loses no acknowledged update when one of its processes dies. Start a backup with "
     "--job_name=ps_backup and the ps task's --task_index",
     "none"},
    {"worker_hosts", "HOST:PORT,...", FlagGroup::Cluster,
     "comma-separated addresses of the worker tasks; worker:0 is the chief", "none"},
    {"job_name", "ps|worker|ps_backup", FlagGroup::Cluster, "this task's job", "TF_CONFIG's task"},
    {"task_index", "N", FlagGroup::Cluster, "this task's index within its job", "0"},
    {"metrics_port", "PORT", FlagGroup::Cluster,
     "serve this task's metrics for Prometheus (OpenMetrics or its text format) at "
     "http://HOST:PORT/metrics, HOST being this task's own host in the cluster; every task takes a port of "
     "its own (under --slurm, PORT plus the task's local index on its node, as its own port), ps:0's shows "
     "the whole cluster (docs/metrics.md); 0 serves none",
     "0"},
    {"cluster_file", "PATH", FlagGroup::Cluster,
     "JSON cluster file as the app saves it: {\"cluster\": ..., \"training\": ...}", "none"},
    {"slurm", "", FlagGroup::Cluster,
     "take the cluster and this task from the Slurm job step it runs in (srun), as TensorFlow's "
     "SlurmClusterResolver: the step's nodes, tasks per node and SLURM_PROCID; the first --slurm_num_ps ranks "
     "are the ps tasks. Implied when SLURM_PROCID is set and no other cluster is given",
     "off"},
    {"slurm_num_ps", "N", FlagGroup::Cluster, "Slurm: how many of the step's tasks are ps tasks", "1"},
    {"slurm_port_base", "PORT", FlagGroup::Cluster,
     "Slurm: a task listens on this port plus its local index on its node", "8888"},
    // Its value form and meaning come from the table of modes (updateModeChoices, updateModeMeanings).
    {"mode", "MODE", FlagGroup::Mode, "", nullptr},
    {"issync", "0|1", FlagGroup::Mode, "the seeds' switch: 1 is --mode=sync, 0 is async", "unset"},
    {"staleness", "N", FlagGroup::Mode, "ssp: steps a worker may run ahead of the slowest live worker; 0 is lock-step",
     nullptr},
    {"replicas_to_aggregate", "N", FlagGroup::Mode,
     "sync: gradients averaged per step; 0 is the number of live workers", nullptr},
    {"total_num_replicas", "N", FlagGroup::Mode,
     "sync: workers expected per step, more than replicas_to_aggregate means backup workers; 0 is "
     "the number of workers",
     nullptr},
    {"learning_rate_by_staleness", "0|1", FlagGroup::Mode,
     "async and ssp: apply a gradient computed S global steps ago at the learning rate divided by max(1, S) "
     "(Zhang et al., staleness-aware async SGD)",
     "0"},
    {"model", "NAME", FlagGroup::ModelAndData,
     "linear (y = w x + b), softmax, mlp[:HIDDEN] (one hidden layer of tanh units, 32 unless given), "
     "mf[:RANK] (a matrix factorization of --dataset=lowrank:..., rank 3 unless given), or, with embedding tables "
     "on the ps tasks (docs/sparse.md), sparse_lr (logistic regression over --dataset=clicklog's ids) or fm[:RANK] "
     "(a factorization machine, rank 8 unless given)",
     nullptr},
    {"dataset", "SPEC", FlagGroup::ModelAndData,
     "linear, blobs, blobs:K:D, lowrank:ROWS:COLS:RANK[:NOISE], clicklog[:FIELDS:VALUES[:ZIPF]], mnist:DIR, "
     "idx:IMAGES,LABELS or csv:PATH; empty is the model's default",
     "the model's"},
    {"samples_per_shard", "N", FlagGroup::ModelAndData, "synthetic data: samples in each worker's shard", nullptr},
    {"eval_dataset", "SPEC", FlagGroup::ModelAndData,
     "held-out data, in the --dataset syntax, that no worker trains on: every --display_step steps the chief "
     "scores the model on it (held-out loss, and accuracy for a classifier)",
     "none"},
    {"eval_fraction", "F", FlagGroup::ModelAndData,
     "hold out this fraction (more than 0, less than 1) of the dataset's rows from every worker's shard, the same "
     "rows on every worker, for the chief to score the model on as with --eval_dataset",
     "none"},
    {"optimizer", "NAME", FlagGroup::Training,
     "sgd, momentum, adagrad, adam or ftrl (state lives on the ps; a model with tables: not adam)", nullptr},
    {"learning_rate", "X", FlagGroup::Training, "the optimizer's learning rate", nullptr},
    {"batch_size", "N", FlagGroup::Training, "samples per step on each worker", nullptr},
    {"last_step", "N", FlagGroup::Training, "stop when the global step reaches N; 0 trains until stopped", nullptr},
    {"display_step", "N", FlagGroup::Training, "the chief logs the loss over its shard every N steps", nullptr},
    {"staleness_probe_every", "N", FlagGroup::Training,
     "workers: on every Nth step also compute the batch's gradient at the parameters the ps tasks hold by then, and "
     "report how far the stale gradient is from it (cosine, relative error); 0 never",
     nullptr},
    {"seed", "N", FlagGroup::Training, "random seed for initial values and synthetic data", nullptr},
    {"min_slice_bytes", "B", FlagGroup::Training,
     "partition a variable larger than this over the ps tasks along its rows, at most one slice per ps task and "
     "each at least B bytes (TensorFlow's min_max_variable_partitioner); 0 keeps every variable whole",
     nullptr},
    {"nonfinite_gradients", "reject|apply", FlagGroup::Training,
     "what ps:0 does with a gradient holding NaN or infinite values; either way it is counted and logged", nullptr},
    {"compute_ms", "N", FlagGroup::Pace,
     "workers: simulated compute time per step in milliseconds (mean of a log-normal), so the cluster trains at "
     "a pace a person can follow; 0 is full speed",
     nullptr},
    {"compute_jitter", "X", FlagGroup::Pace,
     "workers: spread of that time, as its coefficient of variation (0: every step the same; 1: long-tailed, "
     "occasional steps several times the mean)",
     nullptr},
    {"straggler_ms", "N", FlagGroup::Pace,
     "workers: extra delay per step in milliseconds, added to the compute time (a straggler); the app and "
     "TaskControl.SetStraggler change it while training",
     nullptr},
    {"logdir", "DIR", FlagGroup::RunDirectory,
     "run directory: checkpoints, metrics.csv, step log, cluster.json; the chief restores from it", "none"},
    {"save_checkpoint_secs", "N", FlagGroup::RunDirectory,
     "the chief saves a checkpoint every N seconds and at the end; 0 is only at the end", nullptr},
    {"max_to_keep", "N", FlagGroup::RunDirectory, "newest checkpoints kept; 0 keeps all", nullptr},
    {"logdir_max_mb", "N", FlagGroup::RunDirectory,
     "ps:0's step log and metrics.csv stay within N MiB: the step log is rotated and compressed "
     "(steps.jsonl.1.gz, ...) and its oldest segments removed when the budget is reached, as records.json "
     "says; 0 is unbounded",
     nullptr},
    {"hang_timeout_secs", "N", FlagGroup::Faults,
     "ps:0 reports whom it waits for when the global step has not moved for N seconds while workers "
     "are alive; 0 turns the watchdog off",
     nullptr},
    {"max_workers", "N", FlagGroup::Cluster,
     "an elastic cluster: workers with indexes up to N-1 may join while it trains, beyond the ones "
     "--worker_hosts lists (a newcomer is started with --worker_hosts that lists it, --task_index=its "
     "index); sync steps aggregate the live workers, ssp starts a newcomer level with the slowest; 0 is "
     "the --worker_hosts count. Give every task the same",
     nullptr},
    {"straggler_threshold", "X", FlagGroup::Faults,
     "ps:0 flags a worker as a straggler once its steps, less the time the ps held it, take more than X "
     "times the other workers' median for several looks in a row (over a 10 s window), and unflags it once "
     "it is back within half that margin; 0 turns flagging off",
     nullptr},
    {"chief_handover", "0|1", FlagGroup::Faults,
     "1: while the chief worker:0 is dead, the lowest live worker takes over its duties (checkpoints, "
     "the full-shard loss) and hands them back when it returns",
     nullptr},
    {"heartbeat_ms", "N", FlagGroup::Faults,
     "HTTP/2 keepalive interval; a peer that stops answering (cut link, frozen host) is taken for dead "
     "after about twice this (a killed process is seen at once)",
     "1000"},
    {"ps_lease_ms", "N", FlagGroup::Faults,
     "with --ps_backup_hosts: how long a vote for a pair's primary lasts. A primary acknowledges nothing "
     "once neither its backup nor the witness (the chief worker:0) has renewed it within this, and a "
     "backup takes over from a dead primary after about this long. 0 turns leases off, as before they "
     "existed: under a network partition both processes of a pair may then serve (for measuring the "
     "lease's cost)",
     "1000"},
    {"acknowledgement_log", "PATH", FlagGroup::Faults,
     "workers: append one JSON line per step the ps tasks acknowledged (the worker's clock, ps:0's update "
     "and outcome, each ps task's lease epoch and the process that answered) to PATH, the workers' side of "
     "the history the step log keeps, which tests/faults/history_check.py checks against it after a run "
     "of kills, pauses and partitions (scripts/fault-schedule.sh); per task, as --metrics_port. ps tasks "
     "ignore it",
     "none"},
    {"max_message_bytes", "N", FlagGroup::Faults,
     "largest message a task sends or accepts; larger ones are refused (RESOURCE_EXHAUSTED) and the "
     "task keeps serving. Must hold one step of the model (4 bytes per parameter); a ps task's tables "
     "may hold more rows, which checkpoints, restores and backups move in pieces",
     "67108864"},
    {"data_link", "0|1", FlagGroup::Faults,
     "1: a worker's pushes and their answers travel on a TCP connection beside the gRPC stream (an "
     "ephemeral port of the ps's host, opened with a one-time nonce the stream grants); 0 keeps them on "
     "the stream. Under TLS they stay on the stream",
     "1"},
    {"cluster_token_file", "PATH", FlagGroup::Security,
     "file (mode 0600) holding the cluster token every call must carry; the environment variable "
     "PARASYNC_CLUSTER_TOKEN is the other way to give it (never give it on a command line)",
     "none"},
    {"generate_token", "", FlagGroup::Security,
     "print a new random cluster token (256 bits), or write it to --cluster_token_file, and exit", nullptr},
    {"insecure", "", FlagGroup::Security,
     "allow serving a non-loopback address without a cluster token (anyone who can reach it can "
     "steer the cluster)",
     nullptr},
    {"tls_cert", "PATH", FlagGroup::Security,
     "TLS: this task's certificate (PEM); it must name the task's address (an IP or DNS subjectAltName). "
     "With --tls_key and --tls_ca every channel of the task is TLS",
     "none"},
    {"tls_key", "PATH", FlagGroup::Security, "TLS: the private key of --tls_cert (PEM)", "none"},
    {"tls_ca", "PATH", FlagGroup::Security,
     "TLS: the CA certificate (PEM) that signed the other tasks' certificates; peers it did not sign are "
     "refused",
     "none"},
    {"tls_mutual", "", FlagGroup::Security, "mutual TLS: servers also require a client certificate signed by --tls_ca",
     nullptr},
    {"help", "", FlagGroup::Other, "print this text and exit (also -h)", nullptr},
    {"version", "", FlagGroup::Other, "print the version and exit", nullptr},
};

const char *const kOptimizers[] = {"sgd", "momentum", "adagrad", "adam", "ftrl"};

constexpr char kDemoPs[] = "127.0.0.1:2222";
constexpr char kDemoWorkers[] = "127.0.0.1:2223,127.0.0.1:2224";

std::string defaultText(const FlagInfo &flag)
{
    if (flag.defaultText)
        return flag.defaultText;
    static const QJsonObject defaults
        = QJsonDocument::fromJson(QByteArray::fromStdString(TrainingOptions().toJson())).object();
    const QJsonValue value = defaults.value(QLatin1String(flag.name));
    if (value.isUndefined())
        return {};
    if (value.isString())
        return value.toString().isEmpty() ? std::string("none") : ss(value.toString());
    return ss(QString::number(value.toDouble(), 'g', QLocale::FloatingPointShortest));
}

constexpr size_t kHelpWidth = 100;

// `words` laid out to fit `width` columns, continuation lines indented by `indent`.
std::string wrapped(const std::vector<std::string> &words, size_t indent, size_t width)
{
    const size_t room = width > indent + 20 ? width - indent : 20;
    std::string out;
    size_t lineLength = 0;
    for (const std::string &word : words) {
        if (lineLength > 0 && lineLength + 1 + word.size() > room) {
            out += "\n" + std::string(indent, ' ');
            lineLength = 0;
        } else if (lineLength > 0) {
            out += ' ';
            ++lineLength;
        }
        out += word;
        lineLength += word.size();
    }
    return out;
}

// "--lerning_rate" is almost certainly --learning_rate.
std::string suggestion(const std::string &unknown)
{
    std::vector<std::string> names;
    for (const FlagInfo &flag : kFlags)
        names.emplace_back(flag.name);
    return nearestName(unknown, names);
}

void parseMode(const FlagValues &p, proto::ModeConfig *mode)
{
    std::optional<proto::UpdateMode> fromMode;
    if (p.has("mode")) {
        try {
            fromMode = parseUpdateMode(p.text("mode"));
        } catch (const InputError &) {
            throw InputError(p.shown("mode") + ": must be async, sync or ssp (semi-synchronous, with --staleness)");
        }
        mode->set_mode(*fromMode);
    }
    if (p.has("issync")) {
        // A cluster file may well say "issync": true.
        const std::string &text = p.text("issync");
        const std::string value = text == "true" ? "1" : text == "false" ? "0" : text;
        if (value != "0" && value != "1")
            throw InputError(p.shown("issync")
                             + ": must be 0 (async) or 1 (sync); or use --mode=" + updateModeChoices());
        const bool sync = value == "1";
        if (fromMode && sync && *fromMode != proto::SYNC)
            throw InputError(p.shown("issync") + " asks for sync but " + p.shown("mode") + " asks for "
                             + updateModeName(*fromMode) + ": give only one of them");
        if (fromMode && !sync && *fromMode == proto::SYNC)
            throw InputError(p.shown("issync") + " turns sync off but " + p.shown("mode")
                             + " turns it on: give only one of them");
        if (sync)
            mode->set_mode(proto::SYNC);
        else if (!fromMode)
            mode->set_mode(proto::ASYNC);
    }
    int32_t staleness = mode->staleness();
    p.integer("staleness", &staleness, 0);
    mode->set_staleness(staleness);
    int32_t replicas = mode->replicas_to_aggregate();
    p.integer("replicas_to_aggregate", &replicas, 0);
    mode->set_replicas_to_aggregate(replicas);
    int32_t total = mode->total_num_replicas();
    p.integer("total_num_replicas", &total, 0);
    mode->set_total_num_replicas(total);
    bool byStaleness = mode->learning_rate_by_staleness();
    p.boolean("learning_rate_by_staleness", &byStaleness);
    mode->set_learning_rate_by_staleness(byStaleness);
}

void parsePace(const FlagValues &p, WorkerPace *pace)
{
    p.integer("compute_ms", &pace->computeMs, 0, kMaxComputeMs);
    p.boundedFloat("compute_jitter", &pace->computeJitter, 0.0f, kMaxComputeJitter);
    p.integer("straggler_ms", &pace->stragglerMs, 0, kMaxComputeMs);
}

TrainingOptions parseTraining(const FlagValues &p, const ClusterSpec &cluster)
{
    TrainingOptions t;
    parseMode(p, &t.mode);
    p.string("model", &t.model, false);
    p.string("dataset", &t.dataset, true);
    p.integer("samples_per_shard", &t.samplesPerShard, 1);
    p.string("eval_dataset", &t.evalDataset, true);
    p.fraction("eval_fraction", &t.evalFraction);
    if (!t.evalDataset.empty() && t.evalFraction > 0)
        throw InputError(p.shown("eval_dataset") + " and " + p.shown("eval_fraction")
                         + " both name held-out data: give only one of them");
    p.string("optimizer", &t.optimizer, false);
    if (std::find(std::begin(kOptimizers), std::end(kOptimizers), t.optimizer) == std::end(kOptimizers))
        throw InputError(p.shown("optimizer") + ": must be sgd, momentum, adagrad, adam or ftrl");
    p.positiveFloat("learning_rate", &t.learningRate);
    p.integer("batch_size", &t.batchSize, 1);
    p.integer("last_step", &t.lastStep, 0);
    p.integer("display_step", &t.displayStep, 1);
    p.integer("staleness_probe_every", &t.stalenessProbeEvery, 0);
    p.string("logdir", &t.logdir, true);
    p.integer("save_checkpoint_secs", &t.saveCheckpointSecs, 0);
    p.integer("max_to_keep", &t.maxToKeep, 0);
    p.integer("logdir_max_mb", &t.logdirMaxMb, 0, 1 << 30);
    p.unsignedInteger("seed", &t.seed);
    p.integer("min_slice_bytes", &t.minSliceBytes, 0);
    std::string nonfinite = t.applyNonfinite ? "apply" : "reject";
    p.string("nonfinite_gradients", &nonfinite, false);
    if (nonfinite != "reject" && nonfinite != "apply")
        throw InputError(p.shown("nonfinite_gradients") + ": must be reject or apply");
    t.applyNonfinite = nonfinite == "apply";
    p.integer("hang_timeout_secs", &t.hangTimeoutSecs, 0, 24 * 3600);
    p.integer("max_workers", &t.maxWorkers, 0, kMaxWorkers);
    p.boundedFloat("straggler_threshold", &t.stragglerThreshold, 0.0f, 1000.0f);
    if (t.stragglerThreshold > 0 && t.stragglerThreshold <= 1)
        throw InputError(p.shown("straggler_threshold")
                         + ": every worker would be slower than the others by that measure; give more than 1 "
                           "(2: twice the others' time a step) or 0 to turn flagging off");
    p.boolean("chief_handover", &t.chiefHandover);
    parsePace(p, &t.pace);

    const int replicas = t.mode.replicas_to_aggregate();
    const int total = t.mode.total_num_replicas();
    if (replicas > 0 && total > 0 && replicas > total)
        throw InputError(p.shown("replicas_to_aggregate") + " is more than " + p.shown("total_num_replicas")
                         + ": a step cannot wait for more gradients than there are replicas; lower "
                           "--replicas_to_aggregate or raise --total_num_replicas");
    if (t.maxWorkers > 0 && t.maxWorkers < cluster.numWorkers())
        throw InputError(p.shown("max_workers") + " but --worker_hosts lists " + std::to_string(cluster.numWorkers())
                         + " workers: give at least " + std::to_string(cluster.numWorkers())
                         + " (a newcomer's --worker_hosts lists the workers up to itself), or 0 for no newcomers");
    const int workers = std::max(cluster.numWorkers(), t.maxWorkers);
    if (replicas > workers)
        throw InputError(p.shown("replicas_to_aggregate") + " but the cluster has " + std::to_string(workers)
                         + " worker" + (workers == 1 ? "" : "s") + ": a sync step would never complete; give at most "
                         + std::to_string(workers) + " (or 0 for all live workers)");
    if (total > workers)
        throw InputError(p.shown("total_num_replicas") + " but the cluster has " + std::to_string(workers) + " worker"
                         + (workers == 1 ? "" : "s") + ": give at most " + std::to_string(workers)
                         + " (or 0 for all workers)");
    return t;
}

} // namespace

const std::vector<std::string> &connectionFlagNames()
{
    static const std::vector<std::string> names = {"tls_cert",          "tls_key",      "tls_ca",    "tls_mutual",
                                                   "max_message_bytes", "heartbeat_ms", "data_link", "ps_lease_ms"};
    return names;
}

ConnectionOptions connectionFromFlags(const FlagValues &p)
{
    ConnectionOptions c;
    p.string("tls_cert", &c.tlsCert, true);
    p.string("tls_key", &c.tlsKey, true);
    p.string("tls_ca", &c.tlsCa, true);
    c.tlsMutual = p.has("tls_mutual");
    // A step of the two-parameter demo is under 100 bytes; gRPC itself needs
    // a few kB for metadata.
    p.integer("max_message_bytes", &c.maxMessageBytes, 4096);
    p.integer("heartbeat_ms", &c.heartbeatMs, 100, 600000);
    p.integer("ps_lease_ms", &c.psLeaseMs, 0, 60000);
    if (c.psLeaseMs > 0 && c.psLeaseMs < 100)
        throw InputError("--ps_lease_ms=" + std::to_string(c.psLeaseMs)
                         + " is shorter than a vote's round trip may take: give 100 to 60000 ms (0 turns leases off)");
    p.boolean("data_link", &c.dataLink);
    return c;
}

NodeOptions parseNodeOptions(const std::vector<std::string> &args, const std::string &tfConfig)
{
    return parseNodeOptions(args, tfConfig, SlurmVariables());
}

namespace {

// The command line, parsed against the flag table: which flags were given,
// and their text. Refuses an unknown flag, suggesting the nearest one.
class GivenFlags
{
public:
    explicit GivenFlags(const std::vector<std::string> &args) : m_helpShort(QStringLiteral("h"))
    {
        // TensorFlow's flags library takes -name=value as well as --name=value.
        m_parser.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
        for (const FlagInfo &flag : kFlags) {
            QCommandLineOption option(qs(flag.name));
            if (*flag.valueName)
                option.setValueName(QString::fromLatin1(flag.valueName));
            m_parser.addOption(option);
            m_options.emplace(flag.name, option);
        }
        m_parser.addOption(m_helpShort);

        // Every boolean takes TensorFlow's forms (--data_link, --nodata_link,
        // --insecure=true): spelled here as the table declares it.
        std::set<std::string> valueBooleans, switches;
        for (const FlagInfo &flag : kFlags) {
            if (std::string_view(flag.valueName) == "0|1")
                valueBooleans.insert(flag.name);
            else if (*flag.valueName == '\0')
                switches.insert(flag.name);
        }
        QStringList arguments;
        for (const std::string &arg : spellBooleanFlags(args, valueBooleans, switches))
            arguments.append(qs(arg));
        if (arguments.isEmpty())
            arguments.append(QStringLiteral("parasync-node"));
        if (!m_parser.parse(arguments)) {
            std::string message = ss(m_parser.errorText());
            const QStringList unknown = m_parser.unknownOptionNames();
            if (unknown.size() == 1) {
                const std::string best = suggestion(ss(unknown.front()));
                if (!best.empty())
                    message += " Did you mean --" + best + "?";
            }
            throw InputError(message + " (see --help)");
        }
    }

    bool isSet(const std::string &name) const { return m_parser.isSet(m_options.at(name)); }
    std::string value(const std::string &name) const { return ss(m_parser.value(m_options.at(name))); }
    bool helpShort() const { return m_parser.isSet(m_helpShort); }
    QStringList positional() const { return m_parser.positionalArguments(); }

    // One flag's text, for FlagValues' checked reading.
    FlagValues one(const std::string &name) const { return FlagValues({{name, GivenValue{value(name), {}}}}); }

private:
    QCommandLineParser m_parser;
    std::map<std::string, QCommandLineOption> m_options;
    QCommandLineOption m_helpShort;
};

// The cluster and this task's place in it from Slurm's job step, laid out by
// --slurm_num_ps and --slurm_port_base.
SlurmTask slurmTaskFromFlags(const GivenFlags &flags, const SlurmVariables &slurm)
{
    if (flags.isSet("ps_hosts") || flags.isSet("job_name") || flags.isSet("task_index"))
        throw InputError(std::string(flags.isSet("ps_hosts") ? "--ps_hosts/--worker_hosts" : "--job_name/--task_index")
                         + " given with --slurm: Slurm's job step gives the cluster and every task's place in "
                           "it (SLURM_PROCID); drop one or the other");
    SlurmLayout layout;
    if (flags.isSet("slurm_num_ps"))
        flags.one("slurm_num_ps").integer("slurm_num_ps", &layout.numPs, 1, 65535);
    if (flags.isSet("slurm_port_base"))
        flags.one("slurm_port_base").integer("slurm_port_base", &layout.portBase, 1, 65535);
    SlurmTask task = slurmTaskFromEnvironment(slurm, layout);
    task.cluster.validate();
    return task;
}

// The training flags' texts: the cluster file's "training", this worker's
// "per_worker" entry over it, the command line over both.
std::map<std::string, GivenValue> trainingFlagsGiven(const GivenFlags &flags, const std::optional<ClusterFile> &file,
                                                     const std::string &filePath, const TaskId &task)
{
    std::map<std::string, GivenValue> given;
    if (file) {
        for (const auto &[name, text] : file->training)
            given[name] = GivenValue{text, filePath};
        if (task.job == JobName::Worker) {
            if (auto it = file->perWorker.find(task.index); it != file->perWorker.end())
                for (const auto &[name, text] : it->second)
                    given[name]
                        = GivenValue{text, filePath, "\"per_worker\" \"" + std::to_string(task.index) + "\" entry"};
        }
    }
    // --mode and --issync say one thing; either on the command line replaces both in the file.
    if (flags.isSet("mode") || flags.isSet("issync")) {
        given.erase("mode");
        given.erase("issync");
    }
    for (const std::string &name : trainingFlagNames())
        if (flags.isSet(name))
            given[name] = GivenValue{flags.value(name), {}};
    return given;
}

} // namespace

NodeOptions parseNodeOptions(const std::vector<std::string> &args, const std::string &tfConfig,
                             const SlurmVariables &slurm)
{
    const GivenFlags flags(args);
    const auto isSet = [&flags](const char *name) { return flags.isSet(name); };
    const auto value = [&flags](const char *name) { return flags.value(name); };

    NodeOptions result;
    result.help = isSet("help") || flags.helpShort();
    result.version = isSet("version");
    result.generateToken = isSet("generate_token");
    if (isSet("cluster_token_file"))
        result.clusterTokenFile = value("cluster_token_file");
    result.insecure = isSet("insecure");
    if (result.help || result.version || result.generateToken)
        return result;
    std::map<std::string, GivenValue> connectionFlags;
    for (const std::string &name : connectionFlagNames())
        if (flags.isSet(name))
            connectionFlags[name] = GivenValue{flags.value(name), {}};
    result.connection = connectionFromFlags(FlagValues(std::move(connectionFlags)));
    if (!flags.positional().isEmpty())
        throw InputError("unexpected argument '" + ss(flags.positional().front())
                         + "': flags are written --name=value (see --help)");

    // The cluster: the command line, else the cluster file, else TF_CONFIG.
    const bool hasPsHosts = isSet("ps_hosts");
    const bool hasWorkerHosts = isSet("worker_hosts");
    if (hasPsHosts != hasWorkerHosts)
        throw InputError(std::string(hasPsHosts ? "--ps_hosts given without --worker_hosts"
                                                : "--worker_hosts given without --ps_hosts")
                         + ": give both, like --ps_hosts=" + kDemoPs + " --worker_hosts=" + kDemoWorkers);
    if (isSet("ps_backup_hosts") && !hasPsHosts)
        throw InputError("--ps_backup_hosts given without --ps_hosts: the backups are of the ps tasks --ps_hosts "
                         "lists; give both (a cluster file names them \"ps_backup\")");
    std::optional<ClusterFile> clusterFile;
    std::string clusterFilePath;
    if (isSet("cluster_file")) {
        clusterFilePath = value("cluster_file");
        if (clusterFilePath.empty())
            throw InputError(
                "--cluster_file is empty: give the path of a cluster file, like --cluster_file=cluster.json");
        clusterFile = readClusterFile(clusterFilePath);
    }
    const bool hasTfConfig = tfConfig.find_first_not_of(" \t\r\n") != std::string::npos;
    const bool jobGiven = isSet("job_name");
    // Slurm's step: asked for, or implied inside one when nothing else names the cluster.
    const bool fromSlurm
        = isSet("slurm") || (!hasPsHosts && !clusterFile && !hasTfConfig && !jobGiven && insideSlurmTask(slurm));
    if (fromSlurm) {
        const SlurmTask task = slurmTaskFromFlags(flags, slurm);
        result.cluster = task.cluster;
        result.task = task.task;
    } else if (isSet("slurm_num_ps") || isSet("slurm_port_base")) {
        throw InputError(std::string(isSet("slurm_num_ps") ? "--slurm_num_ps" : "--slurm_port_base")
                         + " only lays out a cluster taken from Slurm: add --slurm (and run under srun), or drop it");
    }
    std::optional<TfConfig> tf;
    if (!fromSlurm && !jobGiven && hasTfConfig)
        tf = parseTfConfig(tfConfig);

    if (fromSlurm) {
        // Taken from the step above.
    } else if (hasPsHosts) {
        result.cluster.ps = parseHostList(value("ps_hosts"), "--ps_hosts");
        result.cluster.workers = parseHostList(value("worker_hosts"), "--worker_hosts");
        if (isSet("ps_backup_hosts"))
            result.cluster.psBackups = parseHostList(value("ps_backup_hosts"), "--ps_backup_hosts");
    } else if (clusterFile) {
        result.cluster = clusterFile->cluster;
    } else if (tf) {
        result.cluster = tf->cluster;
    } else if (hasTfConfig) {
        result.cluster = parseTfConfigCluster(tfConfig);
    } else {
        // The seeds' scripts had their hosts as flag defaults, and their
        // commands name none: say what the local demo cluster's flags are.
        throw InputError("no cluster given: pass --ps_hosts and --worker_hosts, --cluster_file, set TF_CONFIG, "
                         "or run under srun in a Slurm job (--slurm) (see --help); the local demo cluster is "
                         "--ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224");
    }
    result.cluster.validate();

    // The task: Slurm's rank, else --job_name/--task_index, else TF_CONFIG's "task".
    if (fromSlurm) {
        // Taken from the step above.
    } else if (jobGiven)
        result.task.job = parseJobName(value("job_name"));
    else if (tf)
        result.task.job = tf->task.job;
    else
        throw InputError("--job_name is missing: give --job_name=ps or --job_name=worker, with --task_index");
    if (!fromSlurm && isSet("task_index")) {
        flags.one("task_index").integer("task_index", &result.task.index, 0);
    } else if (!fromSlurm && tf && tf->task.job == result.task.job) {
        result.task.index = tf->task.index;
    }
    result.cluster.validateTask(result.task);
    if (isSet("metrics_port")) {
        flags.one("metrics_port").integer("metrics_port", &result.metricsPort, 0, 65535);
        // The task's own gRPC port is taken by the task itself; say so now
        // rather than as "in use" by the process being started.
        const HostPort &own = result.cluster.address(result.task);
        // srun gives every rank the same command line: a node's tasks take
        // consecutive metrics ports, as they take their own ports from
        // --slurm_port_base.
        if (fromSlurm && result.metricsPort != 0) {
            SlurmLayout layout;
            if (isSet("slurm_port_base"))
                flags.one("slurm_port_base").integer("slurm_port_base", &layout.portBase, 1, 65535);
            result.metricsPort += own.port - layout.portBase;
            if (result.metricsPort > 65535)
                throw InputError("--metrics_port=" + value("metrics_port")
                                 + " plus this task's local index on its node ("
                                 + std::to_string(own.port - layout.portBase) + ") is beyond 65535: lower it");
        }
        if (result.metricsPort != 0 && result.metricsPort == own.port)
            throw InputError("--metrics_port=" + std::to_string(result.metricsPort) + " is this task's own port ("
                             + result.task.toString() + " serves gRPC at " + own.toString()
                             + "): give the metrics another port");
    }

    if (isSet("acknowledgement_log")) {
        result.acknowledgementLog = value("acknowledgement_log");
        if (result.acknowledgementLog.empty())
            throw InputError("--acknowledgement_log= is empty: give the file a worker appends its acknowledged "
                             "steps to, or leave the flag out");
    }

    result.training = parseTraining(FlagValues(trainingFlagsGiven(flags, clusterFile, clusterFilePath, result.task)),
                                    result.cluster);
    return result;
}

std::string nodeHelpText()
{
    std::string text
        = "Usage: parasync-node --ps_hosts=HOST:PORT,... --worker_hosts=HOST:PORT,... --job_name=ps|worker "
          "--task_index=N [flags]\n"
          "\n"
          "Runs one task (a ps or a worker) of a Parasync parameter-server cluster. Every task gets the same\n"
          "cluster and training flags plus its own --job_name and --task_index. The three-port demo cluster:\n"
          "\n";
    for (const char *task :
         {"--job_name=ps --task_index=0", "--job_name=worker --task_index=0", "--job_name=worker --task_index=1"})
        text += std::string("  parasync-node --ps_hosts=") + kDemoPs + " --worker_hosts=" + kDemoWorkers + " " + task
                + "\n";
    text += "\n"
            "The cluster comes from --ps_hosts/--worker_hosts, else --cluster_file, else the TF_CONFIG\n"
            "environment variable (TensorFlow's JSON), else the Slurm job step it runs in (--slurm; under\n"
            "srun, the first --slurm_num_ps ranks are the ps tasks). Training values in a cluster file's \"training\"\n"
            "section apply unless the same flag is given on the command line.\n";

    const std::pair<FlagGroup, const char *> groups[] = {
        {FlagGroup::Cluster, "Cluster"},
        {FlagGroup::Mode, "Update mode"},
        {FlagGroup::ModelAndData, "Model and data"},
        {FlagGroup::Training, "Training"},
        {FlagGroup::Pace, "Pace (each worker may have its own: a cluster file's \"per_worker\")"},
        {FlagGroup::RunDirectory, "Run directory"},
        {FlagGroup::Faults, "Faults and limits"},
        {FlagGroup::Security, "Security"},
        {FlagGroup::Other, "Other"},
    };
    size_t width = 0;
    const auto isMode = [](const FlagInfo &flag) { return std::string(flag.name) == "mode"; };
    const auto spelling = [&](const FlagInfo &flag) {
        if (isMode(flag))
            return "--mode=" + updateModeChoices();
        return "--" + std::string(flag.name) + (*flag.valueName ? "=" + std::string(flag.valueName) : "");
    };
    for (const FlagInfo &flag : kFlags)
        width = std::max(width, spelling(flag).size());
    for (const auto &[group, title] : groups) {
        text += "\n" + std::string(title) + ":\n";
        for (const FlagInfo &flag : kFlags) {
            if (flag.group != group)
                continue;
            const std::string left = spelling(flag);
            std::vector<std::string> words;
            const std::string meaning = isMode(flag) ? updateModeMeanings() : std::string(flag.meaning);
            for (size_t start = 0; start < meaning.size();) {
                const size_t end = std::min(meaning.find(' ', start), meaning.size());
                words.push_back(meaning.substr(start, end - start));
                start = end + 1;
            }
            // Kept on one line, so the default is easy to find.
            const std::string defaultValue = defaultText(flag);
            if (!defaultValue.empty())
                words.push_back("(default: " + defaultValue + ")");
            text += "  " + left + std::string(width - left.size() + 2, ' ') + wrapped(words, width + 4, kHelpWidth)
                    + "\n";
        }
    }
    text += "\nA flag that takes 0|1, and a switch, also take --noNAME and --NAME=true|false|1|0, as TensorFlow's\n"
            "flags do: --data_link, --nodata_link and --data_link=false are all understood.\n";
    text += "\nEnvironment:\n"
            "  TF_CONFIG               TensorFlow's JSON cluster and task, used when neither --ps_hosts nor\n"
            "                          --cluster_file is given\n"
            "  PARASYNC_CLUSTER_TOKEN  the cluster token when no --cluster_token_file is given (never on a\n"
            "                          command line, where ps shows it to every user)\n"
            "  SLURM_*                 with --slurm, or under srun with nothing else naming the cluster: the\n"
            "                          job's nodes and this task's rank\n"
            "  GRPC_VERBOSITY, GRPC_TRACE  gRPC's own logging; unset, only its errors are shown\n";
    text += "\nControl a running cluster through ps:0 (no task is started):\n"
            "  parasync-node --ps_hosts=HOST:PORT --status\n"
            "      the global step, the mode and what each worker is doing\n"
            "  parasync-node --ps_hosts=HOST:PORT --set_mode="
            + updateModeChoices()
            + " [--staleness=N]\n"
              "                [--replicas_to_aggregate=N] [--total_num_replicas=N]\n"
              "      change the update mode while the cluster trains; numbers not given keep\n"
              "      their current values; takes effect at the next step boundary\n";
    return text;
}

} // namespace parasync
