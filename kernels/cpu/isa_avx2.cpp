// The AVX2 level (AVX2 + FMA + F16C). Compiled with those flags only; see isa_kernels.hpp
// for the rules of ISA files (internal linkage, no library inline functions).
//
// GEMV tiles are one weight row x up to 4 activation rows (float prefill chunks: 3 weight rows
// x 2 activation rows); every (row, feature) pair runs the same instruction sequence whatever
// the tile, so results do not depend on the batch. Quantized weights take Q8
// activations: d[nbp], signed q in natural order, and aux[b * 8 + g] = 8 * (sum of q over group g of 4 elements of
// block b), the correction of the unsigned Q4 nibbles (value = nibble - 8).
#include <immintrin.h>

#include "isa_kernels.hpp"
#include "k_quants.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace specd::kernels::cpu {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float half_to_f32(uint16_t h) {
  return _cvtsh_ss(h);
}

const float* act_f32(const GemvArgs& a, int64_t r) {
  return reinterpret_cast<const float*>(a.act + static_cast<size_t>(r) * a.act_stride);
}

// ---- f32 / f16 / bf16 weights ----------------------------------------------------------------

enum class Wt { kF32, kF16, kBF16 };

template <Wt kT>
inline __m256 load_w8(const uint8_t* row, int64_t i) {
  if constexpr (kT == Wt::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (kT == Wt::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
}

template <Wt kT>
inline float w_at(const uint8_t* row, int64_t i) {
  if constexpr (kT == Wt::kF32) return reinterpret_cast<const float*>(row)[i];
  const uint16_t h = reinterpret_cast<const uint16_t*>(row)[i];
  if constexpr (kT == Wt::kF16) return half_to_f32(h);
  return bf16_to_f32(h);
}

// Weight rows are streamed one at a time, front to back (see isa_avx512.cpp).

// J weight rows (features j .. j + J - 1) x MB activation rows; each (row, feature) pair has
// two accumulators: chunk c of 8 goes to accumulator c % 2, the same instructions for every J
// and MB.
template <Wt kT, int J, int MB>
void tile_float(const GemvArgs& a, int64_t j, int64_t r0) {
  __m256 acc[J][MB][2];
#pragma GCC unroll 4
  for (int jj = 0; jj < J; ++jj)
#pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) acc[jj][rr][0] = acc[jj][rr][1] = _mm256_setzero_ps();
  const uint8_t* w[J];
#pragma GCC unroll 4
  for (int jj = 0; jj < J; ++jj) w[jj] = a.w + static_cast<size_t>(j + jj) * a.w_stride;
  const float* x[MB];
#pragma GCC unroll 16
  for (int rr = 0; rr < MB; ++rr) x[rr] = act_f32(a, r0 + rr);
  const int64_t full = a.k / 16 * 16;
  for (int64_t i = 0; i < full; i += 16) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 wh[J];
#pragma GCC unroll 4
      for (int jj = 0; jj < J; ++jj) wh[jj] = load_w8<kT>(w[jj], i + 8 * h);
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        const __m256 xh = _mm256_loadu_ps(x[rr] + i + 8 * h);
#pragma GCC unroll 4
        for (int jj = 0; jj < J; ++jj) acc[jj][rr][h] = _mm256_fmadd_ps(wh[jj], xh, acc[jj][rr][h]);
      }
    }
  }
  int64_t i = full;
  if (i + 8 <= a.k) {
#pragma GCC unroll 4
    for (int jj = 0; jj < J; ++jj) {
      const __m256 w0 = load_w8<kT>(w[jj], i);
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) acc[jj][rr][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[rr] + i), acc[jj][rr][0]);
    }
    i += 8;
  }
#pragma GCC unroll 4
  for (int jj = 0; jj < J; ++jj)
#pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) {
      float s = hsum(_mm256_add_ps(acc[jj][rr][0], acc[jj][rr][1]));
      for (int64_t t = i; t < a.k; ++t) s += w_at<kT>(w[jj], t) * x[rr][t];
      a.c[(r0 + rr) * a.ldc + j + jj] = s;
    }
}

template <Wt kT, int J>
struct FloatTile {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) { tile_float<kT, J, MB>(a, j, r0); }
  };
};

template <Wt kT>
void gemv_float(const GemvArgs& a, int64_t j0, int64_t j1) {
  // Prefill chunks: 3 x 2 tiles (12 accumulators, 3 + 2 loads per 6 products where the 4-row
  // tiles took 1 + 4 per 4): tinyllama f16 prefill-128 43-45 -> 68-76 tok/s on this level. Scoring
  // rows keep one weight row per tile: three streams per thread were slower on cold weights.
  if (a.m >= 12) {
    walk_wide<FloatTile<kT, 3>::template T, 3, 2, FloatTile<kT, 2>::template T, FloatTile<kT, 1>::template T>(a, j0,
                                                                                                              j1);
  } else {
    walk_by_4<FloatTile<kT, 1>::template T>(a, j0, j1);
  }
}

// ---- quantized weights -------------------------------------------------------------------

struct ActRow {
  const float* d;
  const int8_t* q;
  const int32_t* aux;
};

ActRow act_q8(const GemvArgs& a, int64_t r) {
  const uint8_t* row = a.act + static_cast<size_t>(r) * a.act_stride;
  const int64_t nbp = q8_blocks_padded(a.k);
  return {reinterpret_cast<const float*>(row), reinterpret_cast<const int8_t*>(row + nbp * 4),
          reinterpret_cast<const int32_t*>(row + nbp * 36)};
}

void prep_q8(const float* x, uint8_t* out, int64_t k) {
  const int64_t nb = k / 32, nbp = q8_blocks_padded(k);
  auto* d = reinterpret_cast<float*>(out);
  auto* q = reinterpret_cast<int8_t*>(out + nbp * 4);
  auto* aux = reinterpret_cast<int32_t*>(out + nbp * 36);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < nbp; ++b) {
    if (b >= nb) {
      d[b] = 0.0f;
      for (int i = 0; i < 32; ++i) q[b * 32 + i] = 0;
      for (int g = 0; g < 8; ++g) aux[b * 8 + g] = 0;
      continue;
    }
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * 32 + i * 8);
      m = _mm256_max_ps(m, _mm256_and_ps(v[i], abs_mask));
    }
    const float db = hmax(m) / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    d[b] = db;
    const __m256 idv = _mm256_set1_ps(id);
    alignas(32) int32_t qi[32];
    for (int i = 0; i < 4; ++i)
      _mm256_store_si256(reinterpret_cast<__m256i*>(qi + i * 8), _mm256_cvtps_epi32(_mm256_mul_ps(v[i], idv)));
    for (int g = 0; g < 8; ++g) {
      int32_t s = 0;
      for (int e = 0; e < 4; ++e) {
        q[b * 32 + g * 4 + e] = static_cast<int8_t>(qi[g * 4 + e]);
        s += qi[g * 4 + e];
      }
      aux[b * 8 + g] = 8 * s;
    }
  }
}

// 32 unsigned nibble values (0..15) of a Q4_0 block, natural element order.
inline __m256i q4_nibbles(const BlockQ4_0* blk) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->q));
  const __m128i lo_mask = _mm_set1_epi8(15);
  const __m128i lo = _mm_and_si128(v, lo_mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), lo_mask);
  return _mm256_set_m128i(hi, lo);
}

// Block b of weight row `row` into accumulator C of every row (C = b % 2; a template
// argument so that the accumulators stay in registers).
template <DType kW, int MB, int C>
inline void quant_block(const uint8_t* row, int64_t b, const ActRow* x, __m256 (*acc)[2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i wv, aw;  // aw: |w| for Q8_0, the nibbles for Q4_0
  float dw;
  if constexpr (kW == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->q));
    aw = _mm256_abs_epi8(wv);
    dw = half_to_f32(blk->d);
  } else {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    wv = aw = q4_nibbles(blk);
    dw = half_to_f32(blk->d);
  }
#pragma GCC unroll 16
  for (int rr = 0; rr < MB; ++rr) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[rr].q + b * 32));
    __m256i p;
    if constexpr (kW == DType::kQ8_0) {
      // |w| * (x * sign(w)): unsigned x signed products that cannot saturate.
      p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, wv)), ones);
    } else {
      p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xv), ones);
      p = _mm256_sub_epi32(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[rr].aux + b * 8)));
    }
    acc[rr][C] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * x[rr].d[b]), acc[rr][C]);
  }
}

template <DType kW, int MB>
void tile_quant(const GemvArgs& a, int64_t j, int64_t r0) {
  __m256 acc[MB][2];
#pragma GCC unroll 16
  for (int rr = 0; rr < MB; ++rr) acc[rr][0] = acc[rr][1] = _mm256_setzero_ps();
  ActRow x[MB];
#pragma GCC unroll 16
  for (int rr = 0; rr < MB; ++rr) x[rr] = act_q8(a, r0 + rr);
  const uint8_t* row = a.w + static_cast<size_t>(j) * a.w_stride;
  const int64_t nb = a.k / 32;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    quant_block<kW, MB, 0>(row, b, x, acc);
    quant_block<kW, MB, 1>(row, b + 1, x, acc);
  }
  if (b < nb) quant_block<kW, MB, 0>(row, b, x, acc);
#pragma GCC unroll 16
  for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = hsum(_mm256_add_ps(acc[rr][0], acc[rr][1]));
}

template <DType kW>
struct QuantTile {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) { tile_quant<kW, MB>(a, j, r0); }
  };
};

template <DType kW>
void gemv_quant(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk_by_4<QuantTile<kW>::template T>(a, j0, j1);
}

// ---- conversions -------------------------------------------------------------------------

void f16_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) dst[i] = half_to_f32(s[i]);
}

void bf16_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_w8<Wt::kBF16>(reinterpret_cast<const uint8_t*>(s), i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

void q4_0_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ4_0*>(src);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256 d = _mm256_set1_ps(half_to_f32(blk[b].d));
    alignas(32) uint8_t u[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(u), q4_nibbles(blk + b));
    for (int i = 0; i < 4; ++i) {
      const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + i * 8)));
      _mm256_storeu_ps(dst + b * 32 + i * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, eight)), d));
    }
  }
}

void q8_0_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256 d = _mm256_set1_ps(half_to_f32(blk[b].d));
    for (int i = 0; i < 4; ++i) {
      const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk[b].q + i * 8)));
      _mm256_storeu_ps(dst + b * 32 + i * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
    }
  }
}

void narrow_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

// ---- attention over cached rows --------------------------------------------------------------
// A 16-bit block shared by several query heads is widened once, 16 rows at a time.

template <Wt kT>
const float* widen_rows(const void* rows, int64_t stride, int64_t n, int64_t hd, float* tmp) {
  const auto* r = static_cast<const uint8_t*>(rows);
  const int64_t elem = kT == Wt::kF32 ? 4 : 2;
  for (int64_t j = 0; j < n; ++j) {
    int64_t e = 0;
    for (; e + 8 <= hd; e += 8) _mm256_storeu_ps(tmp + j * hd + e, load_w8<kT>(r + j * stride * elem, e));
    for (; e < hd; ++e) tmp[j * hd + e] = w_at<kT>(r + j * stride * elem, e);
  }
  return tmp;
}

// Lane i = the sum of v[i]'s 8 lanes.
inline __m256 transpose_sum8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// head_dim 8 NC (64, 128), any group: per head, 8 keys at a time straight from the cache, eight
// independent FMA chains (the generic loop below runs one chain per key and a horizontal sum),
// summed by one transpose. bench_kernels on Zen 4 at this level (with attn_values_fixed), 2048
// tokens, f16 cache: llama-160m's 12 heads 197 -> 132 us, 32 heads over 4 KV heads 355 -> 182 us
// per decode token and 1.78 -> 0.89 ms for 5 scoring rows (the AVX-512 levels' figures).
template <Wt kT, int NC>
void attn_scores_fixed(const float* q, int64_t group, const void* rows, int64_t stride, int64_t n, float scale,
                       float* scores, int64_t ld) {
  constexpr int64_t kElem = kT == Wt::kF32 ? 4 : 2, hd = 8 * NC;
  const auto* base = static_cast<const uint8_t*>(rows);
  for (int64_t j0 = 0; j0 < n; j0 += 8) {
    const int64_t nn = n - j0 < 8 ? n - j0 : 8;
    const uint8_t* key[8];
    for (int j = 0; j < 8; ++j) key[j] = base + (j0 + (j < nn ? j : nn - 1)) * stride * kElem;
    for (int64_t h = 0; h < group; ++h) {
      __m256 acc[8];
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
#pragma GCC unroll 16
      for (int c = 0; c < NC; ++c) {
        const __m256 qv = _mm256_loadu_ps(q + h * hd + 8 * c);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(qv, load_w8<kT>(key[j], 8 * c), acc[j]);
      }
      alignas(32) float s[8];
      _mm256_store_ps(s, _mm256_mul_ps(transpose_sum8(acc), _mm256_set1_ps(scale)));
      for (int64_t j = 0; j < nn; ++j) scores[h * ld + j0 + j] = s[j];
    }
  }
}

// head_dim 8 NC, any group: per head, its output in registers (8 chunks at a time) over the n
// rows, the generic loop's FMAs in its order (the same bits), without its run-time head_dim.
template <Wt kT, int NC>
void attn_values_fixed(const float* p, int64_t ld, int64_t group, const void* rows, int64_t stride, int64_t n,
                       float* out) {
  constexpr int64_t kElem = kT == Wt::kF32 ? 4 : 2, hd = 8 * NC;
  constexpr int kHalf = NC < 8 ? NC : 8;
  const auto* base = static_cast<const uint8_t*>(rows);
  for (int64_t h = 0; h < group; ++h)
    for (int c0 = 0; c0 < NC; c0 += kHalf) {
      __m256 acc[kHalf];
#pragma GCC unroll 8
      for (int c = 0; c < kHalf; ++c) acc[c] = _mm256_loadu_ps(out + h * hd + 8 * (c0 + c));
      for (int64_t j = 0; j < n; ++j) {
        const __m256 pj = _mm256_set1_ps(p[h * ld + j]);
        const uint8_t* row = base + j * stride * kElem;
#pragma GCC unroll 8
        for (int c = 0; c < kHalf; ++c) acc[c] = _mm256_fmadd_ps(pj, load_w8<kT>(row, 8 * (c0 + c)), acc[c]);
      }
#pragma GCC unroll 8
      for (int c = 0; c < kHalf; ++c) _mm256_storeu_ps(out + h * hd + 8 * (c0 + c), acc[c]);
    }
}

template <Wt kT>
void attn_scores(const float* q, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n, float scale,
                 float* scores, int64_t ld) {
  if (hd == 64) return attn_scores_fixed<kT, 8>(q, group, rows, stride, n, scale, scores, ld);
  if (hd == 128) return attn_scores_fixed<kT, 16>(q, group, rows, stride, n, scale, scores, ld);
  alignas(32) float tmp[16 * kMaxHeadDim];
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nn = n - j0 < 16 ? n - j0 : 16;
    const int64_t elem = kT == Wt::kF32 ? 4 : 2;
    const uint8_t* base = static_cast<const uint8_t*>(rows) + j0 * stride * elem;
    const bool wide = kT != Wt::kF32 && group > 1;
    const float* w = wide ? widen_rows<kT>(base, stride, nn, hd, tmp) : nullptr;
    for (int64_t h = 0; h < group; ++h)
      for (int64_t j = 0; j < nn; ++j) {
        __m256 acc = _mm256_setzero_ps();
        int64_t e = 0;
        for (; e + 8 <= hd; e += 8) {
          const __m256 kv = wide ? _mm256_loadu_ps(w + j * hd + e) : load_w8<kT>(base + j * stride * elem, e);
          acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * hd + e), kv, acc);
        }
        float s = hsum(acc);
        for (; e < hd; ++e) s += q[h * hd + e] * (wide ? w[j * hd + e] : w_at<kT>(base + j * stride * elem, e));
        scores[h * ld + j0 + j] = s * scale;
      }
  }
}

template <Wt kT>
void attn_values(const float* p, int64_t ld, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n,
                 float* out) {
  if (hd == 64) return attn_values_fixed<kT, 8>(p, ld, group, rows, stride, n, out);
  if (hd == 128) return attn_values_fixed<kT, 16>(p, ld, group, rows, stride, n, out);
  alignas(32) float tmp[16 * kMaxHeadDim];
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nn = n - j0 < 16 ? n - j0 : 16;
    const int64_t elem = kT == Wt::kF32 ? 4 : 2;
    const uint8_t* base = static_cast<const uint8_t*>(rows) + j0 * stride * elem;
    const bool wide = kT != Wt::kF32 && group > 1;
    const float* w = wide ? widen_rows<kT>(base, stride, nn, hd, tmp) : nullptr;
    for (int64_t h = 0; h < group; ++h) {
      float* o = out + h * hd;
      const float* ph = p + h * ld + j0;
      int64_t e = 0;
      for (; e + 8 <= hd; e += 8) {
        __m256 acc = _mm256_loadu_ps(o + e);
        for (int64_t j = 0; j < nn; ++j) {
          const __m256 v = wide ? _mm256_loadu_ps(w + j * hd + e) : load_w8<kT>(base + j * stride * elem, e);
          acc = _mm256_fmadd_ps(_mm256_set1_ps(ph[j]), v, acc);
        }
        _mm256_storeu_ps(o + e, acc);
      }
      for (; e < hd; ++e)
        for (int64_t j = 0; j < nn; ++j) o[e] += ph[j] * (wide ? w[j * hd + e] : w_at<kT>(base + j * stride * elem, e));
    }
  }
}

double sum_squares(const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  double s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

// exp(x) for x <= 0: 2^k * e^r with k = round(x / ln 2), |r| <= ln 2 / 2, e^r by its Taylor
// polynomial to r^7 (relative error < 2e-7); exactly 0 below -87.3 (2^k would be subnormal).
inline __m256 exp_nonpositive(__m256 x) {
  const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 k =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

void silu_mul(float* g, const float* u, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 e = exp_nonpositive(_mm256_or_ps(x, sign));         // exp(-|x|)
    const __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, e), x);  // x * e where x < 0
    _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) {
    alignas(32) float t[8] = {};
    t[0] = -__builtin_fabsf(g[i]);
    _mm256_store_ps(t, exp_nonpositive(_mm256_load_ps(t)));
    const float x = g[i], e = t[0];
    g[i] = (x >= 0.0f ? x : x * e) / (1.0f + e) * u[i];
  }
}

float exp_sum(float* x, int64_t n, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float s = hsum(acc);
  if (i < n) {
    alignas(32) float tmp[8] = {};
    for (int64_t t = i; t < n; ++t) tmp[t - i] = x[t] - shift;
    for (int64_t t = n - i; t < 8; ++t) tmp[t] = -1e30f;  // exp = 0
    _mm256_store_ps(tmp, exp_nonpositive(_mm256_load_ps(tmp)));
    for (int64_t t = i; t < n; ++t) {
      x[t] = tmp[t - i];
      s += x[t];
    }
  }
  return s;
}

float read_sum(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t i = 0; i < n; i += 64) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    a4 = _mm256_add_ps(a4, _mm256_load_ps(p + i + 32));
    a5 = _mm256_add_ps(a5, _mm256_load_ps(p + i + 40));
    a6 = _mm256_add_ps(a6, _mm256_load_ps(p + i + 48));
    a7 = _mm256_add_ps(a7, _mm256_load_ps(p + i + 56));
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                            _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))));
}

void f32_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const float*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
}

}  // namespace
}  // namespace specd::kernels::cpu

// The K-quant GEMV and its activations use walk_by_4 (isa_kernels.hpp), hsum, hmax and half_to_f32 above.
#include "isa_avx2_kquant.hpp"

namespace specd::kernels::cpu {

const IsaKernels kAvx2Kernels = {
    CpuIsa::kAvx2,
    {gemv_float<Wt::kF32>, gemv_float<Wt::kF16>, gemv_float<Wt::kBF16>, gemv_quant<DType::kQ8_0>,
     gemv_quant<DType::kQ4_0>, gemv_k<DType::kQ4_K>, gemv_k<DType::kQ5_K>, gemv_k<DType::kQ6_K>, gemv_k<DType::kQ3_K>,
     gemv_k<DType::kQ2_K>},
    {nullptr, nullptr, scalar::prep_bf16_as_f32, prep_q8, prep_q8, prep_q8k, prep_q8k, prep_q8k, prep_q8k, prep_q8k},
    {f32_to_f32, f16_row_to_f32, bf16_row_to_f32, q8_0_row_to_f32, q4_0_row_to_f32, q4_k_row_to_f32, q5_k_row_to_f32,
     q6_k_row_to_f32, q3_k_row_to_f32, q2_k_row_to_f32},
    {nullptr, narrow_f16, scalar::narrow_bf16, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr},
    {attn_scores<Wt::kF32>, attn_scores<Wt::kF16>, attn_scores<Wt::kBF16>},
    {attn_values<Wt::kF32>, attn_values<Wt::kF16>, attn_values<Wt::kBF16>},
    sum_squares,
    exp_sum,
    silu_mul,
    read_sum,
};

}  // namespace specd::kernels::cpu
