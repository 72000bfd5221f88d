// The ARM NEON levels (aarch64), one implementation compiled twice (isa_neon.cpp without,
// isa_neon_dotprod.cpp with the dot-product extension, ARMv8.2 FEAT_DotProd: Graviton 2 and
// later, Apple M1 and later, Neoverse N1/V1). Included once per level file; every function
// has internal linkage (see isa_kernels.hpp for why).
//
//   f32 / f16 / bf16 weights: F32 activations (bf16 weights take them rounded to bf16, as
//     every level does), weights widened in registers (FCVTL for f16, a 16-bit shift for
//     bf16), FMA into two 4-lane accumulators per row.
//   q8_0 / q4_0: activations quantized per block of 32 to int8 in natural order (the scalar
//     level's layout, scalar::prep_q8); each weight block is unpacked once for the rows of a
//     tile into signed bytes (Q4_0: nibble - 8) and multiplied with SDOT (with dotprod) or
//     SMULL + SADALP pair sums (without: |products| <= 128·127 fit 16 bits); per block one
//     convert and one FMA by d_w·d_x.
//   Q4_K / Q5_K / Q6_K / Q3_K: Q8_K activations in natural order (scalar::prep_q8k); a
//     super-block's levels are unpacked once per tile into 16 byte vectors; per row, integer dot
//     products per sub-block (Q6_K, Q3_K: per 16) weighted by the integer scales, the mins (Q6_K,
//     Q3_K: the offset of 32 or 4)
//     through the activations' 16-element sums, one float step per super-block: the scalar
//     level's integer arithmetic, so K-quant rows equal the scalar level's exactly.
// Per (row, feature) the instruction sequence does not depend on the tile: results are
// batch-invariant as on x86. Attention, RMSNorm's sum of squares and the bandwidth probe are
// vectorized; exp, conversions at load and narrowing reuse the scalar level's code.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <type_traits>

#include "isa_kernels.hpp"
#include "k_quants.hpp"

namespace specd::kernels::cpu {
namespace {

enum class Wt { kF32, kF16, kBF16 };

float half_to_float(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// 4 weights (or KV elements) from element i, widened to F32.
template <Wt kT>
inline float32x4_t load4(const void* p, int64_t i) {
  if constexpr (kT == Wt::kF32) {
    return vld1q_f32(static_cast<const float*>(p) + i);
  } else if constexpr (kT == Wt::kF16) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(static_cast<const uint16_t*>(p) + i)));
  } else {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(static_cast<const uint16_t*>(p) + i), 16));
  }
}

template <Wt kT>
inline float load1(const void* p, int64_t i) {
  if constexpr (kT == Wt::kF32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (kT == Wt::kF16) {
    return half_to_float(static_cast<const uint16_t*>(p)[i]);
  } else {
    return vgetq_lane_f32(vreinterpretq_f32_u32(vshll_n_u16(vdup_n_u16(static_cast<const uint16_t*>(p)[i]), 16)), 0);
  }
}

// ---- float weights ----------------------------------------------------------------------------
template <Wt kT>
struct FloatTile {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      const uint8_t* w = a.w + static_cast<size_t>(j) * a.w_stride;
      const float* x[MB];
      float32x4_t acc[MB][2];
      for (int rr = 0; rr < MB; ++rr) {
        x[rr] = reinterpret_cast<const float*>(a.act + static_cast<size_t>(r0 + rr) * a.act_stride);
        acc[rr][0] = acc[rr][1] = vdupq_n_f32(0.0f);
      }
      int64_t i = 0;
      for (; i + 8 <= a.k; i += 8) {
        const float32x4_t w0 = load4<kT>(w, i), w1 = load4<kT>(w, i + 4);
        for (int rr = 0; rr < MB; ++rr) {
          acc[rr][0] = vfmaq_f32(acc[rr][0], vld1q_f32(x[rr] + i), w0);
          acc[rr][1] = vfmaq_f32(acc[rr][1], vld1q_f32(x[rr] + i + 4), w1);
        }
      }
      for (int rr = 0; rr < MB; ++rr) {
        float s = vaddvq_f32(vaddq_f32(acc[rr][0], acc[rr][1]));
        for (int64_t t = i; t < a.k; ++t) s += load1<kT>(w, t) * x[rr][t];
        a.c[(r0 + rr) * a.ldc + j] = s;
      }
    }
  };
};

template <Wt kT>
void gemv_float(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk_by_4<FloatTile<kT>::template T>(a, j0, j1);
}

// ---- integer dot products -----------------------------------------------------------------------
// acc + the sums of 4 consecutive products of a and b per lane (exact).
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#ifdef __ARM_FEATURE_DOTPROD
  return vdotq_s32(acc, a, b);
#else
  return vpadalq_s16(vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b))), vmull_high_s8(a, b));
#endif
}

// ---- q8_0 / q4_0 --------------------------------------------------------------------------------
struct Q8Row {
  const float* d;
  const int8_t* q;
};

inline Q8Row q8_row(const uint8_t* row, int64_t k) {
  return {reinterpret_cast<const float*>(row), reinterpret_cast<const int8_t*>(row + q8_blocks_padded(k) * 4)};
}

template <DType kW>
struct QuantTile {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      const uint8_t* w = a.w + static_cast<size_t>(j) * a.w_stride;
      Q8Row x[MB];
      float32x4_t acc[MB];
      for (int rr = 0; rr < MB; ++rr) {
        x[rr] = q8_row(a.act + static_cast<size_t>(r0 + rr) * a.act_stride, a.k);
        acc[rr] = vdupq_n_f32(0.0f);
      }
      for (int64_t b = 0; b < a.k / 32; ++b) {
        int8x16_t lo, hi;
        float dw;
        if constexpr (kW == DType::kQ8_0) {
          const auto* blk = reinterpret_cast<const BlockQ8_0*>(w) + b;
          lo = vld1q_s8(blk->q);
          hi = vld1q_s8(blk->q + 16);
          dw = half_to_float(blk->d);
        } else {
          const auto* blk = reinterpret_cast<const BlockQ4_0*>(w) + b;
          const uint8x16_t v = vld1q_u8(blk->q);
          const int8x16_t eight = vdupq_n_s8(8);
          lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(15))), eight);
          hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
          dw = half_to_float(blk->d);
        }
        for (int rr = 0; rr < MB; ++rr) {
          const int8_t* q = x[rr].q + b * 32;
          const int32x4_t dot = dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(q)), hi, vld1q_s8(q + 16));
          acc[rr] = vfmaq_n_f32(acc[rr], vcvtq_f32_s32(dot), dw * x[rr].d[b]);
        }
      }
      for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = vaddvq_f32(acc[rr]);
    }
  };
};

template <DType kW>
void gemv_quant(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk_by_4<QuantTile<kW>::template T>(a, j0, j1);
}

// ---- K-quants -----------------------------------------------------------------------------------
// A super-block unpacked: 256 levels in natural order (16 vectors of 16), the integer scales
// and mins per group of 16 (Q4_K / Q5_K: each sub-block's value twice), d and dmin.
struct KBlock {
  int8x16_t q[16];
  int32_t sc[16];
  int32_t mn[16];
  float d, dmin;
};

template <DType kW>
inline void unpack_k45(const uint8_t* blk, KBlock& k) {
  using Block = std::conditional_t<kW == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
  const auto& b = *reinterpret_cast<const Block*>(blk);
  uint8x16_t qh[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
  if constexpr (kW == DType::kQ5_K) {
    qh[0] = vld1q_u8(b.qh);
    qh[1] = vld1q_u8(b.qh + 16);
  }
  for (int j = 0; j < 8; ++j) {  // sub-block j: the low (even j) or high nibbles of qs[32 (j / 2) ..]
    int sc = 0, m = 0;
    k_scale_min(j, b.scales, &sc, &m);
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t v = vld1q_u8(b.qs + 32 * (j / 2) + 16 * h);
      uint8x16_t lv = j % 2 == 0 ? vandq_u8(v, vdupq_n_u8(15)) : vshrq_n_u8(v, 4);
      if constexpr (kW == DType::kQ5_K) {
        const uint8x16_t bit = vandq_u8(vshlq_u8(qh[h], vdupq_n_s8(static_cast<int8_t>(-j))), vdupq_n_u8(1));
        lv = vorrq_u8(lv, vshlq_n_u8(bit, 4));
      }
      k.q[2 * j + h] = vreinterpretq_s8_u8(lv);
      k.sc[2 * j + h] = sc;
      k.mn[2 * j + h] = m;
    }
  }
  k.d = half_to_float(b.d);
  k.dmin = half_to_float(b.dmin);
}

// Q6_K: per half of 128, element l (< 32) + 32 t takes nibble t / 2 of ql[l + 32 (t % 2)] and
// bits 2t .. 2t + 1 of qh[l].
inline void unpack_q6_k(const uint8_t* blk, KBlock& k) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(blk);
  const uint8x16_t low4 = vdupq_n_u8(15), two = vdupq_n_u8(3);
  for (int h = 0; h < 2; ++h)
    for (int half = 0; half < 2; ++half) {  // l in [16 half, 16 half + 16)
      const uint8x16_t ql0 = vld1q_u8(b.ql + 64 * h + 16 * half), ql1 = vld1q_u8(b.ql + 64 * h + 32 + 16 * half);
      const uint8x16_t qh = vld1q_u8(b.qh + 32 * h + 16 * half);
      const uint8x16_t lv[4] = {vorrq_u8(vandq_u8(ql0, low4), vshlq_n_u8(vandq_u8(qh, two), 4)),
                                vorrq_u8(vandq_u8(ql1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), two), 4)),
                                vorrq_u8(vshrq_n_u8(ql0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), two), 4)),
                                vorrq_u8(vshrq_n_u8(ql1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4))};
      for (int t = 0; t < 4; ++t) {
        const int g = 8 * h + 2 * t + half;  // group of 16: elements 128 h + 32 t + 16 half ..
        k.q[g] = vreinterpretq_s8_u8(lv[t]);
        k.sc[g] = static_cast<int8_t>(b.scales[g]);
        k.mn[g] = 0;
      }
    }
  k.d = half_to_float(b.d);
  k.dmin = 0.0f;
}

// Q3_K: group g (elements 16g ..) takes bits 2j, 2j + 1 (j = (g mod 8) / 2) of
// qs[32 (g / 8) + 16 (g mod 2) ..] and bit g / 2 of hmask[16 (g mod 2) ..] as bit 2; the factor
// is sc - 32 and the offset 4, as Q6_K's scale and 32.
// Bits 0-1 of Q3_K's and Q2_K's levels of group g: qs[32 (g / 8) + 16 (g mod 2) ..] at shift
// 2j, j = (g mod 8) / 2.
inline uint8x16_t low2_levels(const uint8_t* qs, int g) {
  const uint8x16_t v = vld1q_u8(qs + 32 * (g / 8) + 16 * (g % 2));
  return vandq_u8(vshlq_u8(v, vdupq_n_s8(static_cast<int8_t>(-2 * ((g % 8) / 2)))), vdupq_n_u8(3));
}

inline void unpack_q3_k(const uint8_t* blk, KBlock& k) {
  const auto& b = *reinterpret_cast<const BlockQ3_K*>(blk);
  alignas(16) uint8_t sc[16];
  q3_k_scale_bytes(b.scales, sc);
  for (int g = 0; g < 16; ++g) {
    const uint8x16_t hm = vld1q_u8(b.hmask + 16 * (g % 2));
    const uint8x16_t hi = vandq_u8(vshlq_u8(hm, vdupq_n_s8(static_cast<int8_t>(-(g / 2)))), vdupq_n_u8(1));
    k.q[g] = vreinterpretq_s8_u8(vorrq_u8(low2_levels(b.qs, g), vshlq_n_u8(hi, 2)));
    k.sc[g] = static_cast<int32_t>(sc[g]) - 32;
    k.mn[g] = 0;
  }
  k.d = half_to_float(b.d);
  k.dmin = 0.0f;
}

// Q2_K: Q3_K's bits 0-1 alone, a 4-bit scale and min per group of 16.
inline void unpack_q2_k(const uint8_t* blk, KBlock& k) {
  const auto& b = *reinterpret_cast<const BlockQ2_K*>(blk);
  for (int g = 0; g < 16; ++g) {
    k.q[g] = vreinterpretq_s8_u8(low2_levels(b.qs, g));
    k.sc[g] = b.scales[g] & 15;
    k.mn[g] = b.scales[g] >> 4;
  }
  k.d = half_to_float(b.d);
  k.dmin = half_to_float(b.dmin);
}

// One super-block of one Q8_K row: the scalar level's k_block_dot, in vector form.
template <DType kW>
inline float k_dot(const KBlock& k, const ActQ8K& x, int64_t s) {
  const int8_t* q8 = x.q + s * 256;
  const int16_t* bs = x.bsums + s * 16;
  int32_t isum = 0, msum = 0;
  if constexpr (kW == DType::kQ2_K) {  // a scale and a min per group of 16
    for (int g = 0; g < 16; ++g) {
      isum += k.sc[g] * vaddvq_s32(dot16(vdupq_n_s32(0), k.q[g], vld1q_s8(q8 + 16 * g)));
      msum += k.mn[g] * bs[g];
    }
    return x.d[s] * (k.d * static_cast<float>(isum) - k.dmin * static_cast<float>(msum));
  } else if constexpr (kW == DType::kQ6_K || kW == DType::kQ3_K) {  // levels offset by 32 (Q3_K: 4)
    constexpr int32_t kOffset = kW == DType::kQ6_K ? 32 : 4;
    for (int g = 0; g < 16; ++g) {
      const int32_t dot = vaddvq_s32(dot16(vdupq_n_s32(0), k.q[g], vld1q_s8(q8 + 16 * g)));
      isum += k.sc[g] * (dot - kOffset * bs[g]);
    }
    return k.d * x.d[s] * static_cast<float>(isum);
  } else {
    for (int j = 0; j < 8; ++j) {
      const int32x4_t v =
          dot16(dot16(vdupq_n_s32(0), k.q[2 * j], vld1q_s8(q8 + 32 * j)), k.q[2 * j + 1], vld1q_s8(q8 + 32 * j + 16));
      isum += k.sc[2 * j] * vaddvq_s32(v);
      msum += k.mn[2 * j] * (bs[2 * j] + bs[2 * j + 1]);
    }
    return x.d[s] * (k.d * static_cast<float>(isum) - k.dmin * static_cast<float>(msum));
  }
}

template <DType kW>
struct KTile {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      const uint8_t* w = a.w + static_cast<size_t>(j) * a.w_stride;
      constexpr size_t kBytes = row_bytes(kW, 256);
      ActQ8K x[MB];
      float acc[MB];
      for (int rr = 0; rr < MB; ++rr) {
        x[rr] = act_q8k(a.act + static_cast<size_t>(r0 + rr) * a.act_stride, a.k);
        acc[rr] = 0.0f;
      }
      KBlock k;
      for (int64_t s = 0; s < a.k / 256; ++s) {
        if constexpr (kW == DType::kQ6_K) {
          unpack_q6_k(w + s * kBytes, k);
        } else if constexpr (kW == DType::kQ3_K) {
          unpack_q3_k(w + s * kBytes, k);
        } else if constexpr (kW == DType::kQ2_K) {
          unpack_q2_k(w + s * kBytes, k);
        } else {
          unpack_k45<kW>(w + s * kBytes, k);
        }
        for (int rr = 0; rr < MB; ++rr) acc[rr] += k_dot<kW>(k, x[rr], s);
      }
      for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = acc[rr];
    }
  };
};

template <DType kW>
void gemv_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk_by_4<KTile<kW>::template T>(a, j0, j1);
}

// ---- attention over cached rows ---------------------------------------------------------------
template <Wt kT>
void attn_scores(const float* q, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n, float scale,
                 float* scores, int64_t ld) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t off = j * stride;
    for (int64_t h = 0; h < group; ++h) {
      const float* qh = q + h * hd;
      float32x4_t acc = vdupq_n_f32(0.0f);
      int64_t e = 0;
      for (; e + 4 <= hd; e += 4) acc = vfmaq_f32(acc, vld1q_f32(qh + e), load4<kT>(rows, off + e));
      float s = vaddvq_f32(acc);
      for (; e < hd; ++e) s += qh[e] * load1<kT>(rows, off + e);
      scores[h * ld + j] = s * scale;
    }
  }
}

template <Wt kT>
void attn_values(const float* p, int64_t ld, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n,
                 float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t off = j * stride;
    for (int64_t h = 0; h < group; ++h) {
      const float pj = p[h * ld + j];
      float* o = out + h * hd;
      int64_t e = 0;
      for (; e + 4 <= hd; e += 4) vst1q_f32(o + e, vfmaq_n_f32(vld1q_f32(o + e), load4<kT>(rows, off + e), pj));
      for (; e < hd; ++e) o[e] += pj * load1<kT>(rows, off + e);
    }
  }
}

// ---- reductions ----------------------------------------------------------------------------------
double sum_squares(const float* x, int64_t n) {
  float64x2_t acc0 = vdupq_n_f64(0.0), acc1 = vdupq_n_f64(0.0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
    acc0 = vfmaq_f64(acc0, lo, lo);
    acc1 = vfmaq_f64(acc1, hi, hi);
  }
  double s = vaddvq_f64(vaddq_f64(acc0, acc1));
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

float read_sum(const float* p, int64_t n) {
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  for (int64_t i = 0; i < n; i += 16)
    for (int l = 0; l < 4; ++l) acc[l] = vaddq_f32(acc[l], vld1q_f32(p + i + 4 * l));
  return vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
}

}  // namespace

#ifndef SPECD_NEON_TABLE
#error "define SPECD_NEON_TABLE (the level's table name) and SPECD_NEON_ISA before including isa_neon_level.hpp"
#endif

const IsaKernels SPECD_NEON_TABLE = {
    SPECD_NEON_ISA,
    {gemv_float<Wt::kF32>, gemv_float<Wt::kF16>, gemv_float<Wt::kBF16>, gemv_quant<DType::kQ8_0>,
     gemv_quant<DType::kQ4_0>, gemv_k<DType::kQ4_K>, gemv_k<DType::kQ5_K>, gemv_k<DType::kQ6_K>, gemv_k<DType::kQ3_K>,
     gemv_k<DType::kQ2_K>},
    {nullptr, nullptr, scalar::prep_bf16_as_f32, scalar::prep_q8, scalar::prep_q8, scalar::prep_q8k, scalar::prep_q8k,
     scalar::prep_q8k, scalar::prep_q8k, scalar::prep_q8k},
    {scalar::f32_to_f32, scalar::f16_row_to_f32, scalar::bf16_row_to_f32, scalar::q8_0_row_to_f32,
     scalar::q4_0_row_to_f32, q4_k_row_to_f32, q5_k_row_to_f32, q6_k_row_to_f32, q3_k_row_to_f32, q2_k_row_to_f32},
    {nullptr, scalar::narrow_f16, scalar::narrow_bf16, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr},
    {attn_scores<Wt::kF32>, attn_scores<Wt::kF16>, attn_scores<Wt::kBF16>},
    {attn_values<Wt::kF32>, attn_values<Wt::kF16>, attn_values<Wt::kBF16>},
    sum_squares,
    scalar::exp_sum,
    scalar::silu_mul,
    read_sum,
};

}  // namespace specd::kernels::cpu
