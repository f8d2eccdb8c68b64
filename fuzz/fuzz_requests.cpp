// ps:0's request handlers fed with arbitrary protobuf bytes, as a stranger
// or a confused worker could send them. The input is one byte of cluster
// configuration (optimizer, update mode, --logdir, --nonfinite_gradients)
// and then a session of requests, each framed as [kind][length, 2 bytes
// little-endian][bytes]; the bytes are parsed with ParseFromArray as the
// request of that kind, and garbage that does not parse is dropped, as gRPC
// would drop it.
//
// Initialize, SetMode, GetClusterStatus and Snapshot go to an in-process
// PsTask (ps:0 of a 1-ps, 2-worker cluster) whose server is never started.
// The Train stream handler needs a grpc::ServerReaderWriter, which only a
// running server can make, so Train requests drive the UpdatePolicy and
// ParameterShard pair that PsTask::train drives, after the same checks
// (worker index, gradient count and sizes, steps from the future, NaN/Inf),
// without blocking where PsTask would wait for other workers.
#include "base/error.h"
#include "config/node_options.h"
#include "engine/optimizer.h"
#include "engine/parameter_shard.h"
#include "node/ps_task.h"
#include "engine/update_policy.h"

#include <google/protobuf/stubs/logging.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

using namespace parasync;

namespace {

enum class RequestKind { Initialize, SetMode, Train, Status, Count };

// ps:0's run directory (step log, metrics.csv) when the configuration asks
// for one; emptied after every input so that a long run does not fill it.
std::string g_runDirectory;

NodeOptions clusterOptions(uint8_t configuration)
{
    static const char *const optimizers[] = {"sgd", "momentum", "adagrad", "adam"};
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

// What PsTask::train does with one stream's requests, minus the waiting.
class TrainDriver
{
public:
    explicit TrainDriver(const NodeOptions &options)
        : m_options(options)
        , m_shard(makeOptimizer([&] {
            OptimizerOptions o;
            o.name = options.training.optimizer;
            o.learningRate = options.training.learningRate;
            return o;
        }()))
        , m_policy(options.cluster.numWorkers(), options.training.mode,
                   [this](const Parameters &gradient, int) { m_shard.apply(gradient); })
    {
    }

    void initialize(const proto::InitializeRequest &request)
    {
        if (m_shard.isInitialized())
            return;
        try {
            m_shard.load(request.shard());
        } catch (const InputError &) {
            return;
        }
        m_policy.setGlobalStep(request.global_step());
    }

    void setMode(const proto::SetModeRequest &request)
    {
        try {
            m_policy.setMode(request.mode());
        } catch (const InputError &) {
        }
    }

    void train(const proto::TrainRequest &request)
    {
        if (request.has_join()) {
            const int index = request.join().worker_index();
            if (index < 0 || index >= m_options.cluster.numWorkers()) {
                endStream();
                return;
            }
            m_worker = index;
            if (m_shard.isInitialized())
                m_policy.join(index);
        } else if (request.has_push()) {
            if (m_worker < 0)
                return;
            push(request.push());
        } else if (request.has_leave()) {
            if (m_worker < 0)
                return;
            if (request.leave().finished())
                m_policy.setFinished(m_worker);
            else
                m_policy.setAlive(m_worker, false);
            m_worker = -1;
        }
    }

    // The stream closed without a goodbye.
    void endStream()
    {
        if (m_worker >= 0)
            m_policy.setAlive(m_worker, false);
        m_worker = -1;
    }

private:
    void push(const proto::PushRequest &push)
    {
        if (m_policy.globalStep() >= m_options.training.lastStep)
            return;
        const Parameters &values = m_shard.values();
        if (push.gradients_size() != int(values.size()))
            return;
        Parameters gradient;
        for (int i = 0; i < push.gradients_size(); ++i) {
            if (push.gradients(i).values_size() != values[size_t(i)].size())
                return;
            gradient.push_back(fromTensor(push.gradients(i)));
        }
        if (push.computed_from_step() > m_policy.globalStep() || push.computed_from_step() < 0)
            return;
        const bool finite =
            std::all_of(gradient.begin(), gradient.end(), [](const Eigen::VectorXf &g) { return g.allFinite(); });
        if (!finite && !m_options.training.applyNonfinite)
            return;
        m_policy.push(m_worker, push.computed_from_step(), std::move(gradient));
        (void)m_policy.hold(m_worker);
        (void)m_policy.result(m_worker);
    }

    const NodeOptions &m_options;
    ParameterShard m_shard;
    UpdatePolicy m_policy;
    int m_worker = -1;
};

template <typename Request>
std::optional<Request> parsed(const uint8_t *data, size_t size)
{
    Request request;
    if (!request.ParseFromArray(data, int(size)))
        return std::nullopt;
    return request;
}

void runSession(const NodeOptions &options, const uint8_t *data, size_t size)
{
    PsTask task(options, RpcSettings{}, [](const std::string &) {});
    TrainDriver driver(options);

    for (size_t at = 1; at < size;) {
        const auto kind = RequestKind(data[at] % uint8_t(RequestKind::Count));
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
                driver.initialize(*request);
            }
            break;
        case RequestKind::SetMode:
            if (const auto request = parsed<proto::SetModeRequest>(bytes, length)) {
                proto::SetModeResponse response;
                (void)task.setMode(*request, &response);
                driver.setMode(*request);
            }
            break;
        case RequestKind::Train:
            if (const auto request = parsed<proto::TrainRequest>(bytes, length))
                driver.train(*request);
            else
                driver.endStream();
            break;
        case RequestKind::Status: {
            (void)task.clusterStatus();
            proto::SnapshotResponse snapshot;
            (void)task.snapshot(&snapshot);
            break;
        }
        case RequestKind::Count:
            break;
        }
    }
    driver.endStream();
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
