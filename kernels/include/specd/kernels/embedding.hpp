// Embedding gather: out[i, :] = table[ids[i], :].
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"
#include "specd/kernels/matmul.hpp"

namespace specd::kernels {

// table [vocab, dim] in any dtype (rows widened to F32), ids [n], out [n, dim]. Throws
// specd::Error(kInvalidArgument) naming the offending id when an id is outside [0, vocab).
void embedding(Device device, const WeightView& table, const int32_t* ids, int64_t n, float* out);

// The same for ids the caller has checked against [0, vocab) (the model runtime checks its batch
// on the host): on CUDA nothing is read back, so the call can be recorded in a DeviceGraph. On
// the CPU it checks as embedding() does.
void embedding_of_checked_ids(Device device, const WeightView& table, const int32_t* ids, int64_t n, float* out);

}  // namespace specd::kernels
