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

}  // namespace specd::kernels::cuda
