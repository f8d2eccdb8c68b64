#include "config/update_modes.h"

#include "base/error.h"

#include <google/protobuf/util/message_differencer.h>

#include <QJsonObject>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace parasync {

namespace {

std::string lowered(std::string text)
{
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return text;
}

std::string knownSpecForms()
{
    std::string forms;
    for (const UpdateModeInfo &info : updateModes())
        forms += (forms.empty() ? "" : ", ") + std::string(info.specForm);
    return forms;
}

// A whole non-negative decimal number, or nullopt.
std::optional<int> wholeNumber(const std::string &text)
{
    int value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
        return std::nullopt;
    return value;
}

std::string stalenessRuleWords(const proto::ModeConfig &mode)
{
    return mode.learning_rate_by_staleness() ? ", learning rate / staleness" : "";
}

} // namespace

const std::vector<UpdateModeInfo> &updateModes()
{
    static const std::vector<UpdateModeInfo> modes = {
        {proto::ASYNC, "async", "every gradient applied when it arrives (Downpour, Hogwild)", "async"},
        {proto::SYNC, "sync",
         "replicas_to_aggregate gradients of the current step averaged into one update "
         "(SyncReplicasOptimizer)",
         "sync[:REPLICAS[/TOTAL]]"},
        {proto::SSP, "ssp",
         "applied on arrival; no worker more than `staleness` steps ahead of the slowest (Ho et al.)", "ssp:STALENESS"},
    };
    return modes;
}

proto::UpdateMode parseUpdateMode(const std::string &text)
{
    const std::string name = lowered(text);
    const std::vector<UpdateModeInfo> &modes = updateModes();
    std::string names; // "async, sync or ssp"
    for (size_t i = 0; i < modes.size(); ++i) {
        if (name == modes[i].name)
            return modes[i].mode;
        names += (i == 0 ? "" : i + 1 == modes.size() ? " or " : ", ") + std::string(modes[i].name);
    }
    throw InputError("unknown update mode '" + text + "': use " + names);
}

std::string updateModeName(proto::UpdateMode mode)
{
    for (const UpdateModeInfo &info : updateModes())
        if (info.mode == mode)
            return info.name;
    return "unspecified";
}

std::string describeMode(const proto::ModeConfig &mode)
{
    switch (mode.mode()) {
    case proto::SYNC: {
        const std::string replicas = mode.replicas_to_aggregate() > 0 ? std::to_string(mode.replicas_to_aggregate())
                                                                      : std::string("all live workers");
        const std::string total
            = mode.total_num_replicas() > 0 ? std::to_string(mode.total_num_replicas()) : std::string("all workers");
        // The rule divides by a staleness sync never has: not worth a word.
        return "sync (replicas_to_aggregate=" + replicas + ", total_num_replicas=" + total + ")";
    }
    case proto::SSP: return "ssp (staleness=" + std::to_string(mode.staleness()) + ")" + stalenessRuleWords(mode);
    default: return updateModeName(mode.mode()) + stalenessRuleWords(mode);
    }
}

bool sameMode(const proto::ModeConfig &a, const proto::ModeConfig &b)
{
    return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

proto::ModeConfig modeFromJson(const QJsonObject &object)
{
    proto::ModeConfig mode;
    try {
        mode.set_mode(parseUpdateMode(object.value(QLatin1String("mode")).toString().toStdString()));
    } catch (const InputError &) {
        mode.set_mode(proto::UPDATE_MODE_UNSPECIFIED);
    }
    mode.set_staleness(object.value(QLatin1String("staleness")).toInt());
    mode.set_replicas_to_aggregate(object.value(QLatin1String("replicas_to_aggregate")).toInt());
    mode.set_total_num_replicas(object.value(QLatin1String("total_num_replicas")).toInt());
    // true in the step log, 1 in cluster.json (whose training section is
    // flags, as a cluster file's); "1" or "true" as a cluster file may say.
    const QJsonValue rule = object.value(QLatin1String("learning_rate_by_staleness"));
    mode.set_learning_rate_by_staleness(rule.toBool() || rule.toInt() == 1 || rule.toString() == QLatin1String("1")
                                        || rule.toString() == QLatin1String("true"));
    return mode;
}

proto::ModeConfig parseModeSpec(const std::string &written)
{
    const bool byStaleness
        = written.size() > std::string(kStalenessRuleSuffix).size() && written.ends_with(kStalenessRuleSuffix);
    const std::string text
        = byStaleness ? written.substr(0, written.size() - std::string(kStalenessRuleSuffix).size()) : written;
    const size_t colon = text.find(':');
    const std::string name = text.substr(0, colon);
    const std::string numbers = colon == std::string::npos ? std::string() : text.substr(colon + 1);
    const auto bad = [&](const std::string &why) {
        return InputError("the mode '" + written + "' " + why + ": write " + knownSpecForms() + ", each but sync with "
                          + kStalenessRuleSuffix + " if you like (e.g. async,async" + kStalenessRuleSuffix
                          + ",sync,sync:3/4,ssp:10)");
    };
    proto::ModeConfig mode;
    try {
        mode.set_mode(parseUpdateMode(name));
    } catch (const InputError &) {
        throw bad("is not one");
    }
    switch (mode.mode()) {
    case proto::ASYNC:
        if (colon != std::string::npos)
            throw bad("takes no numbers");
        break;
    case proto::SSP: {
        if (colon == std::string::npos) {
            mode.set_staleness(kDefaultStaleness);
            break;
        }
        const std::optional<int> staleness = wholeNumber(numbers);
        if (!staleness)
            throw bad("needs a staleness bound of 0 or more after the ':'");
        mode.set_staleness(*staleness);
        break;
    }
    case proto::SYNC: {
        if (colon == std::string::npos)
            break; // replicas_to_aggregate 0: every live worker
        const size_t slash = numbers.find('/');
        const std::optional<int> replicas = wholeNumber(numbers.substr(0, slash));
        if (!replicas || *replicas < 1)
            throw bad("needs the gradients per step (1 or more) after the ':'");
        mode.set_replicas_to_aggregate(*replicas);
        if (slash != std::string::npos) {
            const std::optional<int> total = wholeNumber(numbers.substr(slash + 1));
            if (!total || *total < *replicas)
                throw bad("needs a total number of replicas no smaller than the gradients per step after the '/'");
            mode.set_total_num_replicas(*total);
        }
        break;
    }
    default: throw bad("is not one");
    }
    if (byStaleness) {
        if (mode.mode() == proto::SYNC)
            throw bad("divides no learning rate: sync applies fresh gradients only");
        mode.set_learning_rate_by_staleness(true);
    }
    return mode;
}

std::string modeSpec(const proto::ModeConfig &mode)
{
    const std::string name = updateModeName(mode.mode());
    const std::string rule = mode.learning_rate_by_staleness() ? kStalenessRuleSuffix : "";
    switch (mode.mode()) {
    case proto::SSP: return name + ":" + std::to_string(mode.staleness()) + rule;
    case proto::ASYNC: return name + rule;
    case proto::SYNC:
        if (mode.replicas_to_aggregate() <= 0)
            return name;
        return name + ":" + std::to_string(mode.replicas_to_aggregate())
               + (mode.total_num_replicas() > 0 ? "/" + std::to_string(mode.total_num_replicas()) : std::string());
    default: return name;
    }
}

std::vector<proto::ModeConfig> parseModeSpecList(const std::string &text)
{
    std::vector<proto::ModeConfig> modes;
    size_t begin = 0;
    while (begin <= text.size()) {
        const size_t comma = std::min(text.find(',', begin), text.size());
        const std::string spec = text.substr(begin, comma - begin);
        if (!spec.empty()) {
            const proto::ModeConfig mode = parseModeSpec(spec);
            for (const proto::ModeConfig &earlier : modes)
                if (sameMode(earlier, mode))
                    throw InputError("the modes '" + text + "' name " + modeSpec(mode)
                                     + " twice: give each contender once");
            modes.push_back(mode);
        }
        begin = comma + 1;
    }
    if (modes.empty())
        throw InputError("no update modes given: write a comma-separated list such as async,sync,sync:3/4,ssp:10");
    return modes;
}

} // namespace parasync
