#pragma once

// What the round-trip benchmarks share (bench_roundtrip, bench_sparse_step):
// the raw TCP ping-pong that is their floor, and the timing of a benchmark
// loop of round trips against a child process, with what each round trip
// cost the two processes.

#include "alloc_counter.h"
#include "bench_support.h"
#include "proto/parasync.grpc.pb.h"
#include "wire/train_call.h"

#include <benchmark/benchmark.h>

#include <QtGlobal>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace parasync::bench {

// ---------------------------------------------------------------------------
// Raw TCP over loopback (TCP_NODELAY, blocking sockets): a 8-byte header
// (request length, reply length), then the payload; the far end answers with
// `reply` bytes. The least a step of those bytes can cost.
// ---------------------------------------------------------------------------

// The far end: serves one connection after another on 127.0.0.1:`port`,
// printing "tcp echo listening on PORT" once it listens. Returns only on
// an error (1).
int serveTcp(uint16_t port);

class TcpClient
{
public:
    // Connects to serveTcp's `port`, trying for about two seconds.
    explicit TcpClient(uint16_t port);
    ~TcpClient();
    TcpClient(const TcpClient &) = delete;
    TcpClient &operator=(const TcpClient &) = delete;

    // One ping of `request` bytes (header included in the send), one pong of `reply` bytes.
    bool pingPong(size_t request, size_t reply);

private:
    int m_fd = -1;
    std::vector<char> m_out, m_in;
};

// What process `pid` (0: this one) has used so far: CPU time (user +
// system) in microseconds, and minor page faults -- each a page the process
// touched for the first time since it was mapped, which is what a buffer
// allocated afresh every step costs.
struct ProcessUse
{
    double cpuMicros = 0;
    double minorFaults = 0;
};

ProcessUse processUse(qint64 pid);

// Times every round trip of the benchmark loop; p50/p99 go into counters,
// with the CPU time, the minor page faults and the heap allocations the far
// end (`server`) and this process had per round trip: figures the machine's
// other load disturbs much less than latency. `request` and `reply` are the
// round trip's bytes (counters request_bytes, response_bytes).
template<typename RoundTrip>
void measure(benchmark::State &state, const ChildProcess &server, size_t request, size_t reply, RoundTrip roundTrip)
{
    using Clock = std::chrono::steady_clock;
    const qint64 serverPid = server.pid();
    const ProcessUse serverBefore = processUse(serverPid);
    const ProcessUse clientBefore = processUse(0);
    const AllocCounts serverAllocsBefore = server.allocations();
    const AllocCounts clientAllocsBefore = parasync_alloc_counts();
    std::vector<double> micros;
    micros.reserve(1 << 16);
    for (auto _ : state) {
        const auto start = Clock::now();
        if (!roundTrip()) {
            state.SkipWithError("round trip failed");
            return;
        }
        micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    const double iterations = double(std::max<benchmark::IterationCount>(1, state.iterations()));
    const AllocCounts clientAllocsAfter = parasync_alloc_counts();
    const AllocCounts serverAllocsAfter = server.allocations();
    const ProcessUse serverAfter = processUse(serverPid);
    const ProcessUse clientAfter = processUse(0);
    // The counters include the timing loop's own bookkeeping (none: `micros`
    // is reserved up front) and, on the server, its other threads' work.
    state.counters["server_allocs"] = double(serverAllocsAfter.calls - serverAllocsBefore.calls) / iterations;
    state.counters["client_allocs"] = double(clientAllocsAfter.calls - clientAllocsBefore.calls) / iterations;
    state.counters["server_large_allocs"]
        = double(serverAllocsAfter.largeCalls - serverAllocsBefore.largeCalls) / iterations;
    state.counters["client_large_allocs"]
        = double(clientAllocsAfter.largeCalls - clientAllocsBefore.largeCalls) / iterations;
    state.counters["server_cpu_us"] = (serverAfter.cpuMicros - serverBefore.cpuMicros) / iterations;
    state.counters["client_cpu_us"] = (clientAfter.cpuMicros - clientBefore.cpuMicros) / iterations;
    state.counters["server_faults"] = (serverAfter.minorFaults - serverBefore.minorFaults) / iterations;
    state.counters["client_faults"] = (clientAfter.minorFaults - clientBefore.minorFaults) / iterations;
    std::sort(micros.begin(), micros.end());
    auto quantile = [&](double q) { return micros[std::min(micros.size() - 1, size_t(q * double(micros.size())))]; };
    state.counters["p50_us"] = quantile(0.50);
    state.counters["p99_us"] = quantile(0.99);
    state.counters["request_bytes"] = double(request);
    state.counters["response_bytes"] = double(reply);
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(request + reply));
}

// worker:0's side of a real ps's training stream, as the step benchmarks
// play it: the chief's Initialize (a no-op on a ps that holds its
// variables already), the join offering a data link, and a leave when it
// goes. Throws std::runtime_error when the ps refuses any of it.
class ChiefStream
{
public:
    ChiefStream(const std::string &address, const proto::InitializeRequest &init, bool dataLink);
    ~ChiefStream();
    ChiefStream(const ChiefStream &) = delete;
    ChiefStream &operator=(const ChiefStream &) = delete;

    TrainCall &stream() { return *m_stream; }
    int64_t joinedAtStep() const { return m_joinedAtStep; }

private:
    DataLinkContext m_links; // before m_stream, which it outlives
    std::shared_ptr<grpc::Channel> m_channel;
    std::unique_ptr<grpc::ClientContext> m_context;
    std::unique_ptr<TrainCall> m_stream;
    int64_t m_joinedAtStep = 0;
};

} // namespace parasync::bench
