// Whole clusters of real parasync-node processes (issue 5, items 3 to 5):
//   throughput   applied updates/s for 1, 2, 4, 8 workers in async, sync and
//                ssp (staleness 4), demo model; and 1 ps vs 2 ps at 1,000,000
//                parameters;
//   accuracy     wall seconds for the demo to reach |w-2| < 0.05 and
//                |b-10| < 0.05 per mode, workers equal and with worker:1
//                slowed by 2 ms per step (TaskControl.SetStraggler);
//   telemetry    updates/s of one cluster with the app's ClusterWatcher
//                attached against none, in alternating windows;
//   probe        updates/s with the workers' staleness probe off, at its
//                default (every 100 steps) and every 10 steps (issue 32):
//                the demo with 2 and 8 workers and a 16-worker softmax, async;
//   replicated   updates/s with and without a backup for ps:0
//                (--ps_backup_hosts, issue 15): the demo model with 2 and 8
//                workers in async, sync and ssp, and 1,000,000 parameters;
//   many         1 ps + 8, 16, 32, 64 workers (issue 13), demo model at a
//                tenth of its learning rate, async, sync and ssp: rates, and
//                ps:0's CPU time per gradient, its resident memory and its
//                context switches per gradient.
// Repetitions are interleaved (every configuration once, then again) so that
// the load of this shared machine drifts over all of them alike. Raw samples
// go to the JSON file; bench/report.py makes the table.
//
//   bench_cluster [--quick] [--only=throughput,ps,accuracy,telemetry,probe,replicated,many] [--workers=1,2,4,8]
//                 [--many=8,16,32,64] [--repetitions=N] [--out=FILE]

#include "bench_support.h"
#include "orchestration/cluster_watcher.h"
#include "proto/parasync.grpc.pb.h"
#include "wire/rpc.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QThread>
#include <QTimer>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using namespace parasync;
using namespace Qt::StringLiterals;
using bench::BenchCluster;
using bench::ResultFile;

struct Mode
{
    std::string name; // "async", "sync", "ssp"
    QStringList flags;
};

const std::vector<Mode> &modes()
{
    static const std::vector<Mode> all = {
        {"async", {u"--mode=async"_s}},
        {"sync", {u"--mode=sync"_s}},
        {"ssp", {u"--mode=ssp"_s, u"--staleness=4"_s}},
    };
    return all;
}

// Flags for a cluster that trains until stopped, printing nothing per step
// (the chief's periodic full-shard loss is off too: it is not a step's cost).
QStringList endlessFlags()
{
    return {u"--last_step=1000000000000"_s, u"--display_step=1000000000"_s};
}

// Runs this thread's event loop (the watcher's snapshots are delivered
// through it) while time passes, blocking between events as an app does.
void spin(std::chrono::milliseconds duration)
{
    QEventLoop loop;
    QTimer::singleShot(duration, &loop, &QEventLoop::quit);
    loop.exec();
}

struct Counts
{
    int64_t globalStep = 0;
    int64_t gradients = 0; // applied or aggregated, all workers
    double seconds = 0;
    double psSwitches = 0;   // context switches of ps:0's threads
    double psCpuSeconds = 0; // user + system time of ps:0
    int64_t nonfinite = 0;   // gradients rejected as NaN or infinite, all workers
};

Counts counts(const BenchCluster &cluster)
{
    const auto status = cluster.status();
    Counts c;
    c.psSwitches = bench::contextSwitches(cluster.ps0Pid());
    c.psCpuSeconds = bench::cpuSeconds(cluster.ps0Pid());
    c.globalStep = status.global_step();
    for (const auto &w : status.workers()) {
        c.gradients += w.applied();
        c.nonfinite += w.nonfinite();
    }
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    return c;
}

struct Rates
{
    double steps = std::nan("");     // global steps/s
    double gradients = std::nan(""); // gradients applied/s
    double psSwitchesPerGradient = std::nan("");
    double psCpuMicrosPerGradient = std::nan("");
    double psResidentMiB = std::nan(""); // at the end of the window
    int64_t nonfinite = 0;               // in the window: training diverged
};

// Rates over `window`, after `warmup`.
Rates measureRates(const BenchCluster &cluster, std::chrono::milliseconds warmup, std::chrono::milliseconds window)
{
    spin(warmup);
    const Counts a = counts(cluster);
    spin(window);
    const Counts b = counts(cluster);
    const double dt = b.seconds - a.seconds;
    const double gradients = double(b.gradients - a.gradients);
    const double none = std::nan("");
    return {double(b.globalStep - a.globalStep) / dt,
            gradients / dt,
            gradients > 0 ? (b.psSwitches - a.psSwitches) / gradients : none,
            gradients > 0 ? (b.psCpuSeconds - a.psCpuSeconds) * 1e6 / gradients : none,
            bench::residentMiB(cluster.ps0Pid()),
            b.nonfinite - a.nonfinite};
}

struct Timing
{
    std::chrono::milliseconds warmup;
    std::chrono::milliseconds window;
    int repetitions;
};

void benchThroughput(ResultFile &results, const Timing &timing, const std::vector<int> &workerCounts)
{
    for (int rep = 0; rep < timing.repetitions; ++rep) {
        for (const auto &mode : modes()) {
            for (int workers : workerCounts) {
                const std::string name = mode.name + "/" + std::to_string(workers) + "w";
                BenchCluster cluster(QString::fromStdString("throughput-" + mode.name + "-" + std::to_string(workers)),
                                     1, workers, endlessFlags() + mode.flags);
                QString error;
                Rates rates;
                if (cluster.start(&error))
                    rates = measureRates(cluster, timing.warmup, timing.window);
                else // NaN keeps the repetitions of every configuration paired
                    std::fprintf(stderr, "bench_cluster: %s: %s\n", name.c_str(), qPrintable(error));
                cluster.stop();
                results.add("throughput_steps", name, "global steps/s").values.push_back(rates.steps);
                results.add("throughput_gradients", name, "gradients applied/s").values.push_back(rates.gradients);
                results.add("throughput_ps_switches", name, "context switches/gradient")
                    .values.push_back(rates.psSwitchesPerGradient);
                std::printf("throughput %-10s rep %d: %9.0f global steps/s, %9.0f gradients applied/s, "
                            "%5.1f ps:0 context switches per gradient\n",
                            name.c_str(), rep + 1, rates.steps, rates.gradients, rates.psSwitchesPerGradient);
                std::fflush(stdout);
            }
        }
    }
}

void benchPsCount(ResultFile &results, const Timing &timing)
{
    // Softmax on 99,999 features x 10 classes: W has 999,990 values, b 10.
    const QStringList flags = endlessFlags()
                              + QStringList{u"--mode=async"_s, u"--model=softmax"_s, u"--dataset=blobs:10:99999"_s,
                                            u"--samples_per_shard=20"_s};
    for (int rep = 0; rep < timing.repetitions; ++rep) {
        for (int numPs : {1, 2}) {
            const std::string name = std::to_string(numPs) + "ps/2w";
            BenchCluster cluster(QStringLiteral("ps-count-%1").arg(numPs), numPs, 2, flags);
            QString error;
            double steps = std::nan("");
            if (cluster.start(&error, {}, std::chrono::seconds(120)))
                steps = measureRates(cluster, timing.warmup * 2, timing.window * 2).steps;
            else
                std::fprintf(stderr, "bench_cluster: %s: %s\n", name.c_str(), qPrintable(error));
            cluster.stop();
            auto &s = results.add("ps_count", name, "global steps/s");
            s.values.push_back(steps);
            s.extra = QJsonObject{{u"ps"_s, numPs}, {u"workers"_s, 2}, {u"parameters"_s, 1000000}};
            std::printf("1M parameters %-6s rep %d: %7.1f global steps/s\n", name.c_str(), rep + 1, steps);
            std::fflush(stdout);
        }
    }
}

// Follows ps:0's telemetry from before the first step until the parameters a
// gradient was computed from are within the target, on a thread of its own.
// result(): the wall seconds (ps:0's clock) from the first step event, and
// the global step then; NaN on timeout.
class AccuracyWatch
{
public:
    AccuracyWatch(const std::string &ps0, std::chrono::seconds timeout)
        : m_stub(proto::Telemetry::NewStub(makeChannel(ps0, RpcSettings{})))
        , m_context(makeContext(RpcSettings{}, timeout))
    {
        std::promise<void> subscribed;
        auto ready = subscribed.get_future();
        m_thread = std::thread([this, subscribed = std::move(subscribed)]() mutable { run(subscribed); });
        ready.wait();
    }
    ~AccuracyWatch()
    {
        m_context->TryCancel();
        if (m_thread.joinable())
            m_thread.join();
    }
    // Blocks until the target is reached or the timeout passed.
    std::pair<double, int64_t> result()
    {
        if (m_thread.joinable())
            m_thread.join();
        return m_result;
    }

private:
    void run(std::promise<void> &subscribed)
    {
        proto::WatchRequest request;
        request.set_max_buffered_events(1 << 20);
        // The status comes first, at once: once it is read, every later step is seen.
        request.set_include_status(true);
        auto reader = m_stub->Watch(m_context.get(), request);
        proto::TelemetryBatch batch;
        bool first = true;
        double start = std::nan("");
        while (reader->Read(&batch)) {
            if (first) {
                subscribed.set_value();
                first = false;
            }
            for (const auto &event : batch.events()) {
                if (!event.has_step() || event.step().parameters_size() < 2)
                    continue;
                const auto &step = event.step();
                if (std::isnan(start))
                    start = step.wall_time();
                if (std::abs(step.parameters(0) - 2.0f) < 0.05f && std::abs(step.parameters(1) - 10.0f) < 0.05f) {
                    m_result = {step.wall_time() - start, step.global_step()};
                    m_context->TryCancel();
                    reader->Finish();
                    return;
                }
            }
        }
        if (first)
            subscribed.set_value();
        reader->Finish();
    }

    std::unique_ptr<proto::Telemetry::Stub> m_stub;
    std::unique_ptr<grpc::ClientContext> m_context;
    std::pair<double, int64_t> m_result{std::nan(""), 0};
    std::thread m_thread;
};

void benchAccuracy(ResultFile &results, int repetitions)
{
    for (int rep = 0; rep < repetitions; ++rep) {
        for (int straggler : {0, 2}) {
            for (const auto &mode : modes()) {
                const std::string name = mode.name + (straggler ? "/straggler 2ms" : "/equal");
                // The demo, as scripts/demo.sh runs it, only not stopping at 2,000 steps.
                BenchCluster cluster(
                    QString::fromStdString("accuracy-" + mode.name + "-" + std::to_string(straggler)), 1, 2,
                    QStringList{u"--last_step=100000000"_s, u"--display_step=1000000000"_s} + mode.flags);
                std::unique_ptr<AccuracyWatch> watch;
                // Before the chief starts, i.e. before the first step: slow
                // worker:1 down and subscribe to the telemetry.
                const auto prepare = [&] {
                    watch = std::make_unique<AccuracyWatch>(cluster.ps0Address(), std::chrono::seconds(60));
                    if (straggler == 0)
                        return;
                    auto stub = proto::TaskControl::NewStub(makeChannel(cluster.workerAddress(1), RpcSettings{}));
                    for (int attempt = 0; attempt < 200; ++attempt) {
                        auto context = makeContext(RpcSettings{}, std::chrono::milliseconds(500));
                        proto::SetStragglerRequest slow;
                        slow.set_delay_ms(straggler);
                        proto::SetStragglerResponse answer;
                        if (stub->SetStraggler(context.get(), slow, &answer).ok())
                            return;
                        QThread::msleep(20);
                    }
                    std::fprintf(stderr, "bench_cluster: could not slow worker:1 down\n");
                };
                QString error;
                double seconds = std::nan("");
                int64_t step = 0;
                if (cluster.start(&error, prepare))
                    std::tie(seconds, step) = watch->result();
                else
                    std::fprintf(stderr, "bench_cluster: %s: %s\n", name.c_str(), qPrintable(error));
                cluster.stop();
                auto &s = results.add("accuracy", name, "s");
                s.values.push_back(seconds);
                s.extra = QJsonObject{{u"mode"_s, QString::fromStdString(mode.name)}, {u"straggler_ms"_s, straggler}};
                results.add("accuracy_steps", name, "global steps").values.push_back(double(step));
                std::printf("accuracy %-22s rep %d: %6.3f s (global step %lld)\n", name.c_str(), rep + 1, seconds,
                            static_cast<long long>(step));
                std::fflush(stdout);
            }
        }
    }
}

void benchTelemetry(ResultFile &results, const Timing &timing)
{
    // One cluster, alternating windows without and with the app's watcher:
    // both figures of a pair come from the same processes minutes apart at most.
    BenchCluster cluster(u"telemetry"_s, 1, 2, endlessFlags() + QStringList{u"--mode=async"_s});
    QString error;
    if (!cluster.start(&error)) {
        std::fprintf(stderr, "bench_cluster: telemetry: %s\n", qPrintable(error));
        return;
    }
    spin(timing.warmup);
    for (int rep = 0; rep < timing.repetitions * 2; ++rep) {
        for (bool attached : {false, true}) {
            ClusterWatcher watcher;
            int64_t snapshots = 0;
            int64_t lost = 0;
            QObject::connect(&watcher, &ClusterWatcher::snapshotReady, [&](const RunSnapshot &snapshot) {
                ++snapshots;
                lost = snapshot.lostEvents;
            });
            if (attached)
                watcher.connectTo(QString::fromStdString(cluster.ps0Address()));
            const double steps = measureRates(cluster, std::chrono::milliseconds(300), timing.window).steps;
            watcher.disconnectFromCluster();
            const std::string name = attached ? "watcher attached" : "none";
            results.add("telemetry", name, "updates/s").values.push_back(steps);
            std::printf(
                "telemetry %-16s rep %d: %9.0f updates/s%s\n", name.c_str(), rep + 1, steps,
                attached ? qPrintable(QStringLiteral(" (%1 snapshots, %2 events lost)").arg(snapshots).arg(lost)) : "");
            std::fflush(stdout);
        }
    }
    cluster.stop();
}

// Issue 32: what measuring staleness's cost costs. On every Nth step a
// worker reads the parameters from every ps task (Snapshot) and computes its
// batch's gradient a second time; the step's push waits for both. Clusters
// of the same shape with the probe off, at the default and at ten times the
// default rate, in turn, so that all three see the same load.
void benchProbe(ResultFile &results, const Timing &timing)
{
    struct Shape
    {
        std::string name;
        int workers;
        QStringList flags;
    };
    const std::vector<Shape> shapes = {
        {"demo/async/2w", 2, {u"--mode=async"_s}},
        {"demo/async/8w", 8, {u"--mode=async"_s}},
        {"softmax/async/16w",
         16,
         {u"--mode=async"_s, u"--model=softmax"_s, u"--dataset=blobs:10:2"_s, u"--learning_rate=0.05"_s}},
    };
    const std::vector<std::pair<std::string, QString>> settings = {
        {"off", u"--staleness_probe_every=0"_s},
        {"every 100 (default)", u"--staleness_probe_every=100"_s},
        {"every 10", u"--staleness_probe_every=10"_s},
    };
    for (int rep = 0; rep < timing.repetitions; ++rep) {
        for (const auto &shape : shapes) {
            for (const auto &[setting, flag] : settings) {
                const std::string name = shape.name + " probe " + setting;
                BenchCluster cluster(u"probe"_s, 1, shape.workers, endlessFlags() + shape.flags + QStringList{flag});
                QString error;
                Rates rates;
                if (cluster.start(&error))
                    rates = measureRates(cluster, timing.warmup, timing.window);
                else
                    std::fprintf(stderr, "bench_cluster: probe %s: %s\n", name.c_str(), qPrintable(error));
                cluster.stop();
                auto &samples = results.add("probe", name, "global steps/s");
                samples.values.push_back(rates.steps);
                samples.extra = QJsonObject{{u"shape"_s, QString::fromStdString(shape.name)},
                                            {u"probe"_s, QString::fromStdString(setting)}};
                std::printf("probe %-40s rep %d: %9.1f global steps/s\n", name.c_str(), rep + 1, rates.steps);
                std::fflush(stdout);
            }
        }
    }
}

// Issue 15: what a backup costs. Each update is acknowledged only once the
// backup holds it, so the step's round trip grows by a hop to the backup and
// back; these are the updates/s that follow. The same cluster with and
// without a backup, alternating, so both see the same load.
void benchReplicated(ResultFile &results, const Timing &timing)
{
    struct Shape
    {
        std::string name;
        int workers;
        QStringList flags;
    };
    std::vector<Shape> shapes;
    for (const auto &mode : modes())
        for (int workers : {2, 8})
            shapes.push_back({mode.name + "/" + std::to_string(workers) + "w", workers, mode.flags});
    shapes.push_back(
        {"1M parameters/async/2w",
         2,
         {u"--mode=async"_s, u"--model=softmax"_s, u"--dataset=blobs:10:99999"_s, u"--samples_per_shard=20"_s}});
    for (int rep = 0; rep < timing.repetitions; ++rep) {
        for (const auto &shape : shapes) {
            // Alone, with a backup and its lease, with a backup and no lease
            // (--ps_lease_ms=0): the lease's own cost is the last two's ratio.
            for (const int variant : {0, 1, 2}) {
                const bool backup = variant > 0;
                const bool leased = variant == 1;
                const std::string name = shape.name
                                         + (!backup  ? " without"
                                            : leased ? " with a backup"
                                                     : " with a backup, no lease");
                BenchCluster cluster(QStringLiteral("replicated-%1")
                                         .arg(!backup  ? u"alone"_s
                                              : leased ? u"backup"_s
                                                       : u"unleased"_s),
                                     1, shape.workers,
                                     endlessFlags() + shape.flags
                                         + (backup && !leased ? QStringList{u"--ps_lease_ms=0"_s} : QStringList{}),
                                     backup);
                QString error;
                Rates rates;
                const bool big = shape.name.starts_with("1M");
                if (cluster.start(&error, {}, std::chrono::seconds(big ? 120 : 60)))
                    rates = measureRates(cluster, big ? timing.warmup * 2 : timing.warmup,
                                         big ? timing.window * 2 : timing.window);
                else
                    std::fprintf(stderr, "bench_cluster: replicated %s: %s\n", name.c_str(), qPrintable(error));
                cluster.stop();
                auto &samples = results.add("replicated", name, "global steps/s");
                samples.values.push_back(rates.steps);
                samples.extra = QJsonObject{
                    {u"shape"_s, QString::fromStdString(shape.name)}, {u"backup"_s, backup}, {u"lease"_s, leased}};
                auto &cpu = results.add("replicated_ps_cpu", name, "us/gradient");
                cpu.values.push_back(rates.psCpuMicrosPerGradient);
                cpu.extra = samples.extra;
                std::printf("replicated %-36s rep %d: %9.1f global steps/s, ps:0 %7.1f us CPU per gradient\n",
                            name.c_str(), rep + 1, rates.steps, rates.psCpuMicrosPerGradient);
                std::fflush(stdout);
            }
        }
    }
}

// Issue 13: does ps:0 keep up with many workers? Its CPU time and context
// switches per gradient should stay flat as workers are added (a cost per
// gradient that grows with the worker count points to a scan over all
// workers on every push), its memory should grow at most linearly, and a sync step
// must still close with 64 replicas. All of them share this machine's cores.
// The demo's learning rate (0.05) diverges in async and ssp from 32 workers
// on (a gradient is up to N updates stale): ps:0 then rejects every gradient
// as non-finite and applies none. 0.005 stays finite at 64 workers (0.02 does
// not), and the ps's work per gradient does not depend on it.
void benchMany(ResultFile &results, const Timing &timing, const std::vector<int> &workerCounts)
{
    for (int rep = 0; rep < timing.repetitions; ++rep) {
        for (const auto &mode : modes()) {
            for (int workers : workerCounts) {
                const std::string name = mode.name + "/" + std::to_string(workers) + "w";
                BenchCluster cluster(QString::fromStdString("many-" + mode.name + "-" + std::to_string(workers)), 1,
                                     workers, endlessFlags() + mode.flags + QStringList{u"--learning_rate=0.005"_s});
                QString error;
                Rates rates;
                QElapsedTimer started;
                started.start();
                // 64 workers join in under a second on an idle machine, but
                // on 2 cores shared with builds it can take many times that.
                const bool up = cluster.start(&error, {}, std::chrono::seconds(60) + workers * std::chrono::seconds(1));
                const double startSeconds = double(started.elapsed()) / 1000.0;
                if (up)
                    rates = measureRates(cluster, timing.warmup, timing.window);
                else // NaN keeps the repetitions of every configuration paired
                    std::fprintf(stderr, "bench_cluster: many %s: %s\n", name.c_str(), qPrintable(error));
                QElapsedTimer stopped;
                stopped.start();
                cluster.stop();
                const double stopSeconds = double(stopped.elapsed()) / 1000.0;
                const QJsonObject extra{{u"mode"_s, QString::fromStdString(mode.name)}, {u"workers"_s, workers}};
                auto add = [&](const char *group, const char *unit, double value) {
                    auto &s = results.add(group, name, unit);
                    s.values.push_back(value);
                    s.extra = extra;
                };
                add("many_steps", "global steps/s", rates.steps);
                add("many_gradients", "gradients applied/s", rates.gradients);
                add("many_ps_cpu", "us/gradient", rates.psCpuMicrosPerGradient);
                add("many_ps_rss", "MiB", rates.psResidentMiB);
                add("many_ps_switches", "context switches/gradient", rates.psSwitchesPerGradient);
                add("many_start", "s", up ? startSeconds : std::nan(""));
                add("many_nonfinite", "gradients rejected as non-finite", up ? double(rates.nonfinite) : std::nan(""));
                if (mode.name == "sync")
                    add("many_step_closed", "1: a global step closed in the window",
                        up ? double(rates.steps > 0) : std::nan(""));
                std::printf("many %-9s rep %d: %7.0f global steps/s, %7.0f gradients/s, ps:0 %6.1f us CPU and "
                            "%5.1f context switches per gradient, %6.1f MiB resident (started in %.1f s, stopped in "
                            "%.1f s)%s\n",
                            name.c_str(), rep + 1, rates.steps, rates.gradients, rates.psCpuMicrosPerGradient,
                            rates.psSwitchesPerGradient, rates.psResidentMiB, startSeconds, stopSeconds,
                            mode.name == "sync" ? (rates.steps > 0 ? ", steps close" : ", NO STEP CLOSED") : "");
                if (rates.nonfinite > 0)
                    std::printf("many %-9s rep %d: %lld gradients rejected as non-finite: the training diverged\n",
                                name.c_str(), rep + 1, static_cast<long long>(rates.nonfinite));
                std::fflush(stdout);
            }
        }
    }
}

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    bool quick = false;
    QString out; // --out: where the samples go for bench/report.py; none by default
    QStringList only
        = {u"throughput"_s, u"ps"_s, u"accuracy"_s, u"telemetry"_s, u"probe"_s, u"replicated"_s, u"many"_s};
    std::vector<int> workerCounts = {1, 2, 4, 8};
    std::vector<int> manyCounts = {8, 16, 32, 64};
    int repetitions = 0; // 0: the mode's default
    for (const QString &arg : app.arguments().mid(1)) {
        if (arg == u"--quick")
            quick = true;
        else if (arg.startsWith(u"--out="))
            out = arg.mid(6);
        else if (arg.startsWith(u"--only="))
            only = arg.mid(7).split(u',');
        else if (arg.startsWith(u"--workers=")) {
            workerCounts.clear();
            for (const QString &n : arg.mid(10).split(u','))
                workerCounts.push_back(n.toInt());
        } else if (arg.startsWith(u"--many=")) {
            manyCounts.clear();
            for (const QString &n : arg.mid(7).split(u','))
                manyCounts.push_back(n.toInt());
        } else if (arg.startsWith(u"--repetitions="))
            repetitions = arg.mid(14).toInt();
        else {
            std::fprintf(
                stderr,
                "usage: bench_cluster [--quick] [--only=throughput,ps,accuracy,telemetry,probe,replicated,many] "
                "[--workers=1,2,4,8] [--many=8,16,32,64] [--repetitions=N] [--out=FILE]\n");
            return 2;
        }
    }
    Timing timing = quick ? Timing{std::chrono::milliseconds(300), std::chrono::milliseconds(700), 1}
                          : Timing{std::chrono::milliseconds(500), std::chrono::milliseconds(2000), 5};
    // A longer warm-up: 64 workers that just joined still settle into their pace.
    Timing manyTiming = quick ? Timing{std::chrono::milliseconds(300), std::chrono::milliseconds(700), 1}
                              : Timing{std::chrono::milliseconds(1000), std::chrono::milliseconds(2000), 5};
    if (repetitions > 0)
        timing.repetitions = manyTiming.repetitions = repetitions;
    ResultFile results(u"bench_cluster"_s, quick);
    results.note(u"node"_s, bench::nodeBinary());
    try {
        if (only.contains(u"throughput"_s))
            benchThroughput(results, timing, workerCounts);
        if (only.contains(u"ps"_s))
            benchPsCount(results, timing);
        if (only.contains(u"accuracy"_s))
            benchAccuracy(results, repetitions > 0 ? repetitions : quick ? 1 : 5);
        if (only.contains(u"telemetry"_s))
            benchTelemetry(results, timing);
        if (only.contains(u"probe"_s))
            benchProbe(results, timing);
        if (only.contains(u"replicated"_s))
            benchReplicated(results, timing);
        if (only.contains(u"many"_s))
            benchMany(results, manyTiming, manyCounts);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_cluster: %s\n", e.what());
        results.write(out);
        return 1;
    }
    if (!results.write(out)) {
        std::fprintf(stderr, "bench_cluster: cannot write %s\n", qPrintable(out));
        return 1;
    }
    return 0;
}
