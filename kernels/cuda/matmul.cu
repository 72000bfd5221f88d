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
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

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

// The dot products of kF weight rows (w[f] row j[f]) with activation rows r0 .. r0 + rows (rows
// <= kR), each summed by the whole warp (every lane gets the sums); the kF rows share each load
// of the activations. kAligned: k % 8 == 0 and aligned bases (every step whole, vector loads);
// else each element is checked. A (weight row, activation row) pair's sum is the same whatever
// kR and kF: the same lanes add the same elements in the same order.
template <class Widen, bool kAligned, int kR, int kF>
__device__ __forceinline__ void dot_rows(const float* a, int64_t rows, int64_t r0, const void* const* w,
                                         const int64_t* j, int64_t k, float (&acc)[kF][kR]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int f = 0; f < kF; ++f)
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[f][r] = 0.0f;
#pragma unroll(kR == 1 ? 4 : 2)
  for (int64_t l = lane * kVec; l < k; l += kSpan) {
    float wv[kF][kVec];
#pragma unroll
    for (int f = 0; f < kF; ++f) {
      if constexpr (kAligned) {
        Load8<Widen>::run(w[f], j[f] * k + l, wv[f]);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) wv[f][e] = l + e < k ? Widen{}(w[f], j[f] * k + l + e) : 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      if (r >= rows) break;
      const float* x = a + (r0 + r) * k + l;
      float xv[kVec];
      if constexpr (kAligned) {
        const float4 x0 = reinterpret_cast<const float4*>(x)[0], x1 = reinterpret_cast<const float4*>(x)[1];
        xv[0] = x0.x, xv[1] = x0.y, xv[2] = x0.z, xv[3] = x0.w, xv[4] = x1.x, xv[5] = x1.y, xv[6] = x1.z, xv[7] = x1.w;
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) xv[e] = l + e < k ? x[e] : 0.0f;
      }
#pragma unroll
      for (int f = 0; f < kF; ++f)
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          if (kAligned || l + e < k) acc[f][r] = fmaf(xv[e], wv[f][e], acc[f][r]);
    }
  }
#pragma unroll
  for (int f = 0; f < kF; ++f)
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[f][r] = warp_sum(acc[f][r]);
}

// Up to kMaxOuts products of the same activations (Q, K and V) in one launch: warp f of the grid
// takes features [f · kF, f · kF + kF) of the outputs laid end to end (each output's rows a
// multiple of kF, so the kF lie in one output).
constexpr int kMaxOuts = 4;
struct Outs {
  const void* w[kMaxOuts];
  const float* bias[kMaxOuts];
  float* c[kMaxOuts];
  int64_t ldc[kMaxOuts];
  int64_t start[kMaxOuts + 1];  // output i has features [start[i], start[i + 1])
  int count;
};

template <class Widen, bool kAligned, int kR, int kF>
__global__ void gemv_kernel(const float* a, int64_t m, int64_t k, Outs o) {
  const int64_t f0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5)) * kF;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kR;
  if (f0 >= o.start[o.count]) return;
  int i = 0;
  while (f0 >= o.start[i + 1]) ++i;
  const int64_t rows = m - r0 < kR ? m - r0 : kR;
  const void* w[kF];
  int64_t j[kF];
#pragma unroll
  for (int f = 0; f < kF; ++f) w[f] = o.w[i], j[f] = f0 - o.start[i] + f;
  float acc[kF][kR];
  dot_rows<Widen, kAligned, kR, kF>(a, rows, r0, w, j, k, acc);
  if ((threadIdx.x & 31) != 0) return;
  for (int f = 0; f < kF; ++f)
    for (int r = 0; r < rows; ++r)
      o.c[i][(r0 + r) * o.ldc[i] + j[f]] = o.bias[i] != nullptr ? acc[f][r] + o.bias[i][j[f]] : acc[f][r];
}

// out[r, j] = silu(a_r · gate_j) * (a_r · up_j): the two products as matmul computes them (one
// pass over the activations for both) and silu_mul's formula, in one launch.
template <class Widen, bool kAligned, int kR>
__global__ void gemv_swiglu_kernel(const float* a, int64_t m, int64_t k, const void* gate, const void* up, int64_t n,
                                   float* out) {
  const int64_t jj = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kR;
  if (jj >= n) return;
  const int64_t rows = m - r0 < kR ? m - r0 : kR;
  const void* w[2] = {gate, up};
  const int64_t j[2] = {jj, jj};
  float acc[2][kR];
  dot_rows<Widen, kAligned, kR, 2>(a, rows, r0, w, j, k, acc);
  if ((threadIdx.x & 31) != 0) return;
  for (int r = 0; r < rows; ++r) out[(r0 + r) * n + jj] = acc[0][r] / (1.0f + expf(-acc[0][r])) * acc[1][r];
}

// The vector path needs 16-byte aligned rows of weights and activations: k % 8 == 0 and aligned
// bases.
template <class Widen>
bool vector_path(const float* a, int64_t k, const void* const* weights, int n) {
  if (k % kVec != 0 || reinterpret_cast<uintptr_t>(a) % 16 != 0) return false;
  bool aligned = true;  // quantized weights are read element by element: any address will do
  for (int i = 0; i < n; ++i)
    aligned = aligned && (!Load8<Widen>::kVector || reinterpret_cast<uintptr_t>(weights[i]) % 16 == 0);
  return aligned;
}

dim3 grid_of(int64_t features, int64_t m, int rows_per_warp, int features_per_warp = 1) {
  const int64_t per_block = int64_t{kWarpsPerBlock} * features_per_warp;
  return {static_cast<unsigned>((features + per_block - 1) / per_block),
          static_cast<unsigned>((m + rows_per_warp - 1) / rows_per_warp)};
}

// Calls f(aligned, rows per warp) as compile-time constants: one row per warp for a single row
// (a lighter loop with more loads in flight), kRows otherwise. A row's sums are the same either
// way (the same lanes add the same elements in the same order).
template <class F>
void dispatch(bool aligned, int64_t m, F&& f) {
  auto rows = [&](auto al) {
    if (m == 1) {
      f(al, std::integral_constant<int, 1>{});
    } else {
      f(al, std::integral_constant<int, kRows>{});
    }
  };
  if (aligned) {
    rows(std::true_type{});
  } else {
    rows(std::false_type{});
  }
}

void check_rows(int64_t m) {
  if (m > int64_t{65535} * kRows)
    throw Error(ErrorCode::kInvalidArgument, "matmul: " + std::to_string(m) + " rows in one CUDA call (at most " +
                                                 std::to_string(int64_t{65535} * kRows) + ")");
}

}  // namespace

void matmul_multi(const float* a, int64_t m, std::span<const MatmulOutput> outs) {
  if (m == 0 || outs.empty()) return;
  check_rows(m);
  for (size_t first = 0; first < outs.size(); first += kMaxOuts) {
    Outs o{};
    o.count = static_cast<int>(std::min<size_t>(kMaxOuts, outs.size() - first));
    for (int i = 0; i < o.count; ++i) {
      const MatmulOutput& x = outs[first + static_cast<size_t>(i)];
      o.w[i] = x.w.data;
      o.bias[i] = x.bias;
      o.c[i] = x.c;
      o.ldc[i] = x.w.rows;
      o.start[i + 1] = o.start[i] + x.w.rows;
    }
    if (o.start[o.count] == 0) continue;
    const int64_t k = outs[first].w.cols;
    with_widen(outs[first].w.dtype, [&](auto widen) {
      using W = decltype(widen);
      // Several rows: two features per warp share each activation load, where every output's
      // rows are even.
      bool even = true;
      for (int i = 0; i < o.count; ++i) even = even && (o.start[i + 1] - o.start[i]) % 2 == 0;
      dispatch(vector_path<W>(a, k, o.w, o.count), m, [&](auto al, auto rr) {
        if constexpr (rr.value == 1) {
          gemv_kernel<W, al.value, 1, 1><<<grid_of(o.start[o.count], m, 1), kThreads, 0, stream()>>>(a, m, k, o);
        } else if (even) {
          gemv_kernel<W, al.value, rr.value, 2>
              <<<grid_of(o.start[o.count], m, rr.value, 2), kThreads, 0, stream()>>>(a, m, k, o);
        } else {
          gemv_kernel<W, al.value, rr.value, 1>
              <<<grid_of(o.start[o.count], m, rr.value), kThreads, 0, stream()>>>(a, m, k, o);
        }
      });
    });
    check_launch("matmul");
  }
}

void matmul(const float* a, int64_t m, const WeightView& w, const float* bias, float* c, int64_t ldc) {
  if (m == 0 || w.rows == 0) return;
  check_rows(m);
  Outs o{};
  o.count = 1;
  o.w[0] = w.data;
  o.bias[0] = bias;
  o.c[0] = c;
  o.ldc[0] = ldc;
  o.start[1] = w.rows;
  with_widen(w.dtype, [&](auto widen) {
    using W = decltype(widen);
    dispatch(vector_path<W>(a, w.cols, o.w, 1), m, [&](auto al, auto rr) {
      if constexpr (rr.value == 1) {
        gemv_kernel<W, al.value, 1, 1><<<grid_of(w.rows, m, 1), kThreads, 0, stream()>>>(a, m, w.cols, o);
      } else if (w.rows % 2 == 0) {
        gemv_kernel<W, al.value, rr.value, 2>
            <<<grid_of(w.rows, m, rr.value, 2), kThreads, 0, stream()>>>(a, m, w.cols, o);
      } else {
        gemv_kernel<W, al.value, rr.value, 1><<<grid_of(w.rows, m, rr.value), kThreads, 0, stream()>>>(a, m, w.cols, o);
      }
    });
  });
  check_launch("matmul");
}

void matmul_swiglu(const float* a, int64_t m, const WeightView& gate, const WeightView& up, float* out) {
  if (m == 0 || gate.rows == 0) return;
  check_rows(m);
  if (gate.dtype != up.dtype) {  // a GGUF file may mix them: the two products, then the activation
    const int64_t n = gate.rows;
    auto* u = static_cast<float*>(scratch(Scratch::kSwigluUp, static_cast<size_t>(m * n) * sizeof(float)));
    matmul(a, m, gate, nullptr, out, n);
    matmul(a, m, up, nullptr, u, n);
    silu_mul(out, u, m * n);
    return;
  }
  with_widen(gate.dtype, [&](auto widen) {
    using W = decltype(widen);
    const void* both[] = {gate.data, up.data};
    dispatch(vector_path<W>(a, gate.cols, both, 2), m, [&](auto al, auto rr) {
      gemv_swiglu_kernel<W, al.value, rr.value><<<grid_of(gate.rows, m, rr.value), kThreads, 0, stream()>>>(
          a, m, gate.cols, gate.data, up.data, gate.rows, out);
    });
  });
  check_launch("matmul_swiglu");
}

}  // namespace specd::kernels::cuda
