#include "wire/cluster_token.h"

#include "base/error.h"
#include "wire/rpc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

namespace parasync {

namespace {

bool isHexToken(const std::string &token)
{
    return token.size() >= 32 && token.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

} // namespace

std::string generateClusterToken()
{
    std::random_device random; // getrandom(2) on Linux
    static const char digits[] = "0123456789abcdef";
    std::string token;
    for (int i = 0; i < 8; ++i) {
        uint32_t word = random();
        for (int j = 0; j < 8; ++j, word >>= 4)
            token += digits[word & 0xf];
    }
    return token;
}

std::string readClusterTokenFile(const std::string &path)
{
    struct stat st
    {
    };
    if (::stat(path.c_str(), &st) != 0)
        throw InputError("cannot read the cluster token file " + path + ": " + std::strerror(errno)
                         + " (make one with: parasync-node --generate_token --cluster_token_file=" + path + ")");
    if (st.st_mode & 077) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%03o", unsigned(st.st_mode & 0777));
        throw InputError("the cluster token file " + path + " can be read by other users (mode " + mode
                         + "): run chmod 600 " + path);
    }
    std::ifstream in(path);
    std::string token;
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' '))
        token.pop_back();
    if (!isHexToken(token))
        throw InputError("the cluster token file " + path
                         + " does not hold a token (at least 32 hex digits on its first line): make one with "
                           "parasync-node --generate_token --cluster_token_file="
                         + path);
    return token;
}

std::string checkClusterToken(const std::string &token, const std::string &origin)
{
    const size_t first = token.find_first_not_of(" \t\r\n");
    const size_t last = token.find_last_not_of(" \t\r\n");
    const std::string trimmed = first == std::string::npos ? std::string() : token.substr(first, last - first + 1);
    if (!isHexToken(trimmed))
        throw InputError(origin
                         + " is not a cluster token (at least 32 hex digits, as parasync-node --generate_token "
                           "prints)");
    return trimmed;
}

void writeClusterTokenFile(const std::string &path, const std::string &token)
{
    ::unlink(path.c_str()); // a fresh file gets our mode, whatever the old one had
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        throw InputError("cannot write the cluster token file " + path + ": " + std::strerror(errno));
    const std::string line = token + "\n";
    const bool ok = ::write(fd, line.data(), line.size()) == ssize_t(line.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok)
        throw InputError("cannot write the cluster token file " + path + ": " + std::strerror(errno));
}

std::string resolveClusterToken(const std::string &tokenFile)
{
    if (!tokenFile.empty())
        return readClusterTokenFile(tokenFile);
    const char *fromEnvironment = std::getenv(kTokenEnvironmentVariable);
    if (!fromEnvironment || !*fromEnvironment)
        return {};
    if (!isHexToken(fromEnvironment))
        throw InputError(
            std::string(kTokenEnvironmentVariable)
            + " does not hold a token (at least 32 hex digits): make one with parasync-node --generate_token");
    return fromEnvironment;
}

} // namespace parasync
