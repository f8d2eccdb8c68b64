// parasync-node: one task (ps or worker) of a Parasync cluster, started the
// way the seeds start a TensorFlow task:
//   parasync-node --ps_hosts=127.0.0.1:2222 --worker_hosts=127.0.0.1:2223,127.0.0.1:2224 --job_name=ps --task_index=0
// and the same for --job_name=worker --task_index=0 and 1.
#include "error.h"
#include "node_options.h"
#include "ps_task.h"
#include "rpc.h"
#include "worker_task.h"

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
    auto watcher = watchSignals(task, signals);
    const int code = task.run();
    // Release the signal thread (SIGUSR2 is ours alone).
    ::pthread_kill(watcher.native_handle(), SIGUSR2);
    watcher.join();
    return code;
}

} // namespace

int main(int argc, char **argv)
{
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
        const auto options = parasync::parseNodeOptions(args, tfConfig ? tfConfig : "");
        if (options.help) {
            std::fputs(parasync::nodeHelpText().c_str(), stdout);
            return 0;
        }
        if (options.version) {
            std::printf("parasync-node %s\n", PARASYNC_VERSION);
            return 0;
        }
        parasync::RpcSettings rpc;
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
