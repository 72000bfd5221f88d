// Row-wise argmax; ties resolve to the lowest index (as numpy and torch do).
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// x [rows, cols], out [rows]. NaN entries are never selected.
void argmax(Device device, const float* x, int64_t rows, int64_t cols, int32_t* out);

}  // namespace specd::kernels
