#include "specd/kernels/silu_mul.hpp"

#include <cmath>

#include "specd/kernels/parallel.hpp"

namespace specd::kernels {

void silu_mul(Device device, const float* gate, const float* up, float* out, int64_t n) {
  detail::require_cpu(device, "silu_mul");
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  });
}

}  // namespace specd::kernels
