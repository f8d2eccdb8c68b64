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

std::string joinedRows(const std::string &separator, std::string (*each)(const UpdateModeInfo &))
{
    std::string text;
    for (const UpdateModeInfo &info : updateModes())
        text += (text.empty() ? "" : separator) + each(info);
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

// "async and ssp": the modes that take kStalenessRuleSuffix.
std::string rulePlaces()
{
    std::vector<std::string> names;
    for (const UpdateModeInfo &info : updateModes())
        if (info.knobs.stalenessRule)
            names.push_back(info.name);
    std::string text;
    for (size_t i = 0; i < names.size(); ++i)
        text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    return text;
}

} // namespace

const std::vector<UpdateModeInfo> &updateModes()
{
    // The colours are the first three of the workers' Tableau palette, so
    // that the default comparison keeps the colours it always had.
    static const std::vector<UpdateModeInfo> modes = {
        {.mode = proto::ASYNC,
         .name = "async",
         .label = "Async",
         .meaning = "every gradient applied when it arrives (Downpour, Hogwild)",
         .specForm = "async",
         .knobs = {.stalenessRule = true},
         .unboundedStaleness = true,
         .rgb = 0x1f77b4},
        {.mode = proto::SYNC,
         .name = "sync",
         .label = "Sync",
         .meaning = "replicas_to_aggregate gradients of the current step averaged into one update "
                    "(SyncReplicasOptimizer)",
         .specForm = "sync[:REPLICAS[/TOTAL]]",
         .knobs = {.replicas = true},
         .unboundedStaleness = false,
         .rgb = 0xff7f0e},
        {.mode = proto::SSP,
         .name = "ssp",
         .label = "Semi-sync (SSP)",
         .meaning = "applied on arrival; no worker more than `staleness` steps ahead of the slowest (Ho et al.)",
         .specForm = "ssp:STALENESS",
         .knobs = {.staleness = true, .stalenessRule = true},
         .unboundedStaleness = false,
         .rgb = 0x2ca02c},
    };
    return modes;
}

const UpdateModeInfo *findUpdateMode(proto::UpdateMode mode)
{
    for (const UpdateModeInfo &info : updateModes())
        if (info.mode == mode)
            return &info;
    return nullptr;
}

std::string updateModeChoices()
{
    return joinedRows("|", [](const UpdateModeInfo &info) { return std::string(info.name); });
}

std::string updateModeMeanings()
{
    return joinedRows("; ", [](const UpdateModeInfo &info) { return info.name + std::string(": ") + info.meaning; });
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
    const UpdateModeInfo *info = findUpdateMode(mode);
    return info ? info->name : "unspecified";
}

std::string describeMode(const proto::ModeConfig &mode)
{
    const UpdateModeInfo *info = findUpdateMode(mode.mode());
    if (!info)
        return updateModeName(mode.mode());
    std::string numbers;
    if (info->knobs.staleness)
        numbers = "staleness=" + std::to_string(mode.staleness());
    if (info->knobs.replicas) {
        const std::string replicas = mode.replicas_to_aggregate() > 0 ? std::to_string(mode.replicas_to_aggregate())
                                                                      : std::string("all live workers");
        const std::string total
            = mode.total_num_replicas() > 0 ? std::to_string(mode.total_num_replicas()) : std::string("all workers");
        numbers += std::string(numbers.empty() ? "" : ", ") + "replicas_to_aggregate=" + replicas
                   + ", total_num_replicas=" + total;
    }
    std::string text = info->name;
    if (!numbers.empty())
        text += " (" + numbers + ")";
    if (info->knobs.stalenessRule && mode.learning_rate_by_staleness())
        text += ", learning rate / staleness";
    return text;
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
        return InputError("the mode '" + written + "' " + why + ": write " + knownSpecForms() + ", " + rulePlaces()
                          + " with " + kStalenessRuleSuffix + " if you like (e.g. async,async" + kStalenessRuleSuffix
                          + ",sync,sync:3/4,ssp:10)");
    };
    proto::ModeConfig mode;
    try {
        mode.set_mode(parseUpdateMode(name));
    } catch (const InputError &) {
        throw bad("is not one");
    }
    const ModeKnobs knobs = findUpdateMode(mode.mode())->knobs;
    if (knobs.staleness) {
        if (colon == std::string::npos) {
            mode.set_staleness(kDefaultStaleness);
        } else {
            const std::optional<int> staleness = wholeNumber(numbers);
            if (!staleness)
                throw bad("needs a staleness bound of 0 or more after the ':'");
            mode.set_staleness(*staleness);
        }
    } else if (knobs.replicas) {
        // No numbers: replicas_to_aggregate 0, every live worker.
        if (colon != std::string::npos) {
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
        }
    } else if (colon != std::string::npos) {
        throw bad("takes no numbers");
    }
    if (byStaleness) {
        if (!knobs.stalenessRule)
            throw bad("divides no learning rate: its gradients are all fresh");
        mode.set_learning_rate_by_staleness(true);
    }
    return mode;
}

std::string modeSpec(const proto::ModeConfig &mode)
{
    const UpdateModeInfo *info = findUpdateMode(mode.mode());
    if (!info)
        return updateModeName(mode.mode());
    std::string spec = info->name;
    if (info->knobs.staleness)
        spec += ":" + std::to_string(mode.staleness());
    if (info->knobs.replicas && mode.replicas_to_aggregate() > 0)
        spec += ":" + std::to_string(mode.replicas_to_aggregate())
                + (mode.total_num_replicas() > 0 ? "/" + std::to_string(mode.total_num_replicas()) : std::string());
    if (info->knobs.stalenessRule && mode.learning_rate_by_staleness())
        spec += kStalenessRuleSuffix;
    return spec;
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
