// parseClusterFile (the app's saved cluster, --cluster_file) on arbitrary
// text. An accepted file must read back the same after writeClusterFile, the
// way the app saves what it loaded.
#include "cluster_spec.h"
#include "error.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

using namespace parasync;

namespace {

std::string g_savedPath;

void checkRoundTrip(const ClusterFile &file)
{
    try {
        writeClusterFile(g_savedPath, file);
        const ClusterFile again = readClusterFile(g_savedPath);
        if (!(again.cluster == file.cluster) || again.training != file.training) {
            std::fprintf(stderr, "the cluster file reads back differently after writeClusterFile\n");
            std::abort();
        }
    } catch (const InputError &e) {
        std::fprintf(stderr, "an accepted cluster file, written back, is refused: %s\n", e.what());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    char directory[] = "/tmp/parasync-fuzz-cluster-file-XXXXXX";
    if (!::mkdtemp(directory))
        std::abort();
    g_savedPath = std::string(directory) + "/cluster.json";
    std::atexit([] { std::filesystem::remove_all(std::filesystem::path(g_savedPath).parent_path()); });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        checkRoundTrip(parseClusterFile(text, "fuzz.json"));
    } catch (const InputError &) {
    }
    return 0;
}
