// The metrics endpoint (--metrics_port) on a real loopback socket, asked by
// a real HTTP client: /metrics in the format the Accept header asks for, a
// 404 that says where the metrics are, a port in use refused naming the
// flag, a clean stop.
#include "base/error.h"
#include "base/port_holder.h"
#include "formats/open_metrics.h"
#include "wire/metrics_endpoint.h"

#include <httplib.h>

#include <QTest>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

using namespace parasync;

namespace {

constexpr char kPrometheusAccept[] = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

// A page of one gauge, in the negotiated format, as a task renders it.
MetricsEndpoint::Render gaugePage(double value)
{
    return [value](const std::string &accept) {
        MetricFamily step;
        step.name = "parasync_global_step";
        step.help = "The global step";
        step.add(value);
        const ExpositionFormat format = negotiateExposition(accept);
        return MetricsPage{metricsContentType(format), renderMetrics({step}, format)};
    };
}

httplib::Result get(uint16_t port, const std::string &path, const std::string &accept = {})
{
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(5);
    client.set_read_timeout(5);
    httplib::Headers headers;
    if (!accept.empty())
        headers.emplace("Accept", accept);
    return client.Get(path, headers);
}

} // namespace

class TestMetricsEndpoint : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void servesTheTextInTheFormatTheScraperAsksFor()
    {
        const uint16_t port = pickFreePort();
        MetricsEndpoint endpoint("127.0.0.1", port, gaugePage(42));
        QCOMPARE(endpoint.url(), "http://127.0.0.1:" + std::to_string(port) + "/metrics");

        auto plain = get(port, "/metrics");
        QVERIFY2(plain, httplib::to_string(plain.error()).c_str());
        QCOMPARE(plain->status, 200);
        QCOMPARE(plain->get_header_value("Content-Type"), std::string("text/plain; version=0.0.4; charset=utf-8"));
        QCOMPARE(plain->body, std::string("# HELP parasync_global_step The global step\n"
                                          "# TYPE parasync_global_step gauge\nparasync_global_step 42\n"));

        auto open = get(port, "/metrics", kPrometheusAccept);
        QVERIFY(open);
        QCOMPARE(open->status, 200);
        QCOMPARE(open->get_header_value("Content-Type"),
                 std::string("application/openmetrics-text; version=1.0.0; charset=utf-8"));
        QVERIFY2(open->body.ends_with("parasync_global_step 42\n# EOF\n"), open->body.c_str());
    }

    void anyOtherPathIsNotFoundAndSaysWhereTheMetricsAre_data()
    {
        QTest::addColumn<QString>("path");
        QTest::newRow("root") << QStringLiteral("/");
        QTest::newRow("a typo") << QStringLiteral("/metric");
        QTest::newRow("below") << QStringLiteral("/metrics/x");
    }
    void anyOtherPathIsNotFoundAndSaysWhereTheMetricsAre()
    {
        QFETCH(QString, path);
        const uint16_t port = pickFreePort();
        MetricsEndpoint endpoint("127.0.0.1", port, gaugePage(1));
        auto answer = get(port, path.toStdString());
        QVERIFY(answer);
        QCOMPARE(answer->status, 404);
        QVERIFY2(answer->body.find("/metrics") != std::string::npos, answer->body.c_str());

        httplib::Client client("127.0.0.1", port);
        auto post = client.Post("/metrics", "x", "text/plain");
        QVERIFY(post);
        QVERIFY2(post->status == 404 || post->status == 405, std::to_string(post->status).c_str());
        QVERIFY2(post->body.find("GET /metrics") != std::string::npos, post->body.c_str());
    }

    void aPortInUseIsRefusedNamingTheFlag()
    {
        const uint16_t port = pickFreePort();
        PortBinding holder = bindPort("127.0.0.1", port, true);
        QVERIFY2(holder.bound(), holder.why().c_str());
        try {
            MetricsEndpoint endpoint("127.0.0.1", port, gaugePage(1));
            QFAIL("a port another socket listens on was taken");
        } catch (const InputError &e) {
            const std::string message = e.what();
            QVERIFY2(message.starts_with("--metrics_port=" + std::to_string(port) + ": "), e.what());
            QVERIFY2(message.find("already in use") != std::string::npos, e.what());
        }
    }

    // cpp-httplib's default SO_REUSEPORT would let a second task given the
    // same --metrics_port share the port and answer half the scrapes.
    void aSecondEndpointOnTheSamePortIsRefused()
    {
        const uint16_t port = pickFreePort();
        MetricsEndpoint first("127.0.0.1", port, gaugePage(1));
        QVERIFY_THROWS_EXCEPTION(InputError, MetricsEndpoint("127.0.0.1", port, gaugePage(2)));
        for (int i = 0; i < 5; ++i) {
            auto answer = get(port, "/metrics");
            QVERIFY(answer);
            QVERIFY2(answer->body.ends_with("parasync_global_step 1\n"), answer->body.c_str());
        }
    }

    void aHostOfAnotherMachineIsRefused()
    {
        // TEST-NET-1 (RFC 5737): never an address of this machine.
        try {
            MetricsEndpoint endpoint("192.0.2.1", pickFreePort(), gaugePage(1));
            QFAIL("bound an address of no interface");
        } catch (const InputError &e) {
            QVERIFY2(std::string(e.what()).find("an address of this machine") != std::string::npos, e.what());
        }
    }

    void rendersOnItsOwnThreadAndAFailureIsA500()
    {
        const uint16_t port = pickFreePort();
        std::atomic<bool> onCallersThread{false};
        const auto caller = std::this_thread::get_id();
        MetricsEndpoint endpoint("127.0.0.1", port, [&](const std::string &) -> MetricsPage {
            onCallersThread = std::this_thread::get_id() == caller;
            throw std::invalid_argument("two metric families named x");
        });
        auto answer = get(port, "/metrics");
        QVERIFY(answer);
        QCOMPARE(answer->status, 500);
        QVERIFY2(answer->body.find("two metric families named x") != std::string::npos, answer->body.c_str());
        QVERIFY(!onCallersThread);
    }

    // A scraper that keeps its connection open (Prometheus asks to) must not
    // keep a stopping task waiting for the connection's idle timeout.
    void stopsAtOnceWithAScrapersConnectionOpen()
    {
        const uint16_t port = pickFreePort();
        MetricsEndpoint endpoint("127.0.0.1", port, gaugePage(1));
        httplib::Client client("127.0.0.1", port);
        client.set_keep_alive(true);
        auto answer = client.Get("/metrics");
        QVERIFY(answer);
        QCOMPARE(answer->get_header_value("Connection"), std::string("close"));
        const auto start = std::chrono::steady_clock::now();
        endpoint.stop();
        QVERIFY(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
    }

    void stopsCleanlyAndFreesThePort()
    {
        const uint16_t port = pickFreePort();
        {
            MetricsEndpoint endpoint("127.0.0.1", port, gaugePage(1));
            QVERIFY(get(port, "/metrics"));
            endpoint.stop();
            endpoint.stop(); // idempotent; the destructor stops once more
            QVERIFY(!get(port, "/metrics"));
        }
        // Free again at once (SO_REUSEADDR: the closed connections' TIME_WAIT does not hold it).
        MetricsEndpoint again("127.0.0.1", port, gaugePage(2));
        auto answer = get(port, "/metrics");
        QVERIFY(answer);
        QVERIFY(answer->body.ends_with("parasync_global_step 2\n"));
    }
};

QTEST_GUILESS_MAIN(TestMetricsEndpoint)
#include "tst_metrics_endpoint.moc"
