#include "formats/task_state_line.h"

#include <QRegularExpression>
#include <QString>

#include <array>
#include <utility>

namespace parasync {

namespace {

constexpr std::array<std::pair<TaskPhase, const char *>, 6> kPhases = {{
    {TaskPhase::Listening, "listening"},
    {TaskPhase::Waiting, "waiting"},
    {TaskPhase::Training, "training"},
    {TaskPhase::Serving, "serving"},
    {TaskPhase::Finished, "finished"},
    {TaskPhase::Stopped, "stopped"},
}};

} // namespace

const char *taskPhaseName(TaskPhase phase)
{
    for (const auto &[value, name] : kPhases)
        if (value == phase)
            return name;
    return "unknown";
}

std::string taskStateLine(const TaskStateReport &report)
{
    std::string line = report.task.toString() + " state " + taskPhaseName(report.phase);
    if (!report.detail.empty())
        line += ": " + report.detail;
    return line;
}

std::optional<TaskStateReport> parseTaskStateLine(std::string_view text)
{
    // The node's log prefixes "HH:MM:SS.mmm "; a line read over ssh or from
    // a pod's log may carry it or not.
    static const QRegularExpression form(QStringLiteral(
        "^(?:\\d\\d:\\d\\d:\\d\\d\\.\\d{3} )?(ps_backup|ps|worker):(\\d{1,9}) state ([a-z]+)(?:: (.*))?$"));
    const auto match = form.match(QString::fromUtf8(text.data(), qsizetype(text.size())).trimmed());
    if (!match.hasMatch())
        return std::nullopt;
    TaskStateReport report;
    report.task.job = match.captured(1) == QLatin1String("ps")          ? JobName::Ps
                      : match.captured(1) == QLatin1String("ps_backup") ? JobName::PsBackup
                                                                        : JobName::Worker;
    report.task.index = match.captured(2).toInt();
    const std::string phase = match.captured(3).toStdString();
    bool known = false;
    for (const auto &[value, name] : kPhases)
        if (phase == name) {
            report.phase = value;
            known = true;
        }
    if (!known)
        return std::nullopt;
    report.detail = match.captured(4).toStdString();
    return report;
}

} // namespace parasync
