#pragma once

// Ports on this machine: whether a task could listen on one (the single "is
// this port free" check the launcher, the pre-flight's probe and a task that
// failed to bind all use), who holds one, and free ones to offer instead.
// No socket header here: the ui layer reaches this file.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

// Who holds a TCP port on this machine, as far as /proc tells: the seeds'
// pitfall of a port still held by an old process after a terminal closed.
struct PortHolder
{
    int64_t pid = 0;
    std::string command;          // its command line, spaces between arguments
    std::string describe() const; // "pid 1234 (parasync-node --job_name=ps ...)"
};

// The process listening on `port` (any local address), if /proc shows one we
// may look at. Linux only; returns nullopt elsewhere or when not visible.
std::optional<PortHolder> findPortHolder(uint16_t port);

// Sockets bound to host:port as bindPort() binds them, closed when this is
// destroyed (or moved from). Move-only.
class PortBinding
{
public:
    PortBinding() = default;
    PortBinding(PortBinding &&other) noexcept;
    PortBinding &operator=(PortBinding &&other) noexcept;
    PortBinding(const PortBinding &) = delete;
    PortBinding &operator=(const PortBinding &) = delete;
    ~PortBinding();

    bool bound() const { return m_why.empty(); }
    // Another socket listens there (findPortHolder() may say whose): the one
    // failure that another port, or stopping that process, cures.
    bool inUse() const { return m_inUse; }
    // Empty when bound; else what bind() said, in words: "address in use",
    // "not an address of this host (...)", "permission denied (...)",
    // "host name 'NAME' does not resolve here", ...
    const std::string &why() const { return m_why; }

private:
    friend PortBinding bindPort(const std::string &host, uint16_t port, bool listen);
    void close();

    std::vector<int> m_sockets;
    bool m_inUse = false;
    std::string m_why;
};

// Binds host:port the way a task's gRPC server binds its address, so that
// "free" here means the task would start there:
// - with SO_REUSEADDR, as gRPC: a port held only by TIME_WAIT connections of
//   a run that just ended is free, a port with a listener is not;
// - "localhost" as 127.0.0.1 (listenAddress() hands gRPC that), an IPv6
//   address with or without brackets;
// - 0.0.0.0 or :: as gRPC binds a wildcard: [::] accepting IPv4 too, or
//   0.0.0.0 where the host has no IPv6; taken if anything listens on the port;
// - a host name at every address it resolves to. gRPC skips the addresses it
//   cannot bind as long as one binds, and so does this for addresses that are
//   not this host's; but a listener on any of them makes the port taken, as
//   peers resolving the name could reach that process instead of the task.
// With `listen`, the sockets also listen (the pre-flight holds a port so that
// a probe from another host meets a real listener). Blocks while a host name
// resolves. Thread-safe.
PortBinding bindPort(const std::string &host, uint16_t port, bool listen = false);

// Whether a task could listen on host:port right now: bindPort(), closed at
// once. On false, `why` (when given) says why, as PortBinding::why().
bool isPortFree(const std::string &host, uint16_t port, std::string *why = nullptr);

// What a task prints when another socket holds the port of its own address
// ("127.0.0.1:2224 (worker:2) cannot be bound: the port is already in use"),
// followed by who holds it and what to do. The launcher looks for it in the
// output of a worker it placed itself, to move that worker to another port.
std::string portTakenMessage(const std::string &address, const std::string &task);

// A free loopback port, chosen by the kernel (for tests and "offer free
// ports"), never one this process was handed before: several calls give a
// plan distinct ports. It stays reserved while this process lives (bound,
// not listening): no other process's kernel-chosen port is this one, while a
// task binds and listens on it as on a free port. 0 when none can be bound.
uint16_t pickFreePort(const std::string &host = "127.0.0.1");

} // namespace parasync
