#pragma once

// A task's cluster and its own place in it, read from the environment Slurm
// gives every task of a job step (srun), as TensorFlow's
// tf.distribute.cluster_resolver.SlurmClusterResolver reads it: the step's
// node list and tasks per node give every task's host in rank order (block
// distribution: a node's tasks are consecutive ranks), a port base plus the
// task's local index on its node gives its port, and the first N ranks are
// the ps tasks, the rest the workers:
//
//   SLURM_STEP_NODELIST=node[01-02]  SLURM_STEP_TASKS_PER_NODE=2(x2)
//   --slurm_num_ps=1 --slurm_port_base=8888
//   -> ps:0 node01:8888, worker:0 node01:8889, worker:1 node02:8888, worker:2 node02:8889
//
// Data and parsing only: the caller hands the variables in (the node's main
// reads them from its environment; tests and the fuzzer pass tables).

#include "config/cluster_spec.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parasync {

// Slurm's compressed host list, as in SLURM_JOB_NODELIST and squeue's %N:
// "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5. A range keeps
// the zero padding of its lower bound ("[08-10]": node08 node09 node10);
// several bracket groups in one name multiply ("r[1-2]n[1-2]": r1n1 r1n2
// r2n1 r2n2). Order and duplicates are kept, as Slurm keeps them. Throws
// InputError naming `origin` (e.g. "SLURM_STEP_NODELIST") and the fault: an
// unclosed '[', a range that runs backwards, an empty name, more than
// kMaxSlurmHosts names.
std::vector<std::string> expandSlurmHostList(const std::string &text, const std::string &origin);
constexpr size_t kMaxSlurmHosts = 65536;

// Slurm's tasks per node, as in SLURM_STEP_TASKS_PER_NODE: "2(x3),1" ->
// 2 2 2 1. Throws InputError naming `origin` and the fault.
std::vector<int> expandSlurmTasksPerNode(const std::string &text, const std::string &origin);

// The Slurm variables of a task's environment: name -> value, SLURM_* only.
using SlurmVariables = std::map<std::string, std::string>;
// The SLURM_* variables of this process's environment.
SlurmVariables slurmVariablesFromEnvironment();
// Whether `variables` come from a task of a Slurm job (SLURM_PROCID is set).
bool insideSlurmTask(const SlurmVariables &variables);

// How the ranks of a step become ps and worker tasks.
struct SlurmLayout
{
    int numPs = 1;            // --slurm_num_ps: ranks 0..numPs-1 are ps:0..
    uint16_t portBase = 8888; // --slurm_port_base: SlurmClusterResolver's default
};

struct SlurmTask
{
    ClusterSpec cluster;
    TaskId task;
    std::string host; // the node this task runs on
    int rank = 0;     // SLURM_PROCID
};

// The cluster of the job step and this task's place in it. Reads
// SLURM_PROCID, SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST),
// SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE), SLURM_STEP_NUM_TASKS
// (else SLURM_NTASKS) and, to catch a distribution other than block,
// SLURM_LOCALID and SLURMD_NODENAME. Throws InputError saying what to fix: a
// step too small for the ps count, a node list that does not parse, tasks
// per node that do not add up to the step's tasks, a port out of range.
SlurmTask slurmTaskFromEnvironment(const SlurmVariables &variables, const SlurmLayout &layout);

// The task of rank `rank` in a step of `numTasks` tasks with `layout`.
TaskId slurmTaskOfRank(int rank, int numTasks, const SlurmLayout &layout);

// ps:0's address in a job step laid out by block distribution on `nodes`
// (squeue's %N for a running job): rank 0 runs on the first node, with
// the port base. Throws InputError when the list does not parse.
HostPort slurmPs0Address(const std::string &nodeList, const SlurmLayout &layout);

} // namespace parasync
