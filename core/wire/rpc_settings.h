#pragma once

// What a connection to a cluster is made with -- token, TLS material, message
// limit, keepalive -- without gRPC's headers, so that the app's orchestration
// and widgets can carry it to the watcher without compiling gRPC.

#include "config/task_options.h"
#include "wire/tls.h"

#include <string>

namespace parasync {

// Everything a task needs to talk to, and serve, the cluster. One place for
// channel and server settings, so that authentication (a cluster token in
// every call's metadata) and TLS are added here, not at every call site.
struct RpcSettings
{
    // Sent as "parasync-cluster-token" metadata with every call when set.
    std::string clusterToken;
    // Largest message sent or accepted, in bytes (a 1M-parameter step is
    // ~4 MB); larger ones fail with RESOURCE_EXHAUSTED, nothing else.
    int maxMessageBytes = ConnectionOptions().maxMessageBytes;
    // HTTP/2 keepalive pings: a peer that stops answering (a cut link, a
    // frozen host; a killed process is seen at once) is taken for gone after
    // about twice this.
    int heartbeatMs = ConnectionOptions().heartbeatMs;
    // Every channel and server is TLS when set (plaintext otherwise).
    TlsMaterial tls;
};

// The settings the connection flags ask for (TLS files read and checked);
// the token is set apart. Throws InputError (see loadTlsMaterial).
RpcSettings rpcSettingsFor(const ConnectionOptions &options, bool serving);

} // namespace parasync
