#pragma once

// A task's metrics over HTTP for Prometheus (--metrics_port): GET /metrics
// answers with the text the task renders, every other path with 404 and a
// line that says where the metrics are. cpp-httplib serves it on threads of
// its own, so a scrape never runs on a gRPC or training thread. What the text
// says, and in which exposition format, is the caller's (the Accept header
// is handed over; formats/open_metrics.h negotiates and renders): this layer
// knows HTTP, not the engine.
//
// Plain HTTP and no token, as Prometheus scrapes: the page is read-only and
// steers nothing. It listens on the task's own host only.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace parasync {

struct MetricsPage
{
    std::string contentType;
    std::string body;
};

class MetricsEndpoint
{
public:
    // Called for every GET /metrics, on one of the endpoint's threads (up to
    // two at once), with the request's Accept header ("" when none).
    // An exception becomes a 500 answer with its message.
    using Render = std::function<MetricsPage(const std::string &accept)>;

    // Binds host:port and serves. Throws InputError naming `flag` when the
    // port is in use (and by whom, when /proc tells) or the host is not this
    // machine's.
    MetricsEndpoint(const std::string &host, uint16_t port, Render render, const std::string &flag = "--metrics_port");
    // Stops taking scrapes and waits for those under way.
    ~MetricsEndpoint();
    MetricsEndpoint(const MetricsEndpoint &) = delete;
    MetricsEndpoint &operator=(const MetricsEndpoint &) = delete;

    // "http://127.0.0.1:9100/metrics"
    const std::string &url() const { return m_url; }
    // Stops serving: blocks until the endpoint's threads have ended. Idempotent.
    void stop();

private:
    struct Server;
    std::unique_ptr<Server> m_server;
    std::string m_url;
};

} // namespace parasync
