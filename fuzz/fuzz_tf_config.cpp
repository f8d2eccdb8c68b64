// parseTfConfig and parseTfConfigCluster (the TF_CONFIG environment
// variable) on arbitrary text. An accepted cluster must read back the same
// from its toJson(), which the app and cluster.json hand to other tasks.
#include "base/error.h"
#include "config/cluster_spec.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace parasync;

namespace {

void checkRoundTrip(const ClusterSpec &spec)
{
    const std::string json = "{\"cluster\": " + spec.toJson() + "}";
    try {
        if (!(parseTfConfigCluster(json) == spec)) {
            std::fprintf(stderr, "the cluster reads back differently from %s\n", json.c_str());
            std::abort();
        }
    } catch (const InputError &e) {
        std::fprintf(stderr, "the accepted cluster's JSON %s is refused: %s\n", json.c_str(), e.what());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const TfConfig config = parseTfConfig(text);
        config.cluster.validateTask(config.task);
        (void)config.cluster.address(config.task);
        checkRoundTrip(config.cluster);
    } catch (const InputError &) {
    }
    try {
        checkRoundTrip(parseTfConfigCluster(text));
    } catch (const InputError &) {
    }
    return 0;
}
