// The per-ISA kernel table (private to kernels/cpu). Each instruction-set level provides one
// table in its own file, compiled with that level's flags:
//   isa_scalar.cpp  (no extra flags)      isa_avx2.cpp  (-mavx2 -mfma -mf16c)
//   isa_avx512*.cpp (AVX-512 F/BW/VL/DQ, each level adding VNNI, VBMI, BF16: isa_avx512_level.hpp)
//   isa_neon*.cpp   (aarch64: NEON, NEON + dotprod: isa_neon_level.hpp)
// The front ends (matmul.cpp, attention.cpp, ...) validate shapes, split work over the thread
// pool and call through active_kernels().
//
// Rule for the ISA files: they define only functions with internal linkage plus their table,
// and use no inline functions or templates from library headers (std::min, std::vector, ...).
// An inline function instantiated there would be compiled with that file's flags, and the
// linker could pick that copy for the whole program: an illegal instruction on an older CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "specd/kernels/cpu_isa.hpp"
#include "specd/kernels/dtype.hpp"

namespace specd::kernels::cpu {

// Prepared activations for quantized weights ("Q8 activations"): each row of k elements
// (k a multiple of 32) is quantized per block of 32 to int8 with a float scale,
// d = max|x| / 127, q = round(x / d). Its bytes, at the start of the row (scalar, AVX2 and NEON
// levels; the AVX-512 levels group 16 blocks, q8_g16_act_bytes below):
//   float d[nb]         (nb = k / 32 padded to a multiple of 4; padding blocks are zero)
//   byte  q[nb * 32]    (order and signedness are the ISA's own, see its prep functions)
//   word  aux[nb * 16]  (32-bit words the ISA precomputes per block: lane scales, sums)
// act_row_bytes() gives the row size for every weight dtype.
inline int64_t q8_blocks_padded(int64_t k) {
  return (k / 32 + 3) / 4 * 4;
}
inline int64_t q8_act_bytes(int64_t k) {
  return q8_blocks_padded(k) * (4 + 32 + 64);
}
// The AVX-512 levels prepare Q8 activations in groups of 16 blocks of their own layout
// (isa_avx512_qgroup.hpp): 640 bytes per group.
inline int64_t q8_g16_act_bytes(int64_t k) {
  return (k / 32 + 15) / 16 * 640;
}

// Prepared activations for K-quant weights ("Q8_K activations"): each row of k elements (k a
// multiple of 256) is quantized per super-block of 256 to int8 with one float scale,
// d = max|x| / 127, q = round(x / d). Its bytes, at the start of the row, in one of two layouts:
//   natural (scalar and NEON: scalar::prep_q8k; AVX2: its prep_q8k, the same bytes)
//     float   d[ns]          (ns = k / 256)
//     int8    q[ns * 256]    natural order
//     int16   bsums[ns * 16] the sum of each 16 consecutive q (for the K-quants' mins and offsets)
//   lane order (AVX-512: prep_q8k_in_lane_order in isa_avx512_kquant.hpp, scalar::prep_q8k's
//   values rearranged)
//     float   d[ns]
//     int8    q[ns * 256]    per super-block, byte 64p + 4L + j is element 16g + 4p + j, so that
//                            32-bit lane L of all four 64-byte vectors holds one group g of 16:
//                            without VBMI g = 4(L mod 4) + L / 4, a 4x4 transpose of 4-byte
//                            units within each 16-byte lane (what in-lane unpacks produce);
//                            with VBMI g = L (byte permutes reach any order, and lane L's scale
//                            is then the block's L-th, with no permute)
//     float   bsx[ns * 16]   per super-block and lane L, d · (the sum of group g's q)
inline int64_t q8k_act_bytes(int64_t k) {
  return k / 256 * (4 + 256 + 64);
}
struct ActQ8K {
  const float* d;
  const int8_t* q;
  const int16_t* bsums;  // natural layout
  const float* bsx;      // lane order layout
};
inline ActQ8K act_q8k(const uint8_t* row, int64_t k) {
  const int64_t ns = k / 256;
  return {reinterpret_cast<const float*>(row), reinterpret_cast<const int8_t*>(row + ns * 4),
          reinterpret_cast<const int16_t*>(row + ns * 260), reinterpret_cast<const float*>(row + ns * 260)};
}

// Activation rows of one GEMV call at most: matmul's chunk of rows per pass over the weights
// (a 128-token prefill chunk reads each weight once; the walks keep a few rows at a time hot).
inline constexpr int64_t kGemvCallRows = 256;

// One GEMV call: for weight rows j in [j0, j1) and activation rows r in [0, m <= kGemvCallRows):
//   c[r * ldc + j] = Σ_i act_r[i] · w_j[i]
// The instructions and summation order for one (r, j) do not depend on m, j0 or j1.
struct GemvArgs {
  const uint8_t* act = nullptr;  // prepared activations, m rows of act_stride bytes
  size_t act_stride = 0;
  int64_t m = 0;
  const uint8_t* w = nullptr;  // weight rows, w_stride bytes apart
  size_t w_stride = 0;
  int64_t k = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  // Optional, kernel-specific: the call's weight rows already unpacked (a per-thread panel the
  // kernel filled for rows [panel_j0, ...), see isa_avx512_qgroup.hpp); null: unpack as read.
  const void* panel = nullptr;
  int64_t panel_j0 = 0;
};

// A per-thread buffer of at least `bytes` bytes, 64-byte aligned, reused by the thread's next
// call: kernels unpack weight panels into it.
uint8_t* gemv_panel(size_t bytes);

// With several activation rows the GEMV loop spends longer on each weight line than the
// hardware prefetchers allow for, and the stream stalls (compute and memory stop overlapping:
// at 5 rows the time was about the sum of the two). Before weight row j, the multi-row walks
// ask for the bytes kGemvPrefetchBytes ahead of it into L2 (prefetcht1). A single row runs at
// the stream's speed without it (a request ahead measured no better there). Prefetching
// changes no arithmetic, so results stay batch-invariant.
constexpr size_t kGemvPrefetchBytes = 4096;
inline void prefetch_weight_row(const GemvArgs& a, int64_t j) {
  const uint8_t* p = a.w + static_cast<size_t>(j) * a.w_stride + kGemvPrefetchBytes;
  for (size_t off = 0; off < a.w_stride; off += 64) __builtin_prefetch(p + off, 0, 2);
}

// Walks with several row groups over one task's features (scoring trees, batches, prefill)
// read the weight rows from memory in their first pass only; the later passes compute from L2
// while the memory stream idles (9 bf16 rows cost the sum of the stream and the compute, not
// the larger). NextTaskPrefetch asks, spread evenly over the later passes' tile calls, for the
// weight rows after the task's last feature: the next task, which this thread usually takes
// next (parallel_for hands each thread runs of consecutive tasks; gemv_range points a.w at the
// task's first feature, so they start at row j1). Its first pass then reads L2. Cold bf16
// GEMVs on Zen 4, 2 threads: 7 rows 13%, 9 rows 15%, 11 rows 17% faster; prefetching the next
// task from a single pass (5 rows) was 10% slower. A prefetch past the matrix's end cannot
// fault. No arithmetic changes.
class NextTaskPrefetch {
 public:
  // later_calls: the tile calls of the passes after the first (0: a single pass, no prefetch).
  NextTaskPrefetch(const GemvArgs& a, int64_t j0, int64_t j1, int64_t later_calls)
      : ahead_(a.w + static_cast<size_t>(j1) * a.w_stride),
        bytes_((j1 - j0) * static_cast<int64_t>(a.w_stride)),
        calls_(later_calls) {}
  // Before a tile call of a later pass.
  void step() {
    if (call_ >= calls_) return;
    const int64_t b = bytes_ * call_ / calls_, e = bytes_ * (call_ + 1) / calls_;
    for (int64_t off = b & ~int64_t{63}; off < e; off += 64) __builtin_prefetch(ahead_ + off, 0, 2);
    ++call_;
  }

 private:
  const uint8_t* ahead_;
  int64_t bytes_, calls_, call_ = 0;
};

// Passes of row groups of `group` rows over m rows (the last one partial).
constexpr int64_t row_passes(int64_t m, int64_t group) {
  return (m + group - 1) / group;
}

// Calls Tile<MB>::run(a, j, r0) for every feature j in [j0, j1) and groups of up to 4 rows (the
// AVX2 and NEON levels; AVX-512 has its own walks with wider groups). Row groups are the outer
// loop: one group's activations stay in the caches while the task's features pass by, and
// their weight rows come from L2 after the first group (see walk in isa_avx512_gemv.hpp). The
// grouping changes only which rows share a weight load, never a row's arithmetic. In an
// unnamed namespace: each level's file instantiates it with its own flags (see the rule above).
namespace {
template <template <int> class Tile>
void walk_by_4(const GemvArgs& a, int64_t j0, int64_t j1) {
  const int64_t full = a.m / 4 * 4;
  NextTaskPrefetch next(a, j0, j1, (row_passes(a.m, 4) - 1) * (j1 - j0));
  for (int64_t r = 0; r < full; r += 4)
    for (int64_t j = j0; j < j1; ++j) {
      if (r == 0 && a.m > 1) prefetch_weight_row(a, j);
      if (r > 0) next.step();
      Tile<4>::run(a, j, r);
    }
  if (full == a.m) return;
  for (int64_t j = j0; j < j1; ++j) {
    if (full == 0 && a.m > 1) prefetch_weight_row(a, j);
    if (full > 0) next.step();
    switch (a.m - full) {
      case 3:
        Tile<3>::run(a, j, full);
        break;
      case 2:
        Tile<2>::run(a, j, full);
        break;
      default:
        Tile<1>::run(a, j, full);
        break;
    }
  }
}

// The 16 six-bit scales of a Q3_K block (q3_k_scale, 0..63: the factor is the value - 32) as
// bytes (the NEON level), with 32-bit word arithmetic on the three words of scales[12]: word i
// of the result takes the low nibbles (i = 0, 1) or high nibbles (i = 2, 3) of word i % 2 and,
// as bits 4-5, bits 2i .. 2i + 1 of each byte of word 2.
inline void q3_k_scale_bytes(const uint8_t* scales, uint8_t* out) {
  uint32_t w[3];
  __builtin_memcpy(w, scales, 12);
  const uint32_t low4 = 0x0f0f0f0fu, two = 0x03030303u;
  const uint32_t o[4] = {(w[0] & low4) | ((w[2] & two) << 4), (w[1] & low4) | (((w[2] >> 2) & two) << 4),
                         ((w[0] >> 4) & low4) | (((w[2] >> 4) & two) << 4),
                         ((w[1] >> 4) & low4) | (((w[2] >> 6) & two) << 4)};
  __builtin_memcpy(out, o, 16);
}

#ifdef __AVX2__
// The same scales minus 32 in a register (x86 levels): dwords [w0 w1 w0 w1] and [w2 w2 w2 w2]
// of scales[12], each shifted per dword, masked and merged. (Bytes written by
// q3_k_scale_bytes and loaded as a vector wait on store forwarding: twice the super-block's
// time.)
inline __m128i q3_k_scales(const BlockQ3_K& b) {
  // scales[-4 .. 12): the tail of qs and the scales, inside the block.
  const __m128i raw = _mm_srli_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales - 4)), 4);
  const __m128i lo =
      _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(raw, 0x44), _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi8(15));
  const __m128i hi =
      _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(raw, 0xaa), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi32(hi, 4)), _mm_set1_epi8(32));
}

#endif

// T<n>::run(a, j, r) for the last n <= N rows of a feature (n >= 1).
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

// Prefill chunks on the float weights: TJ<R> computes J features for R rows; groups of R rows
// outside (their activations stay in L1 while the task's weight rows pass by), groups of J
// features inside; the task's features past its last whole group go through T2 (pairs) and T1,
// the rows past the last whole group through TJ<m % R>. Each activation vector loaded serves J
// weight rows and each weight vector R activation rows. TJ, T2 and T1 run the same instruction
// sequence per (row, feature) pair, so rows stay batch-invariant. The shapes (AVX-512 4 x 3,
// AVX2 3 x 2) and their measurements are in the levels' files and docs/performance.md.
template <template <int> class TJ, int J, int R, template <int> class T2, template <int> class T1>
void walk_wide(const GemvArgs& a, int64_t j0, int64_t j1) {
  const int64_t jw = j0 + (j1 - j0) / J * J, jp = jw + (j1 - jw) / 2 * 2;
  const int64_t full = a.m / R * R;
  const int64_t calls_per_pass = (jw - j0) / J + (jp - jw) / 2 + (j1 - jp);
  NextTaskPrefetch next(a, j0, j1, (row_passes(a.m, R) - 1) * calls_per_pass);
  for (int64_t r = 0; r < full; r += R) {
    if (r == 0)
      for (int64_t j = j0; j < j1; ++j) prefetch_weight_row(a, j);
    for (int64_t j = j0; j < jw; j += J) {
      if (r > 0) next.step();
      TJ<R>::run(a, j, r);
    }
    for (int64_t j = jw; j < jp; j += 2) {
      if (r > 0) next.step();
      T2<R>::run(a, j, r);
    }
    if (jp < j1) {
      if (r > 0) next.step();
      T1<R>::run(a, jp, r);
    }
  }
  if (full < a.m) {
    const int64_t n = a.m - full;
    for (int64_t j = j0; j < jw; j += J) {
      if (full > 0) next.step();
      run_rows<TJ, R - 1>(a, j, full, n);
    }
    for (int64_t j = jw; j < jp; j += 2) {
      if (full > 0) next.step();
      run_rows<T2, R - 1>(a, j, full, n);
    }
    if (jp < j1) {
      if (full > 0) next.step();
      run_rows<T1, R - 1>(a, jp, full, n);
    }
  }
}
}  // namespace

using GemvFn = void (*)(const GemvArgs& args, int64_t j0, int64_t j1);
// Prepares one row of k activations (F32) for weights of the table's dtype into `out`.
using PrepFn = void (*)(const float* x, uint8_t* out, int64_t k);
// Widens / dequantizes n elements (n a multiple of 32 for quantized types) to F32.
using ToF32Fn = void (*)(const void* src, float* dst, int64_t n);
// Narrows n F32 values to f16 / bf16 (round to nearest even).
using NarrowFn = void (*)(const float* src, uint16_t* dst, int64_t n);
// Attention over n cached rows of one block (head_dim <= kMaxHeadDim elements of the KV dtype,
// row j at rows + j * stride elements), for the `group` query heads that share them:
//   scores: scores[h * ld + j] = scale * (q[h * head_dim ...] . row_j)
//   values: out[h * head_dim + e] += sum_j p[h * ld + j] * row_j[e]
inline constexpr int64_t kMaxHeadDim = 256;
using AttnScoresFn = void (*)(const float* q, int64_t group, int64_t head_dim, const void* rows, int64_t stride,
                              int64_t n, float scale, float* scores, int64_t ld);
using AttnValuesFn = void (*)(const float* p, int64_t ld, int64_t group, int64_t head_dim, const void* rows,
                              int64_t stride, int64_t n, float* out);

struct IsaKernels {
  CpuIsa isa;
  GemvFn gemv[kNumDTypes];
  PrepFn prep[kNumDTypes];  // null: the weights take F32 activations as they are
  ToF32Fn to_f32[kNumDTypes];
  NarrowFn narrow[kNumDTypes];  // set for kF16 and kBF16 only
  AttnScoresFn attn_scores[3];  // indexed by KV dtype: kF32, kF16, kBF16
  AttnValuesFn attn_values[3];
  double (*sum_squares)(const float* x, int64_t n);
  // x[i] = exp(x[i] - shift) in place (exactly 0 below exp's float range, e.g. for -inf),
  // returns the sum. shift >= every x[i]: the softmax's max. Relative error ~2e-7 per element.
  float (*exp_sum)(float* x, int64_t n, float shift);
  // The SwiGLU product in place: g[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp(-x)), through
  // exp(-|x|) (x * e / (1 + e) for negative x), so exp never overflows. Elementwise: a row's
  // result does not depend on n or on its neighbours.
  void (*silu_mul)(float* g, const float* u, int64_t n);
  // Sums n floats (n a multiple of 64, p 64-byte aligned): the read-bandwidth probe.
  float (*read_sum)(const float* p, int64_t n);
};

extern const IsaKernels kScalarKernels;
// Scalar entries the vector levels share where they have nothing faster.
namespace scalar {
void prep_bf16_as_f32(const float* x, uint8_t* out, int64_t k);  // bf16-rounded, kept as F32
void narrow_bf16(const float* src, uint16_t* dst, int64_t n);
void prep_q8k(const float* x, uint8_t* out, int64_t k);  // Q8_K activations, natural layout
void prep_q8(const float* x, uint8_t* out, int64_t k);   // Q8 activations: d[nbp], then signed q in order
void f32_to_f32(const void* src, float* dst, int64_t n);
void f16_row_to_f32(const void* src, float* dst, int64_t n);
void bf16_row_to_f32(const void* src, float* dst, int64_t n);
void q8_0_row_to_f32(const void* src, float* dst, int64_t n);
void q4_0_row_to_f32(const void* src, float* dst, int64_t n);
void narrow_f16(const float* src, uint16_t* dst, int64_t n);
float exp_sum(float* x, int64_t n, float shift);
void silu_mul(float* g, const float* u, int64_t n);
void gemv_q4_k(const GemvArgs& a, int64_t j0, int64_t j1);
void gemv_q5_k(const GemvArgs& a, int64_t j0, int64_t j1);
void gemv_q6_k(const GemvArgs& a, int64_t j0, int64_t j1);
void gemv_q3_k(const GemvArgs& a, int64_t j0, int64_t j1);
void gemv_q2_k(const GemvArgs& a, int64_t j0, int64_t j1);
}  // namespace scalar
// Defined only where the compiler targets x86-64.
extern const IsaKernels kAvx2Kernels;
extern const IsaKernels kAvx512Kernels;
extern const IsaKernels kAvx512VnniKernels;
extern const IsaKernels kAvx512VbmiKernels;
extern const IsaKernels kAvx512Bf16Kernels;
// Defined only where the compiler targets aarch64.
extern const IsaKernels kNeonKernels;
extern const IsaKernels kNeonDotprodKernels;

// The table of the active level (cpu_isa.hpp).
const IsaKernels& active_kernels();

// Bytes of one prepared activation row of k elements for weights of dtype `w` on any level.
int64_t act_row_bytes(DType w, int64_t k);

}  // namespace specd::kernels::cpu
