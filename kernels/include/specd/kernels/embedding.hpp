// Embedding gather: out[i, :] = table[ids[i], :].
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// table [vocab, dim], ids [n], out [n, dim]. Throws specd::Error(kInvalidArgument) naming the
// offending id when an id is outside [0, vocab).
void embedding(Device device, const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t n, float* out);

}  // namespace specd::kernels
