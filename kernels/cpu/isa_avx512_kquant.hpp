// The AVX-512 K-quant GEMV (private to isa_avx512_level.hpp, compiled once per level): Q4_K,
// Q5_K, Q6_K, Q3_K and Q2_K weights against Q8_K activations in lane order.
//
// A weight super-block (256 elements, 16 groups of 16) is unpacked once for every activation
// row of the tile into four 64-byte vectors W0..W3 of unsigned levels such that 32-bit lane L
// of every Wp holds elements 16g + 4p .. 16g + 4p + 3 of one group g = lane_group(L): with
// VBMI g = L (byte permutes gather straight into that order, and lane L's scale is the block's
// L-th, Q4_K/Q5_K's (L/2)-th, without a permute); without it lane 4c + r holds group 4r + c (a
// 4x4 dword transpose of the natural-order vectors, within each 128-bit lane), and the scales
// are permuted to their lanes. The activations come in the same order (isa_kernels.hpp,
// prep_q8k_in_lane_order below). A group lies in one sub-block (Q6_K: the group
// is the sub-block; Q4_K/Q5_K: sub-block g / 2), so per activation row the four products sum
// into one vector of per-lane integers without any scale in between: four vpdpbusd (without
// VNNI, vpmaddubsw pair sums added in 16 bits, which the levels' bounds allow: Q4_K/Q5_K
// 4·2·31·127 < 2¹⁵, Q6_K 2·2·63·127 < 2¹⁵, then one vpmaddwd). The lanes are then converted
// and scaled once by d·scale(lane)·d_x. The mins (Q4_K, Q5_K) and Q6_K's offset of 32 take one
// more multiply-add per lane, against the activations' group sums (prepared as floats, already
// times d_x). Per (row, feature) the instructions do not depend on the tile, so results are
// batch-invariant.
#pragma once

#include <type_traits>

#include "isa_avx512_common.hpp"

namespace specd::kernels::cpu {
namespace {

// 64 bytes: the low 32 from `lo`, the high 32 from `hi`.
inline __m512i join256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// An unpacked super-block. q[p]: the levels in lane order; scd: d·scale of each lane's group;
// mnd: what each lane's activation sum is multiplied by and subtracted (Q4_K/Q5_K: dmin·min,
// Q6_K: 32·d·scale, its levels' offset).
struct KBlock {
  __m512i q[4];
  __m512 scd, mnd;
};

// The group of 16 each 32-bit lane holds.
constexpr int lane_group(int lane) {
#ifdef __AVX512VBMI__
  return lane;
#else
  return 4 * (lane % 4) + lane / 4;
#endif
}

#ifndef __AVX512VBMI__
// Without VBMI: the group of each lane as a Q6_K scale index and as a Q4_K / Q5_K sub-block index.
struct KLaneIdx {
  alignas(64) int32_t q6[16];
  alignas(64) int32_t k45[16];
};
constexpr KLaneIdx make_k_lane_idx() {
  KLaneIdx t{};
  for (int lane = 0; lane < 16; ++lane) {
    t.q6[lane] = lane_group(lane);
    t.k45[lane] = lane_group(lane) / 2;
  }
  return t;
}
constexpr KLaneIdx kKLaneIdx = make_k_lane_idx();
#endif

#ifdef __AVX512VBMI__
// Q4_K / Q5_K straight into lane order with byte permutes (VBMI): vector p, lane L, byte b is
// element o = 16 (g mod 2) + 4p + b of sub-block s = g / 2 (g = L), i.e. the nibble s mod 2
// of qs[32 (s / 2) + o], and for Q5_K bit s of qh[o]. One vpermt2b
// over the 128 bytes of qs and one shift per vector replace the four 32-byte unpacks, their
// joins and the 4x4 dword transpose (16 shuffles per super-block, now 4; 8 with Q5_K's bits).
struct KVbmiIdx {
  alignas(64) uint8_t qs[4][64];    // vpermt2b index into qs[0, 128)
  alignas(64) uint8_t qh[4][64];    // vpermb index into qh[0, 32)
  alignas(64) uint16_t nibble[32];  // per 16-bit word: 4 where its lane takes high nibbles
  alignas(64) uint16_t sub[32];     // per 16-bit word: its lane's sub-block s (Q5_K's bit)
};
constexpr KVbmiIdx make_k_vbmi_idx() {
  KVbmiIdx t{};
  for (int lane = 0; lane < 16; ++lane) {
    const int g = lane_group(lane), s = g / 2;
    for (int p = 0; p < 4; ++p)
      for (int b = 0; b < 4; ++b) {
        const int o = 16 * (g % 2) + 4 * p + b;
        t.qs[p][4 * lane + b] = static_cast<uint8_t>(32 * (s / 2) + o);
        t.qh[p][4 * lane + b] = static_cast<uint8_t>(o);
      }
    for (int w = 2 * lane; w < 2 * lane + 2; ++w) {
      t.nibble[w] = static_cast<uint16_t>(4 * (s % 2));
      t.sub[w] = static_cast<uint16_t>(s);
    }
  }
  return t;
}
constexpr KVbmiIdx kKVbmiIdx = make_k_vbmi_idx();

inline __m512i load64(const void* p) {
  return _mm512_load_si512(p);
}

template <DType kW>
inline void unpack_k45_levels(const uint8_t* qs, const uint8_t* qh_bytes, __m512i* q) {
  const __m512i q0 = _mm512_loadu_si512(qs), q1 = _mm512_loadu_si512(qs + 64);
  const __m512i low4 = _mm512_set1_epi8(15), nibble = load64(kKVbmiIdx.nibble);
  __m512i qh = _mm512_setzero_si512(), sub = _mm512_setzero_si512();
  if constexpr (kW == DType::kQ5_K) {
    qh = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh_bytes)));
    sub = load64(kKVbmiIdx.sub);
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m512i bytes = _mm512_permutex2var_epi8(q0, load64(kKVbmiIdx.qs[p]), q1);
    __m512i v = _mm512_and_si512(_mm512_srlv_epi16(bytes, nibble), low4);
    if constexpr (kW == DType::kQ5_K) {  // bit s of the gathered qh byte, moved to bit 4
      const __m512i h = _mm512_permutexvar_epi8(load64(kKVbmiIdx.qh[p]), qh);
      const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(h, sub), _mm512_set1_epi8(1));
      v = _mm512_or_si512(v, _mm512_slli_epi16(bit, 4));
    }
    q[p] = v;
  }
}
#endif

// Natural-order vectors (v[r]: elements 64r .. 64r + 63) into lane order, in place.
inline void to_lane_order(__m512i* v) {
  const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
  v[0] = _mm512_unpacklo_epi64(t0, t2);
  v[1] = _mm512_unpackhi_epi64(t0, t2);
  v[2] = _mm512_unpacklo_epi64(t1, t3);
  v[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Σ of the four bytes of every 32-bit lane of q[0..3] (signed), per lane.
inline __m512i lane_byte_sums(const __m512i* q) {
  const __m512i ones = _mm512_set1_epi8(1);
#ifdef __AVX512VNNI__
  __m512i s = _mm512_setzero_si512();
  for (int p = 0; p < 4; ++p) s = _mm512_dpbusd_epi32(s, ones, q[p]);
  return s;
#else
  __m512i s16 = _mm512_setzero_si512();  // pair sums: |4 x 2 x 128| fits 16 bits
  for (int p = 0; p < 4; ++p) s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(ones, q[p]));
  return _mm512_madd_epi16(s16, _mm512_set1_epi16(1));
#endif
}

// Q8_K activations in this level's lane order (isa_kernels.hpp): per super-block of 256,
// d = max|x| / 127 and q = x · (1 / d) rounded to nearest even, the scalar reference's
// operations (scalar::prep_q8k), so the same bytes; each group of 16 is one vector, narrowed to
// 16 bytes and placed so that to_lane_order leaves group lane_group(L) in lane L.
inline void prep_q8k_in_lane_order(const float* x, uint8_t* out, int64_t k) {
  const int64_t ns = k / 256;
  auto* d = reinterpret_cast<float*>(out);
  uint8_t* q = out + ns * 4;
  auto* bsx = reinterpret_cast<float*>(out + ns * 260);
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t s = 0; s < ns; ++s, x += 256) {
    __m512 v[16];
    __m512 amax = _mm512_setzero_ps();
    for (int g = 0; g < 16; ++g) {
      v[g] = _mm512_loadu_ps(x + 16 * g);
      amax = _mm512_max_ps(_mm512_and_ps(v[g], magnitude), amax);  // a NaN keeps amax, as fmax does
    }
    const float ds = _mm512_reduce_max_ps(amax) / 127.0f;
    const float id = ds != 0.0f ? 1.0f / ds : 0.0f;
    d[s] = ds;
    __m512i z[4] = {};
    for (int lane = 0; lane < 16; ++lane) {  // lane 4c + r of the result: vector r, 128-bit lane c
      const __m512 scaled = _mm512_mul_ps(v[lane_group(lane)], _mm512_set1_ps(id));
      const __m128i bytes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(scaled));
      switch (lane / 4) {  // _mm512_inserti32x4 takes its lane as a constant
        case 0:
          z[lane % 4] = _mm512_inserti32x4(z[lane % 4], bytes, 0);
          break;
        case 1:
          z[lane % 4] = _mm512_inserti32x4(z[lane % 4], bytes, 1);
          break;
        case 2:
          z[lane % 4] = _mm512_inserti32x4(z[lane % 4], bytes, 2);
          break;
        default:
          z[lane % 4] = _mm512_inserti32x4(z[lane % 4], bytes, 3);
          break;
      }
    }
    to_lane_order(z);
    for (int p = 0; p < 4; ++p) _mm512_storeu_si512(q + s * 256 + 64 * p, z[p]);
    _mm512_storeu_ps(bsx + s * 16, _mm512_mul_ps(_mm512_cvtepi32_ps(lane_byte_sums(z)), _mm512_set1_ps(ds)));
  }
}

// d · scale of each lane, from the scales of the block's 16 groups as 32-bit integers (natural
// index).
inline __m512 lane_scales(__m512i scales32, float d) {
#ifdef __AVX512VBMI__
  const __m512i per_lane = scales32;  // lane L holds group L
#else
  const __m512i per_lane = _mm512_permutexvar_epi32(_mm512_load_si512(kKLaneIdx.q6), scales32);
#endif
  return _mm512_mul_ps(_mm512_cvtepi32_ps(per_lane), _mm512_set1_ps(d));
}

// The same for Q4_K / Q5_K, whose 8 scales (bytes of `sc64`) cover two groups each.
inline __m512 lane_scales8(uint64_t sc64, float d) {
  const __m128i sc = _mm_cvtsi64_si128(static_cast<int64_t>(sc64));
#ifdef __AVX512VBMI__
  const __m512i per_lane = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(sc, sc));  // lane L: scale L / 2
#else
  const __m512i per_lane = _mm512_permutexvar_epi32(_mm512_load_si512(kKLaneIdx.k45), _mm512_cvtepu8_epi32(sc));
#endif
  return _mm512_mul_ps(_mm512_cvtepi32_ps(per_lane), _mm512_set1_ps(d));
}

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
#ifdef __AVX512VBMI__
  const uint8_t* qh_bytes = nullptr;
  if constexpr (kW == DType::kQ5_K) qh_bytes = b.qh;
  unpack_k45_levels<kW>(b.qs, qh_bytes, k.q);
#else
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
  }
  to_lane_order(k.q);
#endif
  k.scd = lane_scales8(sc64, half_to_f32(b.d));
  k.mnd = lane_scales8(mn64, half_to_f32(b.dmin));
  return k;
}

#ifdef __AVX512VBMI__
// Q6_K straight into lane order with byte permutes (VBMI): vector p, lane L, byte b is element
// e = 16g + 4p + b (g = L), i.e. with h = g / 8, quarter q = (g mod 8) / 2
// and l = 16 (g mod 2) + 4p + b: nibble q / 2 of ql[64h + 32 (q mod 2) + l] and bits 2q, 2q + 1
// of qh[32h + l]. Per vector one vpermt2b (ql), one vpermb (qh), a per-lane shift of the ql
// bytes, a per-lane rotate that brings qh's two bits to bits 4-5 (what crosses into a
// neighbouring byte lands outside the bits kept), and one bitwise select: 24 vector operations
// per super-block where the natural-order unpack and its 4x4 transpose took 36. Same levels,
// same bits; one cache-resident row of q6_k 4-9% faster on Zen 4 (4 alternating runs).
struct Q6VbmiIdx {
  alignas(64) uint8_t ql[4][64];   // vpermt2b index into ql[0, 128)
  alignas(64) uint8_t qh[4][64];   // vpermb index into qh[0, 64)
  alignas(64) uint16_t shift[32];  // per 16-bit word: 4 where its lane takes high nibbles
  alignas(64) uint32_t rot[16];    // per lane: rotate left by (4 - 2q) mod 32
};
constexpr Q6VbmiIdx make_q6_vbmi_idx() {
  Q6VbmiIdx t{};
  for (int lane = 0; lane < 16; ++lane) {
    const int g = lane_group(lane), h = g / 8, q = (g % 8) / 2;
    for (int p = 0; p < 4; ++p)
      for (int b = 0; b < 4; ++b) {
        const int l = 16 * (g % 2) + 4 * p + b;
        t.ql[p][4 * lane + b] = static_cast<uint8_t>(64 * h + 32 * (q % 2) + l);
        t.qh[p][4 * lane + b] = static_cast<uint8_t>(32 * h + l);
      }
    t.shift[2 * lane] = t.shift[2 * lane + 1] = static_cast<uint16_t>(4 * (q / 2));
    t.rot[lane] = static_cast<uint32_t>((4 - 2 * q + 32) % 32);
  }
  return t;
}
constexpr Q6VbmiIdx kQ6VbmiIdx = make_q6_vbmi_idx();

inline void unpack_q6_levels(const uint8_t* ql_bytes, const uint8_t* qh_bytes, __m512i* q) {
  const __m512i ql0 = _mm512_loadu_si512(ql_bytes), ql1 = _mm512_loadu_si512(ql_bytes + 64);
  const __m512i qh = _mm512_loadu_si512(qh_bytes);
  const __m512i shift = load64(kQ6VbmiIdx.shift), rot = load64(kQ6VbmiIdx.rot);
  const __m512i low4 = _mm512_set1_epi8(15), bits45 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m512i lo = _mm512_srlv_epi16(_mm512_permutex2var_epi8(ql0, load64(kQ6VbmiIdx.ql[p]), ql1), shift);
    const __m512i hi =
        _mm512_and_si512(_mm512_rolv_epi32(_mm512_permutexvar_epi8(load64(kQ6VbmiIdx.qh[p]), qh), rot), bits45);
    q[p] = _mm512_ternarylogic_epi32(low4, lo, hi, 0xEA);  // (low4 & lo) | hi
  }
}
#endif

// Q6_K: per half h of 128 elements, ql[64h ..] and qh[32h ..] give elements [0, 32) and
// [32, 64) from the low nibbles of ql[0..32) and ql[32..64), [64, 96) and [96, 128) from their
// high nibbles; qh supplies bits 4-5 (shifts 0, 2, 4, 6). Sub-blocks of 16: one per group.
inline KBlock unpack_q6_k(const uint8_t* blk) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(blk);
  KBlock k;
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
#ifdef __AVX512VBMI__
  unpack_q6_levels(b.ql, b.qh, k.q);
#else
  const __m512i low4 = _mm512_set1_epi8(15), two = _mm512_set1_epi8(3);
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
  to_lane_order(k.q);
#endif
  k.scd = lane_scales(_mm512_cvtepi8_epi32(sc8), half_to_f32(b.d));
  k.mnd = _mm512_mul_ps(k.scd, _mm512_set1_ps(32.0f));
  return k;
}

// Q3_K: levels q + 4 in 0..7 (bits 0-1 from qs, bit 2 from hmask; dtype.hpp), per group of 16
// the factor sc - 32; the offset of 4 goes through the activations' sums as Q6_K's 32 does.
// With VBMI, vector p, lane L, byte b is element e = 16g + 4p + b (g = L):
// bits 2j, 2j + 1 (j = (g mod 8) / 2) of qs[32 (g / 8) + l] and bit g / 2 of hmask[l], with
// l = 16 (g mod 2) + 4p + b; a per-lane shift and rotate bring them to bits 0-1 and 2.
#ifdef __AVX512VBMI__
struct Q3VbmiIdx {
  alignas(64) uint8_t qs[4][64];   // vpermb index into qs[0, 64)
  alignas(64) uint8_t hm[4][64];   // vpermb index into hmask[0, 32)
  alignas(64) uint16_t shift[32];  // per 16-bit word: 2j of its lane
  alignas(64) uint32_t rot[16];    // per lane: rotate left by (2 - g / 2) mod 32
};
constexpr Q3VbmiIdx make_q3_vbmi_idx() {
  Q3VbmiIdx t{};
  for (int lane = 0; lane < 16; ++lane) {
    const int g = lane_group(lane);
    for (int p = 0; p < 4; ++p)
      for (int b = 0; b < 4; ++b) {
        const int l = 16 * (g % 2) + 4 * p + b;
        t.qs[p][4 * lane + b] = static_cast<uint8_t>(32 * (g / 8) + l);
        t.hm[p][4 * lane + b] = static_cast<uint8_t>(l);
      }
    t.shift[2 * lane] = t.shift[2 * lane + 1] = static_cast<uint16_t>(2 * ((g % 8) / 2));
    t.rot[lane] = static_cast<uint32_t>((2 - g / 2 + 32) % 32);
  }
  return t;
}
constexpr Q3VbmiIdx kQ3VbmiIdx = make_q3_vbmi_idx();
#endif

// Bits 0-1 of Q3_K's or Q2_K's levels from qs in lane order, and Q3_K's bit 2 from hmask
// (hmask null: Q2_K).
inline void unpack_low2_levels(const uint8_t* qs_bytes, const uint8_t* hmask, __m512i* q) {
#ifdef __AVX512VBMI__
  const __m512i three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  const __m512i qs = _mm512_loadu_si512(qs_bytes);
  const __m512i hm = hmask != nullptr ? _mm512_loadu_si512(hmask) : _mm512_setzero_si512();
  const __m512i shift = load64(kQ3VbmiIdx.shift), rot = load64(kQ3VbmiIdx.rot);
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m512i lo = _mm512_srlv_epi16(_mm512_permutexvar_epi8(load64(kQ3VbmiIdx.qs[p]), qs), shift);
    if (hmask == nullptr) {
      q[p] = _mm512_and_si512(lo, three);
    } else {
      const __m512i hi =
          _mm512_and_si512(_mm512_rolv_epi32(_mm512_permutexvar_epi8(load64(kQ3VbmiIdx.hm[p]), hm), rot), four);
      q[p] = _mm512_ternarylogic_epi32(three, lo, hi, 0xEA);  // (3 & lo) | hi
    }
  }
#else
  // Natural order first: vector r holds elements 64r .. 64r + 63, two runs of 32 (j = 2 (r mod 2)
  // and j + 1 of qs's half r / 2; hmask bits 2r and 2r + 1).
  const __m256i hm =
      hmask != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hmask)) : _mm256_setzero_si256();
  const __m256i three8 = _mm256_set1_epi8(3), one8 = _mm256_set1_epi8(1);
  auto run = [&](__m256i qsn, int j, int bit) {
    const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(qsn, _mm_cvtsi32_si128(2 * j)), three8);
    const __m256i h = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(bit)), one8);
    return _mm256_or_si256(lo, _mm256_slli_epi16(h, 2));
  };
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const __m256i qsn = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs_bytes + 32 * (r / 2)));
    q[r] = join256(run(qsn, 2 * (r % 2), 2 * r), run(qsn, 2 * (r % 2) + 1, 2 * r + 1));
  }
  to_lane_order(q);
#endif
}

inline KBlock unpack_q3_k(const uint8_t* blk) {
  const auto& b = *reinterpret_cast<const BlockQ3_K*>(blk);
  KBlock k;
  const __m128i sc8 = q3_k_scales(b);
  unpack_low2_levels(b.qs, b.hmask, k.q);
  k.scd = lane_scales(_mm512_cvtepi8_epi32(sc8), half_to_f32(b.d));
  k.mnd = _mm512_mul_ps(k.scd, _mm512_set1_ps(4.0f));
  return k;
}

// Q2_K: levels 0..3 (Q3_K's bits 0-1), per group of 16 a 4-bit scale and min.
inline KBlock unpack_q2_k(const uint8_t* blk) {
  const auto& b = *reinterpret_cast<const BlockQ2_K*>(blk);
  KBlock k;
  unpack_low2_levels(b.qs, nullptr, k.q);
  const __m512i sm = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  k.scd = lane_scales(_mm512_and_si512(sm, _mm512_set1_epi32(15)), half_to_f32(b.d));
  k.mnd = lane_scales(_mm512_srli_epi32(sm, 4), half_to_f32(b.dmin));
  return k;
}

// One super-block of any K-quant dtype, unpacked.
template <DType kW>
inline KBlock unpack_k(const uint8_t* blk) {
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

// Σ over each 32-bit lane of levels x activations for one super-block (exact integers).
template <DType kW>
inline __m512i k_lane_dots(const KBlock& k, const int8_t* q8) {
#ifdef __AVX512VNNI__
  __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k.q[0], _mm512_loadu_si512(q8));
#pragma GCC unroll 3
  for (int p = 1; p < 4; ++p) s = _mm512_dpbusd_epi32(s, k.q[p], _mm512_loadu_si512(q8 + 64 * p));
  return s;
#else
  __m512i pr[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) pr[p] = _mm512_maddubs_epi16(k.q[p], _mm512_loadu_si512(q8 + 64 * p));
  const __m512i ones = _mm512_set1_epi16(1);
  const __m512i s01 = _mm512_add_epi16(pr[0], pr[1]), s23 = _mm512_add_epi16(pr[2], pr[3]);
  if constexpr (kW == DType::kQ6_K) {  // levels <= 63: only two pair sums fit in 16 bits
    return _mm512_add_epi32(_mm512_madd_epi16(s01, ones), _mm512_madd_epi16(s23, ones));
  } else {
    return _mm512_madd_epi16(_mm512_add_epi16(s01, s23), ones);
  }
#endif
}

// One super-block of one activation row into acc (16 lanes, F32):
//   Σ lanes  d_x·dot·d·scale  -  d_x·sum·mnd
// (d_x·sum: the activations' bsx).
template <DType kW>
inline void k_mac(const KBlock& k, const int8_t* q8, const float* bsx, float dx, __m512& acc) {
  const __m512i dots = k_lane_dots<kW>(k, q8);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_mul_ps(k.scd, _mm512_set1_ps(dx)), acc);
  acc = _mm512_fnmadd_ps(_mm512_loadu_ps(bsx), k.mnd, acc);
}

template <DType kW>
struct TileK {
  template <int MB>
  struct T {
    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      __m512 acc[MB];
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) acc[rr] = _mm512_setzero_ps();
      ActQ8K x[MB];
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) x[rr] = act_q8k(a.act + static_cast<size_t>(r0 + rr) * a.act_stride, a.k);
      const uint8_t* row = a.w + static_cast<size_t>(j) * a.w_stride;
      const int64_t ns = a.k / 256;
      constexpr size_t kBytes = row_bytes(kW, 256);
      for (int64_t s = 0; s < ns; ++s) {
        const KBlock k = unpack_k<kW>(row + s * kBytes);
#pragma GCC unroll 16
        for (int rr = 0; rr < MB; ++rr) k_mac<kW>(k, x[rr].q + s * 256, x[rr].bsx + s * 16, x[rr].d[s], acc[rr]);
      }
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = _mm512_reduce_add_ps(acc[rr]);
    }
  };
};

template <DType kW>
void gemv_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  walk<TileK<kW>::template T, 8>(a, j0, j1);
}

}  // namespace
}  // namespace specd::kernels::cpu
