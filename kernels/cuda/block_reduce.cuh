// Block-wide reductions for the CUDA ops (include from .cu files only). Blocks of kThreads
// threads; every thread gets the result.
#pragma once

#include <cuda_runtime.h>

namespace specd::kernels::cuda {

inline constexpr int kThreads = 256;

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int off = 16; off > 0; off >>= 1) {
    const T o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return v;
}

// Sum over the block (of kBlock threads); `scratch` holds kBlock / 32 values in shared memory.
template <class T, int kBlock = kThreads>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < kBlock / 32; ++w) total += scratch[w];
  return total;
}

template <class T>
__device__ __forceinline__ T block_max(T v, T* scratch) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T m = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) m = scratch[w] > m ? scratch[w] : m;
  return m;
}

// Blocks for n independent elements, kThreads each, capped (grid-stride loops do the rest).
inline unsigned grid_for(long long n) {
  const long long blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

}  // namespace specd::kernels::cuda
