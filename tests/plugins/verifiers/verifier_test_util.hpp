// Helpers for the verifier plugin tests: load the three in-tree verifier plugins through the
// host's registry, build host-side verify batches, and re-state the documented sampling rule
// (docs/verifiers.md) independently of the plugins' code.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "specd/error.hpp"
#include "specd/sdk/abi.h"
#include "specd/sdk/philox.hpp"

namespace specd::test {

inline const char* const kVerifierNames[] = {"rejection", "typical_acceptance", "greedy"};

// Test-name generator for suites parametrized by verifier name.
struct VerifierName {
  std::string operator()(const ::testing::TestParamInfo<std::string>& info) const { return info.param; }
};

// One registry per test process with the three verifier plugins loaded.
inline plugin::Registry& verifier_registry() {
  static plugin::Registry* reg = [] {
    auto* r = new plugin::Registry();
    // SPECD_TEST_PLUGIN_DIR: the plugins elsewhere than in the build (scripts/gpu-check.sh).
    const char* env = std::getenv("SPECD_TEST_PLUGIN_DIR");
    const std::filesystem::path dir(env != nullptr && *env != '\0' ? env : SPECD_PLUGIN_BUILD_DIR);
    for (const char* name : kVerifierNames) r->load(dir / (std::string("specd_verifier_") + name + ".so"));
    return r;
  }();
  return *reg;
}

inline std::unique_ptr<plugin::VerifierInstance> make_verifier(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& params = {}) {
  return verifier_registry().create_verifier(
      name, plugin::Params::from_pairs(params, "verifiers.yaml", "speculative.verifier"));
}

// A verify batch in host memory, with its outputs. Layouts as in specd_verify_batch.
struct HostBatch {
  int32_t num_seqs = 0;
  int32_t k_max = 0;
  int32_t vocab = 0;
  std::vector<float> target;    // [B, k+1, V]
  std::vector<float> draft;     // [B, k, V], or empty (one-hot q)
  std::vector<int32_t> drafts;  // [B, k]
  std::vector<int32_t> num_drafted;
  std::vector<uint64_t> seeds;
  std::vector<uint64_t> steps;
  std::vector<int32_t> out;       // [B, k+1]
  std::vector<int32_t> accepted;  // [B]

  HostBatch() = default;
  HostBatch(int32_t b, int32_t k, int32_t v, bool with_draft_probs)
      : num_seqs(b),
        k_max(k),
        vocab(v),
        target(static_cast<size_t>(b) * (k + 1) * v, 0.0f),
        draft(with_draft_probs ? static_cast<size_t>(b) * k * v : 0, 0.0f),
        drafts(static_cast<size_t>(b) * k, -1),
        num_drafted(static_cast<size_t>(b), k),
        seeds(static_cast<size_t>(b)),
        steps(static_cast<size_t>(b), 0),
        out(static_cast<size_t>(b) * (k + 1), -7),
        accepted(static_cast<size_t>(b), -7) {
    for (int32_t i = 0; i < b; ++i) seeds[static_cast<size_t>(i)] = 1000 + static_cast<uint64_t>(i);
  }

  float* target_row(int32_t i, int32_t pos) {
    return target.data() + (static_cast<size_t>(i) * (k_max + 1) + pos) * vocab;
  }
  float* draft_row(int32_t i, int32_t pos) { return draft.data() + (static_cast<size_t>(i) * k_max + pos) * vocab; }
  int32_t& draft_token(int32_t i, int32_t pos) { return drafts[static_cast<size_t>(i) * k_max + pos]; }
  std::vector<int32_t> out_row(int32_t i) const {
    return {out.begin() + static_cast<ptrdiff_t>(i) * (k_max + 1),
            out.begin() + static_cast<ptrdiff_t>(i + 1) * (k_max + 1)};
  }

  specd_verify_batch view() {
    specd_verify_batch b{};
    b.struct_size = sizeof(b);
    b.device = {SPECD_DEVICE_CPU, 0};
    b.stream = nullptr;
    b.num_seqs = num_seqs;
    b.k_max = k_max;
    b.vocab_size = vocab;
    b.num_drafted = num_drafted.data();
    b.draft_tokens = drafts.data();
    b.target_probs = target.data();
    b.draft_probs = draft.empty() ? nullptr : draft.data();
    b.seeds = seeds.data();
    b.steps = steps.data();
    b.out_tokens = out.data();
    b.num_accepted = accepted.data();
    return b;
  }

  void run(plugin::VerifierInstance& v) {
    const specd_verify_batch b = view();
    v.verify(b);
  }
};

// Fills row with a random distribution: p_i ∝ exp(spread · N(0, 1)), normalised so that the
// float row sums to 1 within rounding.
inline void random_distribution(float* row, int64_t vocab, std::mt19937_64& rng, double spread = 1.0) {
  std::normal_distribution<double> normal;
  std::vector<double> w(static_cast<size_t>(vocab));
  double total = 0.0;
  for (auto& x : w) total += (x = std::exp(spread * normal(rng)));
  for (int64_t i = 0; i < vocab; ++i) row[i] = static_cast<float>(w[static_cast<size_t>(i)] / total);
}

inline void one_hot(float* row, int64_t vocab, int64_t token) {
  for (int64_t i = 0; i < vocab; ++i) row[i] = 0.0f;
  row[token] = 1.0f;
}

inline void uniform(float* row, int64_t vocab) {
  for (int64_t i = 0; i < vocab; ++i) row[i] = 1.0f / static_cast<float>(vocab);
}

// Fills every target and draft row with random distributions and every draft token with a
// random id; num_drafted random in [0, k] when `random_lengths`.
inline HostBatch random_batch(int32_t b, int32_t k, int32_t v, bool with_draft_probs, uint64_t seed,
                              bool random_lengths = true) {
  HostBatch hb(b, k, v, with_draft_probs);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, v - 1), length(0, k);
  for (int32_t i = 0; i < b; ++i) {
    for (int32_t pos = 0; pos <= k; ++pos) random_distribution(hb.target_row(i, pos), v, rng);
    for (int32_t pos = 0; pos < k; ++pos) {
      if (with_draft_probs) random_distribution(hb.draft_row(i, pos), v, rng);
      hb.draft_token(i, pos) = token(rng);
    }
    hb.num_drafted[static_cast<size_t>(i)] = random_lengths ? length(rng) : k;
    hb.seeds[static_cast<size_t>(i)] = seed * 1000003u + static_cast<uint64_t>(i);
    hb.steps[static_cast<size_t>(i)] = static_cast<uint64_t>(token(rng));
  }
  return hb;
}

// The output contract of every verifier: num_accepted in [0, num_drafted], the accepted
// drafts, one emitted token in the vocabulary, then -1 padding.
inline void expect_well_formed(const HostBatch& hb) {
  for (int32_t i = 0; i < hb.num_seqs; ++i) {
    const int32_t a = hb.accepted[static_cast<size_t>(i)];
    const int32_t n = hb.num_drafted[static_cast<size_t>(i)];
    ASSERT_GE(a, 0) << "sequence " << i;
    ASSERT_LE(a, n) << "sequence " << i;
    const std::vector<int32_t> row = hb.out_row(i);
    for (int32_t pos = 0; pos < a; ++pos)
      ASSERT_EQ(row[static_cast<size_t>(pos)], hb.drafts[static_cast<size_t>(i) * hb.k_max + pos])
          << "sequence " << i << " position " << pos;
    ASSERT_GE(row[static_cast<size_t>(a)], 0) << "sequence " << i;
    ASSERT_LT(row[static_cast<size_t>(a)], hb.vocab) << "sequence " << i;
    for (int32_t pos = a + 1; pos <= hb.k_max; ++pos)
      ASSERT_EQ(row[static_cast<size_t>(pos)], -1) << "sequence " << i << " position " << pos;
  }
}

// The sampling rule of docs/verifiers.md, restated: chunks of 256 entries summed in index order,
// running sum over chunks, first chunk whose running sum exceeds u·total, then the first entry
// inside it whose running sum exceeds u·total (fallbacks: the chunk's, else the row's, last
// positive entry).
inline int32_t documented_inverse_cdf(const float* w, int64_t vocab, float u) {
  constexpr int64_t kChunk = 256;
  const int64_t n = (vocab + kChunk - 1) / kChunk;
  std::vector<float> prefix(static_cast<size_t>(n));
  volatile float cum = 0.0f;  // volatile: one rounding per addition, whatever the flags
  for (int64_t c = 0; c < n; ++c) {
    volatile float s = 0.0f;
    for (int64_t i = c * kChunk; i < std::min(vocab, (c + 1) * kChunk); ++i) s = s + w[i];
    cum = cum + s;
    prefix[static_cast<size_t>(c)] = cum;
  }
  const volatile float target = u * cum;
  auto last_positive = [&](int64_t begin, int64_t end) -> int32_t {
    for (int64_t i = end - 1; i >= begin; --i)
      if (w[i] > 0.0f) return static_cast<int32_t>(i);
    return -1;
  };
  for (int64_t c = 0; c < n; ++c) {
    if (!(prefix[static_cast<size_t>(c)] > target)) continue;
    volatile float acc = c > 0 ? prefix[static_cast<size_t>(c - 1)] : 0.0f;
    const int64_t end = std::min(vocab, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) {
      acc = acc + w[i];
      if (acc > target) return static_cast<int32_t>(i);
    }
    return last_positive(c * kChunk, end);
  }
  return last_positive(0, vocab);
}

inline std::string verify_error(plugin::VerifierInstance& v, const specd_verify_batch& b) {
  try {
    v.verify(b);
  } catch (const specd::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected verify to fail";
  return {};
}

}  // namespace specd::test
