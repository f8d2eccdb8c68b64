// parasync-node: one task (ps or worker) of a Parasync cluster, started the
// way the seeds start a TensorFlow task:
//   parasync-node --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --job_name=ps --task_index=0
// and the same for --job_name=worker --task_index=0 and 1.
#include "wire/cluster_control.h"
#include "wire/cluster_token.h"
#include "base/error.h"
#include "node/network_probe.h"
#include "config/node_options.h"
#include "node/ps_task.h"
#include "wire/rpc.h"
#include "base/version.h"
#include "node/worker_task.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <string>
#include <sys/time.h>
#include <thread>
#include <vector>

namespace {

std::mutex g_outputMutex;

// One line per event, flushed at once: the app and `tail -f` read it live.
void logLine(const std::string &line)
{
    timeval now{};
    ::gettimeofday(&now, nullptr);
    tm local{};
    ::localtime_r(&now.tv_sec, &local);
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "%02d:%02d:%02d.%03ld", local.tm_hour, local.tm_min, local.tm_sec,
                  long(now.tv_usec / 1000));
    std::lock_guard lock(g_outputMutex);
    std::fprintf(stdout, "%s %s\n", stamp, line.c_str());
    std::fflush(stdout);
}

// SIGINT/SIGTERM become a clean stop (a worker leaves its streams, a ps
// shuts down), handled on a thread of its own rather than in a signal handler.
template<typename Task>
std::thread watchSignals(Task &task, const sigset_t &signals)
{
    return std::thread([&task, signals] {
        int signal = 0;
        if (::sigwait(&signals, &signal) == 0 && signal != SIGUSR2)
            task.requestStop(std::string("received ") + (signal == SIGINT ? "SIGINT" : "SIGTERM"));
    });
}

template<typename Task>
int runTask(Task &task, const sigset_t &signals)
{
    task.start();
    // However run() ends, an exception included, the signal thread is
    // released (SIGUSR2 is ours alone) and joined: a joinable std::thread
    // destroyed on the way out would abort the process instead of letting
    // main() report the error.
    struct SignalThread
    {
        std::thread thread;
        ~SignalThread()
        {
            ::pthread_kill(thread.native_handle(), SIGUSR2);
            thread.join();
        }
    } watcher{watchSignals(task, signals)};
    return task.run();
}

std::optional<std::string> flagValue(const std::vector<std::string> &args, const std::string &name)
{
    for (const auto &arg : args) {
        if (arg == "--" + name)
            return std::string();
        if (arg.rfind("--" + name + "=", 0) == 0)
            return arg.substr(name.size() + 3);
    }
    return std::nullopt;
}

// `parasync-node --ps_hosts=H:P --status` and `... --set_mode=ssp [--staleness=N]
// [--replicas_to_aggregate=N] [--total_num_replicas=N]`: control calls on a
// running cluster's ps:0, for users without the desktop app.
int runControlCommand(const std::vector<std::string> &args)
{
    const auto hosts = flagValue(args, "ps_hosts");
    if (!hosts || hosts->empty())
        throw parasync::InputError("--status and --set_mode talk to ps:0: give its address with --ps_hosts=HOST:PORT");
    const std::string ps0 = hosts->substr(0, hosts->find(','));
    parasync::RpcSettings rpc = parasync::rpcSettingsFor(parasync::parseConnectionOptions(args), false);
    rpc.clusterToken = parasync::resolveClusterToken(flagValue(args, "cluster_token_file").value_or(""));
    auto status = parasync::getClusterStatus(ps0, rpc);
    if (const auto mode = flagValue(args, "set_mode")) {
        // Numbers not given keep their current values.
        parasync::proto::ModeConfig config = status.mode();
        config.set_mode(parasync::parseUpdateMode(*mode));
        auto number = [&](const char *name, auto setter) {
            if (const auto value = flagValue(args, name)) {
                try {
                    (config.*setter)(std::stoi(*value));
                } catch (const std::exception &) {
                    throw parasync::InputError(std::string("--") + name + "=" + *value + " is not a number");
                }
            }
        };
        number("staleness", &parasync::proto::ModeConfig::set_staleness);
        number("replicas_to_aggregate", &parasync::proto::ModeConfig::set_replicas_to_aggregate);
        number("total_num_replicas", &parasync::proto::ModeConfig::set_total_num_replicas);
        const auto response = parasync::setClusterMode(ps0, config, "parasync-node --set_mode", rpc);
        std::printf("mode is now %s, from global step %lld\n", parasync::describeMode(response.mode()).c_str(),
                    static_cast<long long>(response.global_step()));
        return 0;
    }
    std::fputs(parasync::formatClusterStatus(status).c_str(), stdout);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    parasync::prepareGrpcProcess();
    // Block the stop signals in every thread gRPC will start; one thread waits for them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR2);
    ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    const std::vector<std::string> args(argv, argv + argc);
    const char *tfConfig = std::getenv("TF_CONFIG");
    try {
        if (flagValue(args, "status") || flagValue(args, "set_mode"))
            return runControlCommand(args);
        // The pre-flight's checks of this host's ports and routes (network_probe.h).
        if (parasync::isNetworkCheckCommand(args))
            return parasync::runNetworkCheckCommand(args);
        const auto options = parasync::parseNodeOptions(args, tfConfig ? tfConfig : "");
        if (options.help) {
            std::fputs(parasync::nodeHelpText().c_str(), stdout);
            return 0;
        }
        if (options.version) {
            std::printf("%s\n", parasync::nodeVersionLine().c_str());
            return 0;
        }
        if (options.generateToken) {
            const std::string token = parasync::generateClusterToken();
            if (options.clusterTokenFile.empty()) {
                std::printf("%s\n", token.c_str());
            } else {
                parasync::writeClusterTokenFile(options.clusterTokenFile, token);
                std::printf("wrote a new cluster token to %s (mode 0600)\n", options.clusterTokenFile.c_str());
            }
            return 0;
        }
        parasync::RpcSettings rpc = parasync::rpcSettingsFor(options.connection, true);
        rpc.clusterToken = parasync::resolveClusterToken(options.clusterTokenFile);
        const auto &own = options.cluster.address(options.task);
        if (rpc.tls.enabled())
            parasync::checkCertificateNames(rpc.tls.certPem, own.host, "--tls_cert=" + options.connection.tlsCert);
        // Mutual TLS authenticates every caller as the token does.
        if (!own.isLoopback() && rpc.clusterToken.empty() && !rpc.tls.mutual) {
            if (!options.insecure)
                throw parasync::InputError(
                    options.task.toString() + " would serve " + own.toString()
                    + ", which is not a loopback address, without a cluster token: anyone who reaches it could "
                      "steer the cluster. Give a token (parasync-node --generate_token --cluster_token_file=FILE, "
                      "then --cluster_token_file=FILE for every task, or PARASYNC_CLUSTER_TOKEN), use mutual TLS "
                      "(--tls_mutual), or pass "
                      "--insecure if the network is yours alone");
            logLine("warning: " + options.task.toString() + " serves " + own.toString()
                    + " without a cluster token (--insecure): anyone who can reach it can steer the cluster");
        }
        if (options.task.job == parasync::JobName::Ps) {
            parasync::PsTask task(options, rpc, logLine);
            return runTask(task, signals);
        }
        parasync::WorkerTask task(options, rpc, logLine);
        return runTask(task, signals);
    } catch (const parasync::InputError &e) {
        std::fprintf(stderr, "parasync-node: %s\n", e.what());
        return 2;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "parasync-node: error: %s\n", e.what());
        return 1;
    }
}
