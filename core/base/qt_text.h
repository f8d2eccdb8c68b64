#pragma once

// std::string <-> QString where the engine's standard strings meet Qt's
// (JSON, files, processes): one spelling for the whole project, where ten
// files each wrote their own.

#include <QString>

#include <string>

namespace parasync {

inline QString qs(const std::string &text)
{
    return QString::fromStdString(text);
}

inline std::string ss(const QString &text)
{
    return text.toStdString();
}

} // namespace parasync
