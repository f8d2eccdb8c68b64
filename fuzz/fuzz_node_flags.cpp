// parseNodeOptions (parasync-node's command line and TF_CONFIG) on arbitrary
// arguments. The input is split at NUL bytes: the first piece is the value
// of TF_CONFIG (empty: unset), the others are the arguments after argv[0].
//
// --cluster_file reads a file, so the parser runs in a directory of its own
// holding two cluster files (good.json, bad.json), and inputs holding '/' are
// skipped: a path cannot leave that directory (to /dev/zero, say).
#include "base/error.h"
#include "config/node_options.h"
#include "engine/optimizer.h"
#include "engine/update_policy.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace parasync;

namespace {

std::string g_directoryPath;
int g_clusterFileDirectory = -1;

void writeText(const std::string &path, const char *text)
{
    std::ofstream(path) << text;
}

// Flags the parser accepts must not be refused later by the task it starts.
void checkEngineAccepts(const NodeOptions &options)
{
    try {
        OptimizerOptions optimizer;
        optimizer.name = options.training.optimizer;
        optimizer.learningRate = options.training.learningRate;
        (void)makeOptimizer(optimizer);
        UpdatePolicy::validate(options.training.mode, options.cluster.numWorkers());
    } catch (const InputError &e) {
        std::fprintf(stderr, "parseNodeOptions accepted flags the engine refuses: %s\n", e.what());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    char directory[] = "/tmp/parasync-fuzz-node-flags-XXXXXX";
    if (!::mkdtemp(directory))
        std::abort();
    const std::string dir = directory;
    writeText(dir + "/good.json",
              R"({"cluster": {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
                  "training": {"mode": "sync", "batch_size": 10, "issync": true, "learning_rate": 0.05}})");
    writeText(dir + "/bad.json", R"({"cluster": {"ps": ["127.0.0.1:2222"]}, "training": {"lerning_rate": 1}})");
    g_clusterFileDirectory = ::open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g_clusterFileDirectory < 0)
        std::abort();
    g_directoryPath = dir;
    std::atexit([] { std::filesystem::remove_all(g_directoryPath); });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (std::memchr(data, '/', size))
        return 0;
    std::vector<std::string> pieces(1);
    for (size_t i = 0; i < size; ++i) {
        if (data[i] == 0)
            pieces.emplace_back();
        else
            pieces.back().push_back(char(data[i]));
    }
    const std::string tfConfig = pieces.front();
    std::vector<std::string> args = pieces;
    args.front() = "parasync-node";

    const int workingDirectory = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (workingDirectory < 0 || ::fchdir(g_clusterFileDirectory) != 0)
        std::abort();
    try {
        const NodeOptions options = parseNodeOptions(args, tfConfig);
        if (options.help)
            (void)nodeHelpText();
        if (!options.help && !options.version && !options.generateToken) {
            (void)options.cluster.address(options.task);
            (void)options.training.toJson();
            (void)describeMode(options.training.mode);
            checkEngineAccepts(options);
        }
    } catch (const InputError &) {
    }
    if (::fchdir(workingDirectory) != 0)
        std::abort();
    ::close(workingDirectory);
    return 0;
}
