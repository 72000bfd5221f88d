#include "specd/kernels/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda_dispatch.hpp"
#include "isa_kernels.hpp"
#include "specd/error.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {
namespace {

[[noreturn]] void all_minus_inf() {
  throw Error(ErrorCode::kInvalidArgument, "softmax: every entry of a row is -inf");
}

float row_max(const float* x, int64_t cols) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < cols; ++i) m = x[i] > m ? x[i] : m;
  if (m == -std::numeric_limits<float>::infinity()) all_minus_inf();
  return m;
}

}  // namespace

void softmax(Device device, const float* x, float* out, int64_t rows, int64_t cols, float temperature) {
  if (!(temperature > 0.0f)) {
    throw Error(ErrorCode::kInvalidArgument, "softmax: temperature must be > 0");
  }
  if constexpr (kWithCuda) {
    if (device == Device::kCuda) {
      if (cuda::softmax(x, out, rows, cols, temperature) >= 0) all_minus_inf();
      return;
    }
  }
  detail::require_cpu(device, "softmax");
  const float inv_t = 1.0f / temperature;
  const cpu::IsaKernels& isa = cpu::active_kernels();
  parallel_for(rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * cols;
      float* o = out + r * cols;
      const float m = row_max(xr, cols);
      float shift = m;
      if (temperature == 1.0f) {
        if (o != xr) std::copy(xr, xr + cols, o);
      } else {
        // (x - max) / T: the subtraction first, so a small T does not magnify rounding of x / T.
        for (int64_t i = 0; i < cols; ++i) o[i] = (xr[i] - m) * inv_t;
        shift = 0.0f;
      }
      const float inv = 1.0f / isa.exp_sum(o, cols, shift);
      for (int64_t i = 0; i < cols; ++i) o[i] *= inv;
    }
  });
}

void log_softmax(Device device, const float* x, float* out, int64_t rows, int64_t cols) {
  if constexpr (kWithCuda) {
    if (device == Device::kCuda) {
      if (cuda::log_softmax(x, out, rows, cols) >= 0) all_minus_inf();
      return;
    }
  }
  detail::require_cpu(device, "log_softmax");
  parallel_for(rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * cols;
      float* o = out + r * cols;
      const float m = row_max(xr, cols);
      double sum = 0.0;
      for (int64_t i = 0; i < cols; ++i) sum += std::exp(static_cast<double>(xr[i]) - m);
      const double lse = m + std::log(sum);
      for (int64_t i = 0; i < cols; ++i) o[i] = static_cast<float>(xr[i] - lse);
    }
  });
}

namespace reference {
void softmax(const float* x, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < cols; ++i) m = std::max<double>(m, x[r * cols + i]);
    double sum = 0.0;
    for (int64_t i = 0; i < cols; ++i) sum += std::exp(x[r * cols + i] - m);
    for (int64_t i = 0; i < cols; ++i) {
      out[r * cols + i] = static_cast<float>(std::exp(x[r * cols + i] - m) / sum);
    }
  }
}
}  // namespace reference

}  // namespace specd::kernels
