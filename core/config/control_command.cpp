#include "config/control_command.h"

#include "base/error.h"
#include "config/flag_values.h"
#include "config/node_options.h"

#include <map>

namespace parasync {

proto::ModeConfig ControlCommand::modeFrom(const proto::ModeConfig &current) const
{
    proto::ModeConfig config = current;
    config.set_mode(mode);
    if (staleness)
        config.set_staleness(*staleness);
    if (replicasToAggregate)
        config.set_replicas_to_aggregate(*replicasToAggregate);
    if (totalNumReplicas)
        config.set_total_num_replicas(*totalNumReplicas);
    if (learningRateByStaleness)
        config.set_learning_rate_by_staleness(*learningRateByStaleness);
    return config;
}

std::optional<ControlCommand> parseControlCommand(const std::vector<std::string> &args)
{
    // `--name` or `--name=value`; the first one given counts. No
    // QCommandLineParser here: it would refuse the task flags a user leaves
    // on the line.
    const auto flagValue = [&args](const std::string &name) -> std::optional<std::string> {
        for (const auto &arg : args) {
            if (arg == "--" + name)
                return std::string();
            if (arg.rfind("--" + name + "=", 0) == 0)
                return arg.substr(name.size() + 3);
        }
        return std::nullopt;
    };
    const auto setMode = flagValue("set_mode");
    if (!setMode && !flagValue("status"))
        return std::nullopt;

    ControlCommand command;
    const auto hosts = flagValue("ps_hosts");
    if (!hosts || hosts->empty())
        throw InputError("--status and --set_mode talk to ps:0: give its address with --ps_hosts=HOST:PORT");
    command.ps0 = hosts->substr(0, hosts->find(','));
    if (const auto backups = flagValue("ps_backup_hosts"); backups && !backups->empty())
        command.ps0Backup = backups->substr(0, backups->find(','));
    command.clusterTokenFile = flagValue("cluster_token_file").value_or("");

    std::map<std::string, GivenValue> connection;
    for (const std::string &name : connectionFlagNames())
        if (const auto value = flagValue(name))
            connection[name] = GivenValue{*value, {}};
    command.connection = connectionFromFlags(FlagValues(std::move(connection)));

    if (!setMode)
        return command;
    command.action = ControlCommand::Action::SetMode;
    try {
        command.mode = parseUpdateMode(*setMode);
    } catch (const InputError &) {
        throw InputError("--set_mode=" + *setMode
                         + ": must be async, sync or ssp (semi-synchronous, with --staleness)");
    }
    std::map<std::string, GivenValue> numbers;
    for (const char *name : {"staleness", "replicas_to_aggregate", "total_num_replicas"})
        if (const auto value = flagValue(name))
            numbers[name] = GivenValue{*value, {}};
    const FlagValues p(std::move(numbers));
    const auto number = [&p](const char *name, std::optional<int32_t> *target) {
        if (!p.has(name))
            return;
        int32_t value = 0;
        p.integer(name, &value, 0);
        *target = value;
    };
    number("staleness", &command.staleness);
    number("replicas_to_aggregate", &command.replicasToAggregate);
    number("total_num_replicas", &command.totalNumReplicas);
    if (const auto value = flagValue("learning_rate_by_staleness")) {
        bool byStaleness = false;
        std::map<std::string, GivenValue> given{{"learning_rate_by_staleness", GivenValue{*value, {}}}};
        FlagValues(std::move(given)).boolean("learning_rate_by_staleness", &byStaleness);
        command.learningRateByStaleness = byStaleness;
    }
    return command;
}

} // namespace parasync
