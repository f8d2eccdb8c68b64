// Round trips, side by side in one run (issue 5, items 1 and 2):
//   - raw TCP ping-pong over loopback (TCP_NODELAY, blocking sockets): the floor;
//   - raw gRPC bidirectional-stream ping-pong, with protobuf messages (as the
//     step's) and with zero-copy ByteBuffers (no protobuf): the transport's floor;
//   - one worker step (push a gradient, receive the fresh parameters) against
//     a real `parasync-node --job_name=ps` process, async, for 2, 7,850 and
//     1,000,000 parameters.
// The baselines carry exactly the bytes of the step they are compared with
// (the serialized push request one way, the push response back), and run
// against a child process, as the ps is one. Each benchmark records every
// round trip and reports p50/p99 as counters; bench/report.py takes the
// median over repetitions and the ratios.
//
//   bench_roundtrip [--quick] [Google Benchmark flags]
//   bench_roundtrip --serve-tcp=PORT | --serve-grpc=PORT   (the baselines' far ends)

#include "alloc_counter.h"
#include "base/port_holder.h"
#include "base/step_memory.h"
#include "bench_echo.grpc.pb.h"
#include "bench_support.h"
#include "engine/model.h"
#include "engine/parameter_shard.h"
#include "proto/parasync.grpc.pb.h"
#include "round_trip.h"
#include "wire/rpc.h"
#include "wire/train_call.h"

#include <benchmark/benchmark.h>

#include <QCoreApplication>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace parasync;
using namespace Qt::StringLiterals;
using Clock = std::chrono::steady_clock;
using bench::measure;
using bench::serveTcp;
using bench::TcpClient;

// ---------------------------------------------------------------------------
// Raw gRPC: the same synchronous server API and channel settings as the ps.
// ---------------------------------------------------------------------------

class EchoService final : public bench::Echo::Service
{
public:
    grpc::Status PingPong(grpc::ServerContext *, grpc::ServerReaderWriter<bench::Blob, bench::Blob> *stream) override
    {
        bench::Blob ping;
        bench::Blob pong;
        while (stream->Read(&ping)) {
            if (pong.payload().size() != ping.reply_bytes())
                pong.mutable_payload()->assign(ping.reply_bytes(), '\0');
            if (!stream->Write(pong))
                break;
        }
        return grpc::Status::OK;
    }
};

// ---------------------------------------------------------------------------
// Raw gRPC without protobuf: the same stream, but the messages are gRPC
// ByteBuffers whose slices point at memory that lives as long as the
// process (sent without a copy) and are read without being parsed. It is the
// least any data path over gRPC can cost -- gRPC's framing, HTTP/2 flow
// control and threads, nothing else -- and so the floor for tensors sent as
// zero-copy buffers over their own memory (issue 13's "different data path").
// A ping's first 4 bytes are the pong's length.
// ---------------------------------------------------------------------------

const char *const kRawPingPong = "/parasync.bench.RawEcho/PingPong";

// One static buffer, large enough for the largest ping or pong (1M floats and
// their framing), shared by the far end and the client: both only send from it.
const std::vector<char> &rawPayload()
{
    static const std::vector<char> payload(size_t(8) << 20, '\1');
    return payload;
}

grpc::ByteBuffer rawMessage(size_t bytes, uint32_t replyBytes)
{
    const std::vector<char> &payload = rawPayload();
    if (bytes < sizeof replyBytes) {
        grpc::Slice slice(&replyBytes, sizeof replyBytes); // copied: 4 bytes
        return grpc::ByteBuffer(&slice, 1);
    }
    // The header is copied into its own small slice; the body is the static
    // buffer itself.
    grpc::Slice slices[2]
        = {grpc::Slice(&replyBytes, sizeof replyBytes),
           grpc::Slice(payload.data(), std::min(bytes, payload.size()) - sizeof replyBytes, grpc::Slice::STATIC_SLICE)};
    return grpc::ByteBuffer(slices, 2);
}

class RawEchoService final : public grpc::Service
{
public:
    RawEchoService()
    {
        AddMethod(new grpc::internal::RpcServiceMethod(
            kRawPingPong, grpc::internal::RpcMethod::BIDI_STREAMING,
            new grpc::internal::BidiStreamingHandler<RawEchoService, grpc::ByteBuffer, grpc::ByteBuffer>(
                [](RawEchoService *, grpc::ServerContext *,
                   grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> *stream) { return pingPong(stream); },
                this)));
    }

private:
    static grpc::Status pingPong(grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> *stream)
    {
        grpc::ByteBuffer ping;
        std::vector<grpc::Slice> slices;
        while (stream->Read(&ping)) {
            // The length may arrive split over slices: gRPC keeps the
            // boundaries of what it read, not of what was sent.
            uint32_t replyBytes = 0;
            size_t have = 0;
            if (ping.Dump(&slices).ok())
                for (const grpc::Slice &slice : slices) {
                    const size_t take = std::min(sizeof replyBytes - have, slice.size());
                    std::memcpy(reinterpret_cast<char *>(&replyBytes) + have, slice.begin(), take);
                    if ((have += take) == sizeof replyBytes)
                        break;
                }
            if (have < sizeof replyBytes)
                return {grpc::StatusCode::INVALID_ARGUMENT, "a raw ping starts with the pong's length"};
            if (!stream->Write(rawMessage(replyBytes, 0)))
                break;
        }
        return grpc::Status::OK;
    }
};

class RawGrpcEchoClient
{
public:
    explicit RawGrpcEchoClient(const std::string &address)
        : m_channel(makeChannel(address, RpcSettings{}))
        , m_context(makeContext(RpcSettings{}))
        , m_stream(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
              m_channel.get(),
              grpc::internal::RpcMethod(kRawPingPong, grpc::internal::RpcMethod::BIDI_STREAMING, m_channel),
              m_context.get()))
    {
    }
    ~RawGrpcEchoClient()
    {
        m_stream->WritesDone();
        m_stream->Finish();
    }

    bool pingPong(size_t request, size_t reply)
    {
        return m_stream->Write(rawMessage(request, uint32_t(reply))) && m_stream->Read(&m_pong)
               && m_pong.Length() == reply;
    }

private:
    std::shared_ptr<grpc::Channel> m_channel;
    std::unique_ptr<grpc::ClientContext> m_context;
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> m_stream;
    grpc::ByteBuffer m_pong;
};

int serveGrpc(uint16_t port)
{
    EchoService service;
    RawEchoService rawService;
    grpc::ServerBuilder builder;
    int selected = 0;
    configureServer(builder, "127.0.0.1:" + std::to_string(port), RpcSettings{}, &selected);
    builder.RegisterService(&service);
    builder.RegisterService(&rawService);
    auto server = builder.BuildAndStart();
    if (!server || selected == 0) {
        std::fprintf(stderr, "bench grpc server: cannot listen on %u\n", unsigned(port));
        return 1;
    }
    std::printf("grpc echo listening on %u\n", unsigned(port));
    std::fflush(stdout);
    server->Wait();
    return 0;
}

class GrpcEchoClient
{
public:
    explicit GrpcEchoClient(const std::string &address)
        : m_stub(bench::Echo::NewStub(makeChannel(address, RpcSettings{})))
        , m_context(makeContext(RpcSettings{}))
        , m_stream(m_stub->PingPong(m_context.get()))
    {
    }
    ~GrpcEchoClient()
    {
        m_stream->WritesDone();
        m_stream->Finish();
    }

    bool pingPong(size_t request, size_t reply)
    {
        // The Blob's own framing (tag, length, reply_bytes) is ~10 bytes: the
        // payload is shortened by it so the message is as long as the step's.
        const size_t framing = 12;
        const size_t payload = request > framing ? request - framing : 0;
        if (m_ping.payload().size() != payload)
            m_ping.mutable_payload()->assign(payload, '\1');
        m_ping.set_reply_bytes(uint32_t(reply > framing ? reply - framing : 0));
        return m_stream->Write(m_ping) && m_stream->Read(&m_pong);
    }

private:
    std::unique_ptr<bench::Echo::Stub> m_stub;
    std::unique_ptr<grpc::ClientContext> m_context;
    std::unique_ptr<grpc::ClientReaderWriter<bench::Blob, bench::Blob>> m_stream;
    bench::Blob m_ping;
    bench::Blob m_pong;
};

// ---------------------------------------------------------------------------
// One worker step against a real ps: this process plays worker:0 (the
// chief), speaking the training stream exactly as WorkerTask::step does: the
// gradient encoded into tensors, the push written, the response read and the
// fresh parameters decoded into the worker's Eigen vectors.
// ---------------------------------------------------------------------------

struct ModelShape
{
    std::string label;   // "2", "7,850", "1,000,000"
    std::string model;   // --model
    std::string dataset; // --dataset
    int64_t featureDim;
    int64_t outputDim;
};

const std::vector<ModelShape> &modelShapes()
{
    // linear 1x1 + bias: the demo; softmax 784x10 + 10: MNIST; softmax
    // 99,999x10 + 10 = 1,000,000 exactly.
    static const std::vector<ModelShape> shapes = {
        {"2", "linear", "linear", 1, 1},
        {"7850", "softmax", "blobs:10:784", 784, 10},
        {"1000000", "softmax", "blobs:10:99999", 99999, 10},
    };
    return shapes;
}

class StepClient
{
public:
    // With `dataLink`, the join offers a data link as a worker's does, and
    // the whole step goes on it when granted.
    StepClient(const std::string &address, const ModelShape &shape, bool dataLink)
    {
        auto model = makeModel(shape.model, shape.featureDim, shape.outputDim);
        m_variables = model->initialVariables(1);
        for (const auto &v : m_variables) {
            m_params.push_back(v.value);
            // A tiny constant gradient: the parameters stay finite however
            // many steps run, and every value still travels and is applied.
            m_gradient.push_back(Eigen::VectorXf::Constant(v.value.size(), 1e-6f));
            m_count += v.value.size();
        }
        proto::ModelSignature signature;
        signature.set_model(model->name());
        signature.set_dataset(shape.dataset);
        signature.set_feature_dim(model->featureDim());
        signature.set_output_dim(model->outputDim());
        signature.set_optimizer("sgd");
        for (const auto &v : m_variables) {
            auto *spec = signature.add_variables();
            spec->set_name(v.name);
            spec->mutable_shape()->Assign(v.shape.begin(), v.shape.end());
        }

        proto::InitializeRequest init;
        init.set_origin("bench_roundtrip");
        *init.mutable_signature() = signature;
        for (const auto &v : m_variables) {
            auto *state = init.mutable_shard()->add_variables();
            state->set_name(v.name);
            toTensor(v.value, v.shape, state->mutable_value());
        }
        m_chief = std::make_unique<bench::ChiefStream>(address, init, dataLink);
        m_globalStep = m_chief->joinedAtStep();
    }

    // One step's communication, as WorkerTask::step does it (the gradient's
    // computation excepted): the push and its answer kept from step to step.
    bool step()
    {
        proto::TrainRequest &request = m_request;
        auto *push = request.mutable_push();
        push->Clear();
        push->set_computed_from_step(m_globalStep);
        push->set_batch_loss(0.5f);
        push->set_full_loss(std::nanf(""));
        push->set_compute_us(10);
        push->set_previous_push_us(m_previousPushUs);
        if (m_count <= 16)
            for (const auto &p : m_params)
                push->mutable_parameter_view()->Add(p.data(), p.data() + p.size());
        TensorValues &gradient = m_gradientValues;
        gradient.clear();
        for (size_t i = 0; i < m_gradient.size(); ++i) {
            const auto &shape = m_variables[i].shape;
            push->add_gradients()->mutable_shape()->Assign(shape.begin(), shape.end());
            gradient.emplace_back(m_gradient[i].data(), size_t(m_gradient[i].size()));
        }
        if (m_lastRequestBytes == 0) {
            // Once: the bytes do not change from step to step, and the
            // allocations are counted per step.
            grpc::ByteBuffer bytes;
            serializeSharingValues(request, gradient, &bytes);
            m_lastRequestBytes = bytes.Length();
            for (auto &tensor : *push->mutable_gradients())
                tensor.clear_values(); // filled when below 64 KiB
        }
        const auto start = Clock::now();
        proto::TrainResponse &response = m_response;
        // Straight into m_params, as the worker reads them.
        TensorDestinations &destinations = m_destinations;
        destinations.clear();
        for (auto &p : m_params)
            destinations.emplace_back(p.data(), size_t(p.size()));
        bool delivered = false;
        TrainCall &stream = m_chief->stream();
        if (!stream.writeSharingValues(request, gradient) || !stream.read(&response, destinations, &delivered)
            || !delivered)
            return false;
        const auto &decision = response.push();
        m_globalStep = decision.global_step();
        m_previousPushUs = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
        m_lastResponseBytes = stream.lastReadBytes();
        return decision.outcome() == proto::APPLIED;
    }

    size_t requestBytes() const { return m_lastRequestBytes; }
    size_t responseBytes() const { return m_lastResponseBytes; }

private:
    std::vector<Variable> m_variables;
    Parameters m_params;
    Parameters m_gradient;
    TensorValues m_gradientValues; // kept, as the worker keeps it
    TensorDestinations m_destinations;
    Eigen::Index m_count = 0;
    int64_t m_globalStep = 0;
    int64_t m_previousPushUs = 0;
    size_t m_lastRequestBytes = 0;
    size_t m_lastResponseBytes = 0;
    std::unique_ptr<bench::ChiefStream> m_chief;
    proto::TrainRequest m_request;
    proto::TrainResponse m_response;
};

// ---------------------------------------------------------------------------
// The run: children, clients, benchmarks.
// ---------------------------------------------------------------------------

// The gRPC clients (echo and step) get a new channel and stream for every
// benchmark run, warmed up before timing: a channel left idle while other
// benchmarks run is taken for dead by the 1 s keepalive (nothing in this
// process reads the peer's pings while no call is in progress).
struct Fixture
{
    std::unique_ptr<bench::ChildProcess> tcpServer;
    std::unique_ptr<bench::ChildProcess> grpcServer;
    std::map<std::string, std::unique_ptr<bench::ChildProcess>> psTasks;
    // The same with a backup (--ps_backup_hosts): the primary, its backup,
    // the primary's address; with its lease, and without (--ps_lease_ms=0).
    struct Pair
    {
        std::unique_ptr<bench::ChildProcess> primary;
        std::unique_ptr<bench::ChildProcess> backup;
        std::string address;
    };
    std::map<std::string, Pair> replicated;
    std::map<std::string, Pair> unleased;
    std::unique_ptr<TcpClient> tcp;
    std::string grpcAddress;
    std::map<std::string, std::string> psAddresses;
    // Per model size: the step's request and response bytes.
    std::map<std::string, std::pair<size_t, size_t>> bytes;
};

constexpr int kWarmUpRoundTrips = 5;

Fixture *g_fixture = nullptr;

void registerBenchmarks(bool quick)
{
    // A 1M-parameter step takes milliseconds: it gets longer so its p99 rests on
    // a few hundred round trips, not a few dozen.
    const auto minTime = [quick](const std::string &label) { return quick ? 0.05 : label == "1000000" ? 2.0 : 0.5; };
    for (const auto &shape : modelShapes()) {
        // Named, not a structured binding: clang 14 cannot capture those.
        const size_t request = g_fixture->bytes.at(shape.label).first;
        const size_t reply = g_fixture->bytes.at(shape.label).second;
        benchmark::RegisterBenchmark(("tcp/" + shape.label).c_str(),
                                     [request, reply](benchmark::State &state) {
                                         measure(state, *g_fixture->tcpServer, request, reply,
                                                 [&] { return g_fixture->tcp->pingPong(request, reply); });
                                     })
            ->UseRealTime()
            ->MinTime(minTime(shape.label));
        benchmark::RegisterBenchmark(("grpc/" + shape.label).c_str(),
                                     [request, reply](benchmark::State &state) {
                                         GrpcEchoClient client(g_fixture->grpcAddress);
                                         for (int i = 0; i < kWarmUpRoundTrips; ++i)
                                             client.pingPong(request, reply);
                                         measure(state, *g_fixture->grpcServer, request, reply,
                                                 [&] { return client.pingPong(request, reply); });
                                     })
            ->UseRealTime()
            ->MinTime(minTime(shape.label));
        benchmark::RegisterBenchmark(("grpc_raw/" + shape.label).c_str(),
                                     [request, reply](benchmark::State &state) {
                                         RawGrpcEchoClient client(g_fixture->grpcAddress);
                                         for (int i = 0; i < kWarmUpRoundTrips; ++i)
                                             client.pingPong(request, reply);
                                         measure(state, *g_fixture->grpcServer, request, reply,
                                                 [&] { return client.pingPong(request, reply); });
                                     })
            ->UseRealTime()
            ->MinTime(minTime(shape.label));
        benchmark::RegisterBenchmark(("step/" + shape.label).c_str(),
                                     [shape, request, reply](benchmark::State &state) {
                                         StepClient client(g_fixture->psAddresses.at(shape.label), shape, true);
                                         for (int i = 0; i < kWarmUpRoundTrips; ++i)
                                             client.step();
                                         measure(state, *g_fixture->psTasks.at(shape.label), request, reply,
                                                 [&] { return client.step(); });
                                     })
            ->UseRealTime()
            ->MinTime(minTime(shape.label));
        // The same step on the gRPC stream (--data_link=0).
        benchmark::RegisterBenchmark(("step_grpc/" + shape.label).c_str(),
                                     [shape, request, reply](benchmark::State &state) {
                                         StepClient client(g_fixture->psAddresses.at(shape.label), shape, false);
                                         for (int i = 0; i < kWarmUpRoundTrips; ++i)
                                             client.step();
                                         measure(state, *g_fixture->psTasks.at(shape.label), request, reply,
                                                 [&] { return client.step(); });
                                     })
            ->UseRealTime()
            ->MinTime(minTime(shape.label));
        for (const bool leased : {true, false})
            benchmark::RegisterBenchmark(
                ((leased ? "step_replicated/" : "step_replicated_unleased/") + shape.label).c_str(),
                [shape, request, reply, leased](benchmark::State &state) {
                    const Fixture::Pair &pair = (leased ? g_fixture->replicated : g_fixture->unleased).at(shape.label);
                    StepClient client(pair.address, shape, true);
                    for (int i = 0; i < kWarmUpRoundTrips; ++i)
                        client.step();
                    measure(state, *pair.primary, request, reply, [&] { return client.step(); });
                })
                ->UseRealTime()
                ->MinTime(minTime(shape.label));
    }
}

int runBenchmarks(int argc, char **argv, bool quick)
{
    Fixture fixture;
    g_fixture = &fixture;
    const QString self = QCoreApplication::applicationFilePath();

    const uint16_t tcpPort = pickFreePort();
    fixture.tcpServer = std::make_unique<bench::ChildProcess>(
        self, QStringList{u"--serve-tcp="_s + QString::number(tcpPort)}, u"roundtrip-tcp-echo"_s);
    fixture.tcpServer->countAllocations();
    fixture.tcpServer->start();
    const uint16_t grpcPort = pickFreePort();
    fixture.grpcServer = std::make_unique<bench::ChildProcess>(
        self, QStringList{u"--serve-grpc="_s + QString::number(grpcPort)}, u"roundtrip-grpc-echo"_s);
    fixture.grpcServer->countAllocations();
    fixture.grpcServer->start();
    if (!fixture.tcpServer->waitForLog(u"listening"_s) || !fixture.grpcServer->waitForLog(u"listening"_s)) {
        std::fprintf(stderr, "bench_roundtrip: the echo servers did not start; logs in %s\n",
                     qPrintable(bench::logDirectory()));
        return 1;
    }
    fixture.tcp = std::make_unique<TcpClient>(tcpPort);
    fixture.grpcAddress = "127.0.0.1:" + std::to_string(grpcPort);

    // One real ps per model size, started as a user starts one.
    for (const auto &shape : modelShapes()) {
        const QString psAddress = u"127.0.0.1:"_s + QString::number(pickFreePort());
        const QString workerAddress = u"127.0.0.1:"_s + QString::number(pickFreePort());
        auto ps = std::make_unique<bench::ChildProcess>(
            bench::nodeBinary(),
            QStringList{u"--ps_hosts="_s + psAddress, u"--worker_hosts="_s + workerAddress, u"--job_name=ps"_s,
                        u"--task_index=0"_s, u"--mode=async"_s, u"--model="_s + QString::fromStdString(shape.model),
                        u"--dataset="_s + QString::fromStdString(shape.dataset), u"--last_step=1000000000000"_s},
            u"roundtrip-ps-"_s + QString::fromStdString(shape.label));
        ps->countAllocations();
        ps->start();
        if (!ps->waitForLog(u"listening on"_s)) {
            std::fprintf(stderr, "bench_roundtrip: the ps did not start; see %s\n", qPrintable(ps->logPath()));
            return 1;
        }
        // The chief's initialisation, and the step's sizes for the baselines.
        {
            StepClient client(psAddress.toStdString(), shape, true);
            for (int i = 0; i < kWarmUpRoundTrips; ++i)
                if (!client.step())
                    throw std::runtime_error("a warm-up step was not applied");
            fixture.bytes[shape.label] = {client.requestBytes(), client.responseBytes()};
        }
        fixture.psAddresses[shape.label] = psAddress.toStdString();
        fixture.psTasks[shape.label] = std::move(ps);

        // And replicated ones: the primary and its backup, with a lease and without.
        for (const bool leased : {true, false}) {
            const QString primaryAddress = u"127.0.0.1:"_s + QString::number(pickFreePort());
            QString backupAddress;
            do
                backupAddress = u"127.0.0.1:"_s + QString::number(pickFreePort());
            while (backupAddress == primaryAddress);
            const QString name = (leased ? u"-"_s : u"-unleased-"_s) + QString::fromStdString(shape.label);
            const QStringList pair{u"--ps_hosts="_s + primaryAddress,
                                   u"--ps_backup_hosts="_s + backupAddress,
                                   u"--worker_hosts="_s + workerAddress,
                                   u"--task_index=0"_s,
                                   u"--mode=async"_s,
                                   u"--model="_s + QString::fromStdString(shape.model),
                                   u"--dataset="_s + QString::fromStdString(shape.dataset),
                                   u"--last_step=1000000000000"_s,
                                   leased ? u"--ps_lease_ms=1000"_s : u"--ps_lease_ms=0"_s};
            Fixture::Pair started;
            started.primary = std::make_unique<bench::ChildProcess>(
                bench::nodeBinary(), pair + QStringList{u"--job_name=ps"_s}, u"roundtrip-primary"_s + name);
            started.primary->countAllocations();
            started.primary->start();
            if (!started.primary->waitForLog(u"listening on"_s)) {
                std::fprintf(stderr, "bench_roundtrip: the primary did not start; see %s\n",
                             qPrintable(started.primary->logPath()));
                return 1;
            }
            started.backup = std::make_unique<bench::ChildProcess>(
                bench::nodeBinary(), pair + QStringList{u"--job_name=ps_backup"_s}, u"roundtrip-backup"_s + name);
            started.backup->start();
            if (!started.backup->waitForLog(u"follows its primary"_s)) {
                std::fprintf(stderr, "bench_roundtrip: the backup did not follow; see %s\n",
                             qPrintable(started.backup->logPath()));
                return 1;
            }
            // The voters promise nothing in their first lease.
            if (leased && !started.primary->waitForLog(u"holds its lease"_s)) {
                std::fprintf(stderr, "bench_roundtrip: the primary never held its lease; see %s\n",
                             qPrintable(started.primary->logPath()));
                return 1;
            }
            {
                StepClient client(primaryAddress.toStdString(), shape, true);
                for (int i = 0; i < kWarmUpRoundTrips; ++i)
                    if (!client.step())
                        throw std::runtime_error("a warm-up step against the replicated ps was not applied");
            }
            started.address = primaryAddress.toStdString();
            (leased ? fixture.replicated : fixture.unleased)[shape.label] = std::move(started);
        }
    }

    benchmark::Initialize(&argc, argv);
    registerBenchmarks(quick);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();

    fixture.tcp.reset();
    g_fixture = nullptr;
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    // As parasync-node does: the worker's side of a step here, and the echo
    // servers, keep their buffers as the ps does, so the baselines are
    // measured under the same heap.
    parasync::keepStepBuffersMapped();
    QCoreApplication app(argc, argv);
    std::vector<char *> args;
    bool quick = false;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.rfind("--serve-tcp=", 0) == 0)
            return serveTcp(uint16_t(std::stoi(arg.substr(12))));
        if (arg.rfind("--serve-grpc=", 0) == 0)
            return serveGrpc(uint16_t(std::stoi(arg.substr(13))));
        if (arg == "--quick")
            quick = true;
        else
            args.push_back(argv[i]);
    }
    int count = int(args.size());
    try {
        return runBenchmarks(count, args.data(), quick);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_roundtrip: %s\n", e.what());
        return 1;
    }
}
