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
// A worker that offers it (JoinRequest.offers_messages_on_data_link) is
// granted more: after its join, its requests and the ps's answers travel
// whole on the link as frames (DataLinkGrant.messages), and a step of any
// size is one exchange on one TCP connection. The stream stays open, carrying
// nothing but its end: the ps's reason when it ends the stream, and the
// worker's cancellation. gRPC's keepalive on it still tells either end that
// the other froze or went away, and either end then closes the link.
//
// Links are plain TCP: a cluster on TLS keeps its values on the (encrypted)
// stream, and so do clients that do not offer a link. Python workers offer
// one for 64 KiB of values or more, without frames.
//
// Boost.Asio connects, accepts and greets, and moves what a worker's
// overlapped uploads leave over; reads and the other writes are system calls
// on the thread that uses the link. Asio's headers stay in data_link.cpp.

#include "wire/tensor_spans.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace parasync {

// The first bytes a worker sends on a new link, before the nonce.
inline constexpr char kGreeting[8] = {'P', 'S', 'Y', 'N', 'C', 'D', 'L', '1'};
inline constexpr size_t kNonceBytes = 16;
inline constexpr unsigned char kAccepted = 1;
// How long an accepted connection has to send its greeting.
inline constexpr std::chrono::milliseconds kGreetingTimeout{5000};
// A frame's length, in bytes, before its message (DataLinkGrant.messages).
inline constexpr size_t kFrameLengthBytes = 4;
// How often a link waiting for the next frame asks whether to go on waiting.
inline constexpr std::chrono::milliseconds kIdleCheck{100};

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

    // Frames. startFrame() makes `frame` the room for a length; append the
    // message after it, then writeFrame() fills the length in and sends the
    // frame and the values that follow it (none, for a message that carries
    // its own): Overlapped as startWrite() (frame and values unchanged until
    // finishWrites()), else as write().
    static void startFrame(std::string *frame);
    bool writeFrame(std::string &frame, const TensorValues &values, bool overlapped);
    enum class FrameRead {
        Read,      // *message holds the next frame's message
        Closed,    // the other end closed the link between frames
        Abandoned, // keepWaiting said to stop waiting
        TooLarge,  // the frame is longer than maxBytes (error() says how long)
        Failed,    // the link broke or stalled mid-frame (error())
    };
    // Reads the next frame's message into *message. Until its first byte the
    // wait has no bound but `keepWaiting` (when given), asked every
    // kIdleCheck: a worker may compute for minutes between two pushes. Once
    // the frame has begun, the rest must come within the stall. Values that
    // follow the frame are read with read(). Anything but Read leaves the
    // link closed.
    FrameRead readFrame(std::string *message, size_t maxBytes, const std::function<bool()> &keepWaiting);
    // From any thread: shuts the link down, so that a readFrame() waiting on
    // another thread returns Closed at once.
    void shutdown();

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
    // Sends `head`, then `values`; Overlapped as startWrite().
    bool send(std::string_view head, const TensorValues &values, bool overlapped);
    enum class Fill { Some, Closed, Abandoned, Failed };
    // Receives what the socket has into the inbox: at least one byte,
    // waiting as readFrame() says (`betweenFrames`: for a frame's first byte).
    Fill fillInbox(bool betweenFrames, const std::function<bool()> &keepWaiting, std::string *why);

    std::unique_ptr<Impl> m_impl;
    bool m_writing = false;
    // Bytes received ahead of where they go: a frame is read with one
    // system call when it fits, and the values after it may come along.
    std::vector<char> m_inbox;
    size_t m_inboxBegin = 0;
    size_t m_inboxEnd = 0;
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
    // Listens on `host` (the address the task serves gRPC on), on a port the
    // kernel picks other than those in `avoid`: the cluster's task ports. A
    // cluster on ephemeral ports (free ports picked before its tasks start)
    // would otherwise find a worker's port taken by the link.
    // Throws InputError when it cannot.
    DataLinkAcceptor(const std::string &host, std::chrono::milliseconds stall, const std::set<int> &avoid = {});
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
