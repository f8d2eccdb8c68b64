// What ps:0's metrics endpoint (--metrics_port) costs a step: a real ps and
// two workers training at full speed (async, the 7,850-parameter softmax of
// bench_roundtrip), in alternating windows with ps:0's /metrics scraped ten
// times a second and not scraped. A scrape copies ps:0's figures under the
// lock every push takes, so its cost shows as longer push round trips and
// fewer steps a second. The round trips are the workers' own measurements
// (the step log's push_us), taken in one run, windows interleaved so that
// the machine's drift falls on both sides alike; the first second of each
// window is left out.
//
//   bench_metrics_scrape [--quick] [--out=FILE.json]

#include "base/port_holder.h"
#include "bench_support.h"

#include <httplib.h>

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

using namespace parasync;
using namespace Qt::StringLiterals;
using namespace std::chrono_literals;

double wallNow()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double quantile(std::vector<double> values, double q)
{
    if (values.empty())
        return std::nan("");
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, size_t(q * double(values.size())))];
}

struct Window
{
    bool scraped = false;
    double from = 0; // wall time, seconds since the epoch
    double to = 0;
};

// Scrapes `port`'s /metrics every 100 ms on a thread of its own, on one
// kept-alive connection as Prometheus does; records each scrape's time.
class Scraper
{
public:
    explicit Scraper(uint16_t port)
        : m_thread([this, port] {
            httplib::Client client("127.0.0.1", port);
            client.set_keep_alive(true);
            client.set_default_headers({{"Accept", "application/openmetrics-text;version=1.0.0"}});
            auto next = std::chrono::steady_clock::now();
            while (!m_stop) {
                const auto start = std::chrono::steady_clock::now();
                auto answer = client.Get("/metrics");
                if (!answer || answer->status != 200)
                    ++m_failures;
                else
                    m_micros.push_back(
                        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
                next += 100ms;
                std::this_thread::sleep_until(next);
            }
        })
    {
    }
    ~Scraper()
    {
        m_stop = true;
        m_thread.join();
    }
    const std::vector<double> &micros() const { return m_micros; }
    int failures() const { return m_failures; }

private:
    std::atomic<bool> m_stop{false};
    std::vector<double> m_micros;
    int m_failures = 0;
    std::thread m_thread; // last: started once the rest is there
};

// Polls ps:0's /metrics until parasync_global_step reaches `step`.
bool waitForGlobalStep(uint16_t port, double step, std::chrono::seconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    httplib::Client client("127.0.0.1", port);
    while (std::chrono::steady_clock::now() < deadline) {
        if (auto answer = client.Get("/metrics")) {
            const std::string key = "\nparasync_global_step ";
            if (const size_t at = answer->body.find(key);
                at != std::string::npos && std::stod(answer->body.substr(at + key.size())) >= step)
                return true;
        }
        std::this_thread::sleep_for(100ms);
    }
    return false;
}

int run(bool quick, const QString &out)
{
    QTemporaryDir logdir;
    const QString ps = u"127.0.0.1:"_s + QString::number(pickFreePort());
    const QString workers
        = u"127.0.0.1:"_s + QString::number(pickFreePort()) + u",127.0.0.1:"_s + QString::number(pickFreePort());
    const uint16_t metricsPort = pickFreePort();
    const QStringList cluster{u"--ps_hosts="_s + ps,    u"--worker_hosts="_s + workers, u"--mode=async"_s,
                              u"--model=softmax"_s,     u"--dataset=blobs:10:784"_s,    u"--last_step=0"_s,
                              u"--display_step=1000"_s, u"--logdir="_s + logdir.path()};
    bench::ChildProcess psTask(
        bench::nodeBinary(),
        cluster
            + QStringList{u"--job_name=ps"_s, u"--task_index=0"_s, u"--metrics_port="_s + QString::number(metricsPort)},
        u"metrics-ps"_s);
    psTask.start();
    if (!psTask.waitForLog(u"serves its metrics"_s)) {
        std::fprintf(stderr, "bench_metrics_scrape: the ps did not start; see %s\n", qPrintable(psTask.logPath()));
        return 1;
    }
    std::vector<std::unique_ptr<bench::ChildProcess>> workerTasks;
    for (int i = 0; i < 2; ++i) {
        workerTasks.push_back(std::make_unique<bench::ChildProcess>(
            bench::nodeBinary(), cluster + QStringList{u"--job_name=worker"_s, u"--task_index="_s + QString::number(i)},
            u"metrics-worker-"_s + QString::number(i)));
        workerTasks.back()->start();
    }
    // Training, and past the start: ps:0's own page says when.
    if (!waitForGlobalStep(metricsPort, 1000, 60s)) {
        std::fprintf(stderr, "bench_metrics_scrape: the workers did not train; see %s\n",
                     qPrintable(workerTasks.front()->logPath()));
        return 1;
    }

    const auto windowLength = quick ? 2s : 6s;
    const int windows = quick ? 4 : 10;
    std::vector<Window> plan;
    std::vector<double> scrapeMicros;
    int scrapeFailures = 0;
    for (int i = 0; i < windows; ++i) {
        Window w;
        w.scraped = i % 2 == 1;
        w.from = wallNow() + 1.0; // a second to settle after the switch
        {
            std::unique_ptr<Scraper> scraper;
            if (w.scraped)
                scraper = std::make_unique<Scraper>(metricsPort);
            std::this_thread::sleep_for(windowLength);
            w.to = wallNow();
        }
        plan.push_back(w);
    }
    {
        Scraper last(metricsPort); // the scraper's own figures, kept apart from the windows
        std::this_thread::sleep_for(2s);
        scrapeMicros = last.micros();
        scrapeFailures = last.failures();
    }
    for (auto &w : workerTasks)
        w->stop();
    psTask.stop();

    // The workers' round trips and the steps, per kind of window.
    std::vector<double> pushUs[2];
    double steps[2] = {0, 0};
    double seconds[2] = {0, 0};
    for (const Window &w : plan)
        seconds[w.scraped] += w.to - w.from;
    QFile log(logdir.path() + u"/steps.jsonl"_s);
    if (!log.open(QIODevice::ReadOnly)) {
        std::fprintf(stderr, "bench_metrics_scrape: no step log in %s\n", qPrintable(logdir.path()));
        return 1;
    }
    while (!log.atEnd()) {
        const QJsonObject r = QJsonDocument::fromJson(log.readLine()).object();
        if (r.value(u"type"_s).toString() != u"step"_s)
            continue;
        const double t = r.value(u"wall_time"_s).toDouble();
        for (const Window &w : plan)
            if (t >= w.from && t < w.to) {
                pushUs[w.scraped].push_back(r.value(u"push_us"_s).toDouble());
                ++steps[w.scraped];
            }
    }

    std::printf("ps:0's /metrics scraped at 10 Hz vs not, 2 workers, async, softmax 7,850 parameters, "
                "%d windows of %lld s interleaved:\n",
                windows, static_cast<long long>(windowLength.count()));
    std::printf("  %-12s %12s %12s %12s %12s\n", "", "steps/s", "push p50 us", "push p90 us", "steps");
    for (const int scraped : {0, 1})
        std::printf("  %-12s %12.0f %12.0f %12.0f %12.0f\n", scraped ? "scraped" : "not scraped",
                    steps[scraped] / seconds[scraped], quantile(pushUs[scraped], 0.5), quantile(pushUs[scraped], 0.9),
                    steps[scraped]);
    std::printf("  a scrape of ps:0 (render + HTTP): median %.0f us, p90 %.0f us, %d failed\n",
                quantile(scrapeMicros, 0.5), quantile(scrapeMicros, 0.9), scrapeFailures);

    bench::ResultFile results(u"bench_metrics_scrape"_s, quick);
    for (const int scraped : {0, 1}) {
        const std::string name = scraped ? "scraped at 10 Hz" : "not scraped";
        results.add("metrics_scrape", name + "/push round trip", "us").values = pushUs[scraped];
        results.add("metrics_scrape", name + "/throughput", "updates/s").values = {steps[scraped] / seconds[scraped]};
    }
    results.add("metrics_scrape", "scrape", "us").values = scrapeMicros;
    return results.write(out) ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    bool quick = false;
    QString out;
    for (int i = 1; i < argc; ++i) {
        const QString arg = QString::fromLocal8Bit(argv[i]);
        if (arg == u"--quick"_s)
            quick = true;
        else if (arg.startsWith(u"--out="_s))
            out = arg.mid(6);
        else {
            std::fprintf(stderr, "usage: bench_metrics_scrape [--quick] [--out=FILE.json]\n");
            return 2;
        }
    }
    return run(quick, out);
}
