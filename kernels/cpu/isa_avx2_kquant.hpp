// The AVX2 K-quant GEMV (private to isa_avx2.cpp, included after its helpers hsum, hmax and
// half_to_f32): Q4_K, Q5_K, Q6_K, Q3_K and Q2_K weights against Q8_K activations, as the AVX-512 level
// does it (isa_avx512_kquant.hpp) with 32-element vectors. A weight super-block is unpacked
// once for every activation row of the tile: eight vectors of unsigned levels in the
// activations' order and a 16-bit scale vector per vector; vpmaddubsw (levels <= 63, |x| <= 127:
// no saturation) then vpmaddwd by the scales sum the block in integers, scaled once by d·d_x.
// The mins (Q4_K, Q5_K) and Q6_K's offset of 32 go through the activations' 16-element sums.
#pragma once

#include <type_traits>

namespace specd::kernels::cpu {
namespace {

// vpshufb controls: byte pairs selecting 16-bit word w of each 128-bit lane, 8 times.
struct KShuffles {
  alignas(32) uint8_t word[8][32];    // lane 0 and lane 1: word w
  alignas(32) uint8_t pairs[32];      // lane 0: words 0,0,1,1,2,2,3,3; lane 1: 4,4,5,5,6,6,7,7
  alignas(32) uint8_t halves[4][32];  // lane 0: word 2v (x8); lane 1: word 2v + 1 (x8)
};
constexpr KShuffles make_k_shuffles() {
  KShuffles t{};
  for (int w = 0; w < 8; ++w)
    for (int i = 0; i < 32; ++i) t.word[w][i] = static_cast<uint8_t>(2 * w + i % 2);
  for (int i = 0; i < 32; ++i) t.pairs[i] = static_cast<uint8_t>(2 * ((i % 16) / 4 + (i >= 16 ? 4 : 0)) + i % 2);
  for (int v = 0; v < 4; ++v)
    for (int i = 0; i < 32; ++i) t.halves[v][i] = static_cast<uint8_t>(2 * (2 * v + (i >= 16 ? 1 : 0)) + i % 2);
  return t;
}
constexpr KShuffles kKShuffles = make_k_shuffles();

inline __m256i shuffle(__m256i v, const uint8_t* control) {
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(control)));
}

struct KBlock2 {
  __m256i q[8];   // levels of elements 32v .. 32v + 31
  __m256i sc[8];  // the 16-bit scale of each pair of them
  __m256i m;      // per 16-element activation sum: its factor (mins, or Q6_K's -32·scale)
  float d, dm;
};

inline void k45_scale_bytes(const uint8_t* scales, uint64_t* sc, uint64_t* mn) {
  uint32_t w[3];
  __builtin_memcpy(w, scales, 12);
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, top2 = 0x30303030u;
  *sc = static_cast<uint64_t>(w[0] & low6) | static_cast<uint64_t>((w[2] & low4) | ((w[0] >> 2) & top2)) << 32;
  *mn = static_cast<uint64_t>(w[1] & low6) | static_cast<uint64_t>(((w[2] >> 4) & low4) | ((w[1] >> 2) & top2)) << 32;
}

template <DType kW>
inline KBlock2 unpack_k45(const uint8_t* blk) {
  using Block = std::conditional_t<kW == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
  const auto& b = *reinterpret_cast<const Block*>(blk);
  KBlock2 k;
  uint64_t sc64 = 0, mn64 = 0;
  k45_scale_bytes(b.scales, &sc64, &mn64);
  const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc64))));
  const __m256i mn16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn64))));
  const __m256i low4 = _mm256_set1_epi8(15);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kW == DType::kQ5_K) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
  for (int p = 0; p < 4; ++p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if constexpr (kW == DType::kQ5_K) {  // bit 2p (resp. 2p + 1) of qh[l] is the 5th bit
      const __m256i one = _mm256_set1_epi8(1);
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one), 4));
    }
    k.q[2 * p] = lo;
    k.q[2 * p + 1] = hi;
    k.sc[2 * p] = shuffle(sc16, kKShuffles.word[2 * p]);
    k.sc[2 * p + 1] = shuffle(sc16, kKShuffles.word[2 * p + 1]);
  }
  k.m = shuffle(mn16, kKShuffles.pairs);
  k.d = half_to_f32(b.d);
  k.dm = half_to_f32(b.dmin);
  return k;
}

// The 16-bit scale of each pair of vector v's elements from the scales of the 16 groups of 16
// (sc16: one word per group; vector v covers groups 2v and 2v + 1, one per 128-bit lane).
inline void group_scales(__m256i sc16, __m256i* sc) {
  const __m256i lo = _mm256_permute2x128_si256(sc16, sc16, 0x00);  // scales 0..7 in both lanes
  const __m256i hi = _mm256_permute2x128_si256(sc16, sc16, 0x11);  // scales 8..15
  for (int v = 0; v < 8; ++v) sc[v] = shuffle(v < 4 ? lo : hi, kKShuffles.halves[v % 4]);
}

// Q6_K / Q3_K: per group of 16 the signed scale sc16 (one word per group), levels offset by
// 2^shift (-2^shift·scale against the activations' sums), d; no mins.
inline void offset_scales(__m256i sc16, int shift, uint16_t d, KBlock2& k) {
  group_scales(sc16, k.sc);
  k.m = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_sll_epi16(sc16, _mm_cvtsi32_si128(shift)));
  k.d = half_to_f32(d);
  k.dm = 0.0f;
}

inline KBlock2 unpack_q6_k(const uint8_t* blk) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(blk);
  KBlock2 k;
  const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    auto high = [&](int shift) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), two), 4); };
    k.q[4 * h] = _mm256_or_si256(_mm256_and_si256(qa, low4), high(0));
    k.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(qb, low4), high(2));
    k.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), low4), high(4));
    k.q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), low4), high(6));
  }
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  offset_scales(sc16, 5, b.d, k);  // levels offset by 32
  return k;
}

// Bits 0-1 of Q3_K's and Q2_K's levels: elements 32v .. from qs half v / 4 at shift 2 (v mod 4).
inline void low2_levels(const uint8_t* qs, __m256i* q) {
  for (int v = 0; v < 8; ++v) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (v / 4)));
    q[v] = _mm256_and_si256(_mm256_srl_epi16(half, _mm_cvtsi32_si128(2 * (v % 4))), _mm256_set1_epi8(3));
  }
}

// Q3_K: levels q + 4 (bits 0-1 of qs at shift 2j, bit 2 from hmask; dtype.hpp), the factor
// sc - 32 per group of 16 as Q6_K's scales, the offset of 4 through the activations' sums.
inline KBlock2 unpack_q3_k(const uint8_t* blk) {
  const auto& b = *reinterpret_cast<const BlockQ3_K*>(blk);
  KBlock2 k;
  low2_levels(b.qs, k.q);
  const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
  for (int v = 0; v < 8; ++v) {  // bit 2 of elements 32v ..: bit v of hmask
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(v)), _mm256_set1_epi8(1));
    k.q[v] = _mm256_or_si256(k.q[v], _mm256_slli_epi16(hi, 2));
  }
  const __m256i sc16 = _mm256_cvtepi8_epi16(q3_k_scales(b));
  offset_scales(sc16, 2, b.d, k);  // levels offset by 4
  return k;
}

// Q2_K: levels 0..3 (Q3_K's bits 0-1), a 4-bit scale per pair as Q6_K's, the 4-bit mins per 16
// against the activations' sums, by dmin.
inline KBlock2 unpack_q2_k(const uint8_t* blk) {
  const auto& b = *reinterpret_cast<const BlockQ2_K*>(blk);
  KBlock2 k;
  low2_levels(b.qs, k.q);
  const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m256i sc16 = _mm256_and_si256(sm, _mm256_set1_epi16(15));
  group_scales(sc16, k.sc);
  k.m = _mm256_srli_epi16(sm, 4);
  k.d = half_to_f32(b.d);
  k.dm = half_to_f32(b.dmin);
  return k;
}

template <DType kW>
inline KBlock2 unpack_k(const uint8_t* blk) {
  if constexpr (kW == DType::kQ6_K) {
    return unpack_q6_k(blk);
  } else if constexpr (kW == DType::kQ3_K) {
    return unpack_q3_k(blk);
  } else if constexpr (kW == DType::kQ2_K) {
    return unpack_q2_k(blk);
  } else {
    return unpack_k45<kW>(blk);
  }
}

template <DType kW>
inline void k_mac(const KBlock2& k, const int8_t* q8, const int16_t* bsums, float dx, __m256& acc, __m256& macc) {
  __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) {
    const __m256i p16 = _mm256_maddubs_epi16(k.q[v], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32 * v)));
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, k.sc[v]));
  }
  const __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)), k.m);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(k.d * dx), acc);
  if constexpr (kW == DType::kQ6_K || kW == DType::kQ3_K) {  // the offset, against d
    macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(k.d * dx), macc);
  } else {
    macc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(k.dm * dx), macc);
  }
}

template <DType kW, int MB>
void tile_k(const GemvArgs& a, int64_t j, int64_t r0) {
  __m256 acc[MB], macc[MB];
  ActQ8K x[MB];
#pragma GCC unroll 4
  for (int rr = 0; rr < MB; ++rr) {
    acc[rr] = macc[rr] = _mm256_setzero_ps();
    x[rr] = act_q8k(a.act + static_cast<size_t>(r0 + rr) * a.act_stride, a.k);
  }
  const uint8_t* row = a.w + static_cast<size_t>(j) * a.w_stride;
  constexpr size_t kBytes = row_bytes(kW, 256);
  for (int64_t s = 0; s < a.k / 256; ++s) {
    const KBlock2 k = unpack_k<kW>(row + s * kBytes);
#pragma GCC unroll 4
    for (int rr = 0; rr < MB; ++rr)
      k_mac<kW>(k, x[rr].q + s * 256, x[rr].bsums + s * 16, x[rr].d[s], acc[rr], macc[rr]);
  }
#pragma GCC unroll 4
  for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = hsum(acc[rr]) + hsum(macc[rr]);
}

template <DType kW>
struct KTile {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) { tile_k<kW, MB>(a, j, r0); }
  };
};

template <DType kW>
void gemv_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk_by_4<KTile<kW>::template T>(a, j0, j1);
}

// Q8_K activations in the natural layout (isa_kernels.hpp): scalar::prep_q8k's operations
// (d = max|x| / 127, q = x · (1 / d) rounded to nearest even), so the same bytes, on 8 lanes.
void prep_q8k(const float* x, uint8_t* out, int64_t k) {
  const int64_t ns = k / 256;
  auto* d = reinterpret_cast<float*>(out);
  auto* q = reinterpret_cast<int8_t*>(out + ns * 4);
  auto* bsums = reinterpret_cast<int16_t*>(out + ns * 260);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t s = 0; s < ns; ++s, x += 256) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 256; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), magnitude), m);
    const float ds = hmax(m) / 127.0f;
    const float id = ds != 0.0f ? 1.0f / ds : 0.0f;
    d[s] = ds;
    const __m256 idv = _mm256_set1_ps(id);
    for (int g = 0; g < 16; ++g) {
      alignas(32) int32_t qi[16];
      const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g), idv));
      const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g + 8), idv));
      _mm256_store_si256(reinterpret_cast<__m256i*>(qi), a);
      _mm256_store_si256(reinterpret_cast<__m256i*>(qi + 8), b);
      int32_t sum = 0;
      for (int i = 0; i < 16; ++i) {
        q[s * 256 + 16 * g + i] = static_cast<int8_t>(qi[i]);
        sum += qi[i];
      }
      bsums[s * 16 + g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace
}  // namespace specd::kernels::cpu
