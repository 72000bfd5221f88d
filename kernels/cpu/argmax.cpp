#include "specd/kernels/argmax.hpp"

#include <algorithm>
#include <limits>

#include "cuda_dispatch.hpp"

namespace specd::kernels {
namespace {

// The largest non-NaN value of x[0, n) (-inf when there is none): 16 independent running
// maxima (branch-free max operations the CPU overlaps; `a > m ? a : m` keeps m for a NaN, as
// the scalar scan's strict comparison does), instead of one compare-and-branch chain over the
// whole row, whose index dependence cost ~2.5 us for a 4096-token vocabulary, a few percent of
// a small model's decode step.
float row_max(const float* x, int64_t n) {
  constexpr int64_t kLanes = 16;
  float m[kLanes];
  std::fill_n(m, kLanes, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float best = m[0];
  for (int64_t l = 1; l < kLanes; ++l) best = m[l] > best ? m[l] : best;
  return best;
}

}  // namespace

void argmax(Device device, const float* x, int64_t rows, int64_t cols, int32_t* out) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::argmax(x, rows, cols, out);
  detail::require_cpu(device, "argmax");
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float best = row_max(xr, cols);
    // The first index holding it (-0 and +0 compare equal, as they did in the scan); a row of
    // NaN only gives 0.
    int64_t at = 0;
    while (at < cols && !(xr[at] == best)) ++at;
    out[r] = static_cast<int32_t>(at == cols ? 0 : at);
  }
}

}  // namespace specd::kernels
