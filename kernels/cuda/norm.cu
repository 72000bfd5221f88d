// RMSNorm on CUDA: one block per row; the sum of squares in double, as the CPU path.
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

}  // namespace

void rmsnorm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps) {
  if (rows == 0 || dim == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(x, nullptr, weight, out, dim, eps);
  check_launch("rmsnorm");
}

void rmsnorm_residual(const float* x, float* residual, const float* weight, float* out, int64_t rows, int64_t dim,
                      float eps) {
  if (rows == 0 || dim == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(x, residual, weight, out, dim, eps);
  check_launch("rmsnorm_residual");
}

}  // namespace specd::kernels::cuda
