#include "node/task_metrics.h"

namespace parasync {

std::unique_ptr<MetricsEndpoint> serveTaskMetrics(const NodeOptions &options,
                                                  std::function<std::string(ExpositionFormat)> render,
                                                  const std::function<void(const std::string &)> &log)
{
    if (options.metricsPort == 0)
        return nullptr;
    const HostPort &own = options.cluster.address(options.task);
    auto endpoint = std::make_unique<MetricsEndpoint>(
        own.host, uint16_t(options.metricsPort), [render = std::move(render)](const std::string &accept) {
            const ExpositionFormat format = negotiateExposition(accept);
            return MetricsPage{metricsContentType(format), render(format)};
        });
    if (log)
        log(options.task.toString() + " serves its metrics for Prometheus at " + endpoint->url());
    return endpoint;
}

} // namespace parasync
