// The AVX-512 K-quant GEMV (private to isa_avx512_level.hpp, compiled once per level): Q4_K,
// Q5_K and Q6_K weights against Q8_K activations (isa_kernels.hpp).
//
// A weight super-block (256 elements) is unpacked once for every activation row of the tile:
// its quants as four 64-byte vectors of unsigned levels in the activations' order, and its
// sub-block scales as 16-bit lane vectors. Per activation row, vpmaddubsw multiplies levels by
// int8 activations into 16-bit pair sums (Q6_K's levels <= 63: at most 63·127·2 < 2¹⁵) and
// vpmaddwd weights each pair sum by its sub-block scale into 32-bit lanes, so the super-block
// is summed in integers and scaled once by d·d_x. The mins (Q4_K, Q5_K) and Q6_K's offset of
// 32 go through the activations' 16-element sums the same way. Per (row, feature) the
// instructions do not depend on the tile, so results are batch-invariant.
#pragma once

#include <type_traits>

#include "isa_avx512_common.hpp"

namespace specd::kernels::cpu {
namespace {

// 64 bytes: the low 32 from `lo`, the high 32 from `hi`.
inline __m512i join256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline float hsum4(__m128 v) {
  const __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Σ over 32-bit lanes of the integer dot, weighted by 16-bit scales: vpmaddwd(vpmaddubsw(u, s), sc).
inline __m512i scaled_dot(__m512i acc, __m512i u, __m512i s, __m512i sc) {
  return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), sc));
}

// An unpacked super-block. q[p]: levels of elements 64p .. 64p + 63; sc[p]: the 16-bit scale of
// each pair of them (32 lanes); m: per 16-element sum of the activations, the factor it takes
// (16 lanes: Q4_K/Q5_K the mins, Q6_K -32·scale); d, dm: the block's d and dmin (0 for Q6_K).
struct KBlock {
  __m512i q[4];
  __m512i sc[4];
  __m256i m;
  float d, dm;
};

// 16-bit lane indices for vpermw: lane l of q[p]'s scale vector takes sub-block 2p + (l >= 16)
// (Q4_K / Q5_K) or, for Q6_K, sub-block 4q + l / 8 of the 16; mins_idx repeats each of 8 twice.
struct KScaleIdx {
  alignas(64) uint16_t k45[4][32];
  alignas(64) uint16_t q6[4][32];
  alignas(32) uint16_t mins[16];
};
constexpr KScaleIdx make_k_scale_idx() {
  KScaleIdx t{};
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      t.k45[p][l] = static_cast<uint16_t>(2 * p + l / 16);
      t.q6[p][l] = static_cast<uint16_t>(4 * p + l / 8);
    }
  for (int l = 0; l < 16; ++l) t.mins[l] = static_cast<uint16_t>(l / 2);
  return t;
}
constexpr KScaleIdx kKScaleIdx = make_k_scale_idx();

// The 8 six-bit scales and mins of a Q4_K / Q5_K block (dtype.hpp's k_scale_min) as bytes, with
// 32-bit word arithmetic on the three words of scales[12].
inline void k45_scales(const uint8_t* scales, uint64_t* sc, uint64_t* mn) {
  uint32_t w[3];
  __builtin_memcpy(w, scales, 12);
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, top2 = 0x30303030u;
  const uint32_t sc_hi = (w[2] & low4) | ((w[0] >> 2) & top2);
  const uint32_t mn_hi = ((w[2] >> 4) & low4) | ((w[1] >> 2) & top2);
  *sc = static_cast<uint64_t>(w[0] & low6) | static_cast<uint64_t>(sc_hi) << 32;
  *mn = static_cast<uint64_t>(w[1] & low6) | static_cast<uint64_t>(mn_hi) << 32;
}

// Q4_K / Q5_K: 8 sub-blocks of 32; sub-blocks 2p and 2p + 1 share qs[32p .. 32p + 32).
template <DType kW>
inline KBlock unpack_k45(const uint8_t* blk) {
  using Block = std::conditional_t<kW == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
  const auto& b = *reinterpret_cast<const Block*>(blk);
  KBlock k;
  uint64_t sc64 = 0, mn64 = 0;
  k45_scales(b.scales, &sc64, &mn64);
  const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc64))));
  const __m256i mn16 = _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn64))));
  const __m256i low4 = _mm256_set1_epi8(15);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kW == DType::kQ5_K) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if constexpr (kW == DType::kQ5_K) {  // bit 2p (resp. 2p + 1) of qh[l] is the 5th bit
      const __m256i one = _mm256_set1_epi8(1);
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one), 4));
    }
    k.q[p] = join256(lo, hi);
    k.sc[p] = _mm512_permutexvar_epi16(_mm512_load_si512(kKScaleIdx.k45[p]), sc16);
  }
  k.m = _mm256_permutexvar_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(kKScaleIdx.mins)), mn16);
  k.d = half_to_f32(b.d);
  k.dm = half_to_f32(b.dmin);
  return k;
}

// Q6_K: per half h of 128 elements, ql[64h ..] and qh[32h ..] give elements [0, 32) and
// [32, 64) from the low nibbles of ql[0..32) and ql[32..64), [64, 96) and [96, 128) from their
// high nibbles; qh supplies bits 4-5 (shifts 0, 2, 4, 6). Sub-blocks of 16: 8-lane scale runs.
inline KBlock unpack_q6_k(const uint8_t* blk) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(blk);
  KBlock k;
  const __m512i low4 = _mm512_set1_epi8(15), two = _mm512_set1_epi8(3);
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m512i sc512 = _mm512_castsi256_si512(sc16);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m512i hb01 = join256(qh, _mm256_srli_epi16(qh, 2));                        // bits for [0,32), [32,64)
    const __m512i hb23 = join256(_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 6));  // [64,96), [96,128)
    k.q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_slli_epi16(_mm512_and_si512(hb01, two), 4));
    k.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                     _mm512_slli_epi16(_mm512_and_si512(hb23, two), 4));
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) k.sc[p] = _mm512_permutexvar_epi16(_mm512_load_si512(kKScaleIdx.q6[p]), sc512);
  k.m = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));  // -32·scale
  k.d = half_to_f32(b.d);
  k.dm = 0.0f;
  return k;
}

// One super-block of one activation row into acc (16 lanes, F32): d·d_x·Σ scaled dots, minus
// dmin·d_x·Σ m·bsums (Q6_K: plus d·d_x·Σ (-32·scale)·bsums, with dm = 0 and m folded in).
template <DType kW>
inline void k_mac(const KBlock& k, const int8_t* q8, const int16_t* bsums, float dx, __m512& acc, __m256& macc) {
  __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) isum = scaled_dot(isum, k.q[p], _mm512_loadu_si512(q8 + 64 * p), k.sc[p]);
  const __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)), k.m);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(k.d * dx), acc);
  if constexpr (kW == DType::kQ6_K) {
    macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(k.d * dx), macc);
  } else {
    macc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(k.dm * dx), macc);
  }
}

template <DType kW>
struct TileK {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      __m512 acc[MB];
      __m256 macc[MB];
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        acc[rr] = _mm512_setzero_ps();
        macc[rr] = _mm256_setzero_ps();
      }
      ActQ8K x[MB];
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) x[rr] = act_q8k(a.act + static_cast<size_t>(r0 + rr) * a.act_stride, a.k);
      const uint8_t* row = a.w + static_cast<size_t>(j) * a.w_stride;
      const int64_t ns = a.k / 256;
      constexpr size_t kBytes = row_bytes(kW, 256);
      for (int64_t s = 0; s < ns; ++s) {
        const KBlock k = kW == DType::kQ6_K ? unpack_q6_k(row + s * kBytes) : unpack_k45<kW>(row + s * kBytes);
#pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr)
          k_mac<kW>(k, x[rr].q + s * 256, x[rr].bsums + s * 16, x[rr].d[s], acc[rr], macc[rr]);
      }
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        const __m256 m = macc[rr];
        const __m128 m4 = _mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        a.c[(r0 + rr) * a.ldc + j] = _mm512_reduce_add_ps(acc[rr]) + hsum4(m4);
      }
    }
  };
};

template <DType kW>
void gemv_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk<TileK<kW>::template T, 8>(a, j0, j1);
}

}  // namespace
}  // namespace specd::kernels::cpu
