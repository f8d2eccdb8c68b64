#include "formats/open_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <stdexcept>

namespace parasync {

namespace {

bool isNameStart(char c, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

bool isNameChar(char c, bool colon)
{
    return isNameStart(c, colon) || (c >= '0' && c <= '9');
}

bool endsWith(std::string_view text, std::string_view suffix)
{
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string_view trimmed(std::string_view text)
{
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos)
        return {};
    const auto last = text.find_last_not_of(" \t");
    return text.substr(first, last - first + 1);
}

std::string lowered(std::string_view text)
{
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return out;
}

// What # TYPE says of a family in `format`.
const char *typeName(MetricType type, ExpositionFormat format)
{
    switch (type) {
    case MetricType::Counter: return "counter";
    case MetricType::Info:
        // The 0.0.4 text knows no info type: a gauge that is always 1.
        return format == ExpositionFormat::OpenMetrics ? "info" : "gauge";
    case MetricType::Gauge: break;
    }
    return "gauge";
}

const char *sampleSuffix(MetricType type)
{
    switch (type) {
    case MetricType::Counter: return "_total";
    case MetricType::Info: return "_info";
    case MetricType::Gauge: break;
    }
    return "";
}

void checkFamily(const MetricFamily &family)
{
    if (!isValidMetricName(family.name))
        throw std::invalid_argument("metric name '" + family.name + "' is not [a-zA-Z_:][a-zA-Z0-9_:]*");
    if (family.type == MetricType::Counter && endsWith(family.name, "_total"))
        throw std::invalid_argument("counter '" + family.name
                                    + "' is named with its _total suffix: name the family without it");
    if (family.type == MetricType::Info && endsWith(family.name, "_info"))
        throw std::invalid_argument("info family '" + family.name
                                    + "' is named with its _info suffix: name the family without it");
    std::set<std::vector<std::pair<std::string, std::string>>> seen;
    for (const MetricSample &sample : family.samples) {
        for (const auto &[label, value] : sample.labels)
            if (!isValidLabelName(label))
                throw std::invalid_argument("label '" + label + "' of " + family.name
                                            + " is not [a-zA-Z_][a-zA-Z0-9_]* or begins with __");
        auto sorted = sample.labels;
        std::sort(sorted.begin(), sorted.end());
        for (size_t i = 1; i < sorted.size(); ++i)
            if (sorted[i].first == sorted[i - 1].first)
                throw std::invalid_argument("label '" + sorted[i].first + "' given twice in a sample of "
                                            + family.name);
        if (!seen.insert(sorted).second)
            throw std::invalid_argument("two samples of " + family.name + " with the same labels");
        if (family.type == MetricType::Info && sample.value != 1)
            throw std::invalid_argument("info sample of " + family.name + " is " + formatMetricValue(sample.value)
                                        + ", not 1: an info metric's value is in its labels");
    }
}

} // namespace

bool isValidMetricName(std::string_view name)
{
    return !name.empty() && isNameStart(name.front(), true)
           && std::all_of(name.begin(), name.end(), [](char c) { return isNameChar(c, true); });
}

bool isValidLabelName(std::string_view name)
{
    return !name.empty() && isNameStart(name.front(), false) && name.substr(0, 2) != "__"
           && std::all_of(name.begin(), name.end(), [](char c) { return isNameChar(c, false); });
}

std::string escapeLabelValue(std::string_view value)
{
    std::string out;
    out.reserve(value.size());
    for (const char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string escapeHelp(std::string_view help, ExpositionFormat format)
{
    std::string out;
    out.reserve(help.size());
    for (const char c : help) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else if (c == '"' && format == ExpositionFormat::OpenMetrics)
            out += "\\\"";
        else
            out += c;
    }
    return out;
}

std::string formatMetricValue(double value)
{
    if (std::isnan(value))
        return "NaN";
    if (std::isinf(value))
        return value > 0 ? "+Inf" : "-Inf";
    char buffer[64];
    // Integral values up to 2^53 as integers: counters read "12", not "12.0" or "1.2e+01".
    if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
        const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, static_cast<long long>(value));
        return error == std::errc() ? std::string(buffer, end) : std::string("NaN");
    }
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
    return error == std::errc() ? std::string(buffer, end) : std::string("NaN");
}

double metricValueOf(float value)
{
    if (!std::isfinite(value))
        return double(value);
    char buffer[32];
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
    double shown = double(value);
    if (error == std::errc())
        std::from_chars(buffer, end, shown);
    return shown;
}

std::string renderMetrics(const std::vector<MetricFamily> &families, ExpositionFormat format)
{
    const bool openMetrics = format == ExpositionFormat::OpenMetrics;
    std::set<std::string> names;
    std::string out;
    for (const MetricFamily &family : families) {
        checkFamily(family);
        const std::string sampleName = family.name + sampleSuffix(family.type);
        // Every name a sample line could carry, so that a gauge "x_total"
        // beside a counter "x" is refused as the scraper would refuse it.
        if (!names.insert(family.name).second || (sampleName != family.name && !names.insert(sampleName).second))
            throw std::invalid_argument("two metric families named " + sampleName);
        if (family.samples.empty())
            continue;
        // The 0.0.4 text names a family by its samples' name; OpenMetrics by the family's.
        const std::string &described = openMetrics ? family.name : sampleName;
        if (!family.help.empty())
            out += "# HELP " + described + " " + escapeHelp(family.help, format) + "\n";
        out += "# TYPE " + described + " " + typeName(family.type, format) + "\n";
        for (const MetricSample &sample : family.samples) {
            out += sampleName;
            if (!sample.labels.empty()) {
                out += '{';
                for (size_t i = 0; i < sample.labels.size(); ++i) {
                    if (i > 0)
                        out += ',';
                    out += sample.labels[i].first + "=\"" + escapeLabelValue(sample.labels[i].second) + "\"";
                }
                out += '}';
            }
            out += ' ' + formatMetricValue(sample.value) + '\n';
        }
    }
    if (openMetrics)
        out += "# EOF\n";
    return out;
}

const char *metricsContentType(ExpositionFormat format)
{
    return format == ExpositionFormat::OpenMetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                                   : "text/plain; version=0.0.4; charset=utf-8";
}

ExpositionFormat negotiateExposition(std::string_view accept)
{
    // The highest quality the header gives each form; Prometheus sends
    // "application/openmetrics-text;version=1.0.0,...,text/plain;version=0.0.4;q=0.5,*/*;q=0.1".
    double openMetrics = 0;
    double text = 0;
    while (!accept.empty()) {
        const size_t comma = accept.find(',');
        const std::string_view range = accept.substr(0, comma);
        accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);

        std::string_view rest = range;
        const size_t semicolon = rest.find(';');
        const std::string type = lowered(trimmed(rest.substr(0, semicolon)));
        rest = semicolon == std::string_view::npos ? std::string_view() : rest.substr(semicolon + 1);
        double quality = 1;
        std::string version;
        while (!rest.empty()) {
            const size_t next = rest.find(';');
            const std::string_view parameter = trimmed(rest.substr(0, next));
            rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
            const size_t equals = parameter.find('=');
            if (equals == std::string_view::npos)
                continue;
            const std::string key = lowered(trimmed(parameter.substr(0, equals)));
            const std::string_view value = trimmed(parameter.substr(equals + 1));
            if (key == "q") {
                double q = 0;
                const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), q);
                quality = error == std::errc() && end == value.data() + value.size() ? std::clamp(q, 0.0, 1.0) : 0;
            } else if (key == "version") {
                version = std::string(value);
            }
        }
        if (type == "application/openmetrics-text") {
            if (version.empty() || version == "1.0.0" || version == "0.0.1")
                openMetrics = std::max(openMetrics, quality);
        } else if (type == "text/plain" || type == "text/*" || type == "*/*") {
            text = std::max(text, quality);
        }
    }
    return openMetrics > 0 && openMetrics >= text ? ExpositionFormat::OpenMetrics : ExpositionFormat::PrometheusText;
}

} // namespace parasync
