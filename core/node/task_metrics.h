#pragma once

// A task's metrics endpoint (--metrics_port) at its own host: the negotiated
// exposition format handed to the task's rendering, the rest
// wire/metrics_endpoint.h's.

#include "config/task_options.h"
#include "formats/open_metrics.h"
#include "wire/metrics_endpoint.h"

#include <functional>
#include <memory>
#include <string>

namespace parasync {

// Serves `render` at http://HOST:--metrics_port/metrics, HOST being the task's
// own host in the cluster spec, and says where in `log`. nullptr when
// --metrics_port is 0. Throws InputError naming --metrics_port when the port
// is taken. `render` is called on the endpoint's threads.
std::unique_ptr<MetricsEndpoint> serveTaskMetrics(const NodeOptions &options,
                                                  std::function<std::string(ExpositionFormat)> render,
                                                  const std::function<void(const std::string &)> &log);

} // namespace parasync
