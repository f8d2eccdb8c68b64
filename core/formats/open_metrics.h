#pragma once

// The text a Prometheus server scrapes: metric families written in the
// Prometheus text exposition format (version 0.0.4) or in OpenMetrics 1.0.0,
// as the scraper asks (wire/metrics_endpoint.h negotiates). Pure functions;
// a task builds its families and hands them to renderMetrics().
//
// The two forms differ where OpenMetrics is stricter: a counter family is
// named without its "_total" suffix in # HELP and # TYPE (its sample keeps
// it), an info family has a type of its own, the help text escapes double
// quotes too, and the text ends with "# EOF".

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parasync {

enum class ExpositionFormat {
    PrometheusText, // text/plain; version=0.0.4
    OpenMetrics,    // application/openmetrics-text; version=1.0.0
};

enum class MetricType {
    Counter, // only goes up (reset by a restart); its sample is NAME_total
    Gauge,   // goes up and down
    Info,    // a constant 1 whose labels carry the value (NAME_info{mode="sync"} 1)
};

struct MetricSample
{
    // Label name and value, in the order they are written.
    std::vector<std::pair<std::string, std::string>> labels;
    double value = 0;
};

struct MetricFamily
{
    // Without the "_total" of a counter or the "_info" of an info family:
    // renderMetrics() adds them.
    std::string name;
    MetricType type = MetricType::Gauge;
    std::string help;
    std::vector<MetricSample> samples;

    // One sample with these labels, for building a family line by line.
    MetricFamily &add(double value, std::vector<std::pair<std::string, std::string>> labels = {})
    {
        samples.push_back(MetricSample{std::move(labels), value});
        return *this;
    }
};

// The families as text in `format`, in the order given. Throws
// std::invalid_argument for what the exposition formats cannot say: an
// invalid metric or label name (a reserved "__" label, a counter named
// "..._total"), two families of one name, two samples of a family with the
// same labels, an info sample other than 1. A family without samples is
// left out (OpenMetrics allows it, but it says nothing).
std::string renderMetrics(const std::vector<MetricFamily> &families, ExpositionFormat format);

// The Content-Type header of a scrape answered in `format`.
const char *metricsContentType(ExpositionFormat format);

// Which format a scraper's Accept header asks for: OpenMetrics when it
// accepts application/openmetrics-text (version 1.0.0, 0.0.1 or none) at
// least as much as text/plain; the Prometheus text form otherwise, an empty
// or unparsable header included.
ExpositionFormat negotiateExposition(std::string_view accept);

// A label value with backslash, double quote and newline escaped, as both
// formats write it between double quotes.
std::string escapeLabelValue(std::string_view value);
// A help text escaped for `format`: backslash and newline (and, in
// OpenMetrics, double quote).
std::string escapeHelp(std::string_view help, ExpositionFormat format);
// A sample value: integers without a fraction ("3", "-2"), others in the
// shortest form that reads back as the same double ("0.1", "1e+100"),
// and "NaN", "+Inf", "-Inf".
std::string formatMetricValue(double value);

// A float figure (a loss, an accuracy) as the double whose shortest text is
// the float's: 0.1f is shown "0.1", not "0.10000000149011612". NaN stays NaN.
double metricValueOf(float value);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool isValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not beginning with "__" (reserved for Prometheus).
bool isValidLabelName(std::string_view name);

} // namespace parasync
