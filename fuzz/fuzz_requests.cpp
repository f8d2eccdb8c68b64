// ps:0's request handlers fed with arbitrary protobuf bytes, as a stranger
// or a confused worker could send them. The input is one byte of cluster
// configuration (optimizer, update mode, --logdir, --nonfinite_gradients)
// and then a session of requests, each framed as [kind][length, 2 bytes
// little-endian][bytes]; the bytes are parsed with ParseFromArray as the
// request of that kind, and garbage that does not parse is dropped, as gRPC
// would drop it.
//
// Every request goes to an in-process PsTask (ps:0 of a 1-ps, 2-worker
// cluster) whose server is never started: Initialize, SetMode,
// GetClusterStatus, GetTaskStatus and Snapshot as calls, Train requests on
// up to three Train streams at once (InProcessTrainCall), each served by
// PsTask::train on a thread of its own as gRPC would. The kind byte's
// higher bits pick the stream (kind 2: stream 0, 6: stream 1, 10: stream 2);
// bytes that do not parse as a TrainRequest end that stream without a
// goodbye, as a killed worker does, and the stream's next request opens a
// new one, as a restarted worker does. After each request the session waits
// until every stream has been answered or is held (a sync barrier, the
// staleness bound, a join before the chief), so that a session replays
// alike; at its end ps:0 is stopped, which releases every held push.
#include "config/task_options.h"
#include "node/in_process_train_call.h"
#include "node/ps_task.h"

#include <google/protobuf/stubs/logging.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace parasync;
using namespace std::chrono_literals;

namespace {

enum class RequestKind { Initialize, SetMode, Train, Status, Count };

// Train streams open at once, and opened in all: each is a thread.
constexpr size_t kStreams = 3;
constexpr int kMaxCallsPerSession = 16;
// A request neither answered nor seen held by then is left to run: the
// session goes on rather than stall (a push the ps is still deciding while
// another stream's worker was released, say).
constexpr auto kAnswerWait = 200ms;

// ps:0's run directory (step log, metrics.csv) when the configuration asks
// for one; emptied after every input so that a long run does not fill it.
std::string g_runDirectory;

NodeOptions clusterOptions(uint8_t configuration)
{
    static const char *const optimizers[] = {"sgd", "momentum", "adagrad", "adam", "ftrl"};
    static const proto::UpdateMode modes[] = {proto::ASYNC, proto::SYNC, proto::SSP};
    NodeOptions options;
    options.cluster.ps = {parseHostPort("127.0.0.1:12222")};
    options.cluster.workers = {parseHostPort("127.0.0.1:12223"), parseHostPort("127.0.0.1:12224")};
    options.task = TaskId{JobName::Ps, 0};
    options.training.optimizer = optimizers[configuration & 3];
    options.training.mode.set_mode(modes[(configuration >> 2) % 3]);
    options.training.applyNonfinite = (configuration & 0x40) != 0;
    if (configuration & 0x20)
        options.training.logdir = g_runDirectory;
    options.training.lastStep = 50;
    return options;
}

template<typename Request>
std::optional<Request> parsed(const uint8_t *data, size_t size)
{
    Request request;
    if (!request.ParseFromArray(data, int(size)))
        return std::nullopt;
    return request;
}

// One worker's side of a Train stream, and what it sent.
struct Stream
{
    struct Sent
    {
        bool join = false;
        bool push = false;
        int worker = -1; // the join's index; for a push, the last join's
    };
    std::unique_ptr<InProcessTrainCall> call;
    std::vector<Sent> sent;
    int worker = -1;
};

// Whether ps:0 holds the request `stream` is at: a join waiting for the
// chief, or a push at a sync barrier or the staleness bound. Another stream
// holding the same worker can fool it; the session then goes on a little
// early, which costs a replay's exactness, not its meaning.
bool isHeld(PsTask &task, const Stream &stream, const InProcessTrainCall::Progress &progress,
            const std::array<Stream, kStreams> &streams)
{
    if (progress.read == progress.handled || progress.read > stream.sent.size())
        return false;
    const auto &request = stream.sent[size_t(progress.read - 1)];
    const auto status = task.clusterStatus();
    if (request.worker < 0 || request.worker >= status.workers_size())
        return false;
    // A join for an index another open stream holds waits (up to a second)
    // for that stream's end before ps:0 answers it.
    const bool indexTaken = std::any_of(streams.begin(), streams.end(), [&](const Stream &other) {
        return &other != &stream && other.call && !other.call->progress().ended && other.worker == request.worker;
    });
    const auto phase = status.workers(request.worker).phase();
    return (request.join && (phase == proto::WAITING_FOR_CHIEF || indexTaken))
           || (request.push && (phase == proto::BLOCKED_BY_SYNC || phase == proto::BLOCKED_BY_STALENESS));
}

// Waits until ps:0 has handled all that `stream` was sent (`toEnd`: until
// the stream ended), or holds it.
void settle(PsTask &task, const Stream &stream, const std::array<Stream, kStreams> &streams, bool toEnd = false)
{
    if (!stream.call)
        return;
    const auto deadline = std::chrono::steady_clock::now() + kAnswerWait;
    auto progress = stream.call->progress();
    while (!progress.ended && (toEnd || progress.handled < progress.sent)) {
        if (isHeld(task, stream, progress, streams) || std::chrono::steady_clock::now() > deadline)
            return;
        // Polled: the ps says when it answers, not when it starts to hold.
        progress = stream.call->waitForProgress(progress, 1ms);
    }
}

void runSession(const NodeOptions &options, const uint8_t *data, size_t size)
{
    PsTask task(options, RpcSettings{}, [](const std::string &) {});
    std::array<Stream, kStreams> streams;
    // Streams that ended (closed by the worker's side, or refused by the
    // ps), kept until the end: a closed stream's push may still be held.
    std::vector<std::unique_ptr<InProcessTrainCall>> ended;
    int calls = 0;
    const auto retire = [&](Stream &stream) {
        ended.push_back(std::move(stream.call));
        stream = Stream();
    };

    for (size_t at = 1; at < size;) {
        const uint8_t kindByte = data[at];
        const auto kind = RequestKind(kindByte % uint8_t(RequestKind::Count));
        const size_t declared = at + 2 < size ? (size_t(data[at + 1]) | size_t(data[at + 2]) << 8) : 0;
        const size_t start = std::min(at + 3, size);
        const size_t length = std::min(declared, size - start);
        const uint8_t *bytes = data + start;
        at = start + length;

        switch (kind) {
        case RequestKind::Initialize:
            if (const auto request = parsed<proto::InitializeRequest>(bytes, length)) {
                proto::InitializeResponse response;
                (void)task.initialize(*request, &response);
            }
            break;
        case RequestKind::SetMode:
            if (const auto request = parsed<proto::SetModeRequest>(bytes, length)) {
                proto::SetModeResponse response;
                (void)task.setMode(*request, &response);
            }
            break;
        case RequestKind::Train: {
            auto &stream = streams[(kindByte / uint8_t(RequestKind::Count)) % kStreams];
            if (stream.call && stream.call->progress().ended)
                retire(stream);
            const auto request = parsed<proto::TrainRequest>(bytes, length);
            if (!request) {
                if (stream.call) {
                    stream.call->close();
                    settle(task, stream, streams, true);
                    retire(stream);
                }
                break;
            }
            if (!stream.call) {
                if (calls == kMaxCallsPerSession)
                    break;
                ++calls;
                stream.call = std::make_unique<InProcessTrainCall>(task);
            }
            if (request->has_join())
                stream.worker = request->join().worker_index();
            stream.sent.push_back({request->has_join(), request->has_push(), stream.worker});
            stream.call->send(*request);
            break;
        }
        case RequestKind::Status: {
            (void)task.clusterStatus();
            (void)task.taskStatus();
            proto::SnapshotResponse snapshot;
            (void)task.snapshot(&snapshot);
            break;
        }
        case RequestKind::Count: break;
        }
        // Any request may release a held one (the chief's initialisation, a
        // mode change, another worker's push or death): all settle before
        // the next, so that a session replays alike.
        for (const auto &stream : streams) {
            settle(task, stream, streams);
            // The answers are not looked at; dropping them keeps memory flat.
            proto::TrainResponse response;
            while (stream.call && stream.call->receive(&response, 0ms)) {}
        }
    }
    // Held pushes are let go, then every stream ends without a goodbye.
    task.requestStop("the fuzz session ended");
    for (auto &stream : streams)
        stream.call.reset();
    ended.clear();
}

} // namespace

// Protobuf logs every string field with invalid UTF-8 it refuses; random
// bytes make thousands of such lines, which would bury a sanitizer report.
extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    google::protobuf::SetLogHandler(nullptr);
    char directory[] = "/tmp/parasync-fuzz-requests-XXXXXX";
    if (!::mkdtemp(directory))
        std::abort();
    g_runDirectory = directory;
    std::atexit([] { std::filesystem::remove_all(g_runDirectory); });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const NodeOptions options = clusterOptions(data[0]);
    runSession(options, data, size);
    if (!options.training.logdir.empty()) {
        for (const auto &entry : std::filesystem::directory_iterator(g_runDirectory))
            std::filesystem::remove_all(entry.path());
    }
    return 0;
}
