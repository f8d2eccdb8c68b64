#include "node/network_probe.h"

#include "base/error.h"
#include "base/port_holder.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <netdb.h>
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
            *why = error == ETIMEDOUT ? "timed out after " + std::to_string(timeoutMs / 1000)
                                            + " s (a firewall that drops packets, or the host is down)"
                   : error == ECONNREFUSED
                       ? std::string("connection refused (nothing listens there, or a firewall rejects)")
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
        const PortBinding check = bindPort(address.host, address.port);
        if (check.bound()) {
            say("port " + address.toString() + " free");
            continue;
        }
        std::string line = "port " + address.toString() + " taken: " + check.why();
        if (check.inUse()) {
            if (const auto holder = findPortHolder(address.port))
                line += " by " + holder->describe();
            if (const uint16_t free = pickFreePort(unbracketed(address.host)))
                line += "; free: " + std::to_string(free);
        }
        say(line);
    }
    std::vector<PortBinding> held;
    for (const HostPort &address : addressList(args, "hold_ports")) {
        PortBinding hold = bindPort(address.host, address.port, true);
        if (hold.bound()) {
            held.push_back(std::move(hold));
            say("holding " + address.toString());
        } else {
            say("hold " + address.toString() + " failed: " + hold.why());
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
    }
    return 0;
}

} // namespace parasync
