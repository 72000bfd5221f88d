// The AVX-512 Q8_0 and Q4_0 GEMV in groups of 16 blocks (private to isa_avx512_level.hpp,
// compiled once per level).
//
// 32-bit lane l of every vector belongs to block l of a group of 16 consecutive blocks, so an
// activation row sums a whole block in integers before any float work: per group and row, eight
// integer dot products of 4 x 64 bytes (vpdpbusd; without VNNI vpmaddubsw + vpmaddwd) and one
// convert, one multiply and one FMA. (Four blocks at a time, four or eight lanes per block,
// needed twenty vector operations per row for Q4_0 and thirty-two for Q8_0.)
//
// The weights are put in that order once per group for all the rows of a tile. Each quad of
// blocks is gathered from its bytes into "lane 4b + i = dword i of block b" (vpermt2b; vpermt2w
// without VBMI: every field starts at an even offset, so whole words move), and a 4x4 dword
// transpose of the four quads (vpermt2d, vshufi64x2) makes T_i, lane l = dword i of block l:
//  - q4_0: dword i of the 16 packed-nibble bytes; its low nibbles are elements 4i..4i+3, its
//    high nibbles 16+4i..16+4i+3, both as unsigned levels 0..15;
//  - q8_0: dwords 0-3 and 4-7 of the 32 quants (two gathers per quad, the second from a window
//    16 bytes further on), T_0..T_7. With VNNI they are made unsigned (w + 128, an xor); without
//    it |w|, and each row's values take w's sign, which keeps vpmaddubsw's pair sums within 16
//    bits (128 x 127 x 2).
// The sixteen fp16 scales are gathered to one F32 vector.
//
// A prepared activation row holds, per group (kGroupActBytes), the signed quantized values in
// the same order (vector v, lane l: elements 4v..4v+3 of block l), then per block the integer
// sum start (q4_0: -8 x the sum of its values, which makes the levels nibble - 8; q8_0 with
// VNNI: -128 x the sum, which takes the 128 off the weights again; without VNNI: 0) and the
// block's scale.
// Per (row, feature) the float work is one FMA per group into one accumulator, in group order,
// then one horizontal sum: the same instructions whatever the tile, so rows are batch-invariant.
#pragma once

#include "isa_avx512_common.hpp"
#include "isa_avx512_gemv.hpp"  // walk

namespace specd::kernels::cpu {
namespace {

// Bytes of one group of a prepared activation row: 8 x 64 bytes of values, 16 int32 sum
// starts, 16 float scales (q8_g16_act_bytes in isa_kernels.hpp sizes the row).
constexpr int64_t kGroupActBytes = 512 + 64 + 64;

// Index vectors of the gathers: byte indices (vpermt2b), or, without VBMI, the same moves as
// word indices (vpermt2w; bytes 2i, 2i + 1 of the result come from word idx[2i] / 2).
struct QuadIdx {
  alignas(64) uint8_t q4[64];        // Q4_0 quad (bytes 0..71): dword i of block b's nibbles -> lane 4b + i
  alignas(64) uint8_t q4_scale[64];  // its 4 fp16 scales (low 8 bytes used)
  alignas(64) uint8_t q8[64];        // Q8_0 quad (bytes 0..127): dword i of block b's quants -> lane 4b + i
  alignas(64) uint8_t q8_scale[64];  // its 4 fp16 scales (low 8 bytes used)
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
    set(t.q8, i, (i / 16) * 34 + 2 + i % 16);
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

// The bytes `index` names from the 128-byte window [l0 l1] (a QuadIdx table).
inline __m512i gather_bytes(__m512i l0, const uint8_t* index, __m512i l1) {
#ifdef __AVX512VBMI__
  return _mm512_permutex2var_epi8(l0, _mm512_load_si512(index), l1);
#else
  return _mm512_permutex2var_epi16(l0, _mm512_load_si512(index), l1);
#endif
}

// Index vectors of the dword transpose of two quads q' = 0, 1 (vpermt2d's two sources): result
// lane 8i' + 4q' + b (i' < 2, b < 4) is dword i' + 2h of block b of quad q', source lane
// 16q' + 4b + i' + 2h (lo: h = 0, hi: h = 1).
struct QuadTranspose {
  alignas(64) int32_t lo[16];
  alignas(64) int32_t hi[16];
};
constexpr QuadTranspose make_quad_transpose() {
  QuadTranspose t{};
  for (int lane = 0; lane < 16; ++lane) {
    const int i = lane / 8, q = (lane / 4) % 2, b = lane % 4;
    t.lo[lane] = q * 16 + 4 * b + i;
    t.hi[lane] = q * 16 + 4 * b + i + 2;
  }
  return t;
}
constexpr QuadTranspose kQuadTranspose = make_quad_transpose();

// v[q], lane 4b + i (dword i of block b of quad q) -> t[i], lane 4q + b.
inline void transpose_quads(const __m512i (&v)[4], __m512i* t) {
  const __m512i lo = _mm512_load_si512(kQuadTranspose.lo), hi = _mm512_load_si512(kQuadTranspose.hi);
  const __m512i a_lo = _mm512_permutex2var_epi32(v[0], lo, v[1]), a_hi = _mm512_permutex2var_epi32(v[0], hi, v[1]);
  const __m512i b_lo = _mm512_permutex2var_epi32(v[2], lo, v[3]), b_hi = _mm512_permutex2var_epi32(v[2], hi, v[3]);
  t[0] = _mm512_shuffle_i64x2(a_lo, b_lo, 0x44);  // 256-bit halves: low of a, low of b
  t[1] = _mm512_shuffle_i64x2(a_lo, b_lo, 0xee);  // high of a, high of b
  t[2] = _mm512_shuffle_i64x2(a_hi, b_hi, 0x44);
  t[3] = _mm512_shuffle_i64x2(a_hi, b_hi, 0xee);
}

// The 16 scales of a group from the low 8 bytes (4 fp16 scales) of each quad's gather.
inline __m512 group_scales(const __m128i (&sc)[4]) {
  return _mm512_cvtph_ps(_mm256_set_m128i(_mm_unpacklo_epi64(sc[2], sc[3]), _mm_unpacklo_epi64(sc[0], sc[1])));
}

inline __m512i join4(__m128i a, __m128i b, __m128i c, __m128i e) {
  __m512i v = _mm512_castsi128_si512(a);
  v = _mm512_inserti32x4(v, b, 1);
  v = _mm512_inserti32x4(v, c, 2);
  return _mm512_inserti32x4(v, e, 3);
}

// ---- activations -------------------------------------------------------------------------------

// One block of 32 quantized to d = max|x| / 127, q = round(x / d), as two int32 vectors.
inline float quantize_block_i32(const float* x, __m512i* i0, __m512i* i1) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
  *i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
  return d;
}

// A row in groups of 16 blocks; each block's sum start is kStart x the sum of its values.
template <int kStart>
void prep_q8_groups(const float* x, uint8_t* out, int64_t k) {
  const int64_t nb = k / 32, ng = (nb + 15) / 16;
  for (int64_t g = 0; g < ng; ++g) {
    uint8_t* o = out + g * kGroupActBytes;
    __m512i half[2][4];  // [elements 0-15 | 16-31][quad]: lane 4b + i = dword i of the half of block 4q + b
    alignas(64) int32_t start[16];
    alignas(64) float d[16];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m128i h[2][4];
#pragma GCC unroll 4
      for (int b = 0; b < 4; ++b) {
        const int64_t blk = 16 * g + 4 * q + b;
        if (blk < nb) {
          __m512i i0, i1;
          d[4 * q + b] = quantize_block_i32(x + blk * 32, &i0, &i1);
          start[4 * q + b] = kStart * _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
          h[0][b] = _mm512_cvtepi32_epi8(i0);
          h[1][b] = _mm512_cvtepi32_epi8(i1);
        } else {
          d[4 * q + b] = 0.0f;
          start[4 * q + b] = 0;
          h[0][b] = h[1][b] = _mm_setzero_si128();
        }
      }
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) half[s][q] = join4(h[s][0], h[s][1], h[s][2], h[s][3]);
    }
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
      __m512i t[4];
      transpose_quads(half[s], t);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) _mm512_storeu_si512(o + (4 * s + i) * 64, t[i]);
    }
    _mm512_storeu_si512(o + 512, _mm512_load_si512(start));
    _mm512_storeu_ps(reinterpret_cast<float*>(o + 576), _mm512_load_ps(d));
  }
}

void prep_q8_for_q4_0(const float* x, uint8_t* out, int64_t k) {
  prep_q8_groups<-8>(x, out, k);
}
#ifdef __AVX512VNNI__
void prep_q8_for_q8_0(const float* x, uint8_t* out, int64_t k) {
  prep_q8_groups<-128>(x, out, k);
}
#else
void prep_q8_for_q8_0(const float* x, uint8_t* out, int64_t k) {
  prep_q8_groups<0>(x, out, k);
}
#endif

// ---- weights -----------------------------------------------------------------------------------

// The quad of blocks starting at block `first` of a row of nb blocks of kBlock bytes: its 128
// bytes from byte `off` of the quad on, as two 64-byte registers, masked to the quad's bytes
// (kTail: to the bytes of the row's blocks; the quad may be partial or past the end).
template <int64_t kBlock, bool kTail>
inline void load_window(const uint8_t* row, int64_t nb, int64_t first, int64_t off, __m512i* l0, __m512i* l1) {
  const uint8_t* base = row + first * kBlock + off;
  if constexpr (kTail) {
    const int64_t owned = (nb - first >= 4 ? 4 * kBlock : (nb > first ? (nb - first) * kBlock : 0)) - off;
    *l0 = _mm512_maskz_loadu_epi8(byte_mask(owned), base);
    *l1 = _mm512_maskz_loadu_epi8(byte_mask(owned - 64), base + 64);
  } else {
    *l0 = _mm512_loadu_si512(base);
    *l1 = _mm512_maskz_loadu_epi8(byte_mask(4 * kBlock - off - 64), base + 64);
  }
}

// One group of 16 blocks of a weight row, unpacked for every activation row of the tile.
template <DType kW>
struct Group;

template <>
struct Group<DType::kQ4_0> {
  __m512i u[8];  // levels 0..15: u[i] elements 4i.., u[4 + i] elements 16 + 4i.. of block l (lane l)
  __m512 dw;

  // Group g (kTail: the last, partial group; its blocks past nb get zero levels and scales).
  template <bool kTail>
  static Group unpack(const uint8_t* row, int64_t nb, int64_t g) {
    __m512i v[4];
    __m128i sc[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m512i l0, l1;
      load_window<18, kTail>(row, nb, 16 * g + 4 * q, 0, &l0, &l1);
      v[q] = gather_bytes(l0, kQuadIdx.q4, l1);
      sc[q] = _mm512_castsi512_si128(gather_bytes(l0, kQuadIdx.q4_scale, l1));
    }
    Group w;
    __m512i t[4];
    transpose_quads(v, t);
    const __m512i m = _mm512_set1_epi8(15);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      w.u[i] = _mm512_and_si512(t[i], m);
      w.u[4 + i] = _mm512_and_si512(_mm512_srli_epi16(t[i], 4), m);
    }
    w.dw = group_scales(sc);
    return w;
  }
  // acc + the integer dot product of u[v] with an activation row's vector v (x).
  __m512i mac(__m512i acc, int v, __m512i x) const {
    return dot_u8s8(acc, u[v], x);
  }
};

template <>
struct Group<DType::kQ8_0> {
  __m512i u[8];  // VNNI: w + 128; else |w| (lane l: elements 4v..4v+3 of block l)
#ifndef __AVX512VNNI__
  __mmask64 neg[8];  // the negative quants
#endif
  __m512 dw;

  template <bool kTail>
  static Group unpack(const uint8_t* row, int64_t nb, int64_t g) {
    __m512i v[2][4];
    __m128i sc[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m512i l0, l1, h0, h1;
      load_window<34, kTail>(row, nb, 16 * g + 4 * q, 0, &l0, &l1);
      load_window<34, kTail>(row, nb, 16 * g + 4 * q, 16, &h0, &h1);
      v[0][q] = gather_bytes(l0, kQuadIdx.q8, l1);  // quants 0..15 of each block
      v[1][q] = gather_bytes(h0, kQuadIdx.q8, h1);  // quants 16..31: the same places 16 bytes on
      sc[q] = _mm512_castsi512_si128(gather_bytes(l0, kQuadIdx.q8_scale, l1));
    }
    Group w;
    transpose_quads(v[0], w.u);
    transpose_quads(v[1], w.u + 4);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
#ifdef __AVX512VNNI__
      w.u[i] = _mm512_xor_si512(w.u[i], _mm512_set1_epi8(static_cast<char>(0x80)));
#else
      w.neg[i] = _mm512_movepi8_mask(w.u[i]);
      w.u[i] = _mm512_abs_epi8(w.u[i]);  // -128 -> 128 as u8
#endif
    }
    w.dw = group_scales(sc);
    return w;
  }
  __m512i mac(__m512i acc, int v, __m512i x) const {
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(acc, u[v], x);
#else
    return dot_u8s8(acc, u[v], _mm512_mask_sub_epi8(x, neg[v], _mm512_setzero_si512(), x));
#endif
  }
};

// One weight row (feature j) x MB activation rows.
template <DType kW>
struct TileGroups {
  template <int MB>
  struct T {
    // Group g of every activation row into its accumulator.
    static void group(const Group<kW>& w, const uint8_t* const* x, int64_t g, __m512* acc) {
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) {
        const uint8_t* xg = x[rr] + g * kGroupActBytes;
        __m512i dot = _mm512_loadu_si512(xg + 512);
#pragma GCC unroll 8
        for (int v = 0; v < 8; ++v) dot = w.mac(dot, v, _mm512_loadu_si512(xg + 64 * v));
        const __m512 dx = _mm512_loadu_ps(reinterpret_cast<const float*>(xg + 576));
        acc[rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dx, w.dw), acc[rr]);
      }
    }

    static void run(const GemvArgs& a, int64_t j, int64_t r0) {
      __m512 acc[MB];
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) acc[rr] = _mm512_setzero_ps();
      const uint8_t* x[MB];
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) x[rr] = a.act + static_cast<size_t>(r0 + rr) * a.act_stride;
      const uint8_t* row = a.w + static_cast<size_t>(j) * a.w_stride;
      const int64_t nb = a.k / 32, full = nb / 16, ng = (nb + 15) / 16;
      if (a.panel != nullptr) {
        const Group<kW>* w = static_cast<const Group<kW>*>(a.panel) + (j - a.panel_j0) * ng;
        for (int64_t g = 0; g < ng; ++g) group(w[g], x, g, acc);
      } else {
        for (int64_t g = 0; g < full; ++g) group(Group<kW>::template unpack<false>(row, nb, g), x, g, acc);
        if (full < ng) group(Group<kW>::template unpack<true>(row, nb, full), x, full, acc);
      }
#pragma GCC unroll 16
      for (int rr = 0; rr < MB; ++rr) a.c[(r0 + rr) * a.ldc + j] = _mm512_reduce_add_ps(acc[rr]);
    }
  };
};

// One weight row at a time, for up to 8 activation rows. (Pairs of weight rows, each
// activation vector serving two, took 10-20% off 5 cache-resident rows in bench_kernels but
// nothing measurable in specd bench's scoring on Zen 4, and slowed Q8_0 without VNNI.)
// Prefill chunks (more than 8 rows) unpack the task's weight rows once, into a per-thread panel
// (gemv_panel; 576 bytes per group of 16 blocks), which every group of 8 rows then reads:
// unpacking in the tile repeated the gathers and the transpose for each group of rows. The
// unpacked values and the instructions per (row, feature) are the same either way, so rows stay
// batch-invariant.
template <DType kW>
void gemv_groups(const GemvArgs& a, int64_t j0, int64_t j1) {
  if (a.m <= 8) {
    walk<TileGroups<kW>::template T, 8>(a, j0, j1);
    return;
  }
  const int64_t nb = a.k / 32, full = nb / 16, ng = (nb + 15) / 16;
  auto* panel = reinterpret_cast<Group<kW>*>(gemv_panel(static_cast<size_t>((j1 - j0) * ng) * sizeof(Group<kW>)));
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* row = a.w + static_cast<size_t>(j) * a.w_stride;
    Group<kW>* out = panel + (j - j0) * ng;
    for (int64_t g = 0; g < full; ++g) out[g] = Group<kW>::template unpack<false>(row, nb, g);
    if (full < ng) out[full] = Group<kW>::template unpack<true>(row, nb, full);
  }
  GemvArgs p = a;
  p.panel = panel;
  p.panel_j0 = j0;
  walk<TileGroups<kW>::template T, 8>(p, j0, j1);
}

}  // namespace
}  // namespace specd::kernels::cpu
