// Element i of a 16- or 32-bit float array on the device, as F32 (include from .cu files only).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace specd::kernels::cuda {

struct WidenF32 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    return static_cast<const float*>(t)[i];
  }
};
struct WidenF16 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    return __half2float(static_cast<const __half*>(t)[i]);
  }
};
struct WidenBF16 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    return __uint_as_float(static_cast<unsigned>(static_cast<const uint16_t*>(t)[i]) << 16);
  }
};

// GGUF blocks of 32 (rows a whole number of blocks, so flat index i lies in block i / 32): an
// fp16 scale d, then 32 int8 levels (Q8_0) or 16 bytes of nibbles (Q4_0: elements 0-15 in the
// low nibbles, 16-31 in the high ones, stored as level + 8); each value d · level, exactly.
struct WidenQ8_0 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 32) * 34;
    return static_cast<float>(static_cast<int8_t>(blk[2 + i % 32])) *
           __half2float(*reinterpret_cast<const __half*>(blk));
  }
};
struct WidenQ4_0 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 32) * 18;
    const int j = static_cast<int>(i % 32);
    const int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
    return static_cast<float>(q - 8) * __half2float(*reinterpret_cast<const __half*>(blk));
  }
};

}  // namespace specd::kernels::cuda
