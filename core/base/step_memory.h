#pragma once

// The heap settings of a process that moves tensors every step.
//
// A 1,000,000-parameter step builds, sends, receives and parses buffers of
// ~4 MB. glibc serves blocks that large with a fresh mmap() and gives them
// back with munmap() on free, so every step touched ~2,000 newly mapped
// pages: a minor page fault each, ~10 us apiece on these VMs, about two
// thirds of the step's time at 1M floats (bench_roundtrip's fault columns).
// Kept in the heap, the same pages serve the next step.

#include <cstdint>

namespace parasync {

// Serves blocks of up to 32 MiB (glibc's ceiling for this setting) from the
// heap, and returns free heap memory to the system only past 1 GiB of it:
// a step's buffers are reused from one step to the next instead of being
// mapped anew. Call once, early in main(), before threads start. A process
// holds on to its largest step's worth of memory per allocating thread,
// which it would map again at the next step anyway.
void keepStepBuffersMapped();

// Bytes the allocator has handed out and not had back, over all its arenas
// (glibc's mallinfo2): the live heap. With free memory kept mapped, resident
// memory is the heap's high-water mark since the process started -- a burst
// of queued work once stays in it -- so a leak shows here, not there.
// 0 under a sanitizer that brings its own allocator (ASan, TSan).
int64_t heapInUseBytes();

} // namespace parasync
