// Matrix products on CUDA for weights of every dtype: c[r, j] = Σ_l a[r, l] · w[j, l] (+ bias[j]), each weight widened
// exactly to F32 (the activations stay F32: closer to the reference than the CPU's 8-bit activations).
//
// Batch-invariant by construction, as on the CPU: one warp per feature j and group of up to
// kRows activation rows; lane t sums the elements t, t + 32, t + 64, ... of its row in order,
// then the 32 lanes combine in a fixed butterfly. A row's result depends on its own data only,
// never on the other rows of the call, so speculative scoring rows equal decode rows bit for
// bit and greedy speculative output equals plain output. (cuBLAS picks its kernel and split by
// shape, so its rows change with the batch; the faster tiled kernels for prefill and scoring
// come later, under the same rule.)
#include <string>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"
#include "specd/error.hpp"
#include "widen.cuh"

namespace specd::kernels::cuda {
namespace {

constexpr int kRows = 4;                       // activation rows per warp (they share each weight load)
constexpr int kWarpsPerBlock = kThreads / 32;  // features per block

template <class Widen>
__global__ void gemv_kernel(const float* a, int64_t m, const void* w, int64_t n, int64_t k, const float* bias, float* c,
                            int64_t ldc, Widen widen) {
  const int lane = threadIdx.x & 31;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRows;
  if (j >= n) return;
  const int64_t rows = m - r0 < kRows ? m - r0 : kRows;
  float acc[kRows] = {};
  for (int64_t l = lane; l < k; l += 32) {
    const float wv = widen(w, j * k + l);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r < rows) acc[r] = fmaf(a[(r0 + r) * k + l], wv, acc[r]);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0 && r < rows) c[(r0 + r) * ldc + j] = bias != nullptr ? sum + bias[j] : sum;
  }
}

template <class Widen>
void launch(const float* a, int64_t m, const WeightView& w, const float* bias, float* c, int64_t ldc) {
  const dim3 grid(static_cast<unsigned>((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((m + kRows - 1) / kRows));
  gemv_kernel<<<grid, kThreads, 0, stream()>>>(a, m, w.data, w.rows, w.cols, bias, c, ldc, Widen{});
}

}  // namespace

void matmul(const float* a, int64_t m, const WeightView& w, const float* bias, float* c, int64_t ldc) {
  if (m == 0 || w.rows == 0) return;
  if (m > int64_t{65535} * kRows)
    throw Error(ErrorCode::kInvalidArgument, "matmul: " + std::to_string(m) + " rows in one CUDA call (at most " +
                                                 std::to_string(int64_t{65535} * kRows) + ")");
  with_widen(w.dtype, [&](auto widen) { launch<decltype(widen)>(a, m, w, bias, c, ldc); });
  check_launch("matmul");
}

void matmul_swiglu(const float* a, int64_t m, const WeightView& gate, const WeightView& up, float* out) {
  if (m == 0) return;
  const int64_t n = gate.rows;
  auto* u = static_cast<float*>(scratch(Scratch::kSwigluUp, static_cast<size_t>(m * n) * sizeof(float)));
  matmul(a, m, gate, nullptr, out, n);
  matmul(a, m, up, nullptr, u, n);
  silu_mul(out, u, m * n);
}

}  // namespace specd::kernels::cuda
