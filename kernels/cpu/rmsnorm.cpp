#include "specd/kernels/rmsnorm.hpp"

#include <algorithm>
#include <cmath>

#include "cuda_dispatch.hpp"
#include "isa_kernels.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {
namespace {

void norm_row(const float* x, const float* w, float* out, int64_t dim, float eps) {
  const double ss = cpu::active_kernels().sum_squares(x, dim);
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
  for (int64_t i = 0; i < dim; ++i) out[i] = w[i] * (x[i] * inv);
}

int64_t row_grain(int64_t dim) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, dim));
}

}  // namespace

void rmsnorm(Device device, const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::rmsnorm(x, weight, out, rows, dim, eps);
  detail::require_cpu(device, "rmsnorm");
  parallel_for(rows, row_grain(dim), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) norm_row(x + r * dim, weight, out + r * dim, dim, eps);
  });
}

void rmsnorm_residual(Device device, const float* x, float* residual, const float* weight, float* out, int64_t rows,
                      int64_t dim, float eps) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::rmsnorm_residual(x, residual, weight, out, rows, dim, eps);
  detail::require_cpu(device, "rmsnorm_residual");
  parallel_for(rows, row_grain(dim), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* res = residual + r * dim;
      const float* xr = x + r * dim;
      for (int64_t i = 0; i < dim; ++i) res[i] += xr[i];
      norm_row(res, weight, out + r * dim, dim, eps);
    }
  });
}

namespace reference {
void rmsnorm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      out[r * dim + i] = static_cast<float>(weight[i] * (x[r * dim + i] * inv));
    }
  }
}
}  // namespace reference

}  // namespace specd::kernels
