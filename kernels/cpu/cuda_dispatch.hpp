// Op front ends hand Device::kCuda to kernels/cuda in CUDA builds:
//   if constexpr (kWithCuda)
//     if (device == Device::kCuda) return cuda::op(...);
// (a discarded branch needs no definition, so builds without CUDA link without kernels/cuda).
#pragma once

#include "../cuda/cuda_ops.hpp"

namespace specd::kernels {
#ifdef SPECD_WITH_CUDA
inline constexpr bool kWithCuda = true;
#else
inline constexpr bool kWithCuda = false;
#endif
}  // namespace specd::kernels
