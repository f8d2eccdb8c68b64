#include "config/slurm_environment.h"

#include "base/error.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

extern char **environ;

namespace parasync {

namespace {

constexpr uint64_t kMaxRangeNumber = 999999999; // Slurm's own limit is far below what a node name holds

// One bracket group's numbers, each with its zero padding: "01-03,7".
std::vector<std::string> expandRanges(const std::string &ranges, const std::string &item, const std::string &origin)
{
    const auto fail = [&](const std::string &what) {
        throw InputError(origin + "='" + item + "': " + what
                         + "; a node list reads like node[01-03,07],gpu5 (Slurm's hostlist syntax)");
    };
    std::vector<std::string> numbers;
    size_t start = 0;
    while (start <= ranges.size()) {
        const size_t end = std::min(ranges.find(',', start), ranges.size());
        const std::string range = ranges.substr(start, end - start);
        if (range.empty())
            fail("an empty range inside '[" + ranges + "]'");
        const size_t dash = range.find('-');
        const std::string low = range.substr(0, dash);
        const std::string high = dash == std::string::npos ? low : range.substr(dash + 1);
        const auto number = [&](const std::string &text) {
            uint64_t value = 0;
            const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
            if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
                fail("'" + range + "' is not a number or a range of numbers like 01-03");
            if (value > kMaxRangeNumber)
                fail("'" + text + "' is too large a node number");
            return value;
        };
        const uint64_t first = number(low);
        const uint64_t last = number(high);
        if (last < first)
            fail("the range '" + range + "' runs backwards");
        if (last - first >= kMaxSlurmHosts || numbers.size() + (last - first) >= kMaxSlurmHosts)
            fail("more than " + std::to_string(kMaxSlurmHosts) + " node names");
        // Slurm pads every number of a range to the width of its lower bound.
        const size_t width = low.size();
        for (uint64_t n = first; n <= last; ++n) {
            std::string digits = std::to_string(n);
            if (digits.size() < width)
                digits.insert(0, width - digits.size(), '0');
            numbers.push_back(std::move(digits));
        }
        start = end + 1;
    }
    return numbers;
}

// One name of the list, with any number of bracket groups: "r[1-2]n[01-02]".
void expandItem(const std::string &item, const std::string &origin, std::vector<std::string> *hosts)
{
    std::vector<std::string> names{std::string()};
    size_t at = 0;
    while (at < item.size()) {
        const size_t open = item.find('[', at);
        const std::string literal = item.substr(at, open == std::string::npos ? std::string::npos : open - at);
        if (literal.find(']') != std::string::npos)
            throw InputError(origin + "='" + item + "': a ']' without its '['");
        for (std::string &name : names)
            name += literal;
        if (open == std::string::npos)
            break;
        const size_t close = item.find(']', open);
        if (close == std::string::npos)
            throw InputError(origin + "='" + item + "': a '[' without its ']'");
        const std::string ranges = item.substr(open + 1, close - open - 1);
        if (ranges.find('[') != std::string::npos)
            throw InputError(origin + "='" + item + "': brackets inside brackets");
        const std::vector<std::string> numbers = expandRanges(ranges, item, origin);
        if (names.size() * numbers.size() + hosts->size() > kMaxSlurmHosts)
            throw InputError(origin + "='" + item + "': more than " + std::to_string(kMaxSlurmHosts) + " node names");
        std::vector<std::string> product;
        product.reserve(names.size() * numbers.size());
        for (const std::string &name : names)
            for (const std::string &number : numbers)
                product.push_back(name + number);
        names = std::move(product);
        at = close + 1;
    }
    for (std::string &name : names) {
        for (const char c : name)
            if (c == ' ' || c == '\t' || c == '\n' || c == ':' || c == '/' || c == '(' || c == ')')
                throw InputError(origin + "='" + item + "': '" + std::string(1, c) + "' cannot be part of a node name");
        hosts->push_back(std::move(name));
    }
}

int parseCount(const std::string &text, const std::string &what, const std::string &origin, const std::string &whole)
{
    int value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
        throw InputError(origin + "='" + whole + "': '" + text + "' is not " + what);
    return value;
}

const std::string *find(const SlurmVariables &variables, const char *name)
{
    const auto it = variables.find(name);
    return it == variables.end() || it->second.empty() ? nullptr : &it->second;
}

// The first of `names` that is set, with its name; InputError when none is.
std::pair<std::string, std::string> required(const SlurmVariables &variables, std::initializer_list<const char *> names)
{
    for (const char *name : names)
        if (const std::string *value = find(variables, name))
            return {name, *value};
    std::string list;
    for (const char *name : names)
        list += (list.empty() ? "" : " or ") + std::string(name);
    throw InputError(list
                     + " is not set: parasync-node --slurm takes its cluster from a Slurm job step; run it "
                       "with srun inside a job (sbatch or salloc), or give --ps_hosts/--worker_hosts instead");
}

} // namespace

std::vector<std::string> expandSlurmHostList(const std::string &text, const std::string &origin)
{
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
        throw InputError(origin + " is empty: it should name the job's nodes, like node[01-03]");
    const std::string list = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
    std::vector<std::string> hosts;
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= list.size(); ++i) {
        if (i < list.size() && list[i] == '[')
            ++depth;
        else if (i < list.size() && list[i] == ']')
            depth = std::max(0, depth - 1);
        if (i < list.size() && (list[i] != ',' || depth > 0))
            continue;
        const std::string item = list.substr(start, i - start);
        if (item.empty())
            throw InputError(origin + "='" + list + "': an empty name between commas");
        expandItem(item, origin, &hosts);
        start = i + 1;
    }
    return hosts;
}

std::vector<int> expandSlurmTasksPerNode(const std::string &text, const std::string &origin)
{
    std::vector<int> counts;
    size_t start = 0;
    if (text.empty())
        throw InputError(origin + " is empty: it should give the tasks on each node, like 2(x3),1");
    while (start <= text.size()) {
        const size_t end = std::min(text.find(',', start), text.size());
        const std::string entry = text.substr(start, end - start);
        int tasks = 0;
        int repeat = 1;
        const size_t open = entry.find("(x");
        if (open != std::string::npos) {
            if (entry.back() != ')')
                throw InputError(origin + "='" + text + "': '" + entry + "' should read like 2(x3)");
            tasks = parseCount(entry.substr(0, open), "a number of tasks", origin, text);
            repeat = parseCount(entry.substr(open + 2, entry.size() - open - 3), "a number of nodes", origin, text);
        } else {
            tasks = parseCount(entry, "a number of tasks", origin, text);
        }
        if (tasks < 1 || repeat < 1)
            throw InputError(origin + "='" + text + "': '" + entry + "' counts no task or no node");
        if (counts.size() + size_t(repeat) > kMaxSlurmHosts)
            throw InputError(origin + "='" + text + "': more than " + std::to_string(kMaxSlurmHosts) + " nodes");
        counts.insert(counts.end(), size_t(repeat), tasks);
        start = end + 1;
    }
    return counts;
}

SlurmVariables slurmVariablesFromEnvironment()
{
    SlurmVariables variables;
    for (char **entry = environ; entry && *entry; ++entry) {
        const char *text = *entry;
        if (std::strncmp(text, "SLURM", 5) != 0)
            continue;
        const char *equals = std::strchr(text, '=');
        if (equals)
            variables[std::string(text, equals)] = equals + 1;
    }
    return variables;
}

bool insideSlurmTask(const SlurmVariables &variables)
{
    return find(variables, "SLURM_PROCID") != nullptr;
}

TaskId slurmTaskOfRank(int rank, int numTasks, const SlurmLayout &layout)
{
    (void)numTasks;
    return rank < layout.numPs ? TaskId{JobName::Ps, rank} : TaskId{JobName::Worker, rank - layout.numPs};
}

SlurmTask slurmTaskFromEnvironment(const SlurmVariables &variables, const SlurmLayout &layout)
{
    if (layout.numPs < 1)
        throw InputError("--slurm_num_ps=" + std::to_string(layout.numPs) + ": a cluster needs at least one ps");
    const auto [rankName, rankText] = required(variables, {"SLURM_PROCID"});
    const auto [nodesName, nodesText] = required(variables, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
    const auto [perNodeName, perNodeText] = required(variables, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});

    const std::vector<std::string> nodes = expandSlurmHostList(nodesText, nodesName);
    const std::vector<int> perNode = expandSlurmTasksPerNode(perNodeText, perNodeName);
    if (perNode.size() != nodes.size())
        throw InputError(perNodeName + "='" + perNodeText + "' counts tasks on " + std::to_string(perNode.size())
                         + " node(s) but " + nodesName + "='" + nodesText + "' names " + std::to_string(nodes.size())
                         + ": both must describe the same job step (run parasync-node with srun)");
    // Every task's host and port, in rank order (block distribution).
    std::vector<HostPort> addresses;
    std::vector<int> localIds;
    int largestLocal = 0;
    for (size_t n = 0; n < nodes.size(); ++n)
        for (int local = 0; local < perNode[n]; ++local) {
            largestLocal = std::max(largestLocal, local);
            if (int(layout.portBase) + local > 65535)
                throw InputError("--slurm_port_base=" + std::to_string(layout.portBase) + " with "
                                 + std::to_string(perNode[n]) + " tasks on node " + nodes[n]
                                 + " needs ports beyond 65535: give a lower --slurm_port_base");
            addresses.push_back(HostPort{nodes[n], uint16_t(layout.portBase + local)});
            localIds.push_back(local);
            if (addresses.size() > kMaxSlurmHosts)
                throw InputError(perNodeName + "='" + perNodeText + "': more than " + std::to_string(kMaxSlurmHosts)
                                 + " tasks");
        }
    const int numTasks = int(addresses.size());
    if (const auto total = find(variables, "SLURM_STEP_NUM_TASKS") ? find(variables, "SLURM_STEP_NUM_TASKS")
                                                                   : find(variables, "SLURM_NTASKS")) {
        const int declared = parseCount(*total, "a number of tasks", "SLURM_NTASKS", *total);
        if (declared != numTasks)
            throw InputError(perNodeName + "='" + perNodeText + "' adds up to " + std::to_string(numTasks)
                             + " tasks, but the step has " + *total
                             + ": run parasync-node with srun inside the job, not in the batch script itself");
    }
    if (numTasks <= layout.numPs)
        throw InputError("the Slurm job step has " + std::to_string(numTasks) + " task(s), but --slurm_num_ps="
                         + std::to_string(layout.numPs) + " takes " + (numTasks < layout.numPs ? "more than " : "")
                         + "all of them for ps tasks and leaves no worker: ask for at least "
                         + std::to_string(layout.numPs + 1) + " tasks (sbatch --ntasks="
                         + std::to_string(layout.numPs + 1) + ") or give a smaller --slurm_num_ps");
    const int rank = parseCount(rankText, "a task rank", rankName, rankText);
    if (rank < 0 || rank >= numTasks)
        throw InputError("SLURM_PROCID=" + rankText + " is not a rank of the step's " + std::to_string(numTasks)
                         + " tasks (0-" + std::to_string(numTasks - 1) + ")");

    SlurmTask result;
    result.rank = rank;
    result.host = addresses[size_t(rank)].host;
    // Rank order only gives hosts when each node's tasks are consecutive
    // ranks; with another distribution two tasks would claim one address.
    const std::string *localId = find(variables, "SLURM_LOCALID");
    const std::string *nodeName = find(variables, "SLURMD_NODENAME");
    if ((localId && parseCount(*localId, "a local task index", "SLURM_LOCALID", *localId) != localIds[size_t(rank)])
        || (nodeName && *nodeName != result.host))
        throw InputError("rank " + rankText + " runs on " + (nodeName ? *nodeName : std::string("its node"))
                         + (localId ? " as local task " + *localId : std::string())
                         + ", but block distribution puts it on " + result.host + " as local task "
                         + std::to_string(localIds[size_t(rank)])
                         + ": run the step with srun --distribution=block (the tasks' addresses follow from it)");
    for (int r = 0; r < numTasks; ++r) {
        const TaskId task = slurmTaskOfRank(r, numTasks, layout);
        (task.job == JobName::Ps ? result.cluster.ps : result.cluster.workers).push_back(addresses[size_t(r)]);
    }
    result.task = slurmTaskOfRank(rank, numTasks, layout);
    return result;
}

HostPort slurmPs0Address(const std::string &nodeList, const SlurmLayout &layout)
{
    const std::vector<std::string> nodes = expandSlurmHostList(nodeList, "the job's node list");
    return HostPort{nodes.front(), layout.portBase};
}

} // namespace parasync
