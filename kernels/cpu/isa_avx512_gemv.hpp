// The AVX-512 GEMV kernels (private to isa_avx512_level.hpp, compiled once per level).
//
// Every (activation row, feature) pair runs the same instruction sequence whatever the tile and
// the batch, so results do not depend on the batch:
//  - f32 / f16 / bf16 weights: one tile template (Tile) over a Kind; bf16 rounds activations
//    to bf16 and, with BF16, uses vdpbf16ps (32 products per instruction), else widens both to
//    F32 (exact) and uses FMA;
//  - q8_0 / q4_0 weights: isa_avx512_qgroup.hpp (groups of 16 blocks).
#pragma once

#include "isa_avx512_common.hpp"

namespace specd::kernels::cpu {
namespace {

// One activation row: weight rows are streamed one at a time, front to back; a single
// sequential stream per thread is what the hardware prefetchers serve fastest (several rows
// interleaved ran at half the speed; software prefetch added nothing). Several rows: each weight
// row is prefetched ahead (prefetch_weight_row) and f32/f16/bf16 take weight rows in pairs
// (walk_pairs). docs/performance.md has the measurements.

// Calls T<MB>::run(a, j, r0) for every feature j in [j0, j1) and groups of up to kMb rows. The
// group size changes only which rows share a weight load, never the arithmetic of a row.
// Row groups are the outer loop: one group's activation rows stay in L1/L2 while the task's
// features pass by, and the features' weight rows, read from memory by the first group, come
// from L2 for the others. (Features outside re-read every row of a 64-row prefill chunk per
// feature: 512 KiB of F32 rows at k = 2048, more than L2 holds at k = 5632.) The first group
// prefetches each weight row ahead (prefetch_weight_row).
template <template <int> class T, int kMb>
void walk(const GemvArgs& a, int64_t j0, int64_t j1) {
  const int64_t full = a.m / kMb * kMb;
  NextTaskPrefetch next(a, j0, j1, (row_passes(a.m, kMb) - 1) * (j1 - j0));
  for (int64_t r = 0; r < full; r += kMb)
    for (int64_t j = j0; j < j1; ++j) {
      if (r == 0) prefetch_weight_row(a, j);
      if (r > 0) next.step();
      T<kMb>::run(a, j, r);
    }
  if (full < a.m)
    for (int64_t j = j0; j < j1; ++j) {
      if (full == 0 && a.m > 1) prefetch_weight_row(a, j);
      if (full > 0) next.step();
      run_rows<T, kMb - 1>(a, j, full, a.m - full);
    }
}

// Scoring rows and small batches (2-11 rows): features in pairs (T2<MB> computes features j
// and j + 1, so each activation vector loaded serves two weight rows), groups of 4 rows from 7
// rows on, else all rows in one group; an odd last feature through T1. T2 runs T1's instruction
// sequence for every (row, feature) pair, so the pairing changes no result. The loop is
// load-bound: two weight rows per activation load took 25-30% off 5- and 8-row tiles on cached
// weights. (Four weight rows per tile, as prefill takes them, were 10-25% slower here with the
// weights coming from memory: four streams per thread instead of two.)
template <template <int> class T2, template <int> class T1>
void walk_pairs(const GemvArgs& a, int64_t j0, int64_t j1) {
  constexpr int kMb = 4;
  const int64_t jp = j0 + (j1 - j0) / 2 * 2;           // features [j0, jp) in pairs
  const int64_t full = a.m > 6 ? a.m / kMb * kMb : 0;  // groups of kMb rows, then the last few
  const int64_t passes = full / kMb + (full < a.m ? 1 : 0);
  NextTaskPrefetch next(a, j0, j1, (passes - 1) * ((jp - j0) / 2));
  for (int64_t r = 0; r < full; r += kMb)
    for (int64_t j = j0; j < jp; j += 2) {
      if (r == 0) {
        prefetch_weight_row(a, j);
        prefetch_weight_row(a, j + 1);
      } else {
        next.step();
      }
      T2<kMb>::run(a, j, r);
    }
  for (int64_t j = j0; j < jp; j += 2) {
    if (full == 0) {
      prefetch_weight_row(a, j);
      prefetch_weight_row(a, j + 1);
    } else {
      next.step();
    }
    run_rows<T2, 6>(a, j, full, a.m - full);
  }
  if (jp < j1) walk<T1, 8>(a, jp, j1);
}

// Two accumulators per row: chunk c of a row goes to accumulator c % 2, the same order for
// every row-group size.
inline float sum2(__m512 a0, __m512 a1) {
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// ---- f32 / f16 / bf16 weights ----------------------------------------------------------------
// One tile for the three: J weight rows (features j .. j + J - 1) x MB activation rows, each
// (row, feature) pair with two accumulators. A Kind says how a chunk of kLanes elements is
// loaded and multiplied into an accumulator:
//  - f32 / f16 weights, F32 activations: 16 lanes, FMA (f16 widened in registers);
//  - bf16 weights, activations rounded to bf16: 32 lanes, vdpbf16ps (32 products).

template <Wt kT>
struct FloatKind {
  static constexpr int64_t kLanes = 16;
  using Mask = __mmask16;
  using V = __m512;
  static Mask mask(int64_t n) { return n >= 16 ? static_cast<Mask>(0xffff) : tail_mask16(n); }
  template <bool kMasked>
  static V w(const uint8_t* row, int64_t i, Mask m) {
    return load_w16<kT>(row, i, kMasked ? m : static_cast<Mask>(0xffff));
  }
  template <bool kMasked>
  static V x(const uint8_t* row, int64_t i, Mask m) {
    const float* p = reinterpret_cast<const float*>(row) + i;
    return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
  }
  static __m512 mac(__m512 acc, V w, V x) { return _mm512_fmadd_ps(w, x, acc); }
};

#ifdef __AVX512BF16__
struct Bf16Kind {
  static constexpr int64_t kLanes = 32;
  using Mask = __mmask32;
  using V = __m512i;
  static Mask mask(int64_t n) { return tail_mask32(n); }
  template <bool kMasked>
  static V w(const uint8_t* row, int64_t i, Mask m) {
    return kMasked ? _mm512_maskz_loadu_epi16(m, row + 2 * i) : _mm512_loadu_si512(row + 2 * i);
  }
  template <bool kMasked>
  static V x(const uint8_t* row, int64_t i, Mask m) {
    return w<kMasked>(row, i, m);
  }
  static __m512 mac(__m512 acc, V w, V x) { return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w); }
};
#else
// bf16 weights widened to F32 (a shift), activations already bf16-rounded F32
// (scalar::prep_bf16_as_f32): each product is exact, as with vdpbf16ps; the sums are F32 FMAs.
struct Bf16Kind {
  static constexpr int64_t kLanes = 16;
  using Mask = __mmask16;
  using V = __m512;
  static Mask mask(int64_t n) { return n >= 16 ? static_cast<Mask>(0xffff) : tail_mask16(n); }
  template <bool kMasked>
  static V w(const uint8_t* row, int64_t i, Mask m) {
    const auto* p = reinterpret_cast<const uint16_t*>(row) + i;
    const __m256i h =
        kMasked ? _mm256_maskz_loadu_epi16(m, p) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  template <bool kMasked>
  static V x(const uint8_t* row, int64_t i, Mask m) {
    const float* p = reinterpret_cast<const float*>(row) + i;
    return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
  }
  static __m512 mac(__m512 acc, V w, V x) { return _mm512_fmadd_ps(w, x, acc); }
};
#endif

template <class K, int J>
struct Tile {
  template <int MB>
  struct T {
    using Mask = typename K::Mask;
    using V = typename K::V;

    // Chunks [i, i + L) and [i + L, i + 2L) of every pair into its accumulators 0 and 1.
    template <bool kMasked>
    static void chunk(const uint8_t* const* w, const uint8_t* const* x, int64_t i, Mask m0, Mask m1,
                      __m512 (*acc)[MB][2]) {
      constexpr int64_t L = K::kLanes;
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {  // chunk i + h L into accumulator h
        V wh[J];
#pragma GCC unroll 4
        for (int jj = 0; jj < J; ++jj) wh[jj] = K::template w<kMasked>(w[jj], i + h * L, h ? m1 : m0);
#pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) {
          const V xh = K::template x<kMasked>(x[rr], i + h * L, h ? m1 : m0);
#pragma GCC unroll 4
          for (int jj = 0; jj < J; ++jj) acc[jj][rr][h] = K::mac(acc[jj][rr][h], wh[jj], xh);
        }
      }
    }

    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      constexpr int64_t L = K::kLanes;
      __m512 acc[J][MB][2];
#pragma GCC unroll 4
      for (int jj = 0; jj < J; ++jj)
#pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) acc[jj][rr][0] = acc[jj][rr][1] = _mm512_setzero_ps();
      const uint8_t* w[J];
#pragma GCC unroll 4
      for (int jj = 0; jj < J; ++jj) w[jj] = a.w + static_cast<size_t>(j + jj) * a.w_stride;
      const uint8_t* x[MB];
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) x[rr] = a.act + static_cast<size_t>(r0 + rr) * a.act_stride;
      const int64_t full = a.k / (2 * L) * (2 * L);
      for (int64_t i = 0; i < full; i += 2 * L) chunk<false>(w, x, i, 0, 0, acc);
      if (full < a.k) {  // up to two partial chunks: into accumulators 0 and 1
        const int64_t rest = a.k - full;
        chunk<true>(w, x, full, K::mask(rest), rest > L ? K::mask(rest - L) : 0, acc);
      }
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr)
#pragma GCC unroll 4
        for (int jj = 0; jj < J; ++jj) a.c[(r0 + rr) * a.ldc + j + jj] = sum2(acc[jj][rr][0], acc[jj][rr][1]);
    }
  };
};

// One row: one weight row per tile (a single stream). Scoring rows: weight rows in pairs.
// Prefill chunks (12 rows and more; walk_wide in isa_kernels.hpp): four weight rows x three
// activation rows per tile, 24 accumulators: 4 + 3 vector loads per 12 products, where 6-row
// pairs took 2 + 6 and read the activations from L2 (six F32 rows of 2048 do not fit L1).
// tinyllama prefill-128 went 58 -> 85 tok/s in f16 and 105 -> 145 in bf16 (docs/performance.md).
template <class K>
void gemv_tiles(const GemvArgs& a, int64_t j0, int64_t j1) {
  using T1 = Tile<K, 1>;
  using T2 = Tile<K, 2>;
  if (a.m == 1) {
    walk<T1::template T, 8>(a, j0, j1);
  } else if (a.m < 12) {
    walk_pairs<T2::template T, T1::template T>(a, j0, j1);
  } else {
    walk_wide<Tile<K, 4>::template T, 4, 3, T2::template T, T1::template T>(a, j0, j1);
  }
}

#ifdef __AVX512BF16__
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
#else
// Without BF16 the bf16 GEMV takes F32 activations rounded to bf16 (Bf16Kind above).
constexpr PrepFn prep_bf16 = scalar::prep_bf16_as_f32;
#endif

}  // namespace
}  // namespace specd::kernels::cpu
