// RMSNorm on CUDA: one block per row; the sum of squares in double, as the CPU path.
#include <cstdint>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"

namespace specd::kernels::cuda {
namespace {

__global__ void rmsnorm_kernel(const float* x, float* residual, const float* w, float* out, int64_t dim, float eps) {
  __shared__ double scratch[kThreads / 32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * dim;
  float* res = residual != nullptr ? residual + row * dim : nullptr;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    float v = xr[i];
    if (res != nullptr) {
      v += res[i];
      res[i] = v;
    }
    ss += static_cast<double>(v) * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(dim) + eps));
  const float* src = res != nullptr ? res : xr;
  float* o = out + row * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) o[i] = w[i] * (src[i] * inv);
}

// Rows of dim % 4 == 0 and at most kWide * 4 * kSteps elements (every hidden size in use): thread
// t holds the float4s t, t + kWide, ... of its row in registers between the two passes, so a row
// is read once; 16-byte loads. The sum's order depends on dim only (never on the rows).
constexpr int kWide = 512;
constexpr int kSteps = 4;
__global__ void __launch_bounds__(kWide)
    rmsnorm_wide_kernel(const float* x, float* residual, const float* w, float* out, int64_t dim, float eps) {
  __shared__ double scratch[kWide / 32];
  const int64_t row = blockIdx.x, n4 = dim / 4;
  const float4* xr = reinterpret_cast<const float4*>(x + row * dim);
  float4* res = residual != nullptr ? reinterpret_cast<float4*>(residual + row * dim) : nullptr;
  float4 v[kSteps];
  double ss = 0.0;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(s) * kWide;
    if (i >= n4) break;
    v[s] = xr[i];
    if (res != nullptr) {
      const float4 r = res[i];
      v[s] = make_float4(v[s].x + r.x, v[s].y + r.y, v[s].z + r.z, v[s].w + r.w);
      res[i] = v[s];
    }
    ss += static_cast<double>(v[s].x) * v[s].x;
    ss += static_cast<double>(v[s].y) * v[s].y;
    ss += static_cast<double>(v[s].z) * v[s].z;
    ss += static_cast<double>(v[s].w) * v[s].w;
  }
  ss = block_sum<double, kWide>(ss, scratch);
  const float inv = static_cast<float>(1.0 / sqrt(ss / static_cast<double>(dim) + eps));
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* o = reinterpret_cast<float4*>(out + row * dim);
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(s) * kWide;
    if (i >= n4) break;
    const float4 g = w4[i];
    o[i] = make_float4(g.x * (v[s].x * inv), g.y * (v[s].y * inv), g.z * (v[s].z * inv), g.w * (v[s].w * inv));
  }
}

void launch(const float* x, float* residual, const float* w, float* out, int64_t rows, int64_t dim, float eps) {
  const bool wide = dim % 4 == 0 && dim >= 1024 && dim <= int64_t{kWide} * 4 * kSteps &&
                    (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(residual) |
                     reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(out)) %
                            16 ==
                        0;
  if (wide) {
    rmsnorm_wide_kernel<<<static_cast<unsigned>(rows), kWide, 0, stream()>>>(x, residual, w, out, dim, eps);
  } else {
    rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(x, residual, w, out, dim, eps);
  }
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps) {
  if (rows == 0 || dim == 0) return;
  launch(x, nullptr, weight, out, rows, dim, eps);
  check_launch("rmsnorm");
}

void rmsnorm_residual(const float* x, float* residual, const float* weight, float* out, int64_t rows, int64_t dim,
                      float eps) {
  if (rows == 0 || dim == 0) return;
  launch(x, residual, weight, out, rows, dim, eps);
  check_launch("rmsnorm_residual");
}

}  // namespace specd::kernels::cuda
