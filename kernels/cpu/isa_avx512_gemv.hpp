// The AVX-512 GEMV kernels (private to isa_avx512_level.hpp, compiled once per level).
//
// Every (activation row, feature) pair runs the same instruction sequence whatever the tile and
// the batch, so results do not depend on the batch:
//  - f32 / f16 / bf16 weights: one tile template (Tile) over a Kind; bf16 rounds activations
//    to bf16 and, with BF16, uses vdpbf16ps (32 products per instruction), else widens both to
//    F32 (exact) and uses FMA;
//  - q8_0 / q4_0 weights: four blocks per step, vpdpbusd with VNNI, else vpmaddubsw + vpmaddwd
//    (see the quantized section).
#pragma once

#include "isa_avx512_common.hpp"

namespace specd::kernels::cpu {
namespace {

// One activation row: weight rows are streamed one at a time, front to back; a single
// sequential stream per thread is what the hardware prefetchers serve fastest (several rows
// interleaved ran at half the speed; software prefetch added nothing). Several rows: each weight
// row is prefetched ahead (prefetch_weight_row) and f32/f16/bf16 take weight rows in pairs
// (walk_pairs). docs/performance.md has the measurements.

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
// Row groups are the outer loop: one group's activation rows stay in L1/L2 while the task's
// features pass by, and the features' weight rows, read from memory by the first group, come
// from L2 for the others. (Features outside re-read every row of a 64-row prefill chunk per
// feature: 512 KiB of F32 rows at k = 2048, more than L2 holds at k = 5632.) The first group
// prefetches each weight row ahead (prefetch_weight_row).
template <template <int> class T, int kMb>
void walk(const GemvArgs& a, int64_t j0, int64_t j1) {
  const int64_t full = a.m / kMb * kMb;
  for (int64_t r = 0; r < full; r += kMb)
    for (int64_t j = j0; j < j1; ++j) {
      if (r == 0) prefetch_weight_row(a, j);
      T<kMb>::run(a, j, r);
    }
  if (full < a.m)
    for (int64_t j = j0; j < j1; ++j) {
      if (full == 0 && a.m > 1) prefetch_weight_row(a, j);
      run_rows<T, kMb - 1>(a, j, full, a.m - full);
    }
}

// With several activation rows: features in pairs (T2<MB> computes features j and j + 1, so
// each activation vector loaded serves two weight rows; up to 6 rows in one group, else groups
// of 4), an odd last feature through T1. T2 runs T1's instruction sequence for every
// (row, feature) pair, so the pairing changes no result. The loop is load-bound: two weight
// rows per activation load took 25-30% off 5- and 8-row tiles on cached weights. Row groups
// outside, as in walk: groups of 4 rows, or 6 from 12 rows on.
template <template <int> class T2, int kMb>
void walk_pair_groups(const GemvArgs& a, int64_t j0, int64_t jp) {
  const int64_t full = a.m > 6 ? a.m / kMb * kMb : 0;  // groups of kMb rows, then the last few
  for (int64_t r = 0; r < full; r += kMb)
    for (int64_t j = j0; j < jp; j += 2) {
      if (r == 0) {
        prefetch_weight_row(a, j);
        prefetch_weight_row(a, j + 1);
      }
      T2<kMb>::run(a, j, r);
    }
  for (int64_t j = j0; j < jp; j += 2) {
    if (full == 0) {
      prefetch_weight_row(a, j);
      prefetch_weight_row(a, j + 1);
    }
    run_rows<T2, 6>(a, j, full, a.m - full);
  }
}

template <template <int> class T2, template <int> class T1>
void walk_pairs(const GemvArgs& a, int64_t j0, int64_t j1) {
  const int64_t jp = j0 + (j1 - j0) / 2 * 2;  // features [j0, jp) in pairs
  if (a.m >= 12) {                            // prefill chunks: 6-row groups convert each weight vector for more rows
    walk_pair_groups<T2, 6>(a, j0, jp);
  } else {
    walk_pair_groups<T2, 4>(a, j0, jp);
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
      V w0[J], w1[J];
#pragma GCC unroll 4
      for (int jj = 0; jj < J; ++jj) {
        w0[jj] = K::template w<kMasked>(w[jj], i, m0);
        w1[jj] = K::template w<kMasked>(w[jj], i + L, m1);
      }
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        const V x0 = K::template x<kMasked>(x[rr], i, m0), x1 = K::template x<kMasked>(x[rr], i + L, m1);
#pragma GCC unroll 4
        for (int jj = 0; jj < J; ++jj) {
          acc[jj][rr][0] = K::mac(acc[jj][rr][0], w0[jj], x0);
          acc[jj][rr][1] = K::mac(acc[jj][rr][1], w1[jj], x1);
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

// One row: one weight row per tile (a single stream). Several rows: weight rows in pairs.
template <class K>
void gemv_tiles(const GemvArgs& a, int64_t j0, int64_t j1) {
  if (a.m == 1) {
    walk<Tile<K, 1>::template T, 8>(a, j0, j1);
  } else {
    walk_pairs<Tile<K, 2>::template T, Tile<K, 1>::template T>(a, j0, j1);
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

// ---- quantized weights (Q8 activations) -------------------------------------------------------
// Four blocks ("a quad") per step. The quad's bytes are loaded as 64-byte windows and one
// two-register permute gathers the quants and the fp16 scales into lane order: vpermt2b with
// VBMI, else vpermt2w (every field starts at an even offset, so whole words move).
//   q4_0: quants -> lo = [A0-15 B0-15 C0-15 D0-15], hi = [A16-31 .. D16-31] as nibble - 8
//         (signed), lane l of both belongs to block l / 4; the activation row stores x + 128
//         (unsigned) in the same order and the lane scales [dA x4, dB x4, dC x4, dD x4]; the
//         start -128·Σw of each lane is computed from the weights once and shared by every row
//         (the activations carry no sums: 52 bytes per block of 32 instead of 100, so five
//         scoring rows of k = 2048 fit in L1 beside the weights).
//   q8_0: quants -> w0 = [A B], w1 = [C D] (signed, natural order); the activation row stores
//         lane scales [dA x8, dB x8], [dC x8, dD x8] and, with VNNI, x + 128 (unsigned: the
//         start -128 * sum(w) is computed from the weights and shared by every row); without
//         VNNI x itself (signed), multiplied as |w| x (x with w's sign) to stay within
//         vpmaddubsw's 16-bit sums.

// Index vectors of the permutes: byte indices (vpermt2b), or, without VBMI, the same moves as
// word indices (vpermt2w; bytes 2i, 2i + 1 of the result come from word idx[2i] / 2).
struct QuadIdx {
  alignas(64) uint8_t q4[64];        // nibble bytes of 4 Q4_0 blocks (window bytes 0..71)
  alignas(64) uint8_t q4_scale[64];  // the 4 fp16 scales of the blocks (low 8 bytes used)
  alignas(64) uint8_t q8_lo[64];     // quants of blocks A, B (window bytes 0..127)
  alignas(64) uint8_t q8_hi[64];     // quants of blocks C, D (window bytes 64..191, minus 64)
  alignas(64) uint8_t q8_scale[64];  // the 4 fp16 scales of the blocks (low 8 bytes used)
};

constexpr QuadIdx make_quad_idx(bool words) {
  QuadIdx t{};
  auto set = [&](uint8_t* table, int i, int byte) {
    if (!words) {
      table[i] = static_cast<uint8_t>(byte);
    } else {  // little-endian 16-bit indices (< 64): low byte, then 0
      table[i] = i % 2 == 0 ? static_cast<uint8_t>(byte / 2) : 0;
    }
  };
  for (int i = 0; i < 64; ++i) {
    set(t.q4, i, (i / 16) * 18 + 2 + i % 16);
    set(t.q4_scale, i, i < 8 ? (i / 2) * 18 + i % 2 : 0);
    set(t.q8_lo, i, (i / 32) * 34 + 2 + i % 32);
    set(t.q8_hi, i, (2 + i / 32) * 34 + 2 + i % 32 - 64);
    set(t.q8_scale, i, i < 8 ? (i / 2) * 34 + i % 2 : 0);
  }
  return t;
}
#ifdef __AVX512VBMI__
constexpr QuadIdx kQuadIdx = make_quad_idx(false);
#else
constexpr QuadIdx kQuadIdx = make_quad_idx(true);
#endif

inline __mmask64 byte_mask(int64_t n) {
  return n >= 64 ? ~__mmask64{0} : (n <= 0 ? __mmask64{0} : (__mmask64{1} << n) - 1);
}
inline __m512i idx(const uint8_t* t) {
  return _mm512_load_si512(t);
}
// The bytes `index` names from the 128-byte window [l0 l1] (a QuadIdx table).
inline __m512i gather_bytes(__m512i l0, const uint8_t* index, __m512i l1) {
#ifdef __AVX512VBMI__
  return _mm512_permutex2var_epi8(l0, idx(index), l1);
#else
  return _mm512_permutex2var_epi16(l0, idx(index), l1);
#endif
}

// The quad's 4 block scales as F32 (gathered from the windows, widened in a 128-bit register:
// cheaper than widening 16 replicated halves in a 512-bit one).
inline __m128 block_scales(__m512i l0, __m512i l1, const uint8_t* index) {
  return _mm_cvtph_ps(_mm512_castsi512_si128(gather_bytes(l0, index, l1)));
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
#ifdef __AVX512VNNI__
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
#else
  const __m512i bias = _mm512_setzero_si512();
#endif
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
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t qd = 0; qd < nbp / 4; ++qd) {
    __m128i h[4][2];
    quantize_quad(x, k / 32, qd, d, h);
    _mm512_storeu_si512(q + qd * 128, _mm512_add_epi8(join4(h[0][0], h[1][0], h[2][0], h[3][0]), bias));
    _mm512_storeu_si512(q + qd * 128 + 64, _mm512_add_epi8(join4(h[0][1], h[1][1], h[2][1], h[3][1]), bias));
    _mm512_storeu_ps(aux + qd * 16, lanes4(d + 4 * qd));
  }
}

// A quad of one weight row, unpacked once for every activation row that uses it (QuantOps).
// q4_0: the nibbles lo, hi and the lane scales dw. q8_0: the quants w0 = [A B], w1 = [C D], the
// lane scales dw0, dw1 and, with VNNI, the starts -128·Σw (s0, s1); without it |w| (in w0, w1)
// and the masks of the negative quants.
template <DType kW>
struct QuantOps;

template <>
struct QuantOps<DType::kQ4_0> {
  static constexpr int64_t kBlock = 18;
  static constexpr int64_t kAuxPerQuad = 16;  // floats of the activation row's aux per quad
  struct W {
    __m512i lo, hi, s;  // levels - 8 (signed), and the start -128·Σw of each lane
    __m512 dw;
  };
  static W unpack(__m512i l0, __m512i l1, __m512i) {
    const __m512i v = gather_bytes(l0, kQuadIdx.q4, l1);
    const __m512i m = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
    W w;
    w.lo = _mm512_sub_epi8(_mm512_and_si512(v, m), eight);
    w.hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m), eight);
    const __m512i b80 = _mm512_set1_epi8(static_cast<char>(0x80));
    w.s = _mm512_sub_epi32(_mm512_setzero_si512(), dot_u8s8(dot_u8s8(_mm512_setzero_si512(), b80, w.lo), b80, w.hi));
    w.dw = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                                 _mm512_castps128_ps512(block_scales(l0, l1, kQuadIdx.q4_scale)));
    return w;
  }
  // Quad qd of one activation row (x + 128, unsigned) into accumulator C (C = qd % 2).
  template <int C>
  static void mac(const W& w, const uint8_t* xq, const float* xa, __m512 (&acc)[2]) {
    __m512i dot = dot_u8s8(w.s, _mm512_loadu_si512(xq), w.lo);
    dot = dot_u8s8(dot, _mm512_loadu_si512(xq + 64), w.hi);
    acc[C] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(_mm512_loadu_ps(xa), w.dw), acc[C]);
  }
};

template <>
struct QuantOps<DType::kQ8_0> {
  static constexpr int64_t kBlock = 34;
  static constexpr int64_t kAuxPerQuad = 32;
  struct W {
    __m512i w0, w1;
    __m512 dw0, dw1;
#ifdef __AVX512VNNI__
    __m512i s0, s1;
#else
    __mmask64 n0, n1;
#endif
  };
  static W unpack(__m512i l0, __m512i l1, __m512i l2) {
    W w;
    w.w0 = gather_bytes(l0, kQuadIdx.q8_lo, l1);
    w.w1 = gather_bytes(l1, kQuadIdx.q8_hi, l2);
    const __m512 sc = _mm512_castps128_ps512(block_scales(l0, l1, kQuadIdx.q8_scale));
    w.dw0 = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), sc);
    w.dw1 = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2), sc);
#ifdef __AVX512VNNI__
    const __m512i b80 = _mm512_set1_epi8(static_cast<char>(0x80));
    w.s0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), b80, w.w0));
    w.s1 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), b80, w.w1));
#else
    w.n0 = _mm512_movepi8_mask(w.w0);
    w.n1 = _mm512_movepi8_mask(w.w1);
    w.w0 = _mm512_abs_epi8(w.w0);  // -128 -> 128 as u8
    w.w1 = _mm512_abs_epi8(w.w1);
#endif
    return w;
  }
  // Quad qd of one activation row: blocks A, B into accumulator 0, C, D into 1.
  template <int>
  static void mac(const W& w, const uint8_t* xq, const float* xa, __m512 (&acc)[2]) {
#ifdef __AVX512VNNI__
    const __m512i d0 = _mm512_dpbusd_epi32(w.s0, _mm512_loadu_si512(xq), w.w0);
    const __m512i d1 = _mm512_dpbusd_epi32(w.s1, _mm512_loadu_si512(xq + 64), w.w1);
#else
    const __m512i x0 = _mm512_loadu_si512(xq), x1 = _mm512_loadu_si512(xq + 64);
    const __m512i z = _mm512_setzero_si512();
    const __m512i d0 = dot_u8s8(z, w.w0, _mm512_mask_sub_epi8(x0, w.n0, z, x0));
    const __m512i d1 = dot_u8s8(z, w.w1, _mm512_mask_sub_epi8(x1, w.n1, z, x1));
#endif
    acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), _mm512_mul_ps(_mm512_loadu_ps(xa), w.dw0), acc[0]);
    acc[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), _mm512_mul_ps(_mm512_loadu_ps(xa + 16), w.dw1), acc[1]);
  }
};

// One weight row (feature j) x MB activation rows: each quad is unpacked once for all MB rows.
template <DType kW>
struct TileQuant {
  template <int MB>
  struct T {
    using Ops = QuantOps<kW>;
    // Quad qd of the weight row into accumulator C of every activation row. C is a template
    // argument so that the accumulators stay in registers.
    template <int C, bool kTail>
    static void quad(const uint8_t* row, int64_t nb, int64_t qd, const ActQ8* x, __m512 (*acc)[2]) {
      constexpr int64_t kBlock = Ops::kBlock;
      // Full quads read whole windows (the last window may run into the next row or past the
      // end: the tail quad masks its loads to the bytes it owns).
      const int64_t bytes = kTail ? (nb - 4 * qd) * kBlock : 4 * kBlock;
      const uint8_t* base = row + qd * 4 * kBlock;
      const __m512i l0 = kTail ? _mm512_maskz_loadu_epi8(byte_mask(bytes), base) : _mm512_loadu_si512(base);
      const __m512i l1 = _mm512_maskz_loadu_epi8(byte_mask(bytes - 64), base + 64);
      const __m512i l2 =
          kW == DType::kQ8_0 ? _mm512_maskz_loadu_epi8(byte_mask(bytes - 128), base + 128) : _mm512_setzero_si512();
      const typename Ops::W wq = Ops::unpack(l0, l1, l2);
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr)
        Ops::template mac<C>(wq, x[rr].q + qd * 128, x[rr].aux + qd * Ops::kAuxPerQuad, acc[rr]);
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

// One weight row at a time, for up to 8 activation rows. Pairing weight rows (as the float tiles
// do) measured no faster for q4_0 and 10-30% slower for q8_0 at 5 rows on Zen 4: the quantized
// loop is bound by its per-row integer and float work, not by the activation loads, and two
// unpacked quads with their accumulators spill registers.
template <DType kW>
void gemv_quant(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk<TileQuant<kW>::template T, 8>(a, j0, j1);
}

}  // namespace
}  // namespace specd::kernels::cpu
