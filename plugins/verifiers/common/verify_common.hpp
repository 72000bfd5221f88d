// Shared by the in-tree verifier plugins (rejection, typical_acceptance, greedy) and compiled
// for both the CPU reference (g++) and the CUDA kernels (nvcc). Everything here is
// header-only and depends on the SDK alone.
//
// Bit-identical CPU/CUDA results. Every float result that decides a token is computed with the
// same operations in the same order on both devices:
//  * multiplications, additions and divisions go through mul_rn/add_rn/div_rn: on the device
//    these are the round-to-nearest intrinsics that nvcc never contracts into an FMA; on the
//    host they are plain operators and the plugins compile with -ffp-contract=off;
//  * sums over a vocabulary row use one fixed order (see "Fixed summation order");
//  * logarithms use portable_log below (no libm / libdevice, whose last bits differ).
//
// Fixed summation order. A row of V weights is cut into chunks of kChunk consecutive entries.
// A chunk's sum is accumulated in index order starting from 0.0f; the row total is the
// in-order running sum of the chunk sums. The inverse CDF and the entropy both use exactly
// this order, so a CPU loop and a CUDA block (one thread per chunk, one thread for the
// running sum) produce the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "specd/sdk/abi.h"
#include "specd/sdk/philox.hpp"

namespace specd::verifiers {

// Entries per chunk of the fixed summation order.
inline constexpr int64_t kChunk = 256;
// A used probability row must sum to 1 within this absolute tolerance.
inline constexpr double kRowSumTolerance = 1e-3;
inline constexpr float kFloatMinNormal = 1.17549435e-38f;

// ---------------------------------------------------------------------------------------------
// Rounded arithmetic that no compiler fuses.

SPECD_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

SPECD_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

SPECD_HOST_DEVICE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

SPECD_HOST_DEVICE uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

SPECD_HOST_DEVICE float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// Natural logarithm of a positive finite float, identical on every device (about 2 ulp from
// the correctly rounded value). x = m·2^e with m in [√½, √2); log m = 2·atanh(s) with
// s = (m−1)/(m+1), |s| ≤ 0.1716, summed to s^11, which is below float precision.
// Branch-free (both sides computed, then selected) so that the CPU loop computing it for a
// whole row vectorizes.
SPECD_HOST_DEVICE float portable_log(float x) {
  const bool subnormal = x < kFloatMinNormal;
  const float scaled = mul_rn(x, 16777216.0f);  // exact: ×2^24
  const uint32_t bits = float_bits(subnormal ? scaled : x);
  const int32_t e0 = static_cast<int32_t>(bits >> 23) - 127 - (subnormal ? 24 : 0);
  const float m0 = bits_to_float((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  const bool high = m0 > 0x1.6a09e6p+0f;                               // above √2
  const float halved = mul_rn(m0, 0.5f);                               // exact
  const float m = high ? halved : m0;
  const int32_t e = high ? e0 + 1 : e0;
  const float s = div_rn(add_rn(m, -1.0f), add_rn(m, 1.0f));
  const float s2 = mul_rn(s, s);
  // Coefficients 1/11, 1/9, 1/7, 1/5, 1/3 as exact float literals.
  float poly = 0x1.745d18p-4f;
  poly = add_rn(mul_rn(poly, s2), 0x1.c71c72p-4f);
  poly = add_rn(mul_rn(poly, s2), 0x1.24924ap-3f);
  poly = add_rn(mul_rn(poly, s2), 0x1.99999ap-3f);
  poly = add_rn(mul_rn(poly, s2), 0x1.555556p-2f);
  poly = add_rn(mul_rn(poly, s2), 1.0f);
  const float log_m = mul_rn(mul_rn(2.0f, s), poly);
  return add_rn(mul_rn(static_cast<float>(e), 0x1.62e430p-1f /* ln 2 */), log_m);
}

// ---------------------------------------------------------------------------------------------
// Weights: a row of non-negative floats read through a functor, so that the residual
// max(0, p − q) is never materialised.

struct TargetWeights {
  const float* p;
  SPECD_HOST_DEVICE float operator()(int64_t i) const { return p[i]; }
};

// normalize(max(0, p − q)) before normalisation.
struct ResidualWeights {
  const float* p;
  const float* q;
  SPECD_HOST_DEVICE float operator()(int64_t i) const {
    const float d = add_rn(p[i], -q[i]);
    return d > 0.0f ? d : 0.0f;
  }
};

// The residual against a one-hot draft distribution at `token` (proposers without probs).
struct OneHotResidualWeights {
  const float* p;
  int64_t token;
  SPECD_HOST_DEVICE float operator()(int64_t i) const {
    if (i != token) return p[i];
    const float d = add_rn(p[i], -1.0f);
    return d > 0.0f ? d : 0.0f;
  }
};

// −p·log p; 0 for p = 0. Summed in the fixed order this is the entropy H in nats.
SPECD_HOST_DEVICE float entropy_term(float v) {
  const float term = -mul_rn(v, portable_log(v));  // finite for v = 0 too; selected away
  return v > 0.0f ? term : 0.0f;
}

struct EntropyTerms {
  const float* p;
  SPECD_HOST_DEVICE float operator()(int64_t i) const { return entropy_term(p[i]); }
};

// ---------------------------------------------------------------------------------------------
// Fixed-order inverse CDF. Shared verbatim by the CPU path and the CUDA block's thread 0.

SPECD_HOST_DEVICE int64_t num_chunks(int64_t vocab) {
  return (vocab + kChunk - 1) / kChunk;
}

// The sum of chunk c, in index order from 0.0f.
template <class W>
SPECD_HOST_DEVICE float chunk_sum(const W& w, int64_t vocab, int64_t c) {
  const int64_t begin = c * kChunk;
  const int64_t end = begin + kChunk < vocab ? begin + kChunk : vocab;
  float acc = 0.0f;
  for (int64_t i = begin; i < end; ++i) acc = add_rn(acc, w(i));
  return acc;
}

// Turns chunk sums into inclusive running sums in place; returns the row total.
SPECD_HOST_DEVICE float inclusive_prefix(float* sums, int64_t n) {
  float cum = 0.0f;
  for (int64_t c = 0; c < n; ++c) {
    cum = add_rn(cum, sums[c]);
    sums[c] = cum;
  }
  return cum;
}

// First c in [0, n) with prefix[c] > target, or n. Running sums of non-negative floats never
// decrease, so a binary search finds the same index as a linear scan.
SPECD_HOST_DEVICE int64_t first_greater(const float* prefix, int64_t n, float target) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (prefix[mid] > target) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The last index in [begin, end) with a positive weight, or -1.
template <class W>
SPECD_HOST_DEVICE int64_t last_positive(const W& w, int64_t begin, int64_t end) {
  for (int64_t i = end - 1; i >= begin; --i)
    if (w(i) > 0.0f) return i;
  return -1;
}

// Draws an index from the weights given the chunks' inclusive running sums (prefix, n chunks)
// and their total, with uniform u in [0, 1):
//   target = u · total;
//   c = the first chunk whose running sum exceeds target;
//   walking chunk c from the running sum before it, return the first index whose running sum
//   exceeds target; if rounding lets the walk end without exceeding, the chunk's last index
//   with positive weight; if no chunk exceeds target (u · total rounded up to total), the
//   row's last index with positive weight.
// Zero-weight entries are never drawn. Returns -1 when the total is not positive.
template <class W>
SPECD_HOST_DEVICE int64_t select_from_prefix(const W& w, int64_t vocab, const float* prefix, int64_t n, float total,
                                             float u) {
  if (!(total > 0.0f)) return -1;
  const float target = mul_rn(u, total);
  const int64_t c = first_greater(prefix, n, target);
  if (c == n) return last_positive(w, 0, vocab);
  const int64_t begin = c * kChunk;
  const int64_t end = begin + kChunk < vocab ? begin + kChunk : vocab;
  float acc = c > 0 ? prefix[c - 1] : 0.0f;
  for (int64_t i = begin; i < end; ++i) {
    acc = add_rn(acc, w(i));
    if (acc > target) return i;
  }
  return last_positive(w, begin, end);
}

// ---------------------------------------------------------------------------------------------
// Acceptance rules (scalar; the entropy and argmax they need are computed by the caller).

// Lossless rejection: accept iff p/q ≥ u, written p ≥ u·q. q = 0 rejects; p = 0 rejects too, so
// that u = 0 (probability 2^-24) never lets a token the target forbids through.
SPECD_HOST_DEVICE bool rejection_accepts(float p, float q, float u) {
  return q > 0.0f && p > 0.0f && p >= mul_rn(u, q);
}

// Typical acceptance: accept iff p > min(threshold, alpha·exp(−H)), i.e. p > threshold or
// p > alpha·exp(−H). The second test is done in log space, log p + H > log alpha, so that only
// portable_log is needed; log_alpha = portable_log(alpha) when alpha > 0.
SPECD_HOST_DEVICE bool typical_accepts(float p, float entropy, float threshold, float alpha, float log_alpha) {
  if (p > threshold) return true;
  if (!(p > 0.0f)) return false;
  if (alpha == 0.0f) return true;  // min(threshold, 0) = 0 < p
  return add_rn(portable_log(p), entropy) > log_alpha;
}

// ---------------------------------------------------------------------------------------------
// One sequence of a specd_verify_batch, with the index arithmetic of its flat layout.

// What a verifier reads from the batch, so that validation checks exactly that.
struct Uses {
  bool rng = true;          // seeds/steps (sampling or random acceptance tests)
  bool draft_probs = true;  // draft_probs when present (else q is one-hot)
};

struct SequenceView {
  int32_t num_drafted;
  int64_t vocab;
  const float* target;    // [k_max + 1, vocab]
  const float* draft;     // [k_max, vocab] or nullptr
  const int32_t* drafts;  // [k_max]
  uint64_t seed;
  uint64_t step;
  // Added to every position's random counter: 0 for a chain; a tree node's view (verify_tree.hpp)
  // sets its depth and sibling rank here and is read at position 0.
  uint32_t counter_base;

  SPECD_HOST_DEVICE const float* target_row(int32_t pos) const { return target + pos * vocab; }
  SPECD_HOST_DEVICE const float* draft_row(int32_t pos) const { return draft + pos * vocab; }
  SPECD_HOST_DEVICE int32_t draft_token(int32_t pos) const { return drafts[pos]; }
  SPECD_HOST_DEVICE float accept_uniform(int32_t pos) const {
    return sdk::philox_uniform(seed, step, counter_base + static_cast<uint32_t>(pos), sdk::kLaneAccept);
  }
  SPECD_HOST_DEVICE float sample_uniform(int32_t pos) const {
    return sdk::philox_uniform(seed, step, counter_base + static_cast<uint32_t>(pos), sdk::kLaneSample);
  }
};

// Sequence i of a batch whose num_drafted[i] was checked to be in [0, k_max].
SPECD_HOST_DEVICE SequenceView sequence_view(const specd_verify_batch& b, int32_t i, const Uses& uses) {
  const int64_t vocab = b.vocab_size;
  const int64_t k = b.k_max;
  SequenceView s{};
  s.num_drafted = b.num_drafted[i];
  s.vocab = vocab;
  s.target = b.target_probs + static_cast<int64_t>(i) * (k + 1) * vocab;
  s.draft =
      uses.draft_probs && b.draft_probs != nullptr ? b.draft_probs + static_cast<int64_t>(i) * k * vocab : nullptr;
  s.drafts = b.draft_tokens != nullptr ? b.draft_tokens + static_cast<int64_t>(i) * k : nullptr;
  s.seed = uses.rng ? b.seeds[i] : 0;
  s.step = uses.rng ? b.steps[i] : 0;
  return s;
}

}  // namespace specd::verifiers
