// Embedding gather: out[i, :] = table[ids[i], :].
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"
#include "specd/kernels/matmul.hpp"

namespace specd::kernels {

// table [vocab, dim] in any dtype (rows widened to F32), ids [n], out [n, dim]. Throws
// specd::Error(kInvalidArgument) naming the offending id when an id is outside [0, vocab).
void embedding(Device device, const WeightView& table, const int32_t* ids, int64_t n, float* out);

}  // namespace specd::kernels
