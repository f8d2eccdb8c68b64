#include "node/in_process_train_call.h"

#include "node/ps_task.h"

namespace parasync {

InProcessTrainCall::InProcessTrainCall(PsTask &ps)
{
    m_thread = std::thread([this, &ps] {
        CallStatus status = ps.train(*this);
        std::lock_guard lock(m_mutex);
        m_end = std::move(status);
        m_changed.notify_all();
    });
}

InProcessTrainCall::~InProcessTrainCall()
{
    close();
    m_thread.join();
}

void InProcessTrainCall::send(proto::TrainRequest request)
{
    std::lock_guard lock(m_mutex);
    m_requests.push_back(std::move(request));
    ++m_sent;
    m_changed.notify_all();
}

void InProcessTrainCall::close()
{
    std::lock_guard lock(m_mutex);
    m_closed = true;
    m_changed.notify_all();
}

bool InProcessTrainCall::receive(proto::TrainResponse *response, std::chrono::milliseconds timeout)
{
    std::unique_lock lock(m_mutex);
    if (!m_changed.wait_for(lock, timeout, [this] { return !m_responses.empty(); }))
        return false;
    *response = std::move(m_responses.front());
    m_responses.pop_front();
    return true;
}

InProcessTrainCall::Progress InProcessTrainCall::progressLocked() const
{
    // A call that ended has handled all it will: what it did not read is lost.
    return {m_sent, m_read, m_end ? m_read : m_handled, m_end.has_value()};
}

InProcessTrainCall::Progress InProcessTrainCall::progress() const
{
    std::lock_guard lock(m_mutex);
    return progressLocked();
}

InProcessTrainCall::Progress InProcessTrainCall::waitForProgress(const Progress &seen,
                                                                 std::chrono::milliseconds timeout)
{
    std::unique_lock lock(m_mutex);
    m_changed.wait_for(lock, timeout, [&] { return progressLocked() != seen; });
    return progressLocked();
}

std::optional<CallStatus> InProcessTrainCall::waitForEnd(std::chrono::milliseconds timeout)
{
    std::unique_lock lock(m_mutex);
    m_changed.wait_for(lock, timeout, [this] { return m_end.has_value(); });
    return m_end;
}

bool InProcessTrainCall::read(proto::TrainRequest *request)
{
    std::unique_lock lock(m_mutex);
    // train() asks for the next request only once it answered the last one.
    m_handled = m_read;
    m_changed.notify_all();
    m_changed.wait(lock, [this] { return !m_requests.empty() || m_closed; });
    if (m_requests.empty())
        return false;
    *request = std::move(m_requests.front());
    m_requests.pop_front();
    ++m_read;
    return true;
}

bool InProcessTrainCall::write(proto::TrainResponse &response, const TensorValues &parameters)
{
    std::lock_guard lock(m_mutex);
    m_responses.push_back(response);
    if (!parameters.empty())
        copyTensorValues(parameters, m_responses.back().mutable_push()->mutable_parameters());
    m_changed.notify_all();
    return true;
}

} // namespace parasync
