#include "base/port_holder.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <set>
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

} // namespace

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

bool isPortFree(const std::string &host, uint16_t port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (::inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &addr.sin_addr) != 1)
        addr.sin_addr.s_addr = htonl(INADDR_ANY);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
    ::close(fd);
    return free;
}

uint16_t pickFreePort(const std::string &host)
{
    // The kernel hands out ephemeral ports at random and may give a port it
    // gave a moment ago once that socket is closed. A caller picking one port
    // per task would then put two tasks on one address (seen in CI: "address
    // 127.0.0.1:46929 is used twice"), so no port is handed out twice by one
    // process.
    static std::mutex mutex;
    static std::set<uint16_t> handedOut;
    for (int attempt = 0; attempt < 64; ++attempt) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return 0;
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
        ::close(fd);
        if (port == 0)
            return 0;
        const std::lock_guard lock(mutex);
        if (handedOut.insert(port).second)
            return port;
    }
    return 0;
}

} // namespace parasync
