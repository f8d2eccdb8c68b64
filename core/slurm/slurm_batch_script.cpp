#include "slurm/slurm_batch_script.h"

#include "base/error.h"
#include "base/version.h"

#include <QStringList>

#include <algorithm>
#include <charconv>
#include <regex>
#include <sstream>

namespace parasync {

namespace {

// `word` as one word for a POSIX shell.
std::string shellWord(const std::string &word)
{
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
        return std::isalnum(c) || std::string_view("%+,-./:=@_").find(char(c)) != std::string_view::npos;
    });
    if (plain)
        return word;
    std::string quoted = "'";
    for (const char c : word)
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

std::string joinedWords(const std::vector<std::string> &words)
{
    std::string line;
    for (const std::string &word : words)
        line += (line.empty() ? "" : " ") + shellWord(word);
    return line;
}

// Slurm's names (job, partition, account): letters, digits, . _ -
void checkName(const std::string &value, const char *what, bool mayBeEmpty)
{
    static const std::regex allowed("[A-Za-z0-9._-]+");
    if (value.empty() && mayBeEmpty)
        return;
    if (!std::regex_match(value, allowed))
        throw InputError(std::string(what) + " '" + value
                         + "': use letters, digits, '.', '_' and '-' only, as Slurm names it");
}

// "fields|separated|by|bars" -> the fields.
std::vector<std::string> fieldsOf(const std::string &line)
{
    std::vector<std::string> fields;
    size_t start = 0;
    while (true) {
        const size_t bar = line.find('|', start);
        fields.push_back(line.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
        if (bar == std::string::npos)
            return fields;
        start = bar + 1;
    }
}

std::vector<std::string> linesOf(const std::string &text)
{
    std::vector<std::string> lines;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
            line.pop_back();
        if (!line.empty())
            lines.push_back(line);
    }
    return lines;
}

int numberOr(const std::string &text, int fallback)
{
    int value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && ptr == text.data() + text.size() ? value : fallback;
}

} // namespace

std::string slurmJobOutputPattern()
{
    return "parasync-%j.out";
}

std::string slurmTaskOutputPattern()
{
    return "parasync-%j-task%t.log";
}

std::string slurmJobOutputName(const std::string &jobId)
{
    return "parasync-" + jobId + ".out";
}

std::string slurmTaskOutputName(const std::string &jobId, int rank)
{
    return "parasync-" + jobId + "-task" + std::to_string(rank) + ".log";
}

std::vector<std::string> slurmNodeArguments(const ClusterPlan &plan, const TaskId &task)
{
    std::vector<std::string> out;
    for (const QString &argument : plan.arguments(task)) {
        // The step gives these (SLURM_PROCID and the node list).
        if (argument.startsWith(QLatin1String("--ps_hosts=")) || argument.startsWith(QLatin1String("--worker_hosts="))
            || argument.startsWith(QLatin1String("--job_name=")) || argument.startsWith(QLatin1String("--task_index=")))
            continue;
        out.push_back(argument.toStdString());
    }
    return out;
}

std::string slurmBatchScript(const ClusterPlan &plan, const SlurmSettings &settings)
{
    plan.cluster.validate();
    // One srun step runs one program on every rank, parasync-node --slurm,
    // which takes its task from the rank; a worker of its own would need a
    // heterogeneous step and its own way to read Slurm's environment.
    if (plan.hasWorkerCommands())
        throw InputError("the cluster's workers run a command of their own (\"worker_command\" in the cluster file), "
                         "but a Slurm job runs parasync-node for every task: remove \"worker_command\" to run this "
                         "cluster on Slurm, or start its workers from the app (locally or over ssh)");
    // Ranks map onto ps tasks and workers only (slurmTaskOfRank).
    if (plan.cluster.replicated())
        throw InputError("the cluster backs its ps tasks with replicas (\"ps_backup\" in the cluster file), which a "
                         "Slurm job does not start yet: remove \"ps_backup\" to run it on Slurm, or start the "
                         "cluster from the app (locally or over ssh)");
    if (settings.outputDirectory.empty())
        throw InputError("no output directory for the Slurm job: give a folder on a file system the nodes share "
                         "with this machine (the tasks' logs go there)");
    if (settings.outputDirectory.front() != '/')
        throw InputError("the Slurm output directory '" + settings.outputDirectory
                         + "' is relative: give an absolute path, as the nodes see it");
    checkName(settings.jobName, "job name", false);
    checkName(settings.partition, "partition", true);
    checkName(settings.account, "account", true);
    static const std::regex timeLimit("UNLIMITED|INFINITE|unlimited|infinite|([0-9]+-)?[0-9]+(:[0-9]+){0,2}");
    if (!std::regex_match(settings.timeLimit, timeLimit))
        throw InputError("time limit '" + settings.timeLimit
                         + "': write it as Slurm does, minutes (30), HH:MM:SS (01:30:00) or D-HH:MM:SS (2-00:00:00)");
    const int numTasks = plan.cluster.numPs() + plan.cluster.numWorkers();
    if (settings.nodes < 0 || settings.nodes > numTasks)
        throw InputError("--slurm_nodes=" + std::to_string(settings.nodes) + ": a job of " + std::to_string(numTasks)
                         + " tasks uses 1 to " + std::to_string(numTasks) + " nodes (0: as Slurm places them)");
    if (settings.portBase == 0 || int(settings.portBase) + numTasks - 1 > 65535)
        throw InputError("--slurm_port_base=" + std::to_string(settings.portBase) + ": the " + std::to_string(numTasks)
                         + " tasks need ports from it up to " + std::to_string(int(settings.portBase) + numTasks - 1)
                         + ", within 1-65535; give e.g. 8888");

    const std::string out = settings.outputDirectory;
    const std::string node = settings.nodeProgram();
    const SlurmLayout layout = settings.layout(plan);
    std::vector<std::string> slurmFlags{"--slurm", "--slurm_num_ps=" + std::to_string(layout.numPs),
                                        "--slurm_port_base=" + std::to_string(layout.portBase)};

    // One command line for every task, unless a worker has its own pace: then
    // srun's --multi-prog gives each rank its own.
    std::vector<std::vector<std::string>> commands;
    bool allSame = true;
    for (const TaskId &task : plan.tasks()) {
        std::vector<std::string> command{node};
        command.insert(command.end(), slurmFlags.begin(), slurmFlags.end());
        const std::vector<std::string> flags = slurmNodeArguments(plan, task);
        command.insert(command.end(), flags.begin(), flags.end());
        allSame = allSame && (commands.empty() || commands.front() == command);
        commands.push_back(std::move(command));
    }

    std::ostringstream s;
    s << "#!/bin/bash\n"
      << "# A Parasync cluster as one Slurm job: " << plan.cluster.numPs() << " ps and " << plan.cluster.numWorkers()
      << " worker task(s) in one srun job step, written by parasync " << version() << ".\n"
      << "# Every task takes the cluster and its own task from the step (parasync-node --slurm):\n"
      << (layout.numPs == 1 ? std::string("# rank 0 is ps:0")
                            : "# ranks 0-" + std::to_string(layout.numPs - 1) + " are the ps tasks")
      << ", the others the workers (worker:0, the chief, is rank " << layout.numPs << "),\n"
      << "# each listening on port " << layout.portBase << " plus its local index on its node.\n"
      << "#\n"
      << "# Submit it by hand with a cluster token in the environment (sbatch hands the\n"
      << "# environment to the tasks; the token is never on a command line):\n"
      << "#   export PARASYNC_CLUSTER_TOKEN=$(parasync-node --generate_token)\n"
      << "#   sbatch " << shellWord(out + "/" + settings.jobName + ".sbatch") << "\n"
      << "# then watch it from the app, with the same token, at ps:0 = the first node of\n"
      << "# `squeue -j JOBID -o %N`, port " << layout.portBase << ":\n"
      << "#   parasync --connect=NODE:" << layout.portBase << "\n"
      << "#SBATCH --job-name=" << settings.jobName << "\n"
      << "#SBATCH --ntasks=" << numTasks << "\n";
    if (settings.nodes > 0)
        s << "#SBATCH --nodes=" << settings.nodes << "\n";
    if (!settings.partition.empty())
        s << "#SBATCH --partition=" << settings.partition << "\n";
    if (!settings.account.empty())
        s << "#SBATCH --account=" << settings.account << "\n";
    s << "#SBATCH --time=" << settings.timeLimit << "\n"
      << "#SBATCH --output=" << out << "/" << slurmJobOutputPattern() << "\n"
      << "set -u\n"
      << "node=" << shellWord(node) << "\n"
      << "out=" << shellWord(out) << "\n"
      << "echo \"parasync: job $SLURM_JOB_ID runs on $SLURM_JOB_NODELIST\"\n";
    // The nodes' names are not loopback: a task refuses to serve them without
    // a token, so say it once here rather than once per task.
    const std::vector<std::string> &common = commands.front();
    const bool tokenElsewhere = std::any_of(common.begin(), common.end(), [](const std::string &flag) {
        return flag == "--insecure" || flag == "--tls_mutual" || flag.rfind("--cluster_token_file=", 0) == 0;
    });
    if (!tokenElsewhere)
        s << "if [ -z \"${PARASYNC_CLUSTER_TOKEN:-}\" ]; then\n"
          << "  echo \"parasync: no cluster token: submit with PARASYNC_CLUSTER_TOKEN set (export "
             "PARASYNC_CLUSTER_TOKEN=\\$(parasync-node --generate_token); sbatch ...)\"\n"
          << "  exit 2\n"
          << "fi\n";
    if (!settings.expectedVersion.empty()) {
        s << "# First the same parasync-node on every node, or nothing starts.\n"
          << "expected=" << shellWord(settings.expectedVersion) << "\n"
          << "if ! versions=$(srun --nodes=\"$SLURM_JOB_NUM_NODES\" --ntasks=\"$SLURM_JOB_NUM_NODES\" "
             "--ntasks-per-node=1 --label \"$node\" --version 2>&1); then\n"
          << "  echo \"parasync: cannot run $node on every node of the job:\"\n"
          << "  echo \"$versions\"\n"
          << "  echo \"parasync: install parasync-node on the nodes (on their PATH), or give its path\"\n"
          << "  exit 2\n"
          << "fi\n"
          << "while IFS= read -r line; do\n"
          << "  if [ \"${line#*: }\" != \"$expected\" ]; then\n"
          << "    echo \"parasync: a node runs '${line#*: }', the app is '$expected': install the same build "
             "there\"\n"
          << "    exit 2\n"
          << "  fi\n"
          << "done <<<\"$versions\"\n";
    }
    s << "# The cluster: one task per ps and worker, block distribution (the addresses follow from it).\n";
    const std::string srun = "srun --ntasks=" + std::to_string(numTasks) + " --distribution=block --output=\"$out/"
                             + slurmTaskOutputPattern() + "\"";
    if (allSame) {
        s << "exec " << srun << " \\\n    " << joinedWords(commands.front()) << "\n";
    } else {
        s << "tasks=\"$out/parasync-$SLURM_JOB_ID.multi-prog\"\n"
          << "cat >\"$tasks\" <<'PARASYNC_TASKS'\n";
        for (size_t rank = 0; rank < commands.size(); ++rank)
            s << rank << " " << joinedWords(commands[rank]) << "\n";
        s << "PARASYNC_TASKS\n"
          << "exec " << srun << " --multi-prog \"$tasks\"\n";
    }
    return s.str();
}

std::optional<std::string> parseSbatchJobId(const std::string &output)
{
    for (const std::string &line : linesOf(output)) {
        const std::string id = line.substr(0, line.find(';'));
        if (!id.empty() && std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); }))
            return id;
    }
    return std::nullopt;
}

std::string squeueFormat()
{
    return "%i|%T|%N|%r";
}

namespace {

// The fields of the first line of `output` (squeue's or sacct's, '|'
// separated, in the formats above) that speaks of `jobId`, with at least the
// four asked for; nothing when no line does.
std::optional<std::vector<std::string>> jobFields(const std::string &output, const std::string &jobId)
{
    for (const std::string &line : linesOf(output)) {
        auto fields = fieldsOf(line);
        if (fields.size() >= 4 && fields[0] == jobId)
            return fields;
    }
    return std::nullopt;
}

} // namespace

SlurmJobStatus parseSqueueOutput(const std::string &output, const std::string &jobId)
{
    SlurmJobStatus status;
    status.jobId = jobId;
    if (const auto fields = jobFields(output, jobId)) {
        status.known = true;
        status.state = (*fields)[1];
        status.nodeList = (*fields)[2];
        status.reason = (*fields)[3];
    }
    return status;
}

std::string sacctFormat()
{
    return "JobID,State,NodeList,ExitCode";
}

SlurmJobStatus parseSacctOutput(const std::string &output, const std::string &jobId)
{
    SlurmJobStatus status;
    status.jobId = jobId;
    if (const auto fields = jobFields(output, jobId)) {
        status.known = true;
        // "CANCELLED by 1000": the state is the first word.
        status.state = (*fields)[1].substr(0, (*fields)[1].find(' '));
        status.nodeList = (*fields)[2] == "None assigned" ? std::string() : (*fields)[2];
        status.exitCode = (*fields)[3];
    }
    return status;
}

std::string describeSlurmJobStatus(const SlurmJobStatus &status)
{
    std::string line = "Slurm job " + status.jobId + ": " + status.state;
    // squeue's reason is "None" once nothing holds the job back.
    if (status.state == "PENDING" && !status.reason.empty() && status.reason != "None")
        line += " (" + status.reason + ")";
    else if (!status.nodeList.empty())
        line += " on " + status.nodeList;
    return line;
}

bool slurmJobIsOver(const std::string &state)
{
    for (const char *over : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                             "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
        if (state == over)
            return true;
    return false;
}

std::vector<SlurmPartition> parseScontrolPartitions(const std::string &output)
{
    std::vector<SlurmPartition> partitions;
    for (const std::string &line : linesOf(output)) {
        if (line.rfind("PartitionName=", 0) != 0)
            continue;
        SlurmPartition p;
        std::istringstream words(line);
        for (std::string word; words >> word;) {
            const size_t equals = word.find('=');
            if (equals == std::string::npos)
                continue;
            const std::string key = word.substr(0, equals);
            const std::string value = word.substr(equals + 1);
            if (key == "PartitionName")
                p.name = value;
            else if (key == "State")
                p.state = value;
            else if (key == "Default")
                p.isDefault = value == "YES";
            else if (key == "TotalNodes")
                p.totalNodes = numberOr(value, 0);
            else if (key == "TotalCPUs")
                p.totalCpus = numberOr(value, 0);
            else if (key == "MaxNodes")
                p.maxNodes = numberOr(value, 0);
            else if (key == "MaxTime")
                p.maxTime = value;
            else if (key == "Nodes")
                p.nodes = value;
        }
        partitions.push_back(std::move(p));
    }
    return partitions;
}

std::optional<std::string> slurmJobDoesNotFit(const ClusterPlan &plan, const SlurmSettings &settings,
                                              const SlurmPartition &partition)
{
    const int numTasks = plan.cluster.numPs() + plan.cluster.numWorkers();
    const std::string name = "partition " + partition.name;
    if (partition.state != "UP")
        return name + " is " + partition.state + ", not UP: it starts no job; pick another (sinfo lists them)";
    if (partition.totalNodes == 0)
        return name + " has no nodes";
    if (settings.nodes > partition.totalNodes)
        return "the job asks for " + std::to_string(settings.nodes) + " nodes, " + name + " has "
               + std::to_string(partition.totalNodes) + ": ask for fewer nodes (0 lets Slurm choose)";
    if (partition.maxNodes > 0 && settings.nodes > partition.maxNodes)
        return "the job asks for " + std::to_string(settings.nodes) + " nodes, " + name + " allows "
               + std::to_string(partition.maxNodes) + " per job: ask for fewer";
    if (partition.totalCpus > 0 && numTasks > partition.totalCpus)
        return "the job's " + std::to_string(numTasks) + " tasks need a CPU each, " + name + " has "
               + std::to_string(partition.totalCpus) + ": design a smaller cluster or pick a larger partition";
    return std::nullopt;
}

} // namespace parasync
