#pragma once

// A designed cluster as a Slurm batch script, and what Slurm's commands say
// back about a job and a partition. The script asks for one task per ps and
// worker and runs them as one srun job step in which every parasync-node
// takes its cluster and its task from the step's environment (--slurm, see
// config/slurm_environment.h): nothing in it names a host, so it runs on
// whatever nodes Slurm gives. Its own layer beside the formats, as the
// TFJob writer is: text in, text out, no process and no socket (the app's
// side that runs sbatch, squeue and scancel is orchestration/slurm_job.h).

#include "config/cluster_plan.h"
#include "config/slurm_environment.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

// What the person chooses about the job; the tasks come from the design.
struct SlurmSettings
{
    std::string jobName = "parasync";   // --job-name
    std::string partition;              // --partition; empty: the cluster's default
    std::string account;                // --account; empty: the user's default
    int nodes = 0;                      // --nodes; 0: as many as Slurm needs to place the tasks
    std::string timeLimit = "01:00:00"; // --time
    uint16_t portBase = 8888;           // --slurm_port_base of every task
    // parasync-node on the nodes: a path, or empty for "parasync-node" on
    // their PATH.
    std::string node;
    // Where the script, the job's output and each task's log go: a folder
    // every node can write and this machine can read (a shared file system).
    std::string outputDirectory;
    // The line `parasync-node --version` must print on every node (the
    // script's first step checks it); empty: not checked.
    std::string expectedVersion;

    std::string nodeProgram() const { return node.empty() ? std::string("parasync-node") : node; }
    SlurmLayout layout(const ClusterPlan &plan) const { return SlurmLayout{plan.cluster.numPs(), portBase}; }
};

// The file names the script gives Slurm, relative to the output directory;
// %j is the job id, %t a task's rank (srun's --output patterns).
std::string slurmJobOutputPattern();  // "parasync-%j.out": the batch script's own output
std::string slurmTaskOutputPattern(); // "parasync-%j-task%t.log": one per task
// The same with the job id and rank filled in.
std::string slurmJobOutputName(const std::string &jobId);
std::string slurmTaskOutputName(const std::string &jobId, int rank);

// The training flags of `plan` for worker `task` (or a ps), without the
// cluster or task flags that Slurm's step replaces (--ps_hosts, --job_name, ...).
std::vector<std::string> slurmNodeArguments(const ClusterPlan &plan, const TaskId &task);

// The batch script. Throws InputError naming the setting to fix: no output
// directory, a job name or partition Slurm would refuse, a time limit that
// is not Slurm's, a port base that leaves no room for the tasks, workers
// with a command of their own (the script runs parasync-node everywhere).
std::string slurmBatchScript(const ClusterPlan &plan, const SlurmSettings &settings);

// --- what Slurm's commands print -------------------------------------------

// `sbatch --parsable` prints "123" or "123;cluster". The job id, or
// nullopt when the text holds none.
std::optional<std::string> parseSbatchJobId(const std::string &output);

// A job as squeue or sacct describes it.
struct SlurmJobStatus
{
    std::string jobId;
    std::string state;    // PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, FAILED, TIMEOUT, ...
    std::string nodeList; // compressed hostlist of the nodes it got; empty while pending
    std::string reason;   // why it is pending ("Resources", "Priority"), or "None"
    std::string exitCode; // sacct's "0:0" (code:signal); empty from squeue
    bool known = false;   // false: neither command knows the job (yet, or any more)
};
// The squeue format the parser reads, for `squeue --noheader --states=all --format=...`.
std::string squeueFormat(); // "%i|%T|%N|%r"
SlurmJobStatus parseSqueueOutput(const std::string &output, const std::string &jobId);
// The sacct fields the parser reads, for `sacct --noheader --parsable2 --allocations --format=...`.
std::string sacctFormat(); // "JobID,State,NodeList,ExitCode"
SlurmJobStatus parseSacctOutput(const std::string &output, const std::string &jobId);
// The job's state in one line, as the window and the headless run show it:
// "Slurm job 12: PENDING (Resources)", "Slurm job 12: RUNNING on node[1-2]".
std::string describeSlurmJobStatus(const SlurmJobStatus &status);
// Whether the job is over and every process of it is gone: COMPLETED,
// CANCELLED, FAILED, TIMEOUT, ... but not COMPLETING (its nodes still clean up).
bool slurmJobIsOver(const std::string &state);

// A partition as `scontrol --oneliner show partition NAME` describes it.
struct SlurmPartition
{
    std::string name;
    std::string state; // UP, DOWN, DRAIN, INACTIVE
    bool isDefault = false;
    int totalNodes = 0;
    int totalCpus = 0;
    int maxNodes = 0;    // 0: unlimited
    std::string maxTime; // "UNLIMITED", "1-00:00:00"
    std::string nodes;   // hostlist
};
// Every partition of the output (one line each).
std::vector<SlurmPartition> parseScontrolPartitions(const std::string &output);

// Whether a job of `plan`'s tasks (one CPU each) with `settings` fits in
// `partition`: nullopt if it does, else what does not fit and what to do.
std::optional<std::string> slurmJobDoesNotFit(const ClusterPlan &plan, const SlurmSettings &settings,
                                              const SlurmPartition &partition);

} // namespace parasync
