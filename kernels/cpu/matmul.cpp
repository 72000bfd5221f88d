#include "specd/kernels/matmul.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "specd/kernels/parallel.hpp"

namespace specd::kernels {

void matmul(Device device, const float* a, const float* w, const float* bias, float* c, int64_t m,
            int64_t n, int64_t k) {
  detail::require_cpu(device, "matmul");
  if (m <= 0 || n <= 0) return;
  const auto M = static_cast<blasint>(m), N = static_cast<blasint>(n), K = static_cast<blasint>(k);
  // Start from the bias (beta = 1) so the add is free inside BLAS.
  float beta = 0.0f;
  if (bias != nullptr) {
    for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * n, bias, static_cast<size_t>(n) * sizeof(float));
    beta = 1.0f;
  }
  // The output features are split across the kernel thread pool and each slice runs
  // single-threaded OpenBLAS: one threading system for every op, and no BLAS worker threads
  // spinning between calls while the pool runs attention.
  const int64_t grain = std::max<int64_t>(16, (n / (4 * num_threads()) + 15) / 16 * 16);
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    const auto cols = static_cast<blasint>(end - begin);
    const float* w_slice = w + begin * k;
    if (m == 1) {
      // One row: y = W · x, a memory-bound GEMV over the weights.
      cblas_sgemv(CblasRowMajor, CblasNoTrans, cols, K, 1.0f, w_slice, K, a, 1, beta, c + begin, 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, cols, K, 1.0f, a, K, w_slice, K, beta,
                  c + begin, N);
    }
  });
}

namespace reference {
void matmul(const float* a, const float* w, const float* bias, float* c, int64_t m, int64_t n,
            int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias != nullptr ? bias[j] : 0.0;
      for (int64_t l = 0; l < k; ++l) acc += static_cast<double>(a[i * k + l]) * w[j * k + l];
      c[i * n + j] = static_cast<float>(acc);
    }
  }
}
}  // namespace reference

}  // namespace specd::kernels
