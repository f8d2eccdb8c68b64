#include "alloc_counter.h"

#include <cerrno>
#include <cstddef>
#include <cstdlib>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

// glibc's allocators under their own names: what malloc and friends are
// when nothing interposes them.
extern "C" {
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *pointer, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
}

namespace {

using parasync::bench::AllocCounts;

AllocCounts g_ownCounts;
AllocCounts *g_counts = nullptr;

// Runs inside the first allocation of the process, before any thread: only
// system calls, nothing that allocates.
AllocCounts *counts()
{
    AllocCounts *counts = __atomic_load_n(&g_counts, __ATOMIC_ACQUIRE);
    if (counts)
        return counts;
    counts = &g_ownCounts;
    if (const char *path = ::getenv("PARASYNC_ALLOC_COUNTS")) {
        const int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0 && ::ftruncate(fd, sizeof(AllocCounts)) == 0) {
            void *mapped = ::mmap(nullptr, sizeof(AllocCounts), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (mapped != MAP_FAILED)
                counts = static_cast<AllocCounts *>(mapped);
        }
        if (fd >= 0)
            ::close(fd);
    }
    __atomic_store_n(&g_counts, counts, __ATOMIC_RELEASE);
    return counts;
}

void count(size_t size)
{
    AllocCounts *c = counts();
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->bytes, size, __ATOMIC_RELAXED);
    if (size >= parasync::bench::kLargeAllocationBytes)
        __atomic_fetch_add(&c->largeCalls, 1, __ATOMIC_RELAXED);
}

} // namespace

extern "C" {

void *malloc(size_t size)
{
    count(size);
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    count(n * size);
    return __libc_calloc(n, size);
}

void *realloc(void *pointer, size_t size)
{
    count(size);
    return __libc_realloc(pointer, size);
}

void *memalign(size_t alignment, size_t size)
{
    count(size);
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
    count(size);
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **pointer, size_t alignment, size_t size)
{
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0)
        return EINVAL;
    count(size);
    void *allocated = __libc_memalign(alignment, size);
    if (!allocated && size != 0)
        return ENOMEM;
    *pointer = allocated;
    return 0;
}

AllocCounts parasync_alloc_counts()
{
    const AllocCounts *c = counts();
    return {__atomic_load_n(&c->calls, __ATOMIC_RELAXED), __atomic_load_n(&c->bytes, __ATOMIC_RELAXED),
            __atomic_load_n(&c->largeCalls, __ATOMIC_RELAXED)};
}

} // extern "C"
