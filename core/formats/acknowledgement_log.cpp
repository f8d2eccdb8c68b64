#include "formats/acknowledgement_log.h"

#include "base/error.h"
#include "formats/run_log.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace parasync {

AcknowledgementLog::AcknowledgementLog(const std::string &path) : m_path(path)
{
    m_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (m_fd < 0)
        throw InputError("--acknowledgement_log=" + path + " cannot be opened for appending: " + std::strerror(errno)
                         + "; give a file in a directory this worker can write");
}

AcknowledgementLog::~AcknowledgementLog()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

std::string AcknowledgementLog::line(const Acknowledgement &a)
{
    std::string epochs, answered;
    for (size_t i = 0; i < a.leaseEpochs.size(); ++i)
        epochs += (i ? "," : "") + std::to_string(a.leaseEpochs[i]);
    for (size_t i = 0; i < a.answeredBy.size(); ++i)
        answered += (i ? "," : "") + jsonQuoted(a.answeredBy[i]);
    return "{\"worker\":" + std::to_string(a.worker) + ",\"worker_clock\":" + std::to_string(a.workerClock)
           + ",\"update\":" + std::to_string(a.update) + ",\"global_step\":" + std::to_string(a.globalStep)
           + ",\"outcome\":\"" + outcomeName(a.outcome) + "\",\"lease_epochs\":[" + epochs + "],\"answered_by\":["
           + answered + "],\"time\":" + jsonSeconds(a.time) + "}\n";
}

std::string AcknowledgementLog::record(const Acknowledgement &acknowledgement)
{
    const std::string text = line(acknowledgement);
    // One write: appended whole, whatever else writes to the file.
    const ssize_t written = ::write(m_fd, text.data(), text.size());
    if (written == ssize_t(text.size()) || m_failed)
        return {};
    m_failed = true;
    return "cannot append to --acknowledgement_log=" + m_path + ": "
           + (written < 0 ? std::string(std::strerror(errno)) : "a short write")
           + "; the worker trains on, and the file misses steps from here";
}

} // namespace parasync
