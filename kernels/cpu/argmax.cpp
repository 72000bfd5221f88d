#include "specd/kernels/argmax.hpp"

#include <cmath>

#include "cuda_dispatch.hpp"

namespace specd::kernels {

void argmax(Device device, const float* x, int64_t rows, int64_t cols, int32_t* out) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::argmax(x, rows, cols, out);
  detail::require_cpu(device, "argmax");
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    int64_t best = -1;
    for (int64_t i = 0; i < cols; ++i) {
      if (std::isnan(xr[i])) continue;
      if (best < 0 || xr[i] > xr[best]) best = i;
    }
    out[r] = static_cast<int32_t>(best < 0 ? 0 : best);
  }
}

}  // namespace specd::kernels
