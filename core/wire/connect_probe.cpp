#include "wire/connect_probe.h"

#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace parasync {

bool canConnect(const HostPort &address, int timeoutMs, std::string *why)
{
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    const std::string host = address.bareHost();
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

} // namespace parasync
