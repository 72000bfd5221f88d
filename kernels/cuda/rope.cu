// Rotary embeddings on CUDA: the cos/sin tables (angles in double, as the CPU) and the
// rotate-half rotation in place.
#include "block_reduce.cuh"
#include "cuda_ops.hpp"

namespace specd::kernels::cuda {
namespace {

__global__ void cos_sin_kernel(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half, float* cos,
                               float* sin) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n * half;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / half, j = i % half;
    const double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[j]);
    cos[i] = static_cast<float>(::cos(angle));
    sin[i] = static_cast<float>(::sin(angle));
  }
}

__global__ void rope_kernel(float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos,
                            const float* sin) {
  const int64_t half = head_dim / 2, pairs = n * num_heads * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % half, head = i / half, t = head / num_heads;
    float* v = x + head * head_dim;
    const float c = cos[t * half + j], s = sin[t * half + j];
    const float x0 = v[j], x1 = v[j + half];
    v[j] = x0 * c - x1 * s;
    v[j + half] = x1 * c + x0 * s;
  }
}

}  // namespace

void rope_cos_sin(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half, float* cos, float* sin) {
  if (n == 0 || half == 0) return;
  cos_sin_kernel<<<grid_for(n * half), kThreads, 0, stream()>>>(positions, n, inv_freq, half, cos, sin);
  check_launch("rope_cos_sin");
}

void rope_apply(float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos, const float* sin) {
  if (n == 0 || num_heads == 0 || head_dim < 2) return;
  rope_kernel<<<grid_for(n * num_heads * (head_dim / 2)), kThreads, 0, stream()>>>(x, n, num_heads, head_dim, cos, sin);
  check_launch("rope_apply");
}

}  // namespace specd::kernels::cuda
