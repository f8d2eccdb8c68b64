#pragma once

// A parasync-node command line as parseNodeOptions and parseControlCommand
// take it (argv[0] first), from the flags a test writes as QStrings.

#include <QStringList>

#include <string>
#include <vector>

namespace parasync::testing {

inline std::vector<std::string> nodeArguments(const QStringList &flags)
{
    std::vector<std::string> args{"parasync-node"};
    for (const QString &flag : flags)
        args.push_back(flag.toStdString());
    return args;
}

} // namespace parasync::testing
