#pragma once

// The two clocks a run is measured with. Wall time (seconds since the Unix
// epoch, as TensorFlow's event files and the step log stamp records) says
// when something happened, comparable across processes; the steady clock
// measures how long it took, immune to the wall clock being set.

#include <chrono>
#include <cstdint>

namespace parasync {

// Seconds since the Unix epoch, with sub-microsecond resolution.
inline double wallTime()
{
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Microseconds of the steady clock since `start`.
inline int64_t microsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
}

} // namespace parasync
