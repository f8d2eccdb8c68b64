// A sparse model's step against a real ps (issue 35's performance targets):
//   - step/1M, step/10M: one worker's step -- the row gradients of a batch of
//     1,000 Zipf-distributed ids x 16 floats pushed, and the next batch's rows
//     pulled in the same exchange, as WorkerTask does (PushRequest.row_gradients
//     and .pull, PushResponse.rows) -- against a `parasync-node --job_name=ps`
//     process whose table holds 1M or 10M rows with Adagrad's state, on the
//     data link. The batches are the same for both tables (drawn over the 1M
//     hottest ranks), so the bytes are the same and only the table's size
//     differs: its rows were made in ascending id order, a random order of
//     ranks, so the batch's rows lie scattered over the whole table;
//   - step_grpc/1M: the same step on the gRPC stream (--data_link=0's path);
//   - tcp/1M: a raw TCP exchange of exactly the step's bytes each way: the
//     floor.
// Each benchmark records every round trip and reports p50/p99 as counters
// (round_trip.h); bench/report.py takes the medians over repetitions and
// the ratios.
//
//   bench_sparse_step [--quick] [Google Benchmark flags]
//   bench_sparse_step --serve-tcp=PORT   (the floor's far end)

#include "base/port_holder.h"
#include "base/step_memory.h"
#include "bench_support.h"
#include "proto/parasync.grpc.pb.h"
#include "round_trip.h"
#include "wire/rpc.h"
#include "wire/train_call.h"
#include "zipf_ids.h"

#include <benchmark/benchmark.h>

#include <QCoreApplication>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace parasync;
using namespace Qt::StringLiterals;

constexpr int64_t kRowWidth = 16;
constexpr size_t kHotRanks = 1'000'000; // the batches' ids: Zipf over these ranks
constexpr size_t kBatches = 64;         // cycled through
constexpr size_t kIdsPerPull = 65'536;  // filling the table: 4 MiB of rows an answer
constexpr int kWarmUpSteps = 20;

struct TableSize
{
    std::string label; // "1M", "10M"
    size_t rows;
};

const std::vector<TableSize> &tableSizes()
{
    static const std::vector<TableSize> sizes = {{"1M", 1'000'000}, {"10M", 10'000'000}};
    return sizes;
}

// A model of one 16-wide embedding table and a bias: the ps applies what
// it is sent and knows no model, so the signature is all it needs.
proto::ModelSignature signature()
{
    proto::ModelSignature s;
    s.set_model("embedding_bench");
    s.set_dataset("zipf");
    s.set_feature_dim(1);
    s.set_output_dim(1);
    s.set_optimizer("adagrad");
    auto *bias = s.add_variables();
    bias->set_name("bias");
    bias->add_shape(1);
    auto *table = s.add_tables();
    table->set_name("embedding");
    table->set_row_width(kRowWidth);
    table->set_init_stddev(0.01f);
    table->set_seed(7);
    return s;
}

// This process plays worker:0 (the chief): it initialises the ps, fills the
// table, and then steps as a worker of a sparse model does.
class SparseStepClient
{
public:
    SparseStepClient(const std::string &address, size_t tableRows, bool dataLink,
                     const std::vector<std::vector<uint64_t>> &batches)
        : m_batches(batches)
    {
        proto::InitializeRequest init;
        init.set_origin("bench_sparse_step");
        *init.mutable_signature() = signature();
        auto *bias = init.mutable_shard()->add_variables();
        bias->set_name("bias");
        bias->mutable_value()->add_shape(1);
        bias->mutable_value()->add_values(0.0f);
        m_chief = std::make_unique<bench::ChiefStream>(address, init, dataLink);
        m_globalStep = m_chief->joinedAtStep();
        if (tableRows > 0)
            fillTable(tableRows);
        // The first batch's rows, as a worker pulls them after its join.
        pull(m_batches.front(), nullptr);
        m_rowGradient.assign(bench::kIdsPerStep * size_t(kRowWidth), 1e-6f);
    }

    // One step's communication (the gradient's computation excepted): this
    // batch's row gradients and the bias's pushed, the next batch's rows
    // asked for and read from the answer.
    bool step()
    {
        const std::vector<uint64_t> &ids = m_batches[m_next];
        m_next = (m_next + 1) % m_batches.size();
        const std::vector<uint64_t> &nextIds = m_batches[m_next];
        proto::TrainRequest &request = m_request;
        auto *push = request.mutable_push();
        push->Clear();
        push->set_computed_from_step(m_globalStep);
        push->set_batch_loss(0.5f);
        push->set_full_loss(std::nanf(""));
        push->set_compute_us(10);
        push->set_previous_push_us(m_previousPushUs);
        push->add_gradients()->add_shape(1);
        proto::SparseRows *rows = push->add_row_gradients();
        rows->set_table(0);
        rows->mutable_ids()->Add(ids.begin(), ids.end());
        rows->mutable_values()->Add(m_rowGradient.begin(), m_rowGradient.begin() + long(ids.size() * kRowWidth));
        proto::RowRequest *pull = push->add_pull();
        pull->set_table(0);
        pull->mutable_ids()->Add(nextIds.begin(), nextIds.end());
        m_gradientValues.clear();
        m_gradientValues.emplace_back(&m_biasGradient, 1);
        if (m_lastRequestBytes == 0) {
            // Once, at the first step (batches differ by a few distinct
            // ids). Serializing fills the bias's tensor, which the write
            // must find empty again.
            grpc::ByteBuffer bytes;
            serializeSharingValues(request, m_gradientValues, &bytes);
            m_lastRequestBytes = bytes.Length();
            for (auto &tensor : *push->mutable_gradients())
                tensor.clear_values();
        }
        const auto start = std::chrono::steady_clock::now();
        m_destinations.clear();
        m_destinations.emplace_back(&m_bias, 1);
        bool delivered = false;
        TrainCall &stream = m_chief->stream();
        if (!stream.writeSharingValues(request, m_gradientValues)
            || !stream.read(&m_response, m_destinations, &delivered) || !delivered)
            return false;
        const auto &decision = m_response.push();
        m_globalStep = decision.global_step();
        m_previousPushUs
            = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
        m_lastResponseBytes = stream.lastReadBytes();
        return decision.outcome() == proto::APPLIED && decision.rows_size() == 1
               && size_t(decision.rows(0).ids_size()) == nextIds.size();
    }

    size_t requestBytes() const { return m_lastRequestBytes; }
    size_t responseBytes() const { return m_lastResponseBytes; }

private:
    // Makes the table's rows: the ids of ranks 0 .. rows-1 pulled in
    // ascending id order, a random order of ranks.
    void fillTable(size_t rows)
    {
        std::vector<uint64_t> ids(rows);
        for (size_t r = 0; r < rows; ++r)
            ids[r] = bench::idOfRank(r);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        for (size_t at = 0; at < ids.size(); at += kIdsPerPull) {
            const size_t end = std::min(ids.size(), at + kIdsPerPull);
            pull({ids.begin() + long(at), ids.begin() + long(end)}, nullptr);
        }
    }

    void pull(const std::vector<uint64_t> &ids, proto::PullResponse *out)
    {
        proto::TrainRequest request;
        auto *table = request.mutable_pull()->add_tables();
        table->set_table(0);
        table->mutable_ids()->Add(ids.begin(), ids.end());
        proto::TrainResponse response;
        if (!m_chief->stream().write(request) || !m_chief->stream().read(&response) || !response.has_pull()
            || response.pull().rows_size() != 1 || size_t(response.pull().rows(0).ids_size()) != ids.size())
            throw std::runtime_error("a pull of " + std::to_string(ids.size()) + " rows was not answered in full");
        if (out)
            *out = response.pull();
    }

    const std::vector<std::vector<uint64_t>> &m_batches;
    size_t m_next = 0;
    std::vector<float> m_rowGradient;
    float m_bias = 0.0f;
    float m_biasGradient = 1e-6f;
    TensorValues m_gradientValues;
    TensorDestinations m_destinations;
    int64_t m_globalStep = 0;
    int64_t m_previousPushUs = 0;
    size_t m_lastRequestBytes = 0;
    size_t m_lastResponseBytes = 0;
    std::unique_ptr<bench::ChiefStream> m_chief;
    proto::TrainRequest m_request;
    proto::TrainResponse m_response;
};

struct Fixture
{
    std::vector<std::vector<uint64_t>> batches;
    std::unique_ptr<bench::ChildProcess> tcpServer;
    std::unique_ptr<bench::TcpClient> tcp;
    // Per table size, the ps holding it.
    std::map<std::string, std::unique_ptr<bench::ChildProcess>> psTasks;
    std::map<std::string, std::string> psAddresses;
    // Per table size, a step's bytes out and back.
    std::map<std::string, std::pair<size_t, size_t>> bytes;
};

Fixture *g_fixture = nullptr;

std::unique_ptr<bench::ChildProcess> startPs(const std::string &label, QString *address)
{
    *address = u"127.0.0.1:"_s + QString::number(pickFreePort());
    const QString workerAddress = u"127.0.0.1:"_s + QString::number(pickFreePort());
    auto ps = std::make_unique<bench::ChildProcess>(
        bench::nodeBinary(),
        QStringList{u"--ps_hosts="_s + *address, u"--worker_hosts="_s + workerAddress, u"--job_name=ps"_s,
                    u"--task_index=0"_s, u"--mode=async"_s, u"--optimizer=adagrad"_s, u"--learning_rate=0.05"_s,
                    u"--last_step=1000000000000"_s},
        u"sparse-step-ps-"_s + QString::fromStdString(label));
    ps->countAllocations();
    ps->start();
    if (!ps->waitForLog(u"listening on"_s))
        throw std::runtime_error("the ps did not start; see " + ps->logPath().toStdString());
    return ps;
}

// Clients get a new channel and stream for every benchmark run, warmed up
// before timing, as bench_roundtrip's do: a channel left idle while other
// benchmarks run is taken for dead by the 1 s keepalive. The table stays
// on the ps from one client to the next.
void measureSteps(benchmark::State &state, const std::string &label, bool dataLink)
{
    SparseStepClient client(g_fixture->psAddresses.at(label), 0, dataLink, g_fixture->batches);
    for (int i = 0; i < kWarmUpSteps; ++i)
        client.step();
    bench::measure(state, *g_fixture->psTasks.at(label), client.requestBytes(), client.responseBytes(),
                   [&] { return client.step(); });
}

void registerBenchmarks(bool quick)
{
    const double minTime = quick ? 0.05 : 1.0;
    const auto [request, reply] = g_fixture->bytes.at("1M");
    benchmark::RegisterBenchmark("tcp/1M",
                                 [request = request, reply = reply](benchmark::State &state) {
                                     bench::measure(state, *g_fixture->tcpServer, request, reply,
                                                    [&] { return g_fixture->tcp->pingPong(request, reply); });
                                 })
        ->UseRealTime()
        ->MinTime(minTime);
    for (const auto &size : tableSizes())
        benchmark::RegisterBenchmark(
            ("step/" + size.label).c_str(),
            [label = size.label](benchmark::State &state) { measureSteps(state, label, true); })
            ->UseRealTime()
            ->MinTime(minTime);
    // The same step on the gRPC stream (--data_link=0's path).
    benchmark::RegisterBenchmark("step_grpc/1M", [](benchmark::State &state) { measureSteps(state, "1M", false); })
        ->UseRealTime()
        ->MinTime(minTime);
}

int runBenchmarks(int argc, char **argv, bool quick)
{
    Fixture fixture;
    g_fixture = &fixture;
    fixture.batches = bench::zipfBatches(kHotRanks, kBatches, true);

    const uint16_t tcpPort = pickFreePort();
    fixture.tcpServer = std::make_unique<bench::ChildProcess>(QCoreApplication::applicationFilePath(),
                                                              QStringList{u"--serve-tcp="_s + QString::number(tcpPort)},
                                                              u"sparse-step-tcp-echo"_s);
    fixture.tcpServer->countAllocations();
    fixture.tcpServer->start();
    if (!fixture.tcpServer->waitForLog(u"listening"_s))
        throw std::runtime_error("the tcp echo server did not start; see "
                                 + fixture.tcpServer->logPath().toStdString());
    fixture.tcp = std::make_unique<bench::TcpClient>(tcpPort);

    for (const auto &size : tableSizes()) {
        QString address;
        fixture.psTasks[size.label] = startPs(size.label, &address);
        fixture.psAddresses[size.label] = address.toStdString();
        std::fprintf(stderr, "bench_sparse_step: filling a table of %zu rows at %s\n", size.rows, qPrintable(address));
        SparseStepClient filler(address.toStdString(), size.rows, true, fixture.batches);
        for (int i = 0; i < kWarmUpSteps; ++i)
            if (!filler.step())
                throw std::runtime_error("a warm-up step against the " + size.label + " table failed");
        fixture.bytes[size.label] = {filler.requestBytes(), filler.responseBytes()};
        std::fprintf(stderr, "bench_sparse_step: a step is %zu bytes out, %zu back\n", filler.requestBytes(),
                     filler.responseBytes());
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
    // As parasync-node does (the ps's heap): this process's buffers too.
    parasync::keepStepBuffersMapped();
    QCoreApplication app(argc, argv);
    std::vector<char *> args;
    bool quick = false;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.rfind("--serve-tcp=", 0) == 0)
            return parasync::bench::serveTcp(uint16_t(std::stoi(arg.substr(12))));
        if (arg == "--quick")
            quick = true;
        else
            args.push_back(argv[i]);
    }
    int count = int(args.size());
    try {
        return runBenchmarks(count, args.data(), quick);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_sparse_step: %s\n", e.what());
        return 1;
    }
}
