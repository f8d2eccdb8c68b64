#include "node/in_process_ps_client.h"

#include "node/in_process_train_call.h"
#include "node/ps_task.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace parasync {

namespace {

using namespace std::chrono_literals;

// How often a blocked read looks whether it was cancelled.
constexpr auto kPoll = 20ms;
// How long finish() waits for the ps to end a stream it was told is over.
constexpr auto kEndWait = 30s;

CallResult resultOf(const CallStatus &status, const std::string &address)
{
    CallResult result;
    switch (status.code()) {
    case CallStatus::Code::Ok: return result;
    case CallStatus::Code::InvalidArgument: result.code = CallResult::Code::InvalidArgument; break;
    case CallStatus::Code::FailedPrecondition: result.code = CallResult::Code::FailedPrecondition; break;
    case CallStatus::Code::AlreadyExists: result.code = CallResult::Code::AlreadyExists; break;
    case CallStatus::Code::RetryLater: result.code = CallResult::Code::Aborted; break;
    case CallStatus::Code::Unavailable: result.code = CallResult::Code::Unavailable; break;
    }
    result.message = status.message();
    result.description = status.message() + " (" + address + ", in-process)";
    return result;
}

class InProcessPsStream final : public PsStream
{
public:
    InProcessPsStream(PsTask &ps, std::string address)
        : m_address(std::move(address))
        , m_call(std::make_unique<InProcessTrainCall>(ps))
    {
    }

    bool write(const proto::TrainRequest &request) override
    {
        if (m_cancelled)
            return false;
        m_call->send(request);
        return true;
    }
    bool writeSharingValues(proto::TrainRequest &request, const TensorValues &gradients, LinkWrite) override
    {
        // In a message of its own, as the gRPC stream would carry it.
        proto::TrainRequest whole = request;
        auto *push = whole.mutable_push();
        if (size_t(push->gradients_size()) != gradients.size())
            return false;
        for (size_t i = 0; i < gradients.size(); ++i)
            push->mutable_gradients(int(i))->mutable_values()->Add(gradients[i].begin(), gradients[i].end());
        return write(whole);
    }
    bool read(proto::TrainResponse *response) override
    {
        while (!m_cancelled) {
            if (m_call->receive(response, kPoll))
                return true;
            if (m_call->progress().ended) // what it wrote before it ended still counts
                return m_call->receive(response, 0ms);
        }
        return false;
    }
    bool read(proto::TrainResponse *response, const TensorDestinations &, bool *delivered) override
    {
        *delivered = false; // the values are in the message
        return read(response);
    }
    bool writesDone() override
    {
        m_call->close();
        return true;
    }
    void cancel() override
    {
        m_cancelled = true;
        m_call->close();
    }
    CallResult finish() override
    {
        m_call->close();
        const std::optional<CallStatus> end = m_call->waitForEnd(kEndWait);
        if (m_cancelled)
            return {CallResult::Code::Cancelled, "cancelled", "cancelled by this worker"};
        if (!end)
            return {CallResult::Code::DeadlineExceeded, "no end", m_address + " did not end the stream"};
        return resultOf(*end, m_address);
    }
    bool openDataLink(DataLinkContext &, const std::string &, const proto::DataLinkGrant &, std::chrono::milliseconds,
                      std::chrono::milliseconds, std::string *error) override
    {
        *error = "no data link in-process";
        return false;
    }
    bool hasDataLink() const override { return false; }
    bool messagesOnDataLink() const override { return false; }

private:
    std::string m_address;
    std::atomic<bool> m_cancelled{false};
    std::unique_ptr<InProcessTrainCall> m_call;
};

// PsTask::watch on a thread of its own; its batches queue up for read().
class InProcessTelemetryStream final : public TelemetryStream, private WatchStream
{
public:
    InProcessTelemetryStream(PsTask &ps, const proto::WatchRequest &request, std::string address)
        : m_address(std::move(address))
    {
        m_thread = std::thread([this, &ps, request] {
            const CallStatus status = ps.watch(request, *this);
            std::lock_guard lock(m_mutex);
            m_end = status;
            m_changed.notify_all();
        });
    }
    ~InProcessTelemetryStream() override
    {
        cancel();
        m_thread.join();
    }

    bool read(proto::TelemetryBatch *batch) override
    {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [this] { return !m_batches.empty() || m_end || m_cancelled; });
        if (m_batches.empty() || m_cancelled)
            return false;
        *batch = std::move(m_batches.front());
        m_batches.pop_front();
        return true;
    }
    void cancel() override
    {
        std::lock_guard lock(m_mutex);
        m_cancelled = true;
        m_changed.notify_all();
    }
    CallResult finish() override
    {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [this] { return m_end.has_value(); });
        if (m_cancelled)
            return {CallResult::Code::Cancelled, "cancelled", "cancelled by this watcher"};
        return resultOf(*m_end, m_address);
    }

private:
    // The ps's side: false once the watcher is gone, which ends the watch.
    bool write(const proto::TelemetryBatch &batch) override
    {
        std::lock_guard lock(m_mutex);
        if (m_cancelled)
            return false;
        m_batches.push_back(batch);
        m_changed.notify_all();
        return true;
    }

    std::string m_address;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<proto::TelemetryBatch> m_batches;
    std::optional<CallStatus> m_end;
    bool m_cancelled = false;
    std::thread m_thread;
};

class InProcessPsClient final : public PsClient
{
public:
    InProcessPsClient(std::vector<PsTask *> processes, std::vector<std::string> addresses)
        : m_processes(std::move(processes))
        , m_addresses(std::move(addresses))
    {
    }

    const std::vector<std::string> &addresses() const override { return m_addresses; }

    CallResult taskStatus(size_t process, std::chrono::milliseconds, proto::TaskStatusResponse *response) override
    {
        *response = m_processes.at(process)->taskStatus();
        return {};
    }
    CallResult initialize(size_t process, const proto::InitializeRequest &request, std::chrono::milliseconds,
                          proto::InitializeResponse *response) override
    {
        return resultOf(m_processes.at(process)->initialize(request, response), m_addresses.at(process));
    }
    CallResult snapshot(size_t process, std::chrono::milliseconds, proto::SnapshotResponse *response) override
    {
        return resultOf(m_processes.at(process)->snapshot(response), m_addresses.at(process));
    }
    CallResult reportCheckpoint(size_t process, const proto::ReportCheckpointRequest &request,
                                std::chrono::milliseconds) override
    {
        m_processes.at(process)->reportCheckpoint(request);
        return {};
    }
    std::unique_ptr<PsStream> openStream(size_t process) override
    {
        return std::make_unique<InProcessPsStream>(*m_processes.at(process), m_addresses.at(process));
    }
    std::unique_ptr<TelemetryStream> watchTelemetry(size_t process, const proto::WatchRequest &request) override
    {
        return std::make_unique<InProcessTelemetryStream>(*m_processes.at(process), request, m_addresses.at(process));
    }

private:
    std::vector<PsTask *> m_processes;
    std::vector<std::string> m_addresses;
};

} // namespace

std::unique_ptr<PsClient> makeInProcessPsClient(std::vector<PsTask *> processes, std::vector<std::string> addresses)
{
    return std::make_unique<InProcessPsClient>(std::move(processes), std::move(addresses));
}

} // namespace parasync
