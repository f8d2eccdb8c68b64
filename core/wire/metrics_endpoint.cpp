#include "wire/metrics_endpoint.h"

#include "base/error.h"
#include "base/port_holder.h"

#include <httplib.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

namespace parasync {

struct MetricsEndpoint::Server
{
    httplib::Server http;
    std::thread thread;
    std::atomic<bool> ended{false}; // the listening loop returned
};

namespace {

// Scrapes at once: Prometheus scrapes each target on one connection at a
// time; a person's curl or a second Prometheus may add one.
constexpr size_t kServingThreads = 4;

constexpr char kNotFound[] = "Parasync serves its metrics at /metrics only (GET /metrics, as Prometheus scrapes).\n";

} // namespace

MetricsEndpoint::MetricsEndpoint(const std::string &host, uint16_t port, Render render, const std::string &flag)
    : m_server(std::make_unique<Server>())
{
    // gRPC's listen address and the port checks read "localhost" as 127.0.0.1; so does this.
    const std::string bindHost = host == "localhost" ? std::string("127.0.0.1") : host;
    const bool ipv6 = bindHost.find(':') != std::string::npos;
    m_url = "http://" + (ipv6 ? "[" + bindHost + "]" : bindHost) + ":" + std::to_string(port) + "/metrics";

    httplib::Server &http = m_server->http;
    http.new_task_queue = [] { return new httplib::ThreadPool(kServingThreads); };
    // One answer a connection: an idle kept-alive connection holds a thread
    // (cpp-httplib polls it every 10 ms) and held a stopping task for its
    // 5 s timeout. A scrape a second or slower loses nothing by reconnecting.
    http.set_keep_alive_max_count(1);
    // cpp-httplib sets SO_REUSEPORT by default, with which a second process
    // (another task given the same --metrics_port) binds the same port and
    // takes half the scrapes. SO_REUSEADDR only, as gRPC binds.
    http.set_socket_options([](socket_t socket) {
        int yes = 1;
        ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    http.Get("/metrics", [render = std::move(render)](const httplib::Request &request, httplib::Response &response) {
        try {
            MetricsPage page = render(request.get_header_value("Accept"));
            response.set_content(std::move(page.body), page.contentType.c_str());
        } catch (const std::exception &e) {
            response.status = 500;
            response.set_content(std::string("rendering the metrics failed: ") + e.what() + "\n",
                                 "text/plain; charset=utf-8");
        }
    });
    // Every other path, and every other method, says where the metrics are.
    http.set_error_handler([](const httplib::Request &, httplib::Response &response) {
        if (response.status == 404 || response.status == 405)
            response.set_content(kNotFound, "text/plain; charset=utf-8");
    });

    if (!http.bind_to_port(bindHost, int(port))) {
        std::string message = flag + "=" + std::to_string(port) + ": cannot serve the metrics at " + bindHost + ":"
                              + std::to_string(port);
        if (bindPort(bindHost, port).inUse()) {
            message += ": the port is already in use";
            if (const auto holder = findPortHolder(port))
                message += " by " + holder->describe();
            message += ". Give " + flag + " a free port (each task its own), or stop that process";
        } else {
            message += ": is " + bindHost + " (this task's host in the cluster spec) an address of this machine?";
        }
        throw InputError(message);
    }
    m_server->thread = std::thread([server = m_server.get()] {
        server->http.listen_after_bind();
        server->ended = true;
    });
    // stop() before the listening loop started would be missed by it (and
    // the join would wait forever): return once it runs.
    while (!http.is_running() && !m_server->ended)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MetricsEndpoint::~MetricsEndpoint()
{
    stop();
}

void MetricsEndpoint::stop()
{
    if (!m_server->thread.joinable())
        return;
    m_server->http.stop();
    m_server->thread.join();
}

} // namespace parasync
