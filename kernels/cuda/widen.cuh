// Element i of a 16- or 32-bit float array on the device, as F32 (include from .cu files only).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "specd/kernels/dtype.hpp"

namespace specd::kernels::cuda {

struct WidenF32 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    return static_cast<const float*>(t)[i];
  }
};
struct WidenF16 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    return __half2float(static_cast<const __half*>(t)[i]);
  }
};
struct WidenBF16 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    return __uint_as_float(static_cast<unsigned>(static_cast<const uint16_t*>(t)[i]) << 16);
  }
};

// GGUF blocks of 32 (rows a whole number of blocks, so flat index i lies in block i / 32): an
// fp16 scale d, then 32 int8 levels (Q8_0) or 16 bytes of nibbles (Q4_0: elements 0-15 in the
// low nibbles, 16-31 in the high ones, stored as level + 8); each value d · level, exactly.
struct WidenQ8_0 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 32) * 34;
    return static_cast<float>(static_cast<int8_t>(blk[2 + i % 32])) *
           __half2float(*reinterpret_cast<const __half*>(blk));
  }
};
struct WidenQ4_0 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 32) * 18;
    const int j = static_cast<int>(i % 32);
    const int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
    return static_cast<float>(q - 8) * __half2float(*reinterpret_cast<const __half*>(blk));
  }
};

// GGUF K-quant super-blocks of 256 (dtype.hpp has the layouts). Each value is computed as the
// CPU's k_quants.cpp computes it, rounding every product and difference on its own (no FMA), so
// the two widen to the same bits.
__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// Sub-block s (0..7) of a Q4_K / Q5_K block: its 6-bit scale and min (dtype.hpp's k_scale_min).
__device__ __forceinline__ void scale_min_k(int s, const uint8_t* scales, int* sc, int* m) {
  if (s < 4) {
    *sc = scales[s] & 63;
    *m = scales[s + 4] & 63;
  } else {
    *sc = (scales[s + 4] & 15) | ((scales[s - 4] >> 6) << 4);
    *m = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
  }
}

// Q4_K (144 bytes: d, dmin, scales[12], qs[128]) and Q5_K (176: d, dmin, scales[12], qh[32],
// qs[128]): d·sc·q - dmin·m per sub-block of 32.
template <bool kFive>
struct WidenK45 {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    constexpr int kBytes = kFive ? 176 : 144;
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 256) * kBytes;
    const int j = static_cast<int>(i % 256), s = j / 32, l = j % 32;
    int sc = 0, m = 0;
    scale_min_k(s, blk + 4, &sc, &m);
    const uint8_t* qs = blk + (kFive ? 48 : 16) + 32 * (s / 2);
    int v = s % 2 == 0 ? qs[l] & 15 : qs[l] >> 4;
    if constexpr (kFive) v |= ((blk[16 + l] >> s) & 1) << 4;
    const float scale = __fmul_rn(half_at(blk), static_cast<float>(sc));
    const float min = __fmul_rn(half_at(blk + 2), static_cast<float>(m));
    return __fsub_rn(__fmul_rn(scale, static_cast<float>(v)), min);
  }
};
using WidenQ4_K = WidenK45<false>;
using WidenQ5_K = WidenK45<true>;

// Q6_K (210 bytes: ql[128], qh[64], int8 scales[16], d): d·sc·(q - 32) per group of 16.
struct WidenQ6_K {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 256) * 210;
    const int j = static_cast<int>(i % 256), h = j / 128, k = (j % 128) / 32, l = j % 32;
    const uint8_t* ql = blk + 64 * h;
    const uint8_t* qh = blk + 128 + 32 * h;
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * h;
    const int low = k % 2 == 0 ? ql[l] : ql[l + 32];
    const int q = (k < 2 ? low & 15 : low >> 4) | (((qh[l] >> (2 * k)) & 3) << 4);
    return __fmul_rn(__fmul_rn(half_at(blk + 208), static_cast<float>(sc[l / 16 + 2 * k])), static_cast<float>(q - 32));
  }
};

// Q3_K (110 bytes: hmask[32], qs[64], scales[12], d): d·(sc - 32)·(q - 4) per group of 16,
// each product rounded on its own as q3_k_row_to_f32 rounds it.
struct WidenQ3_K {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 256) * 110;
    const int e = static_cast<int>(i % 256), s = e / 16;
    const uint8_t* qs = blk + 32;
    const uint8_t* scales = blk + 96;
    const int low = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
    const int sc = (low | ((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4) - 32;
    const int q = ((qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) | ((blk[e % 32] >> (e / 32)) & 1) << 2;
    return __fmul_rn(__fmul_rn(half_at(blk + 108), static_cast<float>(sc)), static_cast<float>(q - 4));
  }
};

// Q2_K (84 bytes: scales[16], qs[64], d, dmin): d·(sc & 15)·q - dmin·(sc >> 4) per group of 16.
struct WidenQ2_K {
  __device__ __forceinline__ float operator()(const void* t, int64_t i) const {
    const auto* blk = static_cast<const uint8_t*>(t) + (i / 256) * 84;
    const int e = static_cast<int>(i % 256), sc = blk[e / 16];
    const int q = (blk[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    const float scale = __fmul_rn(half_at(blk + 80), static_cast<float>(sc & 15));
    const float min = __fmul_rn(half_at(blk + 82), static_cast<float>(sc >> 4));
    return __fsub_rn(__fmul_rn(scale, static_cast<float>(q)), min);
  }
};

// Calls f(Widen{}) with the functor that widens `dt` (every dtype has one).
template <class F>
void with_widen(DType dt, F&& f) {
  switch (dt) {
    case DType::kF32:
      return f(WidenF32{});
    case DType::kF16:
      return f(WidenF16{});
    case DType::kBF16:
      return f(WidenBF16{});
    case DType::kQ8_0:
      return f(WidenQ8_0{});
    case DType::kQ4_0:
      return f(WidenQ4_0{});
    case DType::kQ4_K:
      return f(WidenQ4_K{});
    case DType::kQ5_K:
      return f(WidenQ5_K{});
    case DType::kQ6_K:
      return f(WidenQ6_K{});
    case DType::kQ3_K:
      return f(WidenQ3_K{});
    case DType::kQ2_K:
      return f(WidenQ2_K{});
  }
}

}  // namespace specd::kernels::cuda
