#pragma once

// Tensors' values where they lie -- a worker's gradient and parameter
// vectors -- as the Train stream and its data link send and fill them.

#include <span>
#include <vector>

namespace parasync {

// Values to send, one span per tensor.
using TensorValues = std::vector<std::span<const float>>;
// Where received values go, one span per tensor.
using TensorDestinations = std::vector<std::span<float>>;

} // namespace parasync
