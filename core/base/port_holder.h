#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace parasync {

// Who holds a TCP port on this machine, as far as /proc tells: the seeds'
// pitfall of a port still held by an old process after a terminal closed.
struct PortHolder
{
    int64_t pid = 0;
    std::string command; // its command line, spaces between arguments
    std::string describe() const; // "pid 1234 (parasync-node --job_name=ps ...)"
};

// The process listening on `port` (any local address), if /proc shows one we
// may look at. Linux only; returns nullopt elsewhere or when not visible.
std::optional<PortHolder> findPortHolder(uint16_t port);

// True when a listening socket can be bound to host:port right now.
bool isPortFree(const std::string &host, uint16_t port);

// A free loopback port, chosen by the kernel (for tests and "offer free
// ports"), never one this process was handed before: several calls give a
// plan distinct ports. 0 when none can be bound.
uint16_t pickFreePort(const std::string &host = "127.0.0.1");

} // namespace parasync
