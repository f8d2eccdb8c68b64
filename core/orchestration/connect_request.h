#pragma once

// What the app needs to watch a cluster started elsewhere: ps:0's address,
// its run directory, and how to get in (token, TLS files). The connect dialog
// fills one, the headless runner reads one from flags; both hand its
// rpcSettings() to ClusterWatcher::connectTo.

#include "config/task_options.h"
#include "wire/rpc_settings.h"

#include <QString>

namespace parasync {

struct ConnectRequest
{
    QString address;              // ps:0, host:port
    QString runDirectory;         // optional: its --logdir, readable here
    QString tokenFile;            // optional: a 0600 file holding the token
    QString token;                // optional: the token itself (never saved)
    ConnectionOptions connection; // TLS files

    // The RPC settings: the token from `token`, else `tokenFile`, else
    // $PARASYNC_CLUSTER_TOKEN; TLS files read and checked. Throws
    // InputError naming what to fix.
    RpcSettings rpcSettings() const;
};

} // namespace parasync
