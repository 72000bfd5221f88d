// The AVX-512 level: F/BW/VL/DQ with VNNI (vpdpbusd) and BF16 (vdpbf16ps). Compiled with
// those flags only; see isa_kernels.hpp for the rules of ISA files.
//
// GEMV tiles are JB weight rows x MB activation rows of 16-lane accumulators; every (row,
// feature) pair runs the same instruction sequence whatever the tile, so results do not
// depend on the batch.
//  - bf16 weights: activations rounded to bf16, vdpbf16ps (32 products per instruction).
//  - q8_0 / q4_0 weights: two blocks per 512-bit vector, vpdpbusd (unsigned x signed bytes):
//      q8_0: x is stored as x + 128 (unsigned); the accumulator starts at -128 * Σw, which
//            is computed once per weight vector and shared by every activation row.
//      q4_0: the nibbles are unsigned (value + 8); the activation row carries -8 * Σx per
//            4-element group as the accumulator's start.
//    Q8 activation rows (layout in isa_kernels.hpp) hold per block pair aux words:
//      q8_0: 16 lane scales [dA x8, dB x8]
//      q4_0: 16 lane scales [dA x4, dB x4, dA x4, dB x4], then 16 start values; q is stored
//            per pair as [A0..15, B0..15, A16..31, B16..31], the order the nibbles unpack in.
#include <immintrin.h>

#include "isa_kernels.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace specd::kernels::cpu {
namespace {

inline float half_to_f32(uint16_t h) { return _cvtsh_ss(h); }

inline __mmask16 tail_mask16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
inline __mmask32 tail_mask32(int64_t n) {
  return static_cast<__mmask32>(n >= 32 ? 0xffffffffu : ((1u << n) - 1u));
}

// Calls T<JB, MB>::run over the (feature, row) grid: JB in {4, 1} features, MB up to kMb rows.
template <template <int, int> class T, int kMb>
void walk(const GemvArgs& a, int64_t j0, int64_t j1) {
  auto rows = [&]<int JB>(int64_t j) {
    int64_t r = 0;
    for (; r + kMb <= a.m; r += kMb) T<JB, kMb>::run(a, j, r);
    switch (a.m - r) {
      case 3: if constexpr (kMb > 3) T<JB, 3>::run(a, j, r); break;
      case 2: if constexpr (kMb > 2) T<JB, 2>::run(a, j, r); break;
      case 1: if constexpr (kMb > 1) T<JB, 1>::run(a, j, r); break;
      default: break;
    }
  };
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) rows.template operator()<4>(j);
  for (; j < j1; ++j) rows.template operator()<1>(j);
}

// ---- f32 / f16 weights (F32 activations) ------------------------------------------------------

enum class Wt { kF32, kF16 };

template <Wt kT>
inline __m512 load_w16(const uint8_t* row, int64_t i, __mmask16 m) {
  if constexpr (kT == Wt::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
}

template <Wt kT>
struct TileFloat {
  template <int JB, int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      __m512 acc[JB][MB];
      for (int jj = 0; jj < JB; ++jj)
        for (int rr = 0; rr < MB; ++rr) acc[jj][rr] = _mm512_setzero_ps();
      const uint8_t* w[JB];
      for (int jj = 0; jj < JB; ++jj) w[jj] = a.w + static_cast<size_t>(j + jj) * a.w_stride;
      const float* x[MB];
      for (int rr = 0; rr < MB; ++rr)
        x[rr] = reinterpret_cast<const float*>(a.act + static_cast<size_t>(r0 + rr) * a.act_stride);
      for (int64_t i = 0; i < a.k; i += 16) {
        const __mmask16 m = a.k - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(a.k - i);
        __m512 wv[JB];
        for (int jj = 0; jj < JB; ++jj) wv[jj] = load_w16<kT>(w[jj], i, m);
        for (int rr = 0; rr < MB; ++rr) {
          const __m512 xv = _mm512_maskz_loadu_ps(m, x[rr] + i);
          for (int jj = 0; jj < JB; ++jj) acc[jj][rr] = _mm512_fmadd_ps(wv[jj], xv, acc[jj][rr]);
        }
      }
      for (int jj = 0; jj < JB; ++jj)
        for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j + jj] = _mm512_reduce_add_ps(acc[jj][rr]);
    }
  };
};

template <Wt kT>
void gemv_float(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk<TileFloat<kT>::template T, 4>(a, j0, j1);
}

// ---- bf16 weights (bf16 activations) -----------------------------------------------------------

template <int JB, int MB>
struct TileBf16 {
  static void run(const GemvArgs& a, int64_t j, int64_t r0) {
    __m512 acc[JB][MB];
    for (int jj = 0; jj < JB; ++jj)
      for (int rr = 0; rr < MB; ++rr) acc[jj][rr] = _mm512_setzero_ps();
    const uint8_t* w[JB];
    for (int jj = 0; jj < JB; ++jj) w[jj] = a.w + static_cast<size_t>(j + jj) * a.w_stride;
    const uint8_t* x[MB];
    for (int rr = 0; rr < MB; ++rr) x[rr] = a.act + static_cast<size_t>(r0 + rr) * a.act_stride;
    for (int64_t i = 0; i < a.k; i += 32) {
      const __mmask32 m = tail_mask32(a.k - i);
      __m512i wv[JB];
      for (int jj = 0; jj < JB; ++jj) wv[jj] = _mm512_maskz_loadu_epi16(m, w[jj] + 2 * i);
      for (int rr = 0; rr < MB; ++rr) {
        const __m512i xv = _mm512_maskz_loadu_epi16(m, x[rr] + 2 * i);
        for (int jj = 0; jj < JB; ++jj)
          acc[jj][rr] = _mm512_dpbf16_ps(acc[jj][rr], (__m512bh)xv, (__m512bh)wv[jj]);
      }
    }
    for (int jj = 0; jj < JB; ++jj)
      for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j + jj] = _mm512_reduce_add_ps(acc[jj][rr]);
  }
};

void gemv_bf16(const GemvArgs& a, int64_t j0, int64_t j1) { walk<TileBf16, 4>(a, j0, j1); }

void prep_bf16(const float* x, uint8_t* out, int64_t k) {
  auto* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < k; i += 32) {
    const int64_t n = k - i;
    const __mmask16 m0 = n >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n);
    const __mmask16 m1 = n >= 32 ? static_cast<__mmask16>(0xffff) : (n > 16 ? tail_mask16(n - 16) : 0);
    const __m512 lo = _mm512_maskz_loadu_ps(m0, x + i);
    const __m512 hi = _mm512_maskz_loadu_ps(m1, x + i + 16);
    const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi16(o + i, tail_mask32(n), v);
  }
}

// ---- quantized weights (Q8 activations) -------------------------------------------------------

struct ActQ8 {
  const float* d;
  const uint8_t* q;
  const uint32_t* aux;
};

inline ActQ8 act_q8(const uint8_t* row, int64_t k) {
  const int64_t nbp = q8_blocks_padded(k);
  return {reinterpret_cast<const float*>(row), row + nbp * 4, reinterpret_cast<const uint32_t*>(row + nbp * 36)};
}

// One block of 32: its scale max|x| / 127 and the rounded values as int32 (2 x 16 lanes).
inline void quantize_block(const float* x, float* d_out, __m512i* q_lo, __m512i* q_hi) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = d;
  *q_lo = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
  *q_hi = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
}

// Blocks b and b+1 of the row (b+1 may be past the end: zero) as 64 signed bytes in natural
// order, their scales in d[b], d[b + 1].
__m512i quantize_pair(const float* x, int64_t nb, int64_t b, float* d) {
  __m128i bytes[4];
  for (int h = 0; h < 2; ++h) {
    if (b + h < nb) {
      __m512i lo, hi;
      quantize_block(x + (b + h) * 32, d + b + h, &lo, &hi);
      bytes[2 * h] = _mm512_cvtepi32_epi8(lo);
      bytes[2 * h + 1] = _mm512_cvtepi32_epi8(hi);
    } else {
      d[b + h] = 0.0f;
      bytes[2 * h] = bytes[2 * h + 1] = _mm_setzero_si128();
    }
  }
  __m512i v = _mm512_castsi128_si512(bytes[0]);
  v = _mm512_inserti32x4(v, bytes[1], 1);
  v = _mm512_inserti32x4(v, bytes[2], 2);
  return _mm512_inserti32x4(v, bytes[3], 3);
}

void prep_q8_for_q8_0(const float* x, uint8_t* out, int64_t k) {
  const int64_t nbp = q8_blocks_padded(k);
  auto* d = reinterpret_cast<float*>(out);
  auto* q = out + nbp * 4;
  auto* aux = reinterpret_cast<float*>(out + nbp * 36);
  for (int64_t p = 0; p < nbp / 2; ++p) {
    const __m512i v = quantize_pair(x, k / 32, 2 * p, d);
    _mm512_storeu_si512(q + p * 64, _mm512_add_epi8(v, _mm512_set1_epi8(static_cast<char>(0x80))));
    const __m512 lanes = _mm512_insertf32x8(_mm512_set1_ps(d[2 * p]), _mm256_set1_ps(d[2 * p + 1]), 1);
    _mm512_storeu_ps(aux + p * 16, lanes);
  }
}

void prep_q8_for_q4_0(const float* x, uint8_t* out, int64_t k) {
  const int64_t nbp = q8_blocks_padded(k);
  auto* d = reinterpret_cast<float*>(out);
  auto* q = out + nbp * 4;
  auto* aux = reinterpret_cast<uint32_t*>(out + nbp * 36);
  const __m512i perm = _mm512_set_epi64(7, 6, 3, 2, 5, 4, 1, 0);  // [A0-15 A16-31 B..] -> [A0-15 B0-15 A16-31 B16-31]
  for (int64_t p = 0; p < nbp / 2; ++p) {
    const __m512i v = _mm512_permutexvar_epi64(perm, quantize_pair(x, k / 32, 2 * p, d));
    _mm512_storeu_si512(q + p * 64, v);
    const __m256 ab = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(d[2 * p])), _mm_set1_ps(d[2 * p + 1]), 1);
    _mm512_storeu_ps(aux + p * 32, _mm512_broadcast_f32x8(ab));
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), v);
    _mm512_storeu_si512(aux + p * 32 + 16, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 3)));
  }
}

// Lane scales of a weight block pair: [dA x8, dB x8] (q8_0) or [dA x4, dB x4, dA x4, dB x4].
inline __m512 pair_scales(uint16_t da, uint16_t db, bool interleave4) {
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(da | (static_cast<uint32_t>(db) << 16))));
  const __m512i idx = interleave4 ? _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0)
                                  : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f));
}

template <DType kW>
struct TileQuant {
  template <int JB, int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      __m512 acc[JB][MB];
      for (int jj = 0; jj < JB; ++jj)
        for (int rr = 0; rr < MB; ++rr) acc[jj][rr] = _mm512_setzero_ps();
      ActQ8 x[MB];
      for (int rr = 0; rr < MB; ++rr) x[rr] = act_q8(a.act + static_cast<size_t>(r0 + rr) * a.act_stride, a.k);
      const int64_t nb = a.k / 32;
      for (int64_t b = 0; b < nb; b += 2) {
        const bool pair = b + 1 < nb;
        __m512i wv[JB], start[JB];
        __m512 dw[JB];
        for (int jj = 0; jj < JB; ++jj) {
          const uint8_t* row = a.w + static_cast<size_t>(j + jj) * a.w_stride;
          if constexpr (kW == DType::kQ8_0) {
            const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
            const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].q));
            const __m256i hi = pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].q)) : _mm256_setzero_si256();
            wv[jj] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            start[jj] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), wv[jj]));
            dw[jj] = pair_scales(blk[0].d, pair ? blk[1].d : 0, false);
          } else {
            const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
            const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].q));
            const __m128i qb = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].q)) : _mm_setzero_si128();
            const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(qa), qb, 1);
            const __m256i m = _mm256_set1_epi8(15);
            const __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
            wv[jj] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            dw[jj] = pair_scales(blk[0].d, pair ? blk[1].d : 0, true);
          }
        }
        const int64_t p = b / 2;
        for (int rr = 0; rr < MB; ++rr) {
          const __m512i xv = _mm512_loadu_si512(x[rr].q + p * 64);
          const __m512 dx = _mm512_loadu_ps(reinterpret_cast<const float*>(x[rr].aux + p * (kW == DType::kQ8_0 ? 16 : 32)));
          const __m512i xs = kW == DType::kQ4_0 ? _mm512_loadu_si512(x[rr].aux + p * 32 + 16) : _mm512_setzero_si512();
          for (int jj = 0; jj < JB; ++jj) {
            __m512i dot;
            if constexpr (kW == DType::kQ8_0) {
              dot = _mm512_dpbusd_epi32(start[jj], xv, wv[jj]);
            } else {
              dot = _mm512_dpbusd_epi32(xs, wv[jj], xv);
            }
            acc[jj][rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dx, dw[jj]), acc[jj][rr]);
          }
        }
      }
      for (int jj = 0; jj < JB; ++jj)
        for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j + jj] = _mm512_reduce_add_ps(acc[jj][rr]);
    }
  };
};

template <DType kW>
void gemv_quant(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk<TileQuant<kW>::template T, 2>(a, j0, j1);
}

// ---- conversions -----------------------------------------------------------------------------

void f32_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const float*>(src);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, s + i));
  }
}

void f16_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load_w16<Wt::kF16>(s, i, m));
  }
}

inline __m512 load_bf16x16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

void bf16_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load_bf16x16(s + i, m));
  }
}

void q8_0_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m512 d = _mm512_set1_ps(half_to_f32(blk[b].d));
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[b].q + 16 * h)));
      _mm512_storeu_ps(dst + b * 32 + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(v), d));
    }
  }
}

void q4_0_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ4_0*>(src);
  const __m512i eight = _mm512_set1_epi32(8);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m512 d = _mm512_set1_ps(half_to_f32(blk[b].d));
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[b].q)));
    const __m512i lo = _mm512_and_si512(v, _mm512_set1_epi32(15)), hi = _mm512_srli_epi32(v, 4);
    _mm512_storeu_ps(dst + b * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(lo, eight)), d));
    _mm512_storeu_ps(dst + b * 32 + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(hi, eight)), d));
  }
}

void narrow_f16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

void narrow_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

// ---- attention against cached rows -----------------------------------------------------------

enum class Kv { kF32, kF16, kBF16 };

template <Kv kT>
inline __m512 load_kv16(const void* row, int64_t i, __mmask16 m) {
  if constexpr (kT == Kv::kF32) return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + i);
  if constexpr (kT == Kv::kF16) return load_w16<Wt::kF16>(static_cast<const uint8_t*>(row), i, m);
  return load_bf16x16(static_cast<const uint16_t*>(row) + i, m);
}

template <Kv kT>
float kv_dot(const float* q, const void* k, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), load_kv16<kT>(k, i, m), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

template <Kv kT>
void kv_axpy(float alpha, const void* v, float* y, int64_t n) {
  const __m512 av = _mm512_set1_ps(alpha);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, load_kv16<kT>(v, i, m), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

double sum_squares(const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float read_sum(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

}  // namespace

const IsaKernels kAvx512Kernels = {
    CpuIsa::kAvx512,
    {gemv_float<Wt::kF32>, gemv_float<Wt::kF16>, gemv_bf16, gemv_quant<DType::kQ8_0>, gemv_quant<DType::kQ4_0>},
    {nullptr, nullptr, prep_bf16, prep_q8_for_q8_0, prep_q8_for_q4_0},
    {f32_to_f32, f16_row_to_f32, bf16_row_to_f32, q8_0_row_to_f32, q4_0_row_to_f32},
    {nullptr, narrow_f16, narrow_bf16, nullptr, nullptr},
    {kv_dot<Kv::kF32>, kv_dot<Kv::kF16>, kv_dot<Kv::kBF16>},
    {kv_axpy<Kv::kF32>, kv_axpy<Kv::kF16>, kv_axpy<Kv::kBF16>},
    sum_squares,
    read_sum,
};

}  // namespace specd::kernels::cpu
