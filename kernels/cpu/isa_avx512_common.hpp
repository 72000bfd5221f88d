// Private to the AVX-512 level: included only by isa_avx512.cpp and the headers it includes, so
// everything here is compiled once, with that file's flags (see isa_kernels.hpp for the rules).
// Helpers shared by the level's GEMV (isa_avx512_gemv.hpp), conversions and attention.
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

}  // namespace
}  // namespace specd::kernels::cpu
