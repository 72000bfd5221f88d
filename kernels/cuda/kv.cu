// write_kv on CUDA: n new tokens into their cache rows, keys rotated on the way (rotate-half
// RoPE, as rope_apply), both narrowed to the cache dtype with round-to-nearest-even (the CPU's
// rounding). One thread per (token, kv head, element pair).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"

namespace specd::kernels::cuda {
namespace {

template <class T>
__device__ __forceinline__ T narrow(float x);
template <>
__device__ __forceinline__ float narrow<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half narrow<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <class T>
__global__ void write_kv_kernel(const float* k, const float* v, int64_t n, int64_t num_kv_heads, int64_t head_dim,
                                const float* cos, const float* sin, const int64_t* slots, T* k_cache, T* v_cache) {
  const int64_t half = head_dim / 2, row = num_kv_heads * head_dim, pairs = n * num_kv_heads * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % half, head = i / half, t = head / num_kv_heads;
    const int64_t src = head * head_dim + j;  // head already counts t's heads
    const int64_t dst = slots[t] * row + (head % num_kv_heads) * head_dim + j;
    float k0 = k[src], k1 = k[src + half];
    if (cos != nullptr) {
      const float c = cos[t * half + j], s = sin[t * half + j];
      const float x0 = k0, x1 = k1;
      k0 = x0 * c - x1 * s;
      k1 = x1 * c + x0 * s;
    }
    k_cache[dst] = narrow<T>(k0);
    k_cache[dst + half] = narrow<T>(k1);
    v_cache[dst] = narrow<T>(v[src]);
    v_cache[dst + half] = narrow<T>(v[src + half]);
  }
}

template <class T>
void launch(const float* k, const float* v, int64_t n, int64_t num_kv_heads, int64_t head_dim, const float* cos,
            const float* sin, const int64_t* slots, void* k_cache, void* v_cache) {
  write_kv_kernel<<<grid_for(n * num_kv_heads * (head_dim / 2)), kThreads, 0, stream()>>>(
      k, v, n, num_kv_heads, head_dim, cos, sin, slots, static_cast<T*>(k_cache), static_cast<T*>(v_cache));
}

}  // namespace

void write_kv(const float* k, const float* v, int64_t n, int64_t num_kv_heads, int64_t head_dim, const float* cos,
              const float* sin, const int64_t* slots, DType kv_dtype, void* k_cache, void* v_cache) {
  if (n == 0 || num_kv_heads == 0 || head_dim == 0) return;
  switch (kv_dtype) {
    case DType::kF32:
      launch<float>(k, v, n, num_kv_heads, head_dim, cos, sin, slots, k_cache, v_cache);
      break;
    case DType::kF16:
      launch<__half>(k, v, n, num_kv_heads, head_dim, cos, sin, slots, k_cache, v_cache);
      break;
    default:
      launch<__nv_bfloat16>(k, v, n, num_kv_heads, head_dim, cos, sin, slots, k_cache, v_cache);
      break;
  }
  check_launch("write_kv");
}

}  // namespace specd::kernels::cuda
