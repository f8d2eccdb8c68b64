// parseHostPort and parseHostList (--ps_hosts, --worker_hosts) on arbitrary
// text. Every address accepted must survive the trip through toString(),
// which is how cluster files and TF_CONFIG write it back.
#include "base/error.h"
#include "config/cluster_spec.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace parasync;

namespace {

void checkRoundTrip(const HostPort &address)
{
    (void)address.isLoopback();
    const std::string text = address.toString();
    HostPort again;
    try {
        again = parseHostPort(text);
    } catch (const InputError &e) {
        std::fprintf(stderr, "'%s' was accepted but its toString() '%s' is refused: %s\n", address.host.c_str(),
                     text.c_str(), e.what());
        std::abort();
    }
    if (!(again == address)) {
        std::fprintf(stderr, "'%s' reads back as host '%s' port %u\n", text.c_str(), again.host.c_str(),
                     unsigned(again.port));
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        checkRoundTrip(parseHostPort(text));
    } catch (const InputError &) {
    }
    try {
        const std::vector<HostPort> hosts = parseHostList(text, "--worker_hosts");
        for (const HostPort &address : hosts)
            checkRoundTrip(address);
        ClusterSpec spec;
        spec.ps = {hosts.front()};
        spec.workers.assign(hosts.begin() + 1, hosts.end());
        spec.validate();
    } catch (const InputError &) {
    }
    return 0;
}
