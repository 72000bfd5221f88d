// Gated activations on CUDA: g = act(g) * u, elementwise (grid-stride).
#include "block_reduce.cuh"
#include "cuda_ops.hpp"

namespace specd::kernels::cuda {
namespace {

__global__ void silu_mul_kernel(float* g, const float* u, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = g[i];
    g[i] = x / (1.0f + expf(-x)) * u[i];
  }
}

__global__ void gelu_tanh_mul_kernel(float* g, const float* u, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = g[i];
    g[i] = 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * u[i];
  }
}

}  // namespace

void silu_mul(float* g, const float* u, int64_t n) {
  if (n <= 0) return;
  silu_mul_kernel<<<grid_for(n), kThreads, 0, stream()>>>(g, u, n);
  check_launch("silu_mul");
}

void gelu_tanh_mul(float* g, const float* u, int64_t n) {
  if (n <= 0) return;
  gelu_tanh_mul_kernel<<<grid_for(n), kThreads, 0, stream()>>>(g, u, n);
  check_launch("gelu_tanh_mul");
}

}  // namespace specd::kernels::cuda
