#include "wire/serving_security.h"

#include "base/error.h"
#include "wire/cluster_token.h"
#include "wire/tls.h"

namespace parasync {

std::string checkServingSecurity(const TaskId &task, const HostPort &address, const RpcSettings &rpc, bool insecure)
{
    // Mutual TLS authenticates every caller as the token does.
    if (address.isLoopback() || !rpc.clusterToken.empty() || rpc.tls.mutual)
        return {};
    if (!insecure)
        throw InputError(task.toString() + " would serve " + address.toString()
                         + ", which is not a loopback address, without a cluster token: anyone who reaches it could "
                           "steer the cluster. Give a token (parasync-node --generate_token --cluster_token_file=FILE, "
                           "then --cluster_token_file=FILE for every task, or "
                         + kTokenEnvironmentVariable
                         + "), use mutual TLS (--tls_mutual), or pass --insecure if the network is yours alone");
    return task.toString() + " serves " + address.toString()
           + " without a cluster token (--insecure): anyone who can reach it can steer the cluster";
}

RpcSettings servingRpcSettings(const NodeOptions &options, const std::function<void(const std::string &)> &log)
{
    RpcSettings rpc = rpcSettingsFor(options.connection, true);
    rpc.clusterToken = resolveClusterToken(options.clusterTokenFile);
    const HostPort &own = options.cluster.address(options.task);
    if (rpc.tls.enabled())
        checkCertificateNames(rpc.tls.certPem, own.host, "--tls_cert=" + options.connection.tlsCert);
    if (const std::string warning = checkServingSecurity(options.task, own, rpc, options.insecure); !warning.empty())
        log("warning: " + warning);
    return rpc;
}

} // namespace parasync
