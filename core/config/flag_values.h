#pragma once

// Flags given by name, read as typed values. Every refusal names the flag as
// it was written and where it came from (the command line, or a section of a
// cluster file), with a value that would do: the node's parser, the control
// command and the cluster file's "training" section read their flags through
// it, so that they refuse bad input in the same words.

#include "base/error.h"

#include <charconv>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace parasync {

// A flag's value and where it came from, for messages that say which to fix.
struct GivenValue
{
    std::string value;
    std::string file;                             // empty: the command line
    std::string section = "\"training\" section"; // where in the file
};

// A float's shortest spelling ("0.05", not 0.0500000007).
std::string floatText(float value);

// TensorFlow's (absl's) spellings of a boolean flag, rewritten into the one
// each parser reads, so that every boolean of both programs takes --name,
// --noname and --name=true|false|1|0. For a flag that takes 0|1
// (`valueFlags`), --name becomes --name=1 and --noname --name=0 (its
// true|false stay, as boolean() reads them); for a switch (`switches`,
// given bare), --name=true|1 becomes --name, and --name=false|0 and
// --noname drop out. A single dash works as two. Everything else, and all
// after a bare "--", is kept as it was. Throws InputError for a switch
// given any other value, naming the forms it takes.
std::vector<std::string> spellBooleanFlags(const std::vector<std::string> &args,
                                           const std::set<std::string> &valueFlags,
                                           const std::set<std::string> &switches);

class FlagValues
{
public:
    explicit FlagValues(std::map<std::string, GivenValue> values) : m_values(std::move(values)) {}

    bool has(const std::string &name) const { return m_values.count(name) != 0; }
    const std::string &text(const std::string &name) const { return m_values.at(name).value; }

    // "--batch_size=0" or "--batch_size=0 (from cluster file 'run.json')".
    std::string shown(const std::string &name) const;

    // Each reader leaves `target` as it is when the flag was not given.
    template<typename Int>
    void integer(const std::string &name, Int *target, long long minimum,
                 long long maximum = std::numeric_limits<Int>::max()) const
    {
        if (!has(name))
            return;
        const std::string &value = text(name);
        long long parsed = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
        if (ec == std::errc::result_out_of_range)
            throw InputError(shown(name) + ": must be at most " + std::to_string(maximum));
        if (ec != std::errc() || end != value.data() + value.size() || value.empty())
            throw InputError(shown(name) + ": not a whole number; give e.g. --" + name + "="
                             + std::to_string(std::max<long long>(minimum, 10)));
        if (parsed < minimum)
            throw InputError(shown(name) + ": must be at least " + std::to_string(minimum));
        if (parsed > maximum)
            throw InputError(shown(name) + ": must be at most " + std::to_string(maximum));
        *target = Int(parsed);
    }
    void unsignedInteger(const std::string &name, uint64_t *target) const;
    void positiveFloat(const std::string &name, float *target) const;
    void boundedFloat(const std::string &name, float *target, float minimum, float maximum) const;
    // More than 0 and less than 1; empty (a cluster.json's unset value) leaves it unset.
    void fraction(const std::string &name, double *target) const;
    // 1|0 or true|false (--issync=1, a cluster file's "data_link": true).
    void boolean(const std::string &name, bool *target) const;
    void string(const std::string &name, std::string *target, bool mayBeEmpty) const;

private:
    // The flag's text as a number (NaN and infinities too: the callers
    // bound it); refused with `example` as a value that would do.
    double number(const std::string &name, const std::string &example) const;

    std::map<std::string, GivenValue> m_values;
};

} // namespace parasync
