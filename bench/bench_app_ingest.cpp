// The desktop app's ingest (issue 5, item 6), with the app's own parts: the
// real ui::MainWindow (offscreen when there is no display), ClusterLauncher,
// ClusterWatcher and RunState, wired as app/parasync/main.cpp wires them.
//
//   latency  the demo cluster (real parasync-node processes: ps + 2 workers,
//            linear model, async) trains at full speed, started from the
//            window as a user starts it (MainWindow::startCluster: the app's
//            ClusterLauncher runs the tasks) and watched by it. A probe
//            thread posts a timestamped call to the GUI thread every 2 ms; the
//            delay until the GUI thread runs it is the event-loop latency a
//            user's click would see. Then the same with 64 workers (issue
//            13): 64 lanes of events, and 65 processes on the cores the GUI
//            uses; and those 64 started by another program at the app's own
//            priority, the window only watching (MainWindow::connectToCluster).
//   memory   10 million real steps take far too long on this machine (the
//            demo does a few thousand a second), so a child process serves
//            ps:0's telemetry (ClusterControl.GetClusterStatus and
//            Telemetry.Watch, the same protocol) with step events of the
//            demo's shape as fast as the watcher takes them. The app's
//            resident memory is read after 1 and 10 million events have been
//            ingested by its RunState (the snapshot's stepEvents count).
//
//   bench_app_ingest [--quick] [--only=latency,memory] [--latency_workers=2,64]
//                    [--outside_workers=64] [--out=FILE]
//   bench_app_ingest --serve-telemetry=PORT   (the feeder)

#include "base/port_holder.h"
#include "bench_support.h"
#include "config/cluster_plan.h"
#include "orchestration/cluster_launcher.h"
#include "orchestration/cluster_watcher.h"
#include "proto/parasync.grpc.pb.h"
#include "ui/windows/main_window.h"
#include "wire/rpc.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace {

using namespace parasync;
using namespace Qt::StringLiterals;
using Clock = std::chrono::steady_clock;

double wallTime()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------
// The feeder: ps:0's telemetry protocol, with synthetic demo-shaped steps.
// ---------------------------------------------------------------------------

proto::ClusterStatusResponse feederStatus(int64_t globalStep)
{
    proto::ClusterStatusResponse status;
    status.set_global_step(globalStep);
    status.mutable_mode()->set_mode(proto::ASYNC);
    status.set_initialized(true);
    status.set_last_step(int64_t(1) << 40);
    status.add_ps_hosts("127.0.0.1:1");
    status.add_worker_hosts("127.0.0.1:2");
    status.add_worker_hosts("127.0.0.1:3");
    auto *signature = status.mutable_signature();
    signature->set_model("linear");
    signature->set_feature_dim(1);
    signature->set_output_dim(1);
    signature->set_optimizer("sgd");
    for (const char *name : {"w", "b"}) {
        auto *v = signature->add_variables();
        v->set_name(name);
        v->add_shape(1);
    }
    for (int i = 0; i < 2; ++i) {
        auto *w = status.add_workers();
        w->set_worker_index(i);
        w->set_phase(proto::TRAINING);
        w->set_worker_clock(globalStep / 2);
        w->set_applied(globalStep / 2);
    }
    return status;
}

class FeederControl final : public proto::ClusterControl::Service
{
public:
    explicit FeederControl(std::atomic<int64_t> &step) : m_step(step) {}
    grpc::Status GetClusterStatus(grpc::ServerContext *, const proto::ClusterStatusRequest *,
                                  proto::ClusterStatusResponse *response) override
    {
        *response = feederStatus(m_step.load());
        return grpc::Status::OK;
    }

private:
    std::atomic<int64_t> &m_step;
};

class FeederTelemetry final : public proto::Telemetry::Service
{
public:
    explicit FeederTelemetry(std::atomic<int64_t> &step) : m_step(step) {}
    grpc::Status Watch(grpc::ServerContext *context, const proto::WatchRequest *request,
                       grpc::ServerWriter<proto::TelemetryBatch> *writer) override
    {
        // Batches as ps:0 sends them under load (its hub hands out up to 4096
        // events per batch); the stream's flow control paces us to what the
        // watcher reads.
        constexpr int kBatch = 4096;
        bool first = true;
        auto lastStatus = Clock::now();
        while (!context->IsCancelled()) {
            proto::TelemetryBatch batch;
            if ((first && request->include_status()) || Clock::now() - lastStatus > std::chrono::milliseconds(500)) {
                *batch.mutable_status() = feederStatus(m_step.load());
                lastStatus = Clock::now();
            }
            first = false;
            const double now = wallTime();
            for (int i = 0; i < kBatch; ++i) {
                const int64_t step = ++m_step;
                auto *e = batch.add_events()->mutable_step();
                const int worker = int(step % 2);
                // w and b approach 2 and 10 as the demo's do.
                const double progress = std::exp(-double(step) * 1e-4);
                e->set_global_step(step);
                e->set_wall_time(now + i * 1e-6);
                e->set_worker(worker);
                e->set_worker_clock(step / 2);
                e->set_staleness(step % 3 == 0 ? 1 : 0);
                e->set_computed_from_step(step - 1 - e->staleness());
                e->set_batch_loss(float(0.1 + 50 * progress * progress));
                e->set_full_loss(step % 100 == 0 ? float(0.1 + 40 * progress * progress) : std::nanf(""));
                e->set_outcome(proto::APPLIED);
                e->set_contributions(1);
                e->set_compute_us(20);
                e->set_push_us(150);
                e->add_parameters(float(2 - 2 * progress));
                e->add_parameters(float(10 - 10 * progress));
            }
            if (!writer->Write(batch))
                break;
        }
        return grpc::Status::OK;
    }

private:
    std::atomic<int64_t> &m_step;
};

int serveTelemetry(uint16_t port)
{
    std::atomic<int64_t> step{0};
    FeederControl control(step);
    FeederTelemetry telemetry(step);
    grpc::ServerBuilder builder;
    int selected = 0;
    configureServer(builder, "127.0.0.1:" + std::to_string(port), RpcSettings{}, &selected);
    builder.RegisterService(&control);
    builder.RegisterService(&telemetry);
    auto server = builder.BuildAndStart();
    if (!server || selected == 0) {
        std::fprintf(stderr, "telemetry feeder: cannot listen on %u\n", unsigned(port));
        return 1;
    }
    std::printf("telemetry feeder listening on %u\n", unsigned(port));
    std::fflush(stdout);
    server->Wait();
    return 0;
}

// ---------------------------------------------------------------------------
// The app side.
// ---------------------------------------------------------------------------

// Posts a timestamped call to the GUI thread every `period`; the GUI thread
// records how late it ran.
class LatencyProbe
{
public:
    explicit LatencyProbe(QObject *guiObject, std::chrono::milliseconds period = std::chrono::milliseconds(2))
    {
        m_thread = std::thread([this, guiObject, period] {
            while (!m_stop) {
                const auto sent = Clock::now();
                QMetaObject::invokeMethod(
                    guiObject,
                    [this, sent] {
                        if (m_recording)
                            m_latencies.push_back(
                                std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
                    },
                    Qt::QueuedConnection);
                std::this_thread::sleep_for(period);
            }
        });
    }
    ~LatencyProbe()
    {
        m_stop = true;
        m_thread.join();
    }
    void record(bool on) { m_recording = on; }
    std::vector<double> take() { return std::exchange(m_latencies, {}); }

private:
    std::atomic<bool> m_stop{false};
    bool m_recording = false;        // GUI thread only
    std::vector<double> m_latencies; // GUI thread only
    std::thread m_thread;
};

// Runs the GUI thread's event loop for `duration`, blocking in exec() as the
// app does between events (processEvents() in a loop would spin a core).
void spinFor(std::chrono::milliseconds duration)
{
    QEventLoop loop;
    QTimer::singleShot(duration, &loop, &QEventLoop::quit);
    loop.exec();
}

double quantile(std::vector<double> values, double q)
{
    if (values.empty())
        return std::nan("");
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, size_t(q * double(values.size())))];
}

// How the cluster whose latency is measured came to run.
enum class StartedBy {
    TheWindow, // the user's Start: the app's ClusterLauncher runs every task
    Outside,   // another program started it at the app's own priority; the window watches
};

// The demo's plan, endless and async, with `workers` workers; every task on
// a free port of this machine.
ClusterPlan endlessDemo(int workers)
{
    ClusterPlan plan = ClusterPlan::demo();
    plan.cluster.workers.resize(size_t(workers));
    std::set<uint16_t> taken;
    for (auto *list : {&plan.cluster.ps, &plan.cluster.workers}) {
        for (auto &address : *list) {
            uint16_t port = 0;
            while (port == 0 || !taken.insert(port).second)
                port = pickFreePort();
            address = HostPort{"127.0.0.1", port};
        }
    }
    plan.training.mode.set_mode(proto::ASYNC);
    plan.training.lastStep = 1'000'000'000'000;
    return plan;
}

// Results of the demo's 2 workers go under "app_latency", others under
// "app_latency_<N>w"; a cluster started outside the app under
// "app_latency_outside_<N>w".
void benchLatency(bench::ResultFile &results, bool quick, int workers, StartedBy startedBy)
{
    const bool outside = startedBy == StartedBy::Outside;
    const std::string group = workers == 2 && !outside ? std::string("app_latency")
                                                       : "app_latency_" + std::string(outside ? "outside_" : "")
                                                             + std::to_string(workers) + "w";
    // The demo's learning rate diverges in async from 32 workers on
    // (gradients up to N updates stale), after which ps:0 rejects every
    // gradient: a tenth of it stays finite.
    const float learningRate = workers > 8 ? 0.005f : ClusterPlan::demo().training.learningRate;
    const auto startTimeout = std::chrono::seconds(60) + workers * std::chrono::seconds(1);

    ClusterLauncher launcher;
    ClusterWatcher watcher;
    ui::MainWindow window(&launcher, &watcher);
    window.resize(1400, 900);
    window.show();
    int64_t lastSteps = 0;
    int64_t lost = 0;
    int training = 0;
    QObject::connect(&watcher, &ClusterWatcher::snapshotReady, &window, [&](const RunSnapshot &snapshot) {
        lastSteps = snapshot.stepEvents;
        lost = snapshot.lostEvents;
        training = int(std::count_if(snapshot.workers.begin(), snapshot.workers.end(),
                                     [](const WorkerFigures &w) { return w.phase == proto::TRAINING; }));
    });
    std::optional<bench::BenchCluster> cluster;
    if (outside) {
        // The demo's flags (scripts/demo.sh), only endless.
        QStringList flags{u"--mode=async"_s, u"--last_step=1000000000000"_s,
                          u"--learning_rate="_s + QString::number(double(learningRate))};
        cluster.emplace(u"app-demo-"_s + QString::number(workers), 1, workers, flags);
        QString error;
        if (!cluster->start(&error, {}, startTimeout)) {
            std::fprintf(stderr, "bench_app_ingest: %s\n", qPrintable(error));
            return;
        }
        window.connectToCluster(QString::fromStdString(cluster->ps0Address()));
    } else {
        ClusterPlan plan = endlessDemo(workers);
        plan.training.learningRate = learningRate;
        // A port taken since it was picked would put a question to the user.
        if (!launcher.checkPorts(plan).empty())
            plan = endlessDemo(workers);
        if (!window.startCluster(plan)) {
            std::fprintf(stderr, "bench_app_ingest: the window did not start the cluster of %d workers\n", workers);
            return;
        }
    }
    QElapsedTimer started;
    started.start();
    while (training < workers && std::chrono::milliseconds(started.elapsed()) < startTimeout)
        spinFor(std::chrono::milliseconds(100));
    if (training < workers) {
        std::fprintf(stderr, "bench_app_ingest: %d of %d workers training after %lld s\n", training, workers,
                     static_cast<long long>(started.elapsed() / 1000));
        return;
    }
    LatencyProbe probe(&window);
    spinFor(std::chrono::seconds(2)); // connected, charts filled once

    const int windows = quick ? 2 : 5;
    const auto windowLength = quick ? std::chrono::milliseconds(1500) : std::chrono::milliseconds(4000);
    for (int rep = 0; rep < windows; ++rep) {
        const int64_t before = lastSteps;
        QElapsedTimer timer;
        timer.start();
        const bench::ThreadSchedule scheduleBefore = bench::threadSchedule();
        probe.record(true);
        spinFor(windowLength);
        probe.record(false);
        const bench::ThreadSchedule scheduleAfter = bench::threadSchedule();
        const double seconds = double(timer.elapsed()) / 1000.0;
        auto latencies = probe.take();
        const double p50 = quantile(latencies, 0.5), p99 = quantile(latencies, 0.99);
        results.add(group, "p50", "ms").values.push_back(p50);
        results.add(group, "p99", "ms").values.push_back(p99);
        results.add(group, "max", "ms").values.push_back(quantile(latencies, 1.0));
        const double rate = double(lastSteps - before) / seconds;
        results.add(group, "demo steps/s while watched", "steps/s").values.push_back(rate);
        // Whether latency is the GUI thread's own work or its wait for a core
        // that the cluster's processes hold.
        const double busy = 100 * (scheduleAfter.running - scheduleBefore.running) / seconds;
        const double waiting = 100 * (scheduleAfter.waiting - scheduleBefore.waiting) / seconds;
        results.add(group, "GUI thread running", "% of wall time").values.push_back(busy);
        results.add(group, "GUI thread waiting for a core", "% of wall time").values.push_back(waiting);
        std::printf("app latency, %d workers %s, window %d: p50 %.2f ms, p99 %.2f ms (%zu probes), demo at %.0f "
                    "steps/s, %lld lost; GUI thread running %.0f%%, waiting for a core %.0f%% of the time\n",
                    workers, outside ? "started outside the app" : "started from the window", rep + 1, p50, p99,
                    latencies.size(), rate, static_cast<long long>(lost), busy, waiting);
        std::fflush(stdout);
    }
    watcher.disconnectFromCluster();
    if (cluster)
        cluster->stop();
    else
        launcher.stopAll();
}

void benchMemory(bench::ResultFile &results, bool quick)
{
    const uint16_t port = pickFreePort();
    bench::ChildProcess feeder(QCoreApplication::applicationFilePath(),
                               {u"--serve-telemetry="_s + QString::number(port)}, u"app-telemetry-feeder"_s);
    feeder.start();
    if (!feeder.waitForLog(u"listening"_s)) {
        std::fprintf(stderr, "bench_app_ingest: the feeder did not start; see %s\n", qPrintable(feeder.logPath()));
        return;
    }
    const double baseline = bench::residentMiB();
    ClusterLauncher launcher;
    ClusterWatcher watcher;
    ui::MainWindow window(&launcher, &watcher);
    window.resize(1400, 900);
    window.show();
    int64_t ingested = 0;
    int64_t target = 0;
    QEventLoop waiting;
    QObject::connect(&watcher, &ClusterWatcher::snapshotReady, &window, [&](const RunSnapshot &snapshot) {
        ingested = snapshot.stepEvents;
        if (ingested >= target)
            waiting.quit();
    });
    LatencyProbe probe(&window);
    probe.record(true);
    window.connectToCluster(u"127.0.0.1:"_s + QString::number(port));

    const std::vector<int64_t> marks = quick ? std::vector<int64_t>{1000000} : std::vector<int64_t>{1000000, 10000000};
    QElapsedTimer timer;
    timer.start();
    const auto limit = std::chrono::minutes(quick ? 2 : 6);
    const qint64 limitMs = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
    for (int64_t mark : marks) {
        target = mark;
        // The snapshot handler quits the loop at the mark; the timer bounds the wait.
        while (ingested < mark && timer.elapsed() < limitMs) {
            QTimer::singleShot(std::max<qint64>(1, limitMs - timer.elapsed()), &waiting, &QEventLoop::quit);
            waiting.exec();
        }
        if (ingested < mark) {
            std::fprintf(stderr, "bench_app_ingest: only %lld events ingested in time\n",
                         static_cast<long long>(ingested));
            break;
        }
        const double seconds = double(timer.elapsed()) / 1000.0;
        const double rss = bench::residentMiB();
        const std::string name = mark >= 10000000 ? "10M steps" : "1M steps";
        auto &s = results.add("app_memory", name, "MiB");
        s.values.push_back(rss);
        s.extra = QJsonObject{
            {u"rss_before_window_mib"_s, baseline}, {u"events"_s, double(ingested)}, {u"seconds"_s, seconds}};
        results.add("app_memory", name + " ingest rate", "events/s").values.push_back(double(ingested) / seconds);
        std::printf("app memory after %lld events: %.1f MiB resident (%.0f events/s ingested)\n",
                    static_cast<long long>(ingested), rss, double(ingested) / seconds);
        std::fflush(stdout);
    }
    probe.record(false);
    const auto latencies = probe.take();
    results.add("app_latency_flood", "p99", "ms").values.push_back(quantile(latencies, 0.99));
    results.add("app_latency_flood", "p50", "ms").values.push_back(quantile(latencies, 0.5));
    std::printf("app latency while flooded: p50 %.2f ms, p99 %.2f ms\n", quantile(latencies, 0.5),
                quantile(latencies, 0.99));
    watcher.disconnectFromCluster();
}

} // namespace

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.rfind("--serve-telemetry=", 0) == 0)
            return serveTelemetry(uint16_t(std::stoi(arg.substr(18))));
    }
    if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    // The window remembers addresses in QSettings: not in the user's own app settings.
    QCoreApplication::setOrganizationName(u"parasync-bench"_s);
    QCoreApplication::setApplicationName(u"bench_app_ingest"_s);
    qRegisterMetaType<parasync::RunSnapshot>();
    qRegisterMetaType<parasync::proto::ModeConfig>();
    bool quick = false;
    QString out; // --out: where the samples go for bench/report.py; none by default
    QStringList only = {u"latency"_s, u"memory"_s};
    QList<int> latencyWorkers = {2, 64};
    QList<int> outsideWorkers = {64};
    for (const QString &arg : app.arguments().mid(1)) {
        if (arg == u"--quick")
            quick = true;
        else if (arg.startsWith(u"--out="))
            out = arg.mid(6);
        else if (arg.startsWith(u"--only="))
            only = arg.mid(7).split(u',');
        else if (arg.startsWith(u"--latency_workers=") || arg.startsWith(u"--outside_workers=")) {
            QList<int> &list = arg.startsWith(u"--latency") ? latencyWorkers : outsideWorkers;
            list.clear();
            for (const QString &n : arg.mid(18).split(u',', Qt::SkipEmptyParts))
                list << n.toInt();
        }
    }
    bench::ResultFile results(u"bench_app_ingest"_s, quick);
    results.note(u"platform"_s, QApplication::platformName());
    if (only.contains(u"latency"_s)) {
        for (int workers : std::as_const(latencyWorkers))
            benchLatency(results, quick, workers, StartedBy::TheWindow);
        for (int workers : std::as_const(outsideWorkers))
            benchLatency(results, quick, workers, StartedBy::Outside);
    }
    if (only.contains(u"memory"_s))
        benchMemory(results, quick);
    return results.write(out) ? 0 : 1;
}
