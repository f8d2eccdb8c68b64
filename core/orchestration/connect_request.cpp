#include "orchestration/connect_request.h"

#include "wire/cluster_token.h"

namespace parasync {

RpcSettings ConnectRequest::rpcSettings() const
{
    RpcSettings settings = rpcSettingsFor(connection, false);
    settings.clusterToken = !token.trimmed().isEmpty()
                                ? checkClusterToken(token.trimmed().toStdString(), "the pasted token")
                                : resolveClusterToken(tokenFile.trimmed().toStdString());
    return settings;
}

} // namespace parasync
