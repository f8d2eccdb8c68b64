#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace parasync::fuzz {

// Fuzz input as a file that the path-taking readers (readCsv, readIdx) can
// open: an anonymous memfd reached through /proc/self/fd/N. Nothing touches
// the disk, and parallel fuzzer processes cannot collide on a name.
class MemoryFile
{
public:
    MemoryFile(const char *name, const uint8_t *data, size_t size) : m_fd(::memfd_create(name, MFD_CLOEXEC))
    {
        if (m_fd < 0)
            std::abort();
        for (size_t written = 0; written < size;) {
            const ssize_t n = ::write(m_fd, data + written, size - written);
            if (n <= 0)
                std::abort();
            written += size_t(n);
        }
    }
    ~MemoryFile() { ::close(m_fd); }
    MemoryFile(const MemoryFile &) = delete;
    MemoryFile &operator=(const MemoryFile &) = delete;

    std::string path() const { return "/proc/self/fd/" + std::to_string(m_fd); }

private:
    int m_fd;
};

} // namespace parasync::fuzz
