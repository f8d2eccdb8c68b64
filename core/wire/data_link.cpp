#include "wire/data_link.h"

#include "base/error.h"

#include <utility> // boost/asio/awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <future>
#include <system_error>
#include <vector>

namespace parasync {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// Greetings being read at once; more connections are closed unread, so that
// a flood of idle ones cannot hold the ps's descriptors.
constexpr int kMaxGreetings = 64;

int64_t nowNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string describe(const boost::system::error_code &error)
{
    if (error == asio::error::eof)
        return "the other end closed it";
    return error.message();
}

// Tensor spans as the system calls take them; empty ones are left out.
template<typename Spans>
std::vector<iovec> ioVectors(const Spans &spans, size_t *bytes)
{
    std::vector<iovec> iov;
    *bytes = 0;
    for (const auto &span : spans) {
        if (span.size_bytes() == 0)
            continue;
        iov.push_back({const_cast<void *>(static_cast<const void *>(span.data())), span.size_bytes()});
        *bytes += span.size_bytes();
    }
    return iov;
}

// Drops the first `n` bytes from iov[*first...].
void consume(std::vector<iovec> &iov, size_t *first, size_t n)
{
    while (n > 0) {
        iovec &v = iov[*first];
        if (n < v.iov_len) {
            v.iov_base = static_cast<char *>(v.iov_base) + n;
            v.iov_len -= n;
            return;
        }
        n -= v.iov_len;
        ++*first;
    }
}

enum class Direction { Send, Receive };
enum class Waiting { UntilDone, No };

// Moves iov[*first...] through the socket on the calling thread: as far as
// it goes without waiting, then (UntilDone) waiting in poll() for the rest,
// each wait bounded by `stall`. Empty when all went (or, with Waiting::No,
// all the socket took without waiting); else why not.
//
// Why not on the I/O thread: handing each read and write to it and waiting
// for its handler costs two wake-ups per transfer, and on 2 shared cores a
// woken thread waits its turn. A Python worker's blocking calls did a 1M
// round trip quicker than the C++ worker's hand-offs (BENCHMARKS.md, 1-2e).
std::string moveOnThisThread(int fd, Direction direction, std::vector<iovec> &iov, size_t *first,
                             std::chrono::milliseconds stall, Waiting waiting)
{
    while (*first < iov.size()) {
        msghdr message{};
        message.msg_iov = iov.data() + *first;
        message.msg_iovlen = std::min<size_t>(iov.size() - *first, IOV_MAX);
        const ssize_t n = direction == Direction::Send ? ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL)
                                                       : ::recvmsg(fd, &message, MSG_DONTWAIT);
        if (n > 0) {
            consume(iov, first, size_t(n));
            continue;
        }
        if (n == 0)
            return "the other end closed it";
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return std::system_category().message(errno);
        if (waiting == Waiting::No)
            return {};
        pollfd ready{fd, short(direction == Direction::Send ? POLLOUT : POLLIN), 0};
        int polled;
        do
            polled = ::poll(&ready, 1, int(stall.count()));
        while (polled < 0 && errno == EINTR);
        if (polled == 0)
            return "no byte moved for " + std::to_string(stall.count()) + " ms";
        if (polled < 0)
            return std::system_category().message(errno);
    }
    return {};
}

} // namespace

struct DataLinkContext::Impl
{
    asio::io_context io;
    asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
    std::thread thread{[this] { io.run(); }};

    ~Impl()
    {
        work.reset();
        io.stop();
        thread.join();
    }
};

DataLinkContext::DataLinkContext() : m_impl(std::make_unique<Impl>()) {}
DataLinkContext::~DataLinkContext() = default;

// The socket and the state of the one write and the one read that may be in
// flight on it. The socket object is touched on the context's thread only;
// the thread using the link starts operations by posting them there and
// waits for their handlers under `mutex`. Between such operations that
// thread moves bytes through the descriptor itself (moveOnThisThread).
//
// Once the link is made, its descriptor leaves the context's reactor
// (detach()) and is lent back only while an overlapped write's rest goes
// out there. A socket in the reactor is in its epoll set, edge-triggered:
// every arrival of bytes woke the context's thread, which had nothing to do
// with them, and on a ps that was one wasted wake-up a step (37,000 in 5 s
// of bench_sparse_step), competing for the 2 cores with the threads that
// had.
struct DataLink::Impl
{
    Impl(DataLinkContext::Impl &context, std::chrono::milliseconds stall, tcp::socket socket)
        : context(context)
        , socket(std::move(socket))
        , stall(stall)
    {
    }
    ~Impl()
    {
        if (fd >= 0 && !socket.is_open())
            ::close(fd);
    }
    Impl(const Impl &) = delete;
    Impl &operator=(const Impl &) = delete;

    // On the context's thread, with no operation in flight: takes the
    // descriptor out of the reactor; from now on the link owns it.
    void detach()
    {
        boost::system::error_code error;
        const tcp::endpoint local = socket.local_endpoint(error);
        if (error)
            return; // not connected: the handshake fails, the socket stays
        protocol = local.protocol();
        fd = socket.release(error);
        if (error)
            fd = -1;
    }

    // On the context's thread: the descriptor in the reactor again, for one
    // operation; reclaim() takes it back out when that has ended.
    bool lend(boost::system::error_code *error)
    {
        socket.assign(protocol, fd, *error);
        return !*error;
    }
    void reclaim()
    {
        boost::system::error_code ignored;
        if (socket.is_open())
            socket.release(ignored);
    }

    // The descriptor the link's own thread moves bytes through.
    int descriptor() { return fd >= 0 ? fd : socket.native_handle(); }

    // Ends the operation in flight, which fails at once; from any thread.
    // A detached link is shut down, never closed here: its descriptor is
    // closed by the destructor alone, so that no number closed meanwhile
    // and reused by another socket is ever touched.
    void abort()
    {
        if (fd >= 0) {
            ::shutdown(fd, SHUT_RDWR);
            return;
        }
        asio::post(context.io, [this] {
            boost::system::error_code ignored;
            socket.close(ignored);
        });
    }

    // Runs `start` on the context's thread; it starts one operation whose
    // handler sets *done. Waits for *done; when no byte moved for `stall`,
    // closes the socket (the operation ends, aborted) and says so.
    bool run(const std::function<void()> &start, bool Impl::*done, boost::system::error_code Impl::*error,
             std::string *why)
    {
        {
            std::lock_guard lock(mutex);
            this->*done = false;
            this->*error = {};
        }
        progressNs = nowNs();
        asio::post(context.io, start);
        return wait(done, error, why);
    }

    bool wait(bool Impl::*done, boost::system::error_code Impl::*error, std::string *why)
    {
        std::unique_lock lock(mutex);
        bool stalled = false;
        while (!(this->*done)) {
            finished.wait_for(lock, stall / 4 + std::chrono::milliseconds(1));
            if (!(this->*done) && !stalled && nowNs() - progressNs.load() > int64_t(stall.count()) * 1000000) {
                stalled = true;
                abort();
            }
        }
        if (stalled) {
            *why = "no byte moved for " + std::to_string(stall.count()) + " ms";
            return false;
        }
        if (this->*error) {
            *why = describe(this->*error);
            return false;
        }
        return true;
    }

    // Called by async_read/async_write before each chunk: stamps progress
    // and asks for everything at once. (Asio's own transfer_all asks for
    // 64 KiB at a time: 64 system calls, each after a wait, for 4 MB.)
    size_t progress(const boost::system::error_code &error, size_t)
    {
        progressNs = nowNs();
        return error ? 0 : size_t(1) << 30;
    }

    void finish(bool Impl::*done, boost::system::error_code Impl::*error, const boost::system::error_code &result)
    {
        std::lock_guard lock(mutex);
        this->*done = true;
        this->*error = result;
        finished.notify_all();
    }

    DataLinkContext::Impl &context;
    tcp::socket socket;
    int fd = -1; // detached: the link's own
    tcp protocol = tcp::v4();
    std::chrono::milliseconds stall;

    std::mutex mutex;
    std::condition_variable finished;
    bool written = true;
    boost::system::error_code writeError;
    bool received = true;
    boost::system::error_code readError;
    std::atomic<int64_t> progressNs{0};

    std::vector<asio::const_buffer> out;
    std::vector<asio::mutable_buffer> in;
};

DataLink::DataLink(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

DataLink::~DataLink()
{
    // End what is in flight, wait for its handlers, and let the socket go
    // on the context's thread.
    Impl &i = *m_impl;
    std::promise<void> gone;
    i.abort();
    {
        std::unique_lock lock(i.mutex);
        i.finished.wait(lock, [&i] { return i.written && i.received; });
    }
    asio::post(i.context.io, [this, &gone] {
        m_impl.reset();
        gone.set_value();
    });
    gone.get_future().wait();
}

std::unique_ptr<DataLink> DataLink::connect(DataLinkContext &context, const std::string &host, int port,
                                            const std::string &nonce, std::chrono::milliseconds timeout,
                                            std::chrono::milliseconds stall, std::string *error)
{
    const std::string where = host + ":" + std::to_string(port);
    boost::system::error_code resolveError;
    tcp::resolver resolver(context.impl().io);
    const auto endpoints = resolver.resolve(host, std::to_string(port), resolveError);
    if (resolveError) {
        *error = "cannot resolve " + host + ": " + resolveError.message();
        return nullptr;
    }

    // Connect and greet under `timeout`, then run with `stall`.
    auto handshake = std::make_unique<Impl>(context.impl(), timeout, tcp::socket(context.impl().io));
    Impl &i = *handshake;
    std::string why;
    const bool connected = i.run(
        [&i, &endpoints] {
            asio::async_connect(i.socket, endpoints,
                                [&i](const boost::system::error_code &result, const tcp::endpoint &) {
                                    i.finish(&Impl::written, &Impl::writeError, result);
                                });
        },
        &Impl::written, &Impl::writeError, &why);
    std::unique_ptr<DataLink> link(new DataLink(std::move(handshake)));
    if (!connected) {
        *error = "cannot connect to " + where + ": " + why;
        return nullptr;
    }
    std::string greeting(kGreeting, sizeof kGreeting);
    greeting += nonce;
    unsigned char answer = 0;
    link->m_impl->out = {asio::buffer(greeting)};
    link->m_impl->in = {asio::buffer(&answer, 1)};
    if (!link->m_impl->run(
            [&i] {
                boost::system::error_code ignored;
                i.socket.set_option(tcp::no_delay(true), ignored);
                asio::async_write(i.socket, i.out, [&i](const boost::system::error_code &result, size_t) {
                    i.finish(&Impl::written, &Impl::writeError, result);
                });
            },
            &Impl::written, &Impl::writeError, &why)
        || !link->m_impl->run(
            [&i] {
                asio::async_read(i.socket, i.in, [&i](const boost::system::error_code &result, size_t) {
                    i.finish(&Impl::received, &Impl::readError, result);
                });
            },
            &Impl::received, &Impl::readError, &why)) {
        *error = "the ps at " + where + " did not accept the link's greeting (" + why + ")";
        return nullptr;
    }
    if (answer != kAccepted) {
        *error = "the ps at " + where + " answered the link's greeting with " + std::to_string(answer);
        return nullptr;
    }
    std::promise<void> detached;
    asio::post(i.context.io, [&i, &detached] {
        i.detach();
        detached.set_value();
    });
    detached.get_future().wait();
    // The handshake's timeout was its stall; the link's own is `stall`.
    i.stall = stall;
    return link;
}

bool DataLink::fail(const std::string &what)
{
    m_error = what;
    return false;
}

bool DataLink::failClosing(const std::string &what)
{
    // The peer must not wait for bytes that will not come; the socket itself
    // goes on the context's thread, in the destructor.
    ::shutdown(m_impl->descriptor(), SHUT_RDWR);
    return fail(what);
}

bool DataLink::startWrite(const TensorValues &values)
{
    return send({}, values, true);
}

bool DataLink::write(const TensorValues &values)
{
    return send({}, values, false);
}

bool DataLink::send(std::string_view head, const TensorValues &values, bool overlapped)
{
    if (!finishWrites())
        return false;
    Impl &i = *m_impl;
    size_t bytes = 0;
    std::vector<iovec> iov = ioVectors(values, &bytes);
    if (!head.empty()) {
        iov.insert(iov.begin(), iovec{const_cast<char *>(head.data()), head.size()});
        bytes += head.size();
    }
    // Overlapped: what the socket takes now goes from this thread, the rest
    // from the context's while the caller goes on (a worker starts its
    // uploads to every ps task before it waits for the first).
    size_t first = 0;
    const std::string why = moveOnThisThread(i.descriptor(), Direction::Send, iov, &first, i.stall,
                                             overlapped ? Waiting::No : Waiting::UntilDone);
    if (!why.empty())
        return failClosing("sending on the data link failed: " + why);
    m_sent += bytes;
    if (first == iov.size())
        return true;
    i.out.clear();
    for (size_t k = first; k < iov.size(); ++k)
        i.out.push_back(asio::buffer(iov[k].iov_base, iov[k].iov_len));
    {
        std::lock_guard lock(i.mutex);
        i.written = false;
        i.writeError = {};
    }
    i.progressNs = nowNs();
    asio::post(i.context.io, [&i] {
        boost::system::error_code error;
        if (i.fd >= 0 && !i.lend(&error)) {
            i.finish(&Impl::written, &Impl::writeError, error);
            return;
        }
        asio::async_write(
            i.socket, i.out, [&i](const boost::system::error_code &e, size_t n) { return i.progress(e, n); },
            [&i](const boost::system::error_code &result, size_t) {
                if (i.fd >= 0)
                    i.reclaim();
                i.finish(&Impl::written, &Impl::writeError, result);
            });
    });
    m_writing = true;
    return true;
}

void DataLink::startFrame(std::string *frame)
{
    frame->assign(kFrameLengthBytes, '\0');
}

bool DataLink::writeFrame(std::string &frame, const TensorValues &values, bool overlapped)
{
    const size_t length = frame.size() - kFrameLengthBytes;
    if (frame.size() < kFrameLengthBytes || length > UINT32_MAX)
        return fail("a frame of " + std::to_string(length) + " bytes cannot be sent on the data link");
    for (size_t k = 0; k < kFrameLengthBytes; ++k)
        frame[k] = char((length >> (8 * k)) & 0xff);
    return send(frame, values, overlapped);
}

DataLink::Fill DataLink::fillInbox(bool betweenFrames, const std::function<bool()> &keepWaiting, std::string *why)
{
    const int fd = m_impl->descriptor();
    for (;;) {
        const ssize_t n = ::recv(fd, m_inbox.data() + m_inboxEnd, m_inbox.size() - m_inboxEnd, MSG_DONTWAIT);
        if (n > 0) {
            m_inboxEnd += size_t(n);
            m_received += uint64_t(n);
            return Fill::Some;
        }
        if (n == 0) {
            *why = "the other end closed it";
            return Fill::Closed;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            *why = std::system_category().message(errno);
            return Fill::Failed;
        }
        pollfd ready{fd, POLLIN, 0};
        const std::chrono::milliseconds wait = betweenFrames ? kIdleCheck : m_impl->stall;
        int polled;
        do
            polled = ::poll(&ready, 1, int(wait.count()));
        while (polled < 0 && errno == EINTR);
        if (polled < 0) {
            *why = std::system_category().message(errno);
            return Fill::Failed;
        }
        if (polled > 0)
            continue;
        if (!betweenFrames) {
            *why = "no byte moved for " + std::to_string(m_impl->stall.count()) + " ms";
            return Fill::Failed;
        }
        if (keepWaiting && !keepWaiting())
            return Fill::Abandoned;
    }
}

DataLink::FrameRead DataLink::readFrame(std::string *message, size_t maxBytes, const std::function<bool()> &keepWaiting)
{
    if (!finishWrites())
        return FrameRead::Failed;
    // Large enough for the frame of a step of 7,850 floats and more: one
    // system call reads it whole.
    constexpr size_t kInboxBytes = 64 * 1024;
    if (m_inbox.empty())
        m_inbox.resize(kInboxBytes);
    if (m_inboxBegin == m_inboxEnd) {
        m_inboxBegin = m_inboxEnd = 0;
    } else if (m_inboxBegin + kFrameLengthBytes > m_inbox.size()) {
        std::memmove(m_inbox.data(), m_inbox.data() + m_inboxBegin, m_inboxEnd - m_inboxBegin);
        m_inboxEnd -= m_inboxBegin;
        m_inboxBegin = 0;
    }
    while (m_inboxEnd - m_inboxBegin < kFrameLengthBytes) {
        const bool betweenFrames = m_inboxEnd == m_inboxBegin;
        std::string why;
        switch (fillInbox(betweenFrames, keepWaiting, &why)) {
        case Fill::Some: continue;
        case Fill::Abandoned: failClosing("the stream beside the data link ended"); return FrameRead::Abandoned;
        case Fill::Closed:
            if (betweenFrames) {
                failClosing("the other end closed the data link");
                return FrameRead::Closed;
            }
            break;
        case Fill::Failed: break;
        }
        failClosing("receiving on the data link failed: " + why);
        return FrameRead::Failed;
    }
    size_t length = 0;
    for (size_t k = 0; k < kFrameLengthBytes; ++k)
        length |= size_t(static_cast<unsigned char>(m_inbox[m_inboxBegin + k])) << (8 * k);
    m_inboxBegin += kFrameLengthBytes;
    if (length > maxBytes) {
        failClosing("a frame of " + std::to_string(length) + " bytes came on the data link, more than the "
                    + std::to_string(maxBytes) + " a message may have (--max_message_bytes)");
        return FrameRead::TooLarge;
    }
    message->resize(length);
    const size_t buffered = std::min(length, m_inboxEnd - m_inboxBegin);
    std::memcpy(message->data(), m_inbox.data() + m_inboxBegin, buffered);
    m_inboxBegin += buffered;
    if (buffered == length)
        return FrameRead::Read;
    std::vector<iovec> iov{{message->data() + buffered, length - buffered}};
    size_t first = 0;
    const std::string why
        = moveOnThisThread(m_impl->descriptor(), Direction::Receive, iov, &first, m_impl->stall, Waiting::UntilDone);
    if (!why.empty()) {
        failClosing("receiving on the data link failed: " + why);
        return FrameRead::Failed;
    }
    m_received += length - buffered;
    return FrameRead::Read;
}

void DataLink::shutdown()
{
    Impl &i = *m_impl;
    if (i.fd >= 0) {
        // Closed by the destructor alone, so still this link's.
        ::shutdown(i.fd, SHUT_RDWR);
        return;
    }
    // Still in its handshake: on the context's thread, which alone closes
    // the socket, so that a descriptor closed and reused meanwhile is never
    // shut down by mistake.
    asio::post(i.context.io, [&i] {
        boost::system::error_code ignored;
        i.socket.shutdown(tcp::socket::shutdown_both, ignored);
    });
}

bool DataLink::finishWrites()
{
    if (!m_writing)
        return m_error.empty();
    m_writing = false;
    std::string why;
    if (!m_impl->wait(&Impl::written, &Impl::writeError, &why))
        return fail("sending on the data link failed: " + why);
    return true;
}

bool DataLink::read(const TensorDestinations &destinations)
{
    if (!finishWrites())
        return false;
    size_t bytes = 0;
    std::vector<iovec> iov = ioVectors(destinations, &bytes);
    size_t first = 0;
    // Values that came with the frame before them.
    for (size_t buffered = std::min(bytes, m_inboxEnd - m_inboxBegin); buffered > 0;) {
        const size_t n = std::min(buffered, iov[first].iov_len);
        std::memcpy(iov[first].iov_base, m_inbox.data() + m_inboxBegin, n);
        m_inboxBegin += n;
        buffered -= n;
        bytes -= n;
        consume(iov, &first, n);
    }
    const std::string why
        = moveOnThisThread(m_impl->descriptor(), Direction::Receive, iov, &first, m_impl->stall, Waiting::UntilDone);
    if (!why.empty())
        return failClosing("receiving on the data link failed: " + why);
    m_received += bytes;
    return true;
}

// ---------------------------------------------------------------------------

struct DataLinkAcceptor::Impl
{
    explicit Impl(DataLinkAcceptor &owner) : owner(owner) {}

    // One connection that has yet to greet.
    struct Greeting
    {
        explicit Greeting(asio::io_context &io, tcp::socket s) : socket(std::move(s)), timer(io) {}
        tcp::socket socket;
        asio::steady_timer timer;
        std::array<char, sizeof kGreeting + kNonceBytes> bytes{};
    };

    void acceptNext()
    {
        acceptor.async_accept([this](const boost::system::error_code &error, tcp::socket socket) {
            if (error == asio::error::operation_aborted)
                return;
            if (!error)
                greet(std::move(socket));
            acceptNext();
        });
    }

    void greet(tcp::socket socket)
    {
        if (greetings >= kMaxGreetings)
            return; // closed as it goes
        ++greetings;
        auto g = std::make_shared<Greeting>(context.impl().io, std::move(socket));
        g->timer.expires_after(kGreetingTimeout);
        g->timer.async_wait([g](const boost::system::error_code &error) {
            if (!error) {
                boost::system::error_code ignored;
                g->socket.close(ignored);
            }
        });
        asio::async_read(g->socket, asio::buffer(g->bytes), [this, g](const boost::system::error_code &error, size_t) {
            --greetings;
            g->timer.cancel();
            if (error || std::memcmp(g->bytes.data(), kGreeting, sizeof kGreeting) != 0)
                return; // the socket closes with g
            match(std::string(g->bytes.data() + sizeof kGreeting, kNonceBytes), std::move(g->socket));
        });
    }

    // A greeting came with `nonce`: when it was granted and not yet used,
    // the ps accepts (one byte) and keeps the link for claim(). Otherwise the
    // socket closes unanswered.
    void match(const std::string &nonce, tcp::socket socket)
    {
        std::lock_guard lock(owner.m_mutex);
        auto it = owner.m_granted.find(nonce);
        if (it == owner.m_granted.end() || it->second)
            return; // never granted, revoked, or spent
        boost::system::error_code error;
        socket.set_option(tcp::no_delay(true), error);
        asio::write(socket, asio::buffer(&kAccepted, 1), error);
        if (error)
            return;
        auto link = std::make_unique<DataLink::Impl>(context.impl(), owner.m_stall, std::move(socket));
        link->detach();
        it->second = std::unique_ptr<DataLink>(new DataLink(std::move(link)));
        owner.m_matched.notify_all();
    }

    DataLinkAcceptor &owner;
    DataLinkContext context;
    tcp::acceptor acceptor{context.impl().io};
    int greetings = 0; // on the context's thread only
};

DataLinkAcceptor::DataLinkAcceptor(const std::string &host, std::chrono::milliseconds stall, const std::set<int> &avoid)
    : m_impl(std::make_unique<Impl>(*this))
    , m_stall(stall)
{
    boost::system::error_code error;
    tcp::resolver resolver(m_impl->context.impl().io);
    const std::string bindHost = host == "localhost" ? "127.0.0.1" : host;
    const auto endpoints = resolver.resolve(bindHost, "0", error);
    const std::string advice = "; run the ps task with --data_link=0 to keep tensors on the gRPC stream";
    if (error || endpoints.empty())
        throw InputError("the data link cannot listen on " + host + ": " + error.message() + advice);
    const tcp::endpoint endpoint = *endpoints.begin();
    // A port the kernel gave that a task of the cluster is to serve on stays
    // bound here until a good one comes, so that the kernel does not give it
    // again; the cluster has at most a few hundred.
    std::vector<tcp::acceptor> passedOver;
    for (;;) {
        tcp::acceptor acceptor(m_impl->context.impl().io);
        acceptor.open(endpoint.protocol(), error);
        if (!error)
            acceptor.bind(endpoint, error);
        if (error)
            throw InputError("the data link cannot listen on " + bindHost + ": " + error.message() + advice);
        if (!avoid.contains(acceptor.local_endpoint().port())) {
            acceptor.listen(asio::socket_base::max_listen_connections, error);
            if (error)
                throw InputError("the data link cannot listen on " + bindHost + ": " + error.message() + advice);
            m_impl->acceptor = std::move(acceptor);
            break;
        }
        passedOver.push_back(std::move(acceptor));
    }
    m_port = m_impl->acceptor.local_endpoint().port();
    asio::post(m_impl->context.impl().io, [this] { m_impl->acceptNext(); });
}

DataLinkAcceptor::~DataLinkAcceptor()
{
    std::promise<void> closed;
    asio::post(m_impl->context.impl().io, [this, &closed] {
        boost::system::error_code ignored;
        m_impl->acceptor.close(ignored);
        closed.set_value();
    });
    closed.get_future().wait();
    std::map<std::string, std::unique_ptr<DataLink>> granted;
    {
        std::lock_guard lock(m_mutex);
        granted.swap(m_granted);
    }
    granted.clear(); // the links close on the context's thread, still running
    m_impl.reset();
}

DataLinkGrant DataLinkAcceptor::grant()
{
    DataLinkGrant grant;
    grant.port = m_port;
    grant.nonce.resize(kNonceBytes);
    if (RAND_bytes(reinterpret_cast<unsigned char *>(grant.nonce.data()), int(kNonceBytes)) != 1)
        throw std::runtime_error("OpenSSL's RAND_bytes failed: no random nonce for a data link");
    std::lock_guard lock(m_mutex);
    m_granted[grant.nonce] = nullptr;
    return grant;
}

std::unique_ptr<DataLink> DataLinkAcceptor::claim(const std::string &nonce, std::chrono::milliseconds timeout)
{
    std::unique_lock lock(m_mutex);
    auto it = m_granted.find(nonce);
    m_matched.wait_for(lock, timeout, [&] {
        it = m_granted.find(nonce);
        return it == m_granted.end() || it->second;
    });
    if (it == m_granted.end())
        return nullptr;
    std::unique_ptr<DataLink> link = std::move(it->second);
    m_granted.erase(it);
    return link;
}

void DataLinkAcceptor::revoke(const std::string &nonce)
{
    std::unique_ptr<DataLink> link;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_granted.find(nonce);
        if (it == m_granted.end())
            return;
        link = std::move(it->second);
        m_granted.erase(it);
    }
}

} // namespace parasync
