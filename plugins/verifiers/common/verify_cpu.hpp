// Host-side half of the verifier plugins' shared code: input validation with the error texts
// documented in docs/verifiers.md, the CPU reference primitives (argmax, entropy, inverse-CDF
// sampling in the fixed order of verify_common.hpp) and the per-sequence driver.
//
// Nothing here throws or depends on <specd/sdk/plugin.hpp>: results are a Status, so the CUDA
// translation units (compiled by nvcc) can use the same validation without Boost.DLL.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "verify_common.hpp"

namespace specd::verifiers {

struct Status {
  int32_t code = SPECD_OK;
  std::string message;
  bool ok() const { return code == SPECD_OK; }
};

template <class... Args>
Status invalid(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return {SPECD_ERR_INVALID_ARGUMENT, os.str()};
}

// ---------------------------------------------------------------------------------------------
// Validation

// Checks the batch's scalars and pointers (never dereferences data), so it also serves the
// CUDA path before launch.
inline Status check_batch(const specd_verify_batch& b, const Uses& uses) {
  if (b.struct_size < sizeof(specd_verify_batch))
    return invalid("verify batch: struct_size ", b.struct_size, " is smaller than ", sizeof(specd_verify_batch),
                   " (host built against an older ABI)");
  if (b.num_seqs < 0) return invalid("verify batch: num_seqs must be >= 0, got ", b.num_seqs);
  if (b.k_max < 0) return invalid("verify batch: k_max must be >= 0, got ", b.k_max);
  if (b.vocab_size <= 0) return invalid("verify batch: vocab_size must be > 0, got ", b.vocab_size);
  if (b.num_seqs == 0) return {};
  const std::pair<const void*, const char*> required[] = {{b.num_drafted, "num_drafted"},
                                                          {b.target_probs, "target_probs"},
                                                          {b.out_tokens, "out_tokens"},
                                                          {b.num_accepted, "num_accepted"}};
  for (const auto& [ptr, name] : required)
    if (ptr == nullptr) return invalid("verify batch: ", name, " is null");
  if (b.k_max > 0 && b.draft_tokens == nullptr) return invalid("verify batch: draft_tokens is null");
  if (uses.rng && b.seeds == nullptr) return invalid("verify batch: seeds is null");
  if (uses.rng && b.steps == nullptr) return invalid("verify batch: steps is null");
  return {};
}

// A probability row must hold finite, non-negative values that sum to 1 within
// kRowSumTolerance. `what` is "target" or "draft".
//
// One vectorizable pass: eight float lanes of sums and minima per block of 1024 entries (so
// float rounding stays far below the tolerance), block sums accumulated in double. NaN and +inf
// surface in the sum, negatives in the minimum; only then is the row scanned for the culprit.
inline Status check_row(const float* row, int64_t vocab, int32_t seq, int32_t pos, const char* what) {
  // GCC/Clang vector extension: explicit 2×4-lane SIMD (SSE on baseline x86-64, NEON on
  // arm64), because the auto-vectorizer may not reorder a float reduction by itself.
  typedef float Lanes __attribute__((vector_size(4 * sizeof(float))));
  constexpr int64_t kGroup = 8, kBlockGroups = 128;  // 1024 entries per block
  const int64_t groups = vocab / kGroup;
  double total = 0.0;
  Lanes min0 = {}, min1 = {};
  for (int64_t g0 = 0; g0 < groups; g0 += kBlockGroups) {
    const int64_t g1 = g0 + kBlockGroups < groups ? g0 + kBlockGroups : groups;
    Lanes acc0 = {}, acc1 = {};
    for (int64_t g = g0; g < g1; ++g) {
      Lanes v0, v1;
      std::memcpy(&v0, row + g * kGroup, sizeof(v0));
      std::memcpy(&v1, row + g * kGroup + 4, sizeof(v1));
      acc0 += v0;
      acc1 += v1;
      min0 = v0 < min0 ? v0 : min0;
      min1 = v1 < min1 ? v1 : min1;
    }
    const Lanes acc = acc0 + acc1;
    total += static_cast<double>((acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
  const Lanes lane_min = min0 < min1 ? min0 : min1;
  float min = 0.0f;
  for (int l = 0; l < 4; ++l) min = lane_min[l] < min ? lane_min[l] : min;
  for (int64_t i = groups * kGroup; i < vocab; ++i) {
    total += static_cast<double>(row[i]);
    min = row[i] < min ? row[i] : min;
  }
  if (!(min >= 0.0f) || !std::isfinite(total)) {
    for (int64_t t = 0; t < vocab; ++t)
      if (!(row[t] >= 0.0f && row[t] <= 3.40282347e38f))
        return invalid("sequence ", seq, ", position ", pos, ": ", what, " probability of token ", t, " is ", row[t],
                       " (must be finite and >= 0)");
  }
  if (!(std::fabs(total - 1.0) <= kRowSumTolerance))
    return invalid("sequence ", seq, ", position ", pos, ": ", what, " probabilities sum to ", total,
                   ", expected 1 (tolerance ", kRowSumTolerance, ")");
  return {};
}

// Checks what sequence i uses: num_drafted, its draft tokens, target rows 0..num_drafted and
// (when used and present) draft rows 0..num_drafted-1. Messages name sequence `reported`
// (the index in the caller's batch; differs from i when re-checking a copied sequence).
inline Status check_sequence(const specd_verify_batch& b, int32_t i, const Uses& uses, int32_t reported) {
  const int32_t n = b.num_drafted[i];
  if (n < 0 || n > b.k_max)
    return invalid("sequence ", reported, ": num_drafted ", n, " is outside [0, ", b.k_max, "]");
  // Rows and drafts only: seeds/steps are not read here (they may be device pointers when
  // re-checking a sequence copied back from a CUDA batch).
  const SequenceView s = sequence_view(b, i, Uses{.rng = false, .draft_probs = uses.draft_probs});
  for (int32_t pos = 0; pos < n; ++pos) {
    const int32_t x = s.draft_token(pos);
    if (x < 0 || x >= b.vocab_size)
      return invalid("sequence ", reported, ", position ", pos, ": draft token ", x, " is outside the vocabulary [0, ",
                     b.vocab_size, ")");
  }
  for (int32_t pos = 0; pos <= n; ++pos)
    if (Status st = check_row(s.target_row(pos), s.vocab, reported, pos, "target"); !st.ok()) return st;
  if (s.draft != nullptr)
    for (int32_t pos = 0; pos < n; ++pos)
      if (Status st = check_row(s.draft_row(pos), s.vocab, reported, pos, "draft"); !st.ok()) return st;
  return {};
}

// ---------------------------------------------------------------------------------------------
// CPU primitives

// Reused buffers of one verifier instance (the host calls an instance from one thread).
struct CpuScratch {
  std::vector<float> chunks;  // [num_chunks(vocab)]
  std::vector<float> terms;   // [vocab] entropy terms
  // Draft trees (verify_tree.hpp): residual distributions, node depths, child lists, the path.
  std::vector<float> residual[2];
  std::vector<int32_t> depth, path;
  std::vector<std::vector<int32_t>> children;
};

// All chunk sums of a row, each accumulated in index order exactly as chunk_sum() does. Eight
// chunks advance together so that eight independent addition chains hide the add latency.
template <class W>
void chunk_sums(const W& w, int64_t vocab, float* sums) {
  constexpr int64_t kLanes = 8;
  const int64_t n = num_chunks(vocab);
  const int64_t full = vocab / kChunk;
  int64_t c = 0;
  for (; c + kLanes <= full; c += kLanes) {
    float acc[kLanes] = {};
    const int64_t base = c * kChunk;
    for (int64_t j = 0; j < kChunk; ++j)
      for (int64_t l = 0; l < kLanes; ++l) acc[l] = add_rn(acc[l], w(base + l * kChunk + j));
    for (int64_t l = 0; l < kLanes; ++l) sums[c + l] = acc[l];
  }
  for (; c < n; ++c) sums[c] = chunk_sum(w, vocab, c);
}

// Inverse-CDF draw from the (unnormalised) weights with uniform u; -1 if they are all zero.
template <class W>
int64_t sample_cpu(const W& w, int64_t vocab, float u, CpuScratch& scratch) {
  const int64_t n = num_chunks(vocab);
  scratch.chunks.resize(static_cast<size_t>(n));
  float* prefix = scratch.chunks.data();
  chunk_sums(w, vocab, prefix);
  const float total = inclusive_prefix(prefix, n);
  return select_from_prefix(w, vocab, prefix, n, total, u);
}

// Entropy in nats, −Σ p log p, summed in the fixed order. The terms are computed in a
// separate elementwise (vectorized) pass; elementwise float operations round the same in SIMD
// and scalar code, so this equals summing EntropyTerms directly.
inline float entropy_cpu(const float* p, int64_t vocab, CpuScratch& scratch) {
  const int64_t n = num_chunks(vocab);
  scratch.chunks.resize(static_cast<size_t>(n));
  scratch.terms.resize(static_cast<size_t>(vocab));
  float* terms = scratch.terms.data();
  for (int64_t i = 0; i < vocab; ++i) terms[i] = entropy_term(p[i]);
  chunk_sums(TargetWeights{terms}, vocab, scratch.chunks.data());
  return inclusive_prefix(scratch.chunks.data(), n);
}

// Index of the largest value; ties go to the lowest index. Row values are validated
// (no NaN), so the maximum is well defined.
inline int32_t argmax_cpu(const float* row, int64_t vocab) {
  typedef float Lanes __attribute__((vector_size(4 * sizeof(float))));  // as in check_row
  const int64_t groups = vocab / 8;
  Lanes max0 = {row[0], row[0], row[0], row[0]}, max1 = max0;
  for (int64_t g = 0; g < groups; ++g) {
    Lanes v0, v1;
    std::memcpy(&v0, row + g * 8, sizeof(v0));
    std::memcpy(&v1, row + g * 8 + 4, sizeof(v1));
    max0 = v0 > max0 ? v0 : max0;
    max1 = v1 > max1 ? v1 : max1;
  }
  const Lanes lane_max = max0 > max1 ? max0 : max1;
  float best = row[0];
  for (int l = 0; l < 4; ++l) best = lane_max[l] > best ? lane_max[l] : best;
  for (int64_t i = groups * 8; i < vocab; ++i) best = row[i] > best ? row[i] : best;
  for (int64_t t = 0; t < vocab; ++t)
    if (row[t] == best) return static_cast<int32_t>(t);
  return 0;  // unreachable: best is one of the row's values
}

// The operations a verifier rule needs beyond scalar arithmetic, on the CPU. The CUDA
// counterpart is cuda::BlockOps; both give identical results for identical inputs.
struct CpuOps {
  CpuScratch* scratch;
  template <class W>
  int32_t sample(const W& w, int64_t vocab, float u) {
    return static_cast<int32_t>(sample_cpu(w, vocab, u, *scratch));
  }
  int32_t argmax(const float* row, int64_t vocab) { return argmax_cpu(row, vocab); }
  float entropy(const float* p, int64_t vocab) { return entropy_cpu(p, vocab, *scratch); }
};

// ---------------------------------------------------------------------------------------------
// The CPU driver: validation, the accept/emit loop of every verifier, and the output layout.
//
// A Rule (one per verifier, written once for both devices) provides, for a validated sequence
// and an Ops (CpuOps or cuda::BlockOps):
//   bool accept(const SequenceView&, int32_t pos, Ops&)    — is draft `pos` accepted?
//   int32_t recover(const SequenceView&, int32_t pos, Ops&) — the token emitted when draft `pos`
//                                                             is rejected
//   int32_t bonus(const SequenceView&, int32_t pos, Ops&)   — the token emitted at
//                                                             pos = num_drafted when every draft
//                                                             was accepted (or none was proposed)
// recover/bonus return -1 only for an empty distribution (cannot happen for validated rows).
template <class Rule>
Status verify_on_cpu(const specd_verify_batch& b, const Uses& uses, const Rule& rule, CpuScratch& scratch) {
  if (Status st = check_batch(b, uses); !st.ok()) return st;
  const int64_t width = static_cast<int64_t>(b.k_max) + 1;
  CpuOps ops{&scratch};
  for (int32_t i = 0; i < b.num_seqs; ++i) {
    if (Status st = check_sequence(b, i, uses, i); !st.ok()) return st;
    const SequenceView s = sequence_view(b, i, uses);
    Rule r = rule;
    int32_t accepted = 0;
    int32_t emitted = -1;
    for (; accepted < s.num_drafted; ++accepted) {
      if (!r.accept(s, accepted, ops)) {
        emitted = r.recover(s, accepted, ops);
        break;
      }
    }
    if (accepted == s.num_drafted) emitted = r.bonus(s, accepted, ops);
    if (emitted < 0)
      return {SPECD_ERR_INTERNAL, "sequence " + std::to_string(i) + ", position " + std::to_string(accepted) +
                                      ": no token could be drawn (empty distribution)"};
    int32_t* out = b.out_tokens + i * width;
    for (int32_t pos = 0; pos < accepted; ++pos) out[pos] = s.draft_token(pos);
    out[accepted] = emitted;
    for (int64_t pos = accepted + 1; pos < width; ++pos) out[pos] = -1;
    b.num_accepted[i] = accepted;
  }
  return {};
}

}  // namespace specd::verifiers
