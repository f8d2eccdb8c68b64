// parasync-node: one task (ps or worker) of a Parasync cluster, started the
// way the seeds start a TensorFlow task:
//   parasync-node --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --job_name=ps --task_index=0
// and the same for --job_name=worker --task_index=0 and 1.
#include "base/error.h"
#include "base/step_memory.h"
#include "base/version.h"
#include "config/control_command.h"
#include "config/node_options.h"
#include "config/slurm_environment.h"
#include "node/network_probe.h"
#include "node/ps_task.h"
#include "node/task_metrics.h"
#include "node/worker_task.h"
#include "wire/cluster_control.h"
#include "wire/cluster_token.h"
#include "wire/ps_server.h"
#include "wire/rpc.h"
#include "wire/serving_security.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
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

} // namespace

int main(int argc, char **argv)
{
    parasync::keepStepBuffersMapped();
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
        if (const auto command = parasync::parseControlCommand(args)) {
            std::fputs(parasync::runControlCommand(*command).c_str(), stdout);
            return 0;
        }
        // The pre-flight's checks of this host's ports and routes (network_probe.h).
        if (parasync::isNetworkCheckCommand(args))
            return parasync::runNetworkCheckCommand(args);
        // Inside a Slurm job step (srun), the step gives the cluster (slurm_environment.h).
        const auto options
            = parasync::parseNodeOptions(args, tfConfig ? tfConfig : "", parasync::slurmVariablesFromEnvironment());
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
        const parasync::RpcSettings rpc = parasync::servingRpcSettings(options, logLine);
        if (options.task.isPs()) {
            // The task's logic, and around it its gRPC server and its calls to
            // the other ps processes.
            parasync::PsTask task(options, rpc, logLine, parasync::grpcPsTransport(options, rpc, logLine));
            // Declared after the task: stopped, its scrapes ended, before the task goes.
            const auto metrics = parasync::serveTaskMetrics(
                options, [&task](parasync::ExpositionFormat format) { return task.metricsText(format); }, logLine);
            return runTask(task, signals);
        }
        parasync::WorkerTask task(options, rpc, logLine);
        const auto metrics = parasync::serveTaskMetrics(
            options, [&task](parasync::ExpositionFormat format) { return task.metricsText(format); }, logLine);
        return runTask(task, signals);
    } catch (const parasync::InputError &e) {
        std::fprintf(stderr, "parasync-node: %s\n", e.what());
        return 2;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "parasync-node: error: %s\n", e.what());
        return 1;
    }
}
