// Row-wise softmax, numerically stable (max subtracted).
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// x, out [rows, cols] (may alias). A row whose entries are all -inf has no distribution and is
// rejected with specd::Error(kInvalidArgument).
void softmax(Device device, const float* x, float* out, int64_t rows, int64_t cols);

// Row-wise log-softmax (used to score prompts).
void log_softmax(Device device, const float* x, float* out, int64_t rows, int64_t cols);

namespace reference {
void softmax(const float* x, float* out, int64_t rows, int64_t cols);
}  // namespace reference

}  // namespace specd::kernels
