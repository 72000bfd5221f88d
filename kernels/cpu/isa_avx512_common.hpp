// Private to the AVX-512 levels: included only by isa_avx512_level.hpp and the headers it
// includes, so everything here is compiled once per level, with that level's flags (see
// isa_kernels.hpp for the rules). Helpers shared by the GEMV (isa_avx512_gemv.hpp), conversions
// and attention, with one definition per feature where a level may lack the instruction.
#pragma once

#include <immintrin.h>

#include "isa_kernels.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace specd::kernels::cpu {
namespace {

inline float half_to_f32(uint16_t h) {
  return _cvtsh_ss(h);
}

inline __mmask16 tail_mask16(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}  // n <= 16
inline __mmask32 tail_mask32(int64_t n) {
  return static_cast<__mmask32>(n >= 32 ? 0xffffffffu : ((1u << n) - 1u));
}

enum class Wt { kF32, kF16 };

template <Wt kT>
inline __m512 load_w16(const uint8_t* row, int64_t i, __mmask16 m) {
  if constexpr (kT == Wt::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  } else {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  }
}

// 16 floats to bf16, rounding to nearest even (NaN stays NaN).
inline __m256i f32_to_bf16x16(__m512 v) {
#ifdef __AVX512BF16__
  return (__m256i)_mm512_cvtneps_pbh(v);
#else
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, bits, _mm512_set1_epi32(0x00400000));  // quiet, never rounded to inf
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
#endif
}

// acc + Σ of 4 products u8 x s8 per 32-bit lane. Without VNNI: vpmaddubsw + vpmaddwd, whose
// 16-bit pair sums saturate, so callers keep |u·s + u'·s'| < 32768 (q4_0: u <= 15; q8_0 runs
// |w| x x·sign(w): u <= 128, |s| <= 127).
inline __m512i dot_u8s8(__m512i acc, __m512i u, __m512i s) {
#ifdef __AVX512VNNI__
  return _mm512_dpbusd_epi32(acc, u, s);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}

}  // namespace
}  // namespace specd::kernels::cpu
