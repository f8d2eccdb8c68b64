// Slurm's hostlist and tasks-per-node syntaxes, and a whole job step's
// environment, on arbitrary text: the input's lines are SLURM_STEP_NODELIST,
// SLURM_STEP_TASKS_PER_NODE, SLURM_PROCID and the ps count. Every step
// accepted must give a valid cluster in which the task is its rank's.
#include "base/error.h"
#include "config/slurm_environment.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

using namespace parasync;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const auto hosts = expandSlurmHostList(text, "SLURM_STEP_NODELIST");
        if (hosts.empty() || hosts.size() > kMaxSlurmHosts)
            std::abort();
    } catch (const InputError &) {
    }
    try {
        (void)expandSlurmTasksPerNode(text, "SLURM_STEP_TASKS_PER_NODE");
    } catch (const InputError &) {
    }

    std::istringstream lines(text);
    std::string nodes, perNode, rank, numPs;
    std::getline(lines, nodes);
    std::getline(lines, perNode);
    std::getline(lines, rank);
    std::getline(lines, numPs);
    const SlurmVariables variables{
        {"SLURM_STEP_NODELIST", nodes}, {"SLURM_STEP_TASKS_PER_NODE", perNode}, {"SLURM_PROCID", rank}};
    SlurmLayout layout;
    layout.numPs = numPs.empty() ? 1 : int(uint8_t(numPs[0]) % 8);
    try {
        const SlurmTask task = slurmTaskFromEnvironment(variables, layout);
        task.cluster.validateTask(task.task);
        if (!(task.cluster.address(task.task).host == task.host)) {
            std::fprintf(stderr, "rank %d is %s on %s, but its address names %s\n", task.rank,
                         task.task.toString().c_str(), task.host.c_str(),
                         task.cluster.address(task.task).toString().c_str());
            std::abort();
        }
    } catch (const InputError &) {
    }
    return 0;
}
