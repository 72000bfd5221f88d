// Dtype conversion on CUDA: widening every dtype to F32 (each value exactly as the CPU computes
// it: widen.cuh) and narrowing F32 to f16/bf16 with round-to-nearest-even (equal to the CPU's
// bits for every non-NaN value). Quantizing is refused, naming the dtype.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"
#include "specd/error.hpp"
#include "widen.cuh"

namespace specd::kernels::cuda {
namespace {

#define SPECD_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <class Widen>
__global__ void widen_kernel(const void* src, float* dst, int64_t n, Widen widen) {
  SPECD_GRID_STRIDE(i, n) dst[i] = widen(src, i);
}

template <class T>
__global__ void narrow_kernel(const float* src, T* dst, int64_t n) {
  SPECD_GRID_STRIDE(i, n) {
    if constexpr (sizeof(T) == 4) {
      dst[i] = src[i];
    } else if constexpr (std::is_same_v<T, __half>) {
      dst[i] = __float2half_rn(src[i]);
    } else {
      dst[i] = __float2bfloat16_rn(src[i]);
    }
  }
}

#undef SPECD_GRID_STRIDE

[[noreturn]] void refuse(const char* op, DType dt) {
  throw Error(ErrorCode::kUnsupported, std::string(op) + ": " + std::string(dtype_name(dt)) +
                                           " has no CUDA implementation yet (f32, f16 and bf16 do)");
}

}  // namespace

void to_f32(DType dt, const void* src, float* dst, int64_t n) {
  if (n == 0) return;
  const unsigned grid = grid_for(n);
  with_widen(dt, [&](auto widen) { widen_kernel<<<grid, kThreads, 0, stream()>>>(src, dst, n, widen); });
  check_launch("to_f32");
}

void from_f32(const float* src, DType dt, void* dst, int64_t n) {
  if (n == 0) return;
  const unsigned grid = grid_for(n);
  switch (dt) {
    case DType::kF32:
      narrow_kernel<<<grid, kThreads, 0, stream()>>>(src, static_cast<float*>(dst), n);
      break;
    case DType::kF16:
      narrow_kernel<<<grid, kThreads, 0, stream()>>>(src, static_cast<__half*>(dst), n);
      break;
    case DType::kBF16:
      narrow_kernel<<<grid, kThreads, 0, stream()>>>(src, static_cast<__nv_bfloat16*>(dst), n);
      break;
    default:
      refuse("from_f32", dt);
  }
  check_launch("from_f32");
}

}  // namespace specd::kernels::cuda
