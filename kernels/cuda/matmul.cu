// Matrix products on CUDA for weights of every dtype: c[r, j] = Σ_l a[r, l] · w[j, l] (+ bias[j]), each weight widened
// exactly to F32 (the activations stay F32: closer to the reference than the CPU's 8-bit activations).
//
// Batch-invariant by construction, as on the CPU: one warp per feature j and group of up to
// kRows activation rows; lane t sums the elements [8t + 256i, 8t + 256i + 8) of its row, i = 0,
// 1, ... in order, then the 32 lanes combine in a fixed butterfly. A row's result depends on its
// own data only, never on the other rows of the call, so speculative scoring rows equal decode
// rows bit for bit and greedy speculative output equals plain output. (cuBLAS picks its kernel
// and split by shape, so its rows change with the batch; the tiled kernels for prefill and
// scoring come later, under the same rule.) Each lane reads 8 consecutive weights per step: one
// 16-byte load for 16-bit weights where rows are a multiple of 8 long (the vector path), each
// element widened on its own otherwise; both sum in the same order.
#include <cstdint>
#include <string>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"
#include "specd/error.hpp"
#include "widen.cuh"

namespace specd::kernels::cuda {
namespace {

constexpr int kRows = 8;                       // activation rows per warp (they share each weight load)
constexpr int kWarpsPerBlock = kThreads / 32;  // features per block
constexpr int kVec = 8;                        // consecutive elements per lane and step
constexpr int kSpan = 32 * kVec;               // elements per warp and step

// Weights [i, i + 8) of the flat array as F32 (i % 8 == 0; rows a multiple of 8 long, so the
// 8 lie in one row and, for 16- and 32-bit weights, the load is 16-byte aligned).
template <class Widen>
struct Load8 {
  static constexpr bool kVector = false;
  __device__ __forceinline__ static void run(const void* w, int64_t i, float* out) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) out[e] = Widen{}(w, i + e);
  }
};
template <>
struct Load8<WidenBF16> {
  static constexpr bool kVector = true;
  __device__ __forceinline__ static void run(const void* w, int64_t i, float* out) {
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w) + i);
    const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      out[2 * e] = __uint_as_float(u[e] << 16);
      out[2 * e + 1] = __uint_as_float(u[e] & 0xffff0000u);
    }
  }
};
template <>
struct Load8<WidenF16> {
  static constexpr bool kVector = true;
  __device__ __forceinline__ static void run(const void* w, int64_t i, float* out) {
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const __half*>(w) + i);
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(h[e]);
      out[2 * e] = f.x;
      out[2 * e + 1] = f.y;
    }
  }
};
template <>
struct Load8<WidenF32> {
  static constexpr bool kVector = true;
  __device__ __forceinline__ static void run(const void* w, int64_t i, float* out) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w) + i);
    const float4 x = p[0], y = p[1];
    out[0] = x.x, out[1] = x.y, out[2] = x.z, out[3] = x.w;
    out[4] = y.x, out[5] = y.y, out[6] = y.z, out[7] = y.w;
  }
};

// kAligned: k % 8 == 0 (every step whole, vector loads); else each element is checked.
template <class Widen, bool kAligned>
__global__ void gemv_kernel(const float* a, int64_t m, const void* w, int64_t n, int64_t k, const float* bias, float* c,
                            int64_t ldc) {
  const int lane = threadIdx.x & 31;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRows;
  if (j >= n) return;
  const int64_t rows = m - r0 < kRows ? m - r0 : kRows;
  float acc[kRows] = {};
#pragma unroll 2
  for (int64_t l = lane * kVec; l < k; l += kSpan) {
    float wv[kVec];
    if constexpr (kAligned) {
      Load8<Widen>::run(w, j * k + l, wv);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) wv[e] = l + e < k ? Widen{}(w, j * k + l + e) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= rows) break;
      const float* x = a + (r0 + r) * k + l;
      if constexpr (kAligned) {
        const float4 x0 = reinterpret_cast<const float4*>(x)[0], x1 = reinterpret_cast<const float4*>(x)[1];
        const float xv[kVec] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[r] = fmaf(xv[e], wv[e], acc[r]);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          if (l + e < k) acc[r] = fmaf(x[e], wv[e], acc[r]);
      }
    }
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
  // The vector path needs 16-byte aligned rows of weights and activations: k % 8 == 0 and
  // aligned bases.
  const bool aligned = w.cols % kVec == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                       (!Load8<Widen>::kVector || reinterpret_cast<uintptr_t>(w.data) % 16 == 0);
  if (aligned) {
    gemv_kernel<Widen, true><<<grid, kThreads, 0, stream()>>>(a, m, w.data, w.rows, w.cols, bias, c, ldc);
  } else {
    gemv_kernel<Widen, false><<<grid, kThreads, 0, stream()>>>(a, m, w.data, w.rows, w.cols, bias, c, ldc);
  }
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
