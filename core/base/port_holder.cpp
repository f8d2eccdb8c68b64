#include "base/port_holder.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

namespace parasync {

namespace {

// Socket inodes in LISTEN state (st == 0A) on `port`, from /proc/net/tcp{,6}.
std::vector<std::string> listeningInodes(uint16_t port)
{
    std::vector<std::string> inodes;
    for (const char *table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(table);
        std::string line;
        std::getline(in, line); // header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
            fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
            const auto colon = local.rfind(':');
            if (colon == std::string::npos || state != "0A")
                continue;
            if (std::stoul(local.substr(colon + 1), nullptr, 16) == port)
                inodes.push_back(inode);
        }
    }
    return inodes;
}

std::string commandLine(int64_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto &c : raw)
        if (c == '\0')
            c = ' ';
    while (!raw.empty() && raw.back() == ' ')
        raw.pop_back();
    return raw;
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

// One address to bind, as getaddrinfo gives it.
struct SocketAddress
{
    sockaddr_storage storage{};
    socklen_t length = 0;
    int family() const { return storage.ss_family; }
    bool operator==(const SocketAddress &other) const
    {
        return length == other.length && std::memcmp(&storage, &other.storage, length) == 0;
    }
};

// `text` as a numeric IPv4 or IPv6 address, if it is one.
std::optional<SocketAddress> numericAddress(const std::string &text, uint16_t port)
{
    SocketAddress address;
    auto *v4 = reinterpret_cast<sockaddr_in *>(&address.storage);
    if (::inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        address.length = sizeof(sockaddr_in);
        return address;
    }
    auto *v6 = reinterpret_cast<sockaddr_in6 *>(&address.storage);
    if (::inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        address.length = sizeof(sockaddr_in6);
        return address;
    }
    return std::nullopt;
}

bool isWildcard(const SocketAddress &address)
{
    if (address.family() == AF_INET)
        return reinterpret_cast<const sockaddr_in *>(&address.storage)->sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6 *>(&address.storage)->sin6_addr);
}

// A socket bound (and with `listen`, listening) at `address`; -1 and errno.
// `dualStack`: an IPv6 wildcard that takes IPv4 connections too.
int bindOne(const SocketAddress &address, bool listen, bool dualStack)
{
    const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (dualStack) {
        const int off = 0;
        ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    }
    if (::bind(fd, reinterpret_cast<const sockaddr *>(&address.storage), address.length) == 0
        && (!listen || ::listen(fd, 16) == 0))
        return fd;
    const int error = errno;
    ::close(fd);
    errno = error;
    return -1;
}

} // namespace

PortBinding::PortBinding(PortBinding &&other) noexcept
    : m_sockets(std::move(other.m_sockets))
    , m_inUse(other.m_inUse)
    , m_why(std::move(other.m_why))
{
    other.m_sockets.clear();
}

PortBinding &PortBinding::operator=(PortBinding &&other) noexcept
{
    if (this != &other) {
        close();
        m_sockets = std::move(other.m_sockets);
        other.m_sockets.clear();
        m_inUse = other.m_inUse;
        m_why = std::move(other.m_why);
    }
    return *this;
}

PortBinding::~PortBinding()
{
    close();
}

void PortBinding::close()
{
    for (int fd : m_sockets)
        ::close(fd);
    m_sockets.clear();
}

PortBinding bindPort(const std::string &host, uint16_t port, bool listen)
{
    PortBinding binding;
    std::string name = host;
    if (name.size() >= 2 && name.front() == '[' && name.back() == ']')
        name = name.substr(1, name.size() - 2);
    if (name == "localhost")
        name = "127.0.0.1";
    const auto fail = [&binding](int error) {
        binding.close();
        binding.m_inUse = error == EADDRINUSE;
        binding.m_why = bindError(error);
        return std::move(binding);
    };

    const auto numeric = numericAddress(name, port);
    if (numeric && isWildcard(*numeric)) {
        // As gRPC: [::] taking IPv4 too, else (no IPv6 here) 0.0.0.0.
        const SocketAddress any6 = *numericAddress("::", port);
        int fd = bindOne(any6, listen, true);
        if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
            fd = bindOne(*numericAddress("0.0.0.0", port), listen, false);
        if (fd < 0)
            return fail(errno);
        binding.m_sockets.push_back(fd);
        return binding;
    }

    std::vector<SocketAddress> addresses;
    if (numeric) {
        addresses.push_back(*numeric);
    } else {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        addrinfo *found = nullptr;
        if (::getaddrinfo(name.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
            binding.m_why = "host name '" + name + "' does not resolve here";
            return binding;
        }
        for (const addrinfo *entry = found; entry; entry = entry->ai_next) {
            SocketAddress address;
            std::memcpy(&address.storage, entry->ai_addr, entry->ai_addrlen);
            address.length = entry->ai_addrlen;
            if (std::find(addresses.begin(), addresses.end(), address) == addresses.end())
                addresses.push_back(address);
        }
        ::freeaddrinfo(found);
    }
    int skipped = 0;
    for (const SocketAddress &address : addresses) {
        const int fd = bindOne(address, listen, false);
        if (fd >= 0) {
            binding.m_sockets.push_back(fd);
            continue;
        }
        // Not this host's address, or a family it lacks: gRPC binds the
        // name's other addresses.
        if ((errno == EADDRNOTAVAIL || errno == EAFNOSUPPORT) && addresses.size() > 1) {
            skipped = errno;
            continue;
        }
        return fail(errno);
    }
    if (binding.m_sockets.empty())
        return fail(skipped);
    return binding;
}

std::string portTakenMessage(const std::string &address, const std::string &task)
{
    return address + " (" + task + ") cannot be bound: the port is already in use";
}

bool isPortFree(const std::string &host, uint16_t port, std::string *why)
{
    const PortBinding binding = bindPort(host, port);
    if (why)
        *why = binding.why();
    return binding.bound();
}

std::string PortHolder::describe() const
{
    return "pid " + std::to_string(pid) + (command.empty() ? std::string() : " (" + command + ")");
}

std::optional<PortHolder> findPortHolder(uint16_t port)
{
    const auto inodes = listeningInodes(port);
    if (inodes.empty())
        return std::nullopt;
    DIR *proc = ::opendir("/proc");
    if (!proc)
        return std::nullopt;
    std::optional<PortHolder> found;
    while (dirent *entry = ::readdir(proc)) {
        char *end = nullptr;
        const long pid = std::strtol(entry->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        const std::string fdDir = "/proc/" + std::string(entry->d_name) + "/fd";
        DIR *fds = ::opendir(fdDir.c_str());
        if (!fds)
            continue;
        while (dirent *fd = ::readdir(fds)) {
            char target[128];
            const std::string link = fdDir + "/" + fd->d_name;
            const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            for (const auto &inode : inodes) {
                if (std::string(target) == "socket:[" + inode + "]")
                    found = PortHolder{pid, commandLine(pid)};
            }
            if (found)
                break;
        }
        ::closedir(fds);
        if (found)
            break;
    }
    ::closedir(proc);
    return found;
}

uint16_t pickFreePort(const std::string &host)
{
    // The kernel hands out ephemeral ports at random and may give a port it
    // gave a moment ago once that socket is closed: to this process (seen in
    // CI: "address 127.0.0.1:46929 is used twice") and to any other, such as
    // the test ctest runs beside this one, whose task then held the port a
    // task of this one was to bind seconds later (seen in CI: "the port is
    // already in use by pid ..."). So each port handed out stays bound here,
    // with SO_REUSEADDR and never listening, for as long as this process
    // lives: the kernel gives it to no other bind of port 0, while a task's
    // gRPC server (SO_REUSEADDR, as bindPort) binds and listens on it
    // as on a free port.
    static std::mutex mutex;
    static std::map<uint16_t, int> reserved;
    for (int attempt = 0; attempt < 64; ++attempt) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return 0;
        const int on = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = 0;
        ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
        uint16_t port = 0;
        if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0) {
            socklen_t len = sizeof addr;
            ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
            port = ntohs(addr.sin_port);
        }
        if (port == 0) {
            ::close(fd);
            return 0;
        }
        const std::lock_guard lock(mutex);
        if (reserved.emplace(port, fd).second)
            return port;
        ::close(fd);
    }
    return 0;
}

} // namespace parasync
