#pragma once

// A data link: a TCP connection beside one Train stream that carries the
// values of its pushes' tensors, while the stream carries everything else.
//
// Why: gRPC moves a 4 MB message at 1.8x the cost of the same bytes on a bare
// TCP socket (BENCHMARKS.md, "raw gRPC echo"), and a 1M-parameter step sends
// one each way. On the link the values go from the sender's own vectors to
// the receiver's with one read and one write, as a TCP ping-pong moves them.
//
// How a link is made (parasync.proto, DataLinkGrant):
//  1. A worker's JoinRequest offers one (`offers_data_link`).
//  2. The ps answers with a port and a one-time nonce, on the stream the
//     cluster token (and TLS, when it is on) already protects.
//  3. The worker connects to that port on the ps's host and sends the
//     greeting: kGreeting's 8 bytes, then the 16-byte nonce.
//  4. The ps matches the nonce to the stream that granted it, answers one
//     byte (kAccepted) and forgets the nonce. Any other greeting, or none
//     within kGreetingTimeout, is closed unanswered.
// From then on every push of the stream sets `values_on_data_link`: its
// gradient values follow on the link, tensor after tensor, as little-endian
// floats whose counts the tensors' shapes give, and so do its answer's
// parameter values. A link that breaks, or moves no byte for its stall time,
// ends the stream: the worker joins again, as after any broken stream.
//
// Links are plain TCP: a cluster on TLS keeps its values on the (encrypted)
// stream, and so do clients that do not offer a link (Python workers,
// strangers' clients).
//
// Boost.Asio connects, accepts and greets, and moves what a worker's
// overlapped uploads leave over; reads and the other writes are system calls
// on the thread that uses the link. Asio's headers stay in data_link.cpp.

#include "wire/tensor_spans.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace parasync {

// The first bytes a worker sends on a new link, before the nonce.
inline constexpr char kGreeting[8] = {'P', 'S', 'Y', 'N', 'C', 'D', 'L', '1'};
inline constexpr size_t kNonceBytes = 16;
inline constexpr unsigned char kAccepted = 1;
// How long an accepted connection has to send its greeting.
inline constexpr std::chrono::milliseconds kGreetingTimeout{5000};

// The thread that connects and accepts links and greets on them, and moves
// the part of a startWrite() that the socket did not take at once, so that
// a worker's uploads to its ps tasks go on together. Reads, and write(),
// move their bytes on the thread that calls them.
class DataLinkContext
{
public:
    DataLinkContext();
    ~DataLinkContext();
    DataLinkContext(const DataLinkContext &) = delete;
    DataLinkContext &operator=(const DataLinkContext &) = delete;

    struct Impl;
    Impl &impl() { return *m_impl; }

private:
    std::unique_ptr<Impl> m_impl;
};

// One end of a link. One thread uses it at a time; its context must outlive
// it.
class DataLink
{
public:
    // The worker's end: connects to `host`:`port`, greets with `nonce` and
    // waits for the ps to accept, all within `timeout`. Null, with *error
    // saying why, when any of it fails.
    static std::unique_ptr<DataLink> connect(DataLinkContext &context, const std::string &host, int port,
                                             const std::string &nonce, std::chrono::milliseconds timeout,
                                             std::chrono::milliseconds stall, std::string *error);
    ~DataLink();
    DataLink(const DataLink &) = delete;
    DataLink &operator=(const DataLink &) = delete;

    // Starts sending the values, in order: what the socket takes at once
    // goes before this returns, the rest on the context's thread. They must
    // stay unchanged until finishWrites() (or read()) has returned. Finishes
    // the writes before first: false, with error(), when those failed.
    bool startWrite(const TensorValues &values);
    // Sends the values, in order, on the calling thread; returns when they
    // have gone. False, with error(), when the link broke or stalled.
    bool write(const TensorValues &values);
    // Drives the context until what startWrite() started has gone out.
    // False, with error(), when the link broke or stalled.
    bool finishWrites();
    // Finishes the writes, then fills each destination, in order, from the
    // link, on the calling thread. False, with error(), when the link broke
    // or stalled.
    bool read(const TensorDestinations &destinations);
    // Why the last call failed, in words; the link is closed then.
    const std::string &error() const { return m_error; }
    // Bytes moved so far, each way.
    uint64_t bytesSent() const { return m_sent; }
    uint64_t bytesReceived() const { return m_received; }

    struct Impl;
    // A link on a connected socket (DataLinkAcceptor makes the ps's ends).
    explicit DataLink(std::unique_ptr<Impl> impl);

private:
    bool fail(const std::string &what);
    // fail(), and shuts the socket down so that the other end stops too.
    bool failClosing(const std::string &what);

    std::unique_ptr<Impl> m_impl;
    bool m_writing = false;
    std::string m_error;
    uint64_t m_sent = 0;
    uint64_t m_received = 0;
};

// What a ps grants a worker that offers a link.
struct DataLinkGrant
{
    int port = 0;
    std::string nonce; // kNonceBytes random bytes
};

// The ps's side: listens on an ephemeral port of its host, grants nonces to
// Train streams, and matches the connections that greet with them. Its own
// thread accepts and reads greetings; each link it made is used by its
// stream's thread only, which moves the link's bytes itself.
class DataLinkAcceptor
{
public:
    // Listens on `host` (the address the task serves gRPC on), any port.
    // Throws InputError when it cannot.
    DataLinkAcceptor(const std::string &host, std::chrono::milliseconds stall);
    ~DataLinkAcceptor();
    DataLinkAcceptor(const DataLinkAcceptor &) = delete;
    DataLinkAcceptor &operator=(const DataLinkAcceptor &) = delete;

    int port() const { return m_port; }
    // A new nonce for one stream.
    DataLinkGrant grant();
    // The link that greeted with `nonce`, once it has (waiting up to
    // `timeout`); null when none did. The nonce is spent either way.
    std::unique_ptr<DataLink> claim(const std::string &nonce, std::chrono::milliseconds timeout);
    // Forgets a nonce whose stream ended (closing a link it had).
    void revoke(const std::string &nonce);

    struct Impl;

private:
    friend struct Impl;

    std::unique_ptr<Impl> m_impl;
    int m_port = 0;
    std::chrono::milliseconds m_stall;
    std::mutex m_mutex;
    std::condition_variable m_matched;
    // Granted nonces: null until their link greets.
    std::map<std::string, std::unique_ptr<DataLink>> m_granted;
    std::thread m_thread;
};

} // namespace parasync
