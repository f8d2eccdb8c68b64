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

} // namespace parasync
