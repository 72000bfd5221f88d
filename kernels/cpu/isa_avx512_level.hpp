// The AVX-512 levels (cpu_isa.hpp): this implementation is compiled once per level by
// isa_avx512.cpp, isa_avx512_vnni.cpp, isa_avx512_vbmi.cpp and isa_avx512_bf16.cpp, each with
// its own flags, defining SPECD_AVX512_TABLE (the table's name) and SPECD_AVX512_ISA (its
// level) first. What a level may use comes from the compiler's feature macros (__AVX512VNNI__,
// __AVX512VBMI__, __AVX512BF16__); see isa_kernels.hpp for the rules of ISA files. The GEMV
// kernels are in isa_avx512_gemv.hpp, isa_avx512_qgroup.hpp and isa_avx512_kquant.hpp; this file
// has the conversions, attention and the table.
#pragma once

#include "isa_avx512_common.hpp"
#include "isa_avx512_gemv.hpp"
#include "isa_avx512_kquant.hpp"
#include "isa_avx512_qgroup.hpp"
#include "k_quants.hpp"

namespace specd::kernels::cpu {
namespace {

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
    _mm256_mask_storeu_epi16(dst + i, m, f32_to_bf16x16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

// ---- attention over cached rows --------------------------------------------------------------
// A 16-bit block shared by several query heads is widened once, 16 rows at a time.

enum class Kv { kF32, kF16, kBF16 };

template <Kv kT>
inline __m512 load_kv16(const void* row, int64_t i, __mmask16 m) {
  if constexpr (kT == Kv::kF32) return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + i);
  if constexpr (kT == Kv::kF16) return load_w16<Wt::kF16>(static_cast<const uint8_t*>(row), i, m);
  return load_bf16x16(static_cast<const uint16_t*>(row) + i, m);
}

inline __mmask16 mask_at(int64_t hd, int64_t e) {
  return hd - e >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(hd - e);
}

// The block's rows as F32: the cache itself for f32, else widened into tmp when shared.
template <Kv kT>
struct Rows {
  const uint8_t* base;
  int64_t stride_bytes;
  const float* wide;  // null: read (and widen) the cache directly
  int64_t hd;
  __m512 load(int64_t j, int64_t e, __mmask16 m) const {
    if (wide != nullptr) return _mm512_maskz_loadu_ps(m, wide + j * hd + e);
    return load_kv16<kT>(base + j * stride_bytes, e, m);
  }
};

template <Kv kT>
Rows<kT> block_rows(const void* rows, int64_t stride, int64_t nn, int64_t hd, bool shared, float* tmp) {
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2;
  Rows<kT> r{static_cast<const uint8_t*>(rows), stride * kElem, nullptr, hd};
  if (kT != Kv::kF32 && shared) {
    for (int64_t j = 0; j < nn; ++j)
      for (int64_t e = 0; e < hd; e += 16)
        _mm512_mask_storeu_ps(tmp + j * hd + e, mask_at(hd, e), r.load(j, e, mask_at(hd, e)));
    r.wide = tmp;
  }
  return r;
}

// Lane i of the result = the sum of the 16 lanes of v[i] (a transpose-and-add tree: 45
// instructions for 16 sums instead of 16 horizontal reductions).
inline __m512 transpose_sum16(const __m512* v) {
  __m512 a[8], b[4];
  for (int i = 0; i < 8; ++i)
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 c0 = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 c1 = _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(b[2], b[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(c0, c1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Grouped query heads (GQA) with head_dim 16 NC, 4 heads per tile: 4 heads x 4 keys share one
// transpose-sum, so each key chunk, widened straight from the cache, serves 4 heads. Each
// (head, key) accumulator gets the one-head loop's FMAs in the same order, and the
// transpose-sum adds the lanes of each of its 16 vectors in the same order whatever its
// position, so the scores are the same bits (checked against the one-head loop over head_dim
// 64 and 128, 4 and 8 heads per KV head, 1-1029 cached rows, 1-9 new rows). tinyllama's shape
// at 2048 tokens (bench_kernels AttentionGqa): 333-352 -> 260-272 us per decode token.
template <Kv kT, int NC>
void attn_scores_heads(const float* q, int64_t group, const void* rows, int64_t stride, int64_t n, float scale,
                       float* scores, int64_t ld) {
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2, hd = 16 * NC;
  const auto* base = static_cast<const uint8_t*>(rows);
  for (int64_t k0 = 0; k0 < n; k0 += 4) {
    const int64_t nk = n - k0 < 4 ? n - k0 : 4;
    const uint8_t* key[4];
#pragma GCC unroll 4
    for (int kk = 0; kk < 4; ++kk) key[kk] = base + (k0 + (kk < nk ? kk : nk - 1)) * stride * kElem;
    for (int64_t h0 = 0; h0 < group; h0 += 4) {
      __m512 acc[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        __m512 qv[4];
#pragma GCC unroll 4
        for (int hh = 0; hh < 4; ++hh) qv[hh] = _mm512_loadu_ps(q + (h0 + hh) * hd + 16 * c);
#pragma GCC unroll 4
        for (int kk = 0; kk < 4; ++kk) {
          const __m512 kv = load_kv16<kT>(key[kk], 16 * c, 0xffff);
#pragma GCC unroll 4
          for (int hh = 0; hh < 4; ++hh) acc[4 * hh + kk] = _mm512_fmadd_ps(qv[hh], kv, acc[4 * hh + kk]);
        }
      }
      alignas(64) float s[16];
      _mm512_store_ps(s, _mm512_mul_ps(transpose_sum16(acc), _mm512_set1_ps(scale)));
#pragma GCC unroll 4
      for (int hh = 0; hh < 4; ++hh)
        for (int64_t kk = 0; kk < nk; ++kk) scores[(h0 + hh) * ld + k0 + kk] = s[4 * hh + kk];
    }
  }
}

// Any group with head_dim 16 NC (multi-head attention: Llama 2, llama-160m): per head, 16 keys at a
// time widened straight from the cache, the generic loop's FMAs in its order (the same bits),
// without its run-time head_dim, masks and widened copy. llama-160m's shape (12 heads, 2048
// tokens, bench_kernels Attention, f16 cache): 191-193 -> 130 us per decode token with
// attn_values_heads<.., 1>.
template <Kv kT, int NC>
void attn_scores_fixed(const float* q, int64_t group, const void* rows, int64_t stride, int64_t n, float scale,
                       float* scores, int64_t ld) {
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2, hd = 16 * NC;
  const auto* base = static_cast<const uint8_t*>(rows);
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nn = n - j0 < 16 ? n - j0 : 16;
    const uint8_t* key[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) key[j] = base + (j0 + (j < nn ? j : nn - 1)) * stride * kElem;
    for (int64_t h = 0; h < group; ++h) {
      __m512 acc[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) {
        const __m512 qv = _mm512_loadu_ps(q + h * hd + 16 * c);
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(qv, load_kv16<kT>(key[j], 16 * c, 0xffff), acc[j]);
      }
      _mm512_mask_storeu_ps(scores + h * ld + j0, tail_mask16(nn),
                            _mm512_mul_ps(transpose_sum16(acc), _mm512_set1_ps(scale)));
    }
  }
}

template <Kv kT>
void attn_scores(const float* q, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n, float scale,
                 float* scores, int64_t ld) {
  if (group % 4 == 0 && hd == 64) return attn_scores_heads<kT, 4>(q, group, rows, stride, n, scale, scores, ld);
  if (group % 4 == 0 && hd == 128) return attn_scores_heads<kT, 8>(q, group, rows, stride, n, scale, scores, ld);
  if (hd == 64) return attn_scores_fixed<kT, 4>(q, group, rows, stride, n, scale, scores, ld);
  if (hd == 128) return attn_scores_fixed<kT, 8>(q, group, rows, stride, n, scale, scores, ld);
  alignas(64) float tmp[16 * kMaxHeadDim];
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nn = n - j0 < 16 ? n - j0 : 16;
    const Rows<kT> r =
        block_rows<kT>(static_cast<const uint8_t*>(rows) + j0 * stride * kElem, stride, nn, hd, group > 1, tmp);
    for (int64_t h = 0; h < group; ++h) {
      __m512 acc[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
      for (int64_t e = 0; e < hd; e += 16) {
        const __mmask16 m = mask_at(hd, e);
        const __m512 qv = _mm512_maskz_loadu_ps(m, q + h * hd + e);
        // Always 16 rows (a short block repeats its last row; those lanes are not stored), so
        // the loop unrolls and the accumulators stay in registers.
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(qv, r.load(j < nn ? j : nn - 1, e, m), acc[j]);
      }
      _mm512_mask_storeu_ps(scores + h * ld + j0, tail_mask16(nn),
                            _mm512_mul_ps(transpose_sum16(acc), _mm512_set1_ps(scale)));
    }
  }
}

// Grouped query heads (GQA) with head_dim 16 NC: H heads at a time, each value row widened once
// per H heads straight from the cache and used by all of them; the H x NC outputs stay in
// registers over all n rows. Per (head, chunk) the same FMAs in the same row order as the
// one-head loop below, so the results are the same bits. (tinyllama's 8 heads per KV head at 2048
// tokens of context, bench_kernels AttentionGqa: 12% off a decode token, 27% off 5 scoring rows.)
template <Kv kT, int NC, int H>
void attn_values_heads(const float* p, int64_t ld, int64_t group, const void* rows, int64_t stride, int64_t n,
                       float* out) {
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2, hd = 16 * NC;
  const auto* base = static_cast<const uint8_t*>(rows);
  for (int64_t h0 = 0; h0 < group; h0 += H) {
    __m512 acc[H][NC];
#pragma GCC unroll 8
    for (int hh = 0; hh < H; ++hh)
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) acc[hh][c] = _mm512_loadu_ps(out + (h0 + hh) * hd + 16 * c);
    for (int64_t j = 0; j < n; ++j) {
      __m512 v[NC];
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) v[c] = load_kv16<kT>(base + j * stride * kElem, 16 * c, 0xffff);
#pragma GCC unroll 8
      for (int hh = 0; hh < H; ++hh) {
        const __m512 pj = _mm512_set1_ps(p[(h0 + hh) * ld + j]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) acc[hh][c] = _mm512_fmadd_ps(pj, v[c], acc[hh][c]);
      }
    }
#pragma GCC unroll 8
    for (int hh = 0; hh < H; ++hh)
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + (h0 + hh) * hd + 16 * c, acc[hh][c]);
  }
}

template <Kv kT>
void attn_values(const float* p, int64_t ld, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n,
                 float* out) {
  if (hd == 64 && group % 4 == 0) return attn_values_heads<kT, 4, 4>(p, ld, group, rows, stride, n, out);
  if (hd == 128 && group % 2 == 0) return attn_values_heads<kT, 8, 2>(p, ld, group, rows, stride, n, out);
  if (hd == 64) return attn_values_heads<kT, 4, 1>(p, ld, group, rows, stride, n, out);
  if (hd == 128) return attn_values_heads<kT, 8, 1>(p, ld, group, rows, stride, n, out);
  alignas(64) float tmp[16 * kMaxHeadDim];
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2;
  const int64_t nc = (hd + 15) / 16;  // 16-lane chunks of a row (<= 16)
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nn = n - j0 < 16 ? n - j0 : 16;
    const Rows<kT> r =
        block_rows<kT>(static_cast<const uint8_t*>(rows) + j0 * stride * kElem, stride, nn, hd, group > 1, tmp);
    for (int64_t h = 0; h < group; ++h) {
      // The head's output stays in registers for the whole block: chunks c < nc are live.
      __m512 acc[16];
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c)
        if (c < nc) acc[c] = _mm512_maskz_loadu_ps(mask_at(hd, 16 * c), out + h * hd + 16 * c);
      for (int64_t j = 0; j < nn; ++j) {
        const __m512 pj = _mm512_set1_ps(p[h * ld + j0 + j]);
#pragma GCC unroll 16
        for (int c = 0; c < 16; ++c)
          if (c < nc) acc[c] = _mm512_fmadd_ps(pj, r.load(j, 16 * c, mask_at(hd, 16 * c)), acc[c]);
      }
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c)
        if (c < nc) _mm512_mask_storeu_ps(out + h * hd + 16 * c, mask_at(hd, 16 * c), acc[c]);
    }
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

// exp(x) for x <= 0: 2^k * e^r with k = round(x / ln 2), |r| <= ln 2 / 2, e^r by its Taylor
// polynomial to r^7 (relative error < 2e-7); exactly 0 below -87.3 (2^k would be subnormal).
inline __m512 exp_nonpositive(__m512 x) {
  const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(ok, p, k);
}

float exp_sum(float* x, int64_t n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh)));
    _mm512_mask_storeu_ps(x + i, m, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

void silu_mul(float* g, const float* u, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask16(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));  // exp(-|x|)
    const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 num = _mm512_mask_mul_ps(x, neg, x, e);  // x * e where x < 0
    _mm512_mask_storeu_ps(g + i, m,
                          _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, u + i)));
  }
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

const IsaKernels SPECD_AVX512_TABLE = {
    SPECD_AVX512_ISA,
    {gemv_tiles<FloatKind<Wt::kF32>>, gemv_tiles<FloatKind<Wt::kF16>>, gemv_tiles<Bf16Kind>, gemv_groups<DType::kQ8_0>,
     gemv_groups<DType::kQ4_0>, gemv_k<DType::kQ4_K>, gemv_k<DType::kQ5_K>, gemv_k<DType::kQ6_K>, gemv_k<DType::kQ3_K>,
     gemv_k<DType::kQ2_K>},
    {nullptr, nullptr, prep_bf16, prep_q8_for_q8_0, prep_q8_for_q4_0, prep_q8k_in_lane_order, prep_q8k_in_lane_order,
     prep_q8k_in_lane_order, prep_q8k_in_lane_order, prep_q8k_in_lane_order},
    {f32_to_f32, f16_row_to_f32, bf16_row_to_f32, q8_0_row_to_f32, q4_0_row_to_f32, q4_k_row_to_f32, q5_k_row_to_f32,
     q6_k_row_to_f32, q3_k_row_to_f32, q2_k_row_to_f32},
    {nullptr, narrow_f16, narrow_bf16, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr},
    {attn_scores<Kv::kF32>, attn_scores<Kv::kF16>, attn_scores<Kv::kBF16>},
    {attn_values<Kv::kF32>, attn_values<Kv::kF16>, attn_values<Kv::kBF16>},
    sum_squares,
    exp_sum,
    silu_mul,
    read_sum,
};

}  // namespace specd::kernels::cpu
