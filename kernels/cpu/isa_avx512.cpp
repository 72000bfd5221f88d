// The AVX-512 level: F/BW/VL/DQ with VBMI (vpermt2b), VNNI (vpdpbusd) and BF16 (vdpbf16ps).
// Compiled with those flags only; see isa_kernels.hpp for the rules of ISA files.
//
// GEMV tiles are one weight row x up to 8 activation rows of 16-lane accumulators; every
// (row, feature) pair runs the same instruction sequence whatever the tile, so results do not
// depend on the batch.
//  - bf16 weights: activations rounded to bf16, vdpbf16ps (32 products per instruction).
//  - q8_0 / q4_0 weights: four blocks per step, vpdpbusd (see the quantized section).
#include <immintrin.h>

#include "isa_kernels.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace specd::kernels::cpu {
namespace {

inline float half_to_f32(uint16_t h) { return _cvtsh_ss(h); }

inline __mmask16 tail_mask16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }  // n <= 16
inline __mmask32 tail_mask32(int64_t n) {
  return static_cast<__mmask32>(n >= 32 ? 0xffffffffu : ((1u << n) - 1u));
}

// Weight rows are streamed one at a time, front to back: a single sequential stream per
// thread is what the hardware prefetchers serve fastest (several rows interleaved ran at half
// the speed; software prefetch added nothing; docs/performance.md).

// T<n>::run for the last n < kMb rows of a feature.
template <template <int> class T, int N>
inline void run_rows(const GemvArgs& a, int64_t j, int64_t r, int64_t n) {
  if constexpr (N > 0) {
    if (n == N) {
      T<N>::run(a, j, r);
      return;
    }
    run_rows<T, N - 1>(a, j, r, n);
  }
}

// Calls T<MB>::run(a, j, r0) for every feature j in [j0, j1) and groups of up to kMb rows. The
// group size changes only which rows share a weight load, never the arithmetic of a row.
template <template <int> class T, int kMb>
void walk(const GemvArgs& a, int64_t j0, int64_t j1) {
  const bool prefetch = a.m > 1;
  for (int64_t j = j0; j < j1; ++j) {
    if (prefetch) prefetch_weight_row(a, j);
    int64_t r = 0;
    for (; r + kMb <= a.m; r += kMb) T<kMb>::run(a, j, r);
    run_rows<T, kMb - 1>(a, j, r, a.m - r);
  }
}

// With several activation rows: features in pairs (T2<MB> computes features j and j + 1, so
// each activation vector loaded serves two weight rows; up to 6 rows in one group, else groups
// of 4), an odd last feature through T1. T2 runs T1's instruction sequence for every
// (row, feature) pair, so the pairing changes no result. The loop is load-bound: two weight
// rows per activation load took 25-30% off 5- and 8-row tiles on cached weights.
template <template <int> class T2, template <int> class T1>
void walk_pairs(const GemvArgs& a, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + 2 <= j1; j += 2) {
    prefetch_weight_row(a, j);
    prefetch_weight_row(a, j + 1);
    int64_t r = 0;
    if (a.m > 6)
      for (; r + 4 <= a.m; r += 4) T2<4>::run(a, j, r);
    run_rows<T2, 6>(a, j, r, a.m - r);
  }
  if (j < j1) walk<T1, 8>(a, j, j1);
}

// Two accumulators per row: chunk c of a row goes to accumulator c % 2, the same order for
// every row-group size.
inline float sum2(__m512 a0, __m512 a1) { return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)); }

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
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      // Two accumulators per row (separate arrays: GCC keeps them in registers then).
      __m512 acc0[MB], acc1[MB];
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) acc0[rr] = acc1[rr] = _mm512_setzero_ps();
      const uint8_t* w = a.w + static_cast<size_t>(j) * a.w_stride;
      const float* x[MB];
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr)
        x[rr] = reinterpret_cast<const float*>(a.act + static_cast<size_t>(r0 + rr) * a.act_stride);
      const __mmask16 all = 0xffff;
      const int64_t full = a.k / 32 * 32;
      for (int64_t i = 0; i < full; i += 32) {
        const __m512 w0 = load_w16<kT>(w, i, all), w1 = load_w16<kT>(w, i + 16, all);
        #pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) {
          acc0[rr] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[rr] + i), acc0[rr]);
          acc1[rr] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[rr] + i + 16), acc1[rr]);
        }
      }
      if (full < a.k) {  // up to two chunks of 16: into accumulators 0 and 1
        const __mmask16 m0 = a.k - full >= 16 ? all : tail_mask16(a.k - full);
        const __mmask16 m1 = a.k - full > 16 ? tail_mask16(a.k - full - 16) : 0;
        const __m512 w0 = load_w16<kT>(w, full, m0), w1 = load_w16<kT>(w, full + 16, m1);
        #pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) {
          acc0[rr] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, x[rr] + full), acc0[rr]);
          acc1[rr] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m1, x[rr] + full + 16), acc1[rr]);
        }
      }
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = sum2(acc0[rr], acc1[rr]);
    }
  };
};

// TileFloat for features j and j + 1 (see walk_pairs).
template <Wt kT>
struct TileFloatX2 {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      __m512 a0[MB], a1[MB], b0[MB], b1[MB];
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) a0[rr] = a1[rr] = b0[rr] = b1[rr] = _mm512_setzero_ps();
      const uint8_t* wa = a.w + static_cast<size_t>(j) * a.w_stride;
      const uint8_t* wb = wa + a.w_stride;
      const float* x[MB];
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr)
        x[rr] = reinterpret_cast<const float*>(a.act + static_cast<size_t>(r0 + rr) * a.act_stride);
      const __mmask16 all = 0xffff;
      const int64_t full = a.k / 32 * 32;
      for (int64_t i = 0; i < full; i += 32) {
        const __m512 wa0 = load_w16<kT>(wa, i, all), wa1 = load_w16<kT>(wa, i + 16, all);
        const __m512 wb0 = load_w16<kT>(wb, i, all), wb1 = load_w16<kT>(wb, i + 16, all);
        #pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) {
          const __m512 x0 = _mm512_loadu_ps(x[rr] + i), x1 = _mm512_loadu_ps(x[rr] + i + 16);
          a0[rr] = _mm512_fmadd_ps(wa0, x0, a0[rr]);
          a1[rr] = _mm512_fmadd_ps(wa1, x1, a1[rr]);
          b0[rr] = _mm512_fmadd_ps(wb0, x0, b0[rr]);
          b1[rr] = _mm512_fmadd_ps(wb1, x1, b1[rr]);
        }
      }
      if (full < a.k) {
        const __mmask16 m0 = a.k - full >= 16 ? all : tail_mask16(a.k - full);
        const __mmask16 m1 = a.k - full > 16 ? tail_mask16(a.k - full - 16) : 0;
        const __m512 wa0 = load_w16<kT>(wa, full, m0), wa1 = load_w16<kT>(wa, full + 16, m1);
        const __m512 wb0 = load_w16<kT>(wb, full, m0), wb1 = load_w16<kT>(wb, full + 16, m1);
        #pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) {
          const __m512 x0 = _mm512_maskz_loadu_ps(m0, x[rr] + full), x1 = _mm512_maskz_loadu_ps(m1, x[rr] + full + 16);
          a0[rr] = _mm512_fmadd_ps(wa0, x0, a0[rr]);
          a1[rr] = _mm512_fmadd_ps(wa1, x1, a1[rr]);
          b0[rr] = _mm512_fmadd_ps(wb0, x0, b0[rr]);
          b1[rr] = _mm512_fmadd_ps(wb1, x1, b1[rr]);
        }
      }
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        a.c[(r0 + rr) * a.ldc + j] = sum2(a0[rr], a1[rr]);
        a.c[(r0 + rr) * a.ldc + j + 1] = sum2(b0[rr], b1[rr]);
      }
    }
  };
};

template <Wt kT>
void gemv_float(const GemvArgs& a, int64_t j0, int64_t j1) {
  if (a.m == 1) {
    walk<TileFloat<kT>::template T, 8>(a, j0, j1);
  } else {
    walk_pairs<TileFloatX2<kT>::template T, TileFloat<kT>::template T>(a, j0, j1);
  }
}

// ---- bf16 weights (bf16 activations) -----------------------------------------------------------

template <int MB>
struct TileBf16 {
  static void run(const GemvArgs& a, int64_t j, int64_t r0) {
    __m512 acc[MB][2];
    #pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) acc[rr][0] = acc[rr][1] = _mm512_setzero_ps();
    const uint8_t* w = a.w + static_cast<size_t>(j) * a.w_stride;
    const uint8_t* x[MB];
    #pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) x[rr] = a.act + static_cast<size_t>(r0 + rr) * a.act_stride;
    const int64_t full = a.k / 64 * 64;
    for (int64_t i = 0; i < full; i += 64) {
      const __m512i w0 = _mm512_loadu_si512(w + 2 * i), w1 = _mm512_loadu_si512(w + 2 * i + 64);
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        acc[rr][0] = _mm512_dpbf16_ps(acc[rr][0], (__m512bh)_mm512_loadu_si512(x[rr] + 2 * i), (__m512bh)w0);
        acc[rr][1] = _mm512_dpbf16_ps(acc[rr][1], (__m512bh)_mm512_loadu_si512(x[rr] + 2 * i + 64), (__m512bh)w1);
      }
    }
    if (full < a.k) {  // up to two chunks of 32: into accumulators 0 and 1
      const __mmask32 m0 = tail_mask32(a.k - full);
      const __mmask32 m1 = a.k - full > 32 ? tail_mask32(a.k - full - 32) : 0;
      const __m512i w0 = _mm512_maskz_loadu_epi16(m0, w + 2 * full), w1 = _mm512_maskz_loadu_epi16(m1, w + 2 * full + 64);
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        acc[rr][0] = _mm512_dpbf16_ps(acc[rr][0], (__m512bh)_mm512_maskz_loadu_epi16(m0, x[rr] + 2 * full), (__m512bh)w0);
        acc[rr][1] = _mm512_dpbf16_ps(acc[rr][1], (__m512bh)_mm512_maskz_loadu_epi16(m1, x[rr] + 2 * full + 64), (__m512bh)w1);
      }
    }
    #pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = sum2(acc[rr][0], acc[rr][1]);
  }
};

// Two weight rows (features j, j + 1) x MB activation rows: each activation vector loaded
// serves two weight rows. Every (row, feature) pair runs TileBf16's instruction sequence.
template <int MB>
struct TileBf16x2 {
  static void run(const GemvArgs& a, int64_t j, int64_t r0) {
    __m512 acc[2][MB][2];
    #pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) acc[0][rr][0] = acc[0][rr][1] = acc[1][rr][0] = acc[1][rr][1] = _mm512_setzero_ps();
    const uint8_t* wa = a.w + static_cast<size_t>(j) * a.w_stride;
    const uint8_t* wb = wa + a.w_stride;
    const uint8_t* x[MB];
    #pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) x[rr] = a.act + static_cast<size_t>(r0 + rr) * a.act_stride;
    const int64_t full = a.k / 64 * 64;
    for (int64_t i = 0; i < full; i += 64) {
      const __m512i a0 = _mm512_loadu_si512(wa + 2 * i), a1 = _mm512_loadu_si512(wa + 2 * i + 64);
      const __m512i b0 = _mm512_loadu_si512(wb + 2 * i), b1 = _mm512_loadu_si512(wb + 2 * i + 64);
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        const __m512bh x0 = (__m512bh)_mm512_loadu_si512(x[rr] + 2 * i);
        const __m512bh x1 = (__m512bh)_mm512_loadu_si512(x[rr] + 2 * i + 64);
        acc[0][rr][0] = _mm512_dpbf16_ps(acc[0][rr][0], x0, (__m512bh)a0);
        acc[0][rr][1] = _mm512_dpbf16_ps(acc[0][rr][1], x1, (__m512bh)a1);
        acc[1][rr][0] = _mm512_dpbf16_ps(acc[1][rr][0], x0, (__m512bh)b0);
        acc[1][rr][1] = _mm512_dpbf16_ps(acc[1][rr][1], x1, (__m512bh)b1);
      }
    }
    if (full < a.k) {
      const __mmask32 m0 = tail_mask32(a.k - full);
      const __mmask32 m1 = a.k - full > 32 ? tail_mask32(a.k - full - 32) : 0;
      const __m512i a0 = _mm512_maskz_loadu_epi16(m0, wa + 2 * full), a1 = _mm512_maskz_loadu_epi16(m1, wa + 2 * full + 64);
      const __m512i b0 = _mm512_maskz_loadu_epi16(m0, wb + 2 * full), b1 = _mm512_maskz_loadu_epi16(m1, wb + 2 * full + 64);
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        const __m512bh x0 = (__m512bh)_mm512_maskz_loadu_epi16(m0, x[rr] + 2 * full);
        const __m512bh x1 = (__m512bh)_mm512_maskz_loadu_epi16(m1, x[rr] + 2 * full + 64);
        acc[0][rr][0] = _mm512_dpbf16_ps(acc[0][rr][0], x0, (__m512bh)a0);
        acc[0][rr][1] = _mm512_dpbf16_ps(acc[0][rr][1], x1, (__m512bh)a1);
        acc[1][rr][0] = _mm512_dpbf16_ps(acc[1][rr][0], x0, (__m512bh)b0);
        acc[1][rr][1] = _mm512_dpbf16_ps(acc[1][rr][1], x1, (__m512bh)b1);
      }
    }
    #pragma GCC unroll 16
    for (int rr = 0; rr < MB; ++rr) {
      a.c[(r0 + rr) * a.ldc + j] = sum2(acc[0][rr][0], acc[0][rr][1]);
      a.c[(r0 + rr) * a.ldc + j + 1] = sum2(acc[1][rr][0], acc[1][rr][1]);
    }
  }
};

void gemv_bf16(const GemvArgs& a, int64_t j0, int64_t j1) {
  if (a.m == 1) {
    walk<TileBf16, 8>(a, j0, j1);
  } else {
    walk_pairs<TileBf16x2, TileBf16>(a, j0, j1);
  }
}

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
// Four blocks ("a quad") per step. The quad's bytes are loaded as 64-byte windows and vpermt2b
// (VBMI) gathers the quants and the fp16 scales into lane order in one instruction each.
//   q4_0: quants -> lo = [A0-15 B0-15 C0-15 D0-15], hi = [A16-31 .. D16-31] (unsigned nibbles),
//         lane l of both belongs to block l / 4; the activation row stores x in the same order
//         (signed) with, per lane, -8 * (sum of the lane's 8 x values) as the accumulator start
//         and the lane scales [dA x4, dB x4, dC x4, dD x4].
//   q8_0: quants -> w0 = [A B], w1 = [C D] (signed, natural order); the activation row stores
//         x + 128 (unsigned) and lane scales [dA x8, dB x8], [dC x8, dD x8]; the start
//         -128 * sum(w) is computed from the weights and shared by every row.

struct QuadIdx {
  alignas(64) uint8_t q4[64];        // nibble bytes of 4 Q4_0 blocks (window bytes 0..71)
  alignas(64) uint8_t q4_scale[64];  // the 4 fp16 scales of the blocks (low 8 bytes used)
  alignas(64) uint8_t q8_lo[64];     // quants of blocks A, B (window bytes 0..127)
  alignas(64) uint8_t q8_hi[64];     // quants of blocks C, D (window bytes 64..191, minus 64)
  alignas(64) uint8_t q8_scale[64];  // the 4 fp16 scales of the blocks (low 8 bytes used)
};

constexpr QuadIdx make_quad_idx() {
  QuadIdx t{};
  for (int i = 0; i < 64; ++i) {
    t.q4[i] = static_cast<uint8_t>((i / 16) * 18 + 2 + i % 16);
    t.q4_scale[i] = static_cast<uint8_t>(i < 8 ? (i / 2) * 18 + i % 2 : 0);
    t.q8_lo[i] = static_cast<uint8_t>((i / 32) * 34 + 2 + i % 32);
    t.q8_hi[i] = static_cast<uint8_t>((2 + i / 32) * 34 + 2 + i % 32 - 64);
    t.q8_scale[i] = static_cast<uint8_t>(i < 8 ? (i / 2) * 34 + i % 2 : 0);
  }
  return t;
}
constexpr QuadIdx kQuadIdx = make_quad_idx();

inline __mmask64 byte_mask(int64_t n) {
  return n >= 64 ? ~__mmask64{0} : (n <= 0 ? __mmask64{0} : (__mmask64{1} << n) - 1);
}
inline __m512i idx(const uint8_t* t) { return _mm512_load_si512(t); }

// The quad's 4 block scales as F32 (gathered from the windows, widened in a 128-bit register:
// cheaper than widening 16 replicated halves in a 512-bit one).
inline __m128 block_scales(__m512i l0, __m512i l1, const uint8_t* index) {
  return _mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi8(l0, idx(index), l1)));
}

struct ActQ8 {
  const uint8_t* q;
  const float* aux;
};

inline ActQ8 act_q8(const uint8_t* row, int64_t k) {
  const int64_t nbp = q8_blocks_padded(k);
  return {row + nbp * 4, reinterpret_cast<const float*>(row + nbp * 36)};
}

// One block of 32: its scale max|x| / 127 and the rounded values as 32 bytes (2 x 16).
inline void quantize_block(const float* x, float* d_out, __m128i* lo, __m128i* hi) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = d;
  *lo = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id))));
  *hi = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id))));
}

// Quantizes quad `qd` of the row: d[4 qd + i] and the 4 x 2 halves of 16 bytes (zero past the end).
inline void quantize_quad(const float* x, int64_t nb, int64_t qd, float* d, __m128i (*half)[2]) {
  for (int i = 0; i < 4; ++i) {
    const int64_t b = 4 * qd + i;
    if (b < nb) {
      quantize_block(x + b * 32, d + b, &half[i][0], &half[i][1]);
    } else {
      d[b] = 0.0f;
      half[i][0] = half[i][1] = _mm_setzero_si128();
    }
  }
}

inline __m512i join4(__m128i a, __m128i b, __m128i c, __m128i e) {
  __m512i v = _mm512_castsi128_si512(a);
  v = _mm512_inserti32x4(v, b, 1);
  v = _mm512_inserti32x4(v, c, 2);
  return _mm512_inserti32x4(v, e, 3);
}

inline __m512 lanes4(const float* d) {  // [d0 x4, d1 x4, d2 x4, d3 x4]
  return _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                               _mm512_castps128_ps512(_mm_loadu_ps(d)));
}
inline __m512 lanes8(const float* d) {  // [d0 x8, d1 x8]
  return _mm512_insertf32x8(_mm512_set1_ps(d[0]), _mm256_set1_ps(d[1]), 1);
}

void prep_q8_for_q8_0(const float* x, uint8_t* out, int64_t k) {
  const int64_t nbp = q8_blocks_padded(k);
  auto* d = reinterpret_cast<float*>(out);
  uint8_t* q = out + nbp * 4;
  auto* aux = reinterpret_cast<float*>(out + nbp * 36);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t qd = 0; qd < nbp / 4; ++qd) {
    __m128i h[4][2];
    quantize_quad(x, k / 32, qd, d, h);
    _mm512_storeu_si512(q + qd * 128, _mm512_add_epi8(join4(h[0][0], h[0][1], h[1][0], h[1][1]), bias));
    _mm512_storeu_si512(q + qd * 128 + 64, _mm512_add_epi8(join4(h[2][0], h[2][1], h[3][0], h[3][1]), bias));
    _mm512_storeu_ps(aux + qd * 32, lanes8(d + 4 * qd));
    _mm512_storeu_ps(aux + qd * 32 + 16, lanes8(d + 4 * qd + 2));
  }
}

void prep_q8_for_q4_0(const float* x, uint8_t* out, int64_t k) {
  const int64_t nbp = q8_blocks_padded(k);
  auto* d = reinterpret_cast<float*>(out);
  uint8_t* q = out + nbp * 4;
  auto* aux = reinterpret_cast<float*>(out + nbp * 36);
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t qd = 0; qd < nbp / 4; ++qd) {
    __m128i h[4][2];
    quantize_quad(x, k / 32, qd, d, h);
    const __m512i lo = join4(h[0][0], h[1][0], h[2][0], h[3][0]);
    const __m512i hi = join4(h[0][1], h[1][1], h[2][1], h[3][1]);
    _mm512_storeu_si512(q + qd * 128, lo);
    _mm512_storeu_si512(q + qd * 128 + 64, hi);
    _mm512_storeu_ps(aux + qd * 32, lanes4(d + 4 * qd));
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, lo), ones, hi);
    _mm512_storeu_si512(aux + qd * 32 + 16, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 3)));
  }
}

template <DType kW>
struct TileQuant {
  template <int MB>
  struct T {
    // Quad qd of weight row `row` into accumulator C of every row (C = qd % 2 for q4_0; q8_0
    // uses both: blocks A, B into 0 and C, D into 1). C is a template argument so that the
    // accumulators stay in registers.
    template <int C, bool kTail>
    static void quad(const uint8_t* row, int64_t nb, int64_t qd, const ActQ8* x, __m512 (*acc)[2]) {
      constexpr int64_t kBlock = kW == DType::kQ8_0 ? 34 : 18;
      const uint8_t* base = row + qd * 4 * kBlock;
      // Full quads read whole windows (the last window may run into the next row or past the
      // end: the tail quad masks its loads to the bytes it owns).
      const int64_t bytes = kTail ? (nb - 4 * qd) * kBlock : 4 * kBlock;
      const __m512i l0 = kTail ? _mm512_maskz_loadu_epi8(byte_mask(bytes), base) : _mm512_loadu_si512(base);
      const __m512i l1 = kTail ? _mm512_maskz_loadu_epi8(byte_mask(bytes - 64), base + 64)
                               : _mm512_maskz_loadu_epi8(byte_mask(4 * kBlock - 64), base + 64);
      if constexpr (kW == DType::kQ4_0) {
        const __m512i v = _mm512_permutex2var_epi8(l0, idx(kQuadIdx.q4), l1);
        const __m512i m = _mm512_set1_epi8(15);
        const __m512i lo = _mm512_and_si512(v, m), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
        const __m512 dw = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                                _mm512_castps128_ps512(block_scales(l0, l1, kQuadIdx.q4_scale)));
#pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) {
          const uint8_t* xq = x[rr].q + qd * 128;
          const float* xa = x[rr].aux + qd * 32;
          __m512i dot = _mm512_dpbusd_epi32(_mm512_loadu_si512(xa + 16), lo, _mm512_loadu_si512(xq));
          dot = _mm512_dpbusd_epi32(dot, hi, _mm512_loadu_si512(xq + 64));
          acc[rr][C] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(_mm512_loadu_ps(xa), dw), acc[rr][C]);
        }
      } else {
        const __m512i l2 = _mm512_maskz_loadu_epi8(byte_mask(bytes - 128), base + 128);
        const __m512i w0 = _mm512_permutex2var_epi8(l0, idx(kQuadIdx.q8_lo), l1);
        const __m512i w1 = _mm512_permutex2var_epi8(l1, idx(kQuadIdx.q8_hi), l2);
        const __m512 sc = _mm512_castps128_ps512(block_scales(l0, l1, kQuadIdx.q8_scale));
        const __m512 dw0 = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), sc);
        const __m512 dw1 = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2), sc);
        const __m512i b80 = _mm512_set1_epi8(static_cast<char>(0x80));
        const __m512i s0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), b80, w0));
        const __m512i s1 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), b80, w1));
#pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) {
          const uint8_t* xq = x[rr].q + qd * 128;
          const float* xa = x[rr].aux + qd * 32;
          const __m512i d0 = _mm512_dpbusd_epi32(s0, _mm512_loadu_si512(xq), w0);
          const __m512i d1 = _mm512_dpbusd_epi32(s1, _mm512_loadu_si512(xq + 64), w1);
          acc[rr][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), _mm512_mul_ps(_mm512_loadu_ps(xa), dw0), acc[rr][0]);
          acc[rr][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), _mm512_mul_ps(_mm512_loadu_ps(xa + 16), dw1), acc[rr][1]);
        }
      }
    }

    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      __m512 acc[MB][2];
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) acc[rr][0] = acc[rr][1] = _mm512_setzero_ps();
      ActQ8 x[MB];
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) x[rr] = act_q8(a.act + static_cast<size_t>(r0 + rr) * a.act_stride, a.k);
      const uint8_t* row = a.w + static_cast<size_t>(j) * a.w_stride;
      const int64_t nb = a.k / 32, full = nb / 4;  // full quads, then a partial one
      int64_t qd = 0;
      for (; qd + 2 <= full; qd += 2) {
        quad<0, false>(row, nb, qd, x, acc);
        quad<1, false>(row, nb, qd + 1, x, acc);
      }
      if (qd < full) quad<0, false>(row, nb, qd++, x, acc);
      if (4 * qd < nb) quad<1, true>(row, nb, qd, x, acc);
      #pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = sum2(acc[rr][0], acc[rr][1]);
    }
  };
};

template <DType kW>
void gemv_quant(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk<TileQuant<kW>::template T, 8>(a, j0, j1);
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
      for (int64_t e = 0; e < hd; e += 16) _mm512_mask_storeu_ps(tmp + j * hd + e, mask_at(hd, e), r.load(j, e, mask_at(hd, e)));
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

template <Kv kT>
void attn_scores(const float* q, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n, float scale,
                 float* scores, int64_t ld) {
  alignas(64) float tmp[16 * kMaxHeadDim];
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nn = n - j0 < 16 ? n - j0 : 16;
    const Rows<kT> r = block_rows<kT>(static_cast<const uint8_t*>(rows) + j0 * stride * kElem, stride, nn, hd, group > 1, tmp);
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
      _mm512_mask_storeu_ps(scores + h * ld + j0, tail_mask16(nn), _mm512_mul_ps(transpose_sum16(acc), _mm512_set1_ps(scale)));
    }
  }
}

template <Kv kT>
void attn_values(const float* p, int64_t ld, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n,
                 float* out) {
  alignas(64) float tmp[16 * kMaxHeadDim];
  constexpr int64_t kElem = kT == Kv::kF32 ? 4 : 2;
  const int64_t nc = (hd + 15) / 16;  // 16-lane chunks of a row (<= 16)
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nn = n - j0 < 16 ? n - j0 : 16;
    const Rows<kT> r = block_rows<kT>(static_cast<const uint8_t*>(rows) + j0 * stride * kElem, stride, nn, hd, group > 1, tmp);
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
    {attn_scores<Kv::kF32>, attn_scores<Kv::kF16>, attn_scores<Kv::kBF16>},
    {attn_values<Kv::kF32>, attn_values<Kv::kF16>, attn_values<Kv::kBF16>},
    sum_squares,
    exp_sum,
    read_sum,
};

}  // namespace specd::kernels::cpu
