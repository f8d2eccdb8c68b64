#pragma once

// Heap allocations of a process, counted for the benchmarks (issue 13: "the
// steady state allocates no tensor-sized buffer per step").
//
// libparasync_alloc_counter.so defines malloc, calloc, realloc and the
// aligned allocators, counts each call and hands it on to glibc's own
// (__libc_malloc, ...); free is glibc's, untouched. It counts in the process
// it is loaded into: linked into a benchmark, that benchmark; preloaded
// (LD_PRELOAD) into a child such as parasync-node, the child. A child
// started with PARASYNC_ALLOC_COUNTS=FILE keeps its counters in FILE, mapped
// shared, where the benchmark reads them while it runs (readAllocCounts).
// Not for production: a benchmark tool.

#include <cstdint>

#include <fcntl.h>
#include <unistd.h>

namespace parasync::bench {

// Large: at least this many bytes, the size of a tensor of 16,384 floats --
// what a step that allocates its tensors afresh would show.
inline constexpr uint64_t kLargeAllocationBytes = 64 * 1024;

struct AllocCounts
{
    uint64_t calls = 0;      // malloc, calloc, realloc, aligned allocations
    uint64_t bytes = 0;      // bytes asked for by them
    uint64_t largeCalls = 0; // calls of at least kLargeAllocationBytes
};

} // namespace parasync::bench

extern "C" {
// This process's counts so far (the library's own counters, or FILE's).
parasync::bench::AllocCounts parasync_alloc_counts();
}

namespace parasync::bench {

// The counts a child keeps in `path` (PARASYNC_ALLOC_COUNTS); zeros when it
// cannot be read. Inline: a reader need not load the counting library.
inline AllocCounts readAllocCounts(const char *path)
{
    AllocCounts read;
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return read;
    if (::pread(fd, &read, sizeof read, 0) != ssize_t(sizeof read))
        read = {};
    ::close(fd);
    return read;
}

} // namespace parasync::bench
