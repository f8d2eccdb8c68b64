#include "node/network_probe.h"

#include "base/error.h"
#include "base/port_holder.h"
#include "wire/connect_probe.h"

#include <cstdio>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

namespace parasync {

namespace {

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
            if (const uint16_t free = pickFreePort(address.bareHost()))
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
