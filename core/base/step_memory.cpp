#include "base/step_memory.h"

#include <malloc.h>

namespace parasync {

void keepStepBuffersMapped()
{
    // Setting either threshold also turns off glibc's dynamic threshold,
    // which would otherwise move the mmap threshold only after a block of
    // each size had been freed once, and never above 32 MiB anyway.
    ::mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
}

int64_t heapInUseBytes()
{
    // In the heap, plus the blocks above the mmap threshold, mapped apart.
    const struct mallinfo2 info = ::mallinfo2();
    return int64_t(info.uordblks + info.hblkhd);
}

} // namespace parasync
