#include "config/flag_values.h"

#include <cmath>

namespace parasync {

std::string floatText(float value)
{
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}

std::vector<std::string> spellBooleanFlags(const std::vector<std::string> &args,
                                           const std::set<std::string> &valueFlags,
                                           const std::set<std::string> &switches)
{
    std::vector<std::string> spelled;
    spelled.reserve(args.size());
    bool optionsOver = false;
    for (const std::string &arg : args) {
        if (optionsOver || arg.size() < 2 || arg[0] != '-' || arg == "--") {
            optionsOver = optionsOver || arg == "--";
            spelled.push_back(arg);
            continue;
        }
        const size_t dashes = arg.compare(0, 2, "--") == 0 ? 2 : 1;
        const size_t equals = arg.find('=');
        const std::string name = arg.substr(dashes, equals == std::string::npos ? std::string::npos : equals - dashes);
        const bool negated = name.compare(0, 2, "no") == 0
                             && (valueFlags.count(name.substr(2)) != 0 || switches.count(name.substr(2)) != 0);
        const std::string flag = negated ? name.substr(2) : name;
        if (valueFlags.count(flag) != 0) {
            if (negated && equals == std::string::npos)
                spelled.push_back("--" + flag + "=0");
            else if (equals == std::string::npos)
                spelled.push_back("--" + flag + "=1");
            else
                spelled.push_back(arg); // --noname=... is left to the parser to refuse as unknown
            continue;
        }
        if (switches.count(flag) == 0 || (negated && equals != std::string::npos)) {
            spelled.push_back(arg);
            continue;
        }
        if (negated)
            continue; // --noinsecure: the switch's default
        if (equals == std::string::npos) {
            spelled.push_back(arg);
            continue;
        }
        const std::string value = arg.substr(equals + 1);
        if (value == "true" || value == "1")
            spelled.push_back("--" + flag);
        else if (value != "false" && value != "0")
            throw InputError(arg + ": --" + flag + " is a switch: give --" + flag + " or --" + flag
                             + "=true to turn it on, --no" + flag + " or --" + flag + "=false to leave it off");
    }
    return spelled;
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
        throw InputError(shown(name) + ": must be 1 or 0, or true or false (or give --" + name + " or --no" + name
                         + ")");
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
