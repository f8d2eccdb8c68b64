#include "config/flag_values.h"

#include <cmath>

namespace parasync {

std::string floatText(float value)
{
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}

std::string FlagValues::shown(const std::string &name) const
{
    const GivenValue &given = m_values.at(name);
    std::string out = "--" + name + "=" + given.value;
    if (!given.file.empty())
        out += " (from the " + given.section + " of cluster file '" + given.file + "')";
    return out;
}

void FlagValues::unsignedInteger(const std::string &name, uint64_t *target) const
{
    if (!has(name))
        return;
    const std::string &value = text(name);
    if (!value.empty() && value.front() == '-')
        throw InputError(shown(name) + ": must be at least 0");
    uint64_t parsed = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (ec == std::errc::result_out_of_range)
        throw InputError(shown(name) + ": must be at most " + std::to_string(std::numeric_limits<uint64_t>::max()));
    if (ec != std::errc() || end != value.data() + value.size() || value.empty())
        throw InputError(shown(name) + ": not a whole number; give e.g. --" + name + "=1");
    *target = parsed;
}

double FlagValues::number(const std::string &name, const std::string &example) const
{
    const std::string &value = text(name);
    double parsed = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (ec != std::errc() || end != value.data() + value.size() || value.empty())
        throw InputError(shown(name) + ": not a number; give e.g. --" + name + "=" + example);
    return parsed;
}

void FlagValues::positiveFloat(const std::string &name, float *target) const
{
    if (!has(name))
        return;
    const double parsed = number(name, "0.05");
    if (!std::isfinite(parsed) || parsed > double(std::numeric_limits<float>::max()))
        throw InputError(shown(name) + ": must be a finite number, like 0.05");
    if (parsed <= 0)
        throw InputError(shown(name) + ": must be greater than 0");
    if (float(parsed) == 0.0f)
        throw InputError(shown(name) + ": too small, it rounds to 0 as a float; give e.g. --" + name + "=0.05");
    *target = float(parsed);
}

void FlagValues::boundedFloat(const std::string &name, float *target, float minimum, float maximum) const
{
    if (!has(name))
        return;
    const double parsed = number(name, floatText(maximum / 4));
    // !(in range) also refuses NaN.
    if (!(parsed >= double(minimum) && parsed <= double(maximum)))
        throw InputError(shown(name) + ": must be from " + floatText(minimum) + " to " + floatText(maximum));
    *target = float(parsed);
}

void FlagValues::fraction(const std::string &name, double *target) const
{
    if (!has(name) || text(name).empty())
        return;
    const double parsed = number(name, "0.2");
    // !(in range) also refuses NaN.
    if (!(parsed > 0 && parsed < 1))
        throw InputError(shown(name) + ": must be more than 0 and less than 1, e.g. --" + name
                         + "=0.2 holds out a fifth of the rows");
    *target = parsed;
}

void FlagValues::boolean(const std::string &name, bool *target) const
{
    if (!has(name))
        return;
    const std::string &value = text(name);
    if (value == "1" || value == "true")
        *target = true;
    else if (value == "0" || value == "false")
        *target = false;
    else
        throw InputError(shown(name) + ": must be 0 or 1");
}

void FlagValues::string(const std::string &name, std::string *target, bool mayBeEmpty) const
{
    if (!has(name))
        return;
    if (!mayBeEmpty && text(name).empty())
        throw InputError(shown(name) + ": must not be empty (default: " + *target + ")");
    *target = text(name);
}

} // namespace parasync
