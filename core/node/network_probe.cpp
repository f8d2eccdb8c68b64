#include "node/network_probe.h"

#include "base/error.h"
#include "base/port_holder.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

namespace parasync {

namespace {

std::string unbracketed(const std::string &host)
{
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        return host.substr(1, host.size() - 2);
    return host;
}

std::string bindError(int error)
{
    switch (error) {
    case EADDRINUSE: return "address in use";
    case EADDRNOTAVAIL: return "not an address of this host (a task listens on its own address)";
    case EACCES: return "permission denied (ports below 1024 need privileges)";
    default: return std::strerror(error);
    }
}

// A socket bound (and, with `listen`, listening) on host:port; -1 with `why`.
int bindSocket(const std::string &host, uint16_t port, bool listen, std::string *why)
{
    const std::string name = unbracketed(host);
    const bool v6 = name.find(':') != std::string::npos;
    const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (why)
            *why = std::strerror(errno);
        return -1;
    }
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    int result = -1;
    if (v6) {
        sockaddr_in6 addr{};
        addr.sin6_family = AF_INET6;
        addr.sin6_port = htons(port);
        if (::inet_pton(AF_INET6, name.c_str(), &addr.sin6_addr) != 1) {
            if (why)
                *why = "'" + name + "' is not an IPv6 address";
            ::close(fd);
            return -1;
        }
        result = ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
    } else {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        if (::inet_pton(AF_INET, name == "localhost" ? "127.0.0.1" : name.c_str(), &addr.sin_addr) != 1) {
            // A host name: it binds what it resolves to, as the node does.
            addrinfo hints{};
            hints.ai_family = AF_INET;
            addrinfo *found = nullptr;
            if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0 || !found) {
                if (why)
                    *why = "host name '" + name + "' does not resolve here";
                ::close(fd);
                return -1;
            }
            addr.sin_addr = reinterpret_cast<sockaddr_in *>(found->ai_addr)->sin_addr;
            ::freeaddrinfo(found);
        }
        result = ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
    }
    if (result == 0 && listen)
        result = ::listen(fd, 16);
    if (result != 0) {
        if (why)
            *why = bindError(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

std::vector<HostPort> addressList(const std::vector<std::string> &args, const std::string &flag)
{
    for (const auto &arg : args)
        if (arg.rfind("--" + flag + "=", 0) == 0)
            return parseHostList(arg.substr(flag.size() + 3), "--" + flag);
    return {};
}

void say(const std::string &line)
{
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
}

} // namespace

bool canListen(const std::string &host, uint16_t port, std::string *why)
{
    const int fd = bindSocket(host, port, false, why);
    if (fd < 0)
        return false;
    ::close(fd);
    return true;
}

bool canConnect(const HostPort &address, int timeoutMs, std::string *why)
{
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    const std::string host = unbracketed(address.host);
    if (::getaddrinfo(host.c_str(), std::to_string(address.port).c_str(), &hints, &found) != 0 || !found) {
        if (why)
            *why = "host name '" + host + "' does not resolve";
        return false;
    }
    const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    bool ok = false;
    if (fd >= 0) {
        int result = ::connect(fd, found->ai_addr, found->ai_addrlen);
        int error = result == 0 ? 0 : errno;
        if (error == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            const int ready = ::poll(&p, 1, timeoutMs);
            if (ready == 0) {
                error = ETIMEDOUT;
            } else {
                socklen_t length = sizeof error;
                ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
            }
        }
        ok = error == 0;
        if (!ok && why)
            *why = error == ETIMEDOUT ? "timed out after " + std::to_string(timeoutMs / 1000) + " s (a firewall that drops packets, or the host is down)"
                   : error == ECONNREFUSED ? std::string("connection refused (nothing listens there, or a firewall rejects)")
                                           : std::string(std::strerror(error));
        ::close(fd);
    }
    ::freeaddrinfo(found);
    return ok;
}

bool isNetworkCheckCommand(const std::vector<std::string> &args)
{
    for (const auto &arg : args)
        for (const char *flag : {"--check_ports=", "--hold_ports=", "--probe="})
            if (arg.rfind(flag, 0) == 0)
                return true;
    return false;
}

int runNetworkCheckCommand(const std::vector<std::string> &args)
{
    for (const HostPort &address : addressList(args, "check_ports")) {
        std::string why;
        if (canListen(address.host, address.port, &why)) {
            say("port " + address.toString() + " free");
            continue;
        }
        std::string line = "port " + address.toString() + " taken: " + why;
        if (why == "address in use") {
            if (const auto holder = findPortHolder(address.port))
                line += " by " + holder->describe();
            if (const uint16_t free = pickFreePort(unbracketed(address.host)))
                line += "; free: " + std::to_string(free);
        }
        say(line);
    }
    std::vector<int> held;
    for (const HostPort &address : addressList(args, "hold_ports")) {
        std::string why;
        const int fd = bindSocket(address.host, address.port, true, &why);
        if (fd >= 0) {
            held.push_back(fd);
            say("holding " + address.toString());
        } else {
            say("hold " + address.toString() + " failed: " + why);
        }
    }
    for (const HostPort &address : addressList(args, "probe")) {
        std::string why;
        say(canConnect(address, 3000, &why) ? "reach " + address.toString() + " ok"
                                            : "reach " + address.toString() + " failed: " + why);
    }
    if (!held.empty()) {
        // The kernel completes connections to a listening socket by itself:
        // nothing to accept. Held until the pre-flight closes stdin (or a
        // minute, should it never).
        pollfd p{STDIN_FILENO, POLLIN, 0};
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        char buffer[64];
        while (std::chrono::steady_clock::now() < deadline) {
            if (::poll(&p, 1, 1000) > 0 && ::read(STDIN_FILENO, buffer, sizeof buffer) <= 0)
                break;
        }
        for (int fd : held)
            ::close(fd);
    }
    return 0;
}

} // namespace parasync
