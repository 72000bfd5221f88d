// Per-call time of each verifier plugin on the CPU: B sequences of k = 4 drafts over a
// vocabulary of 32000, through the host's VerifierInstance (ABI call included).
//
// Inputs: target rows p_i ∝ exp(2·N(0,1)); draft probabilities q = normalize(p^1.25) (a draft
// that resembles the target); drafts drawn from q, so every verifier sees a realistic mix of
// accepted and rejected drafts. The verify call validates every row it uses (finite,
// non-negative, sums to 1), so each call reads all (k+1) target rows (and k draft rows for
// rejection) of each sequence at least once.
//
//   bench_verifiers [--benchmark_filter=rejection]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "specd/sdk/abi.h"

namespace {

constexpr int32_t kK = 4;
constexpr int32_t kVocab = 32000;

specd::plugin::Registry& registry() {
  static specd::plugin::Registry* reg = [] {
    auto* r = new specd::plugin::Registry();
    const std::filesystem::path dir(SPECD_PLUGIN_BUILD_DIR);
    for (const char* name : {"rejection", "typical_acceptance", "greedy"})
      r->load(dir / (std::string("specd_verifier_") + name + ".so"));
    return r;
  }();
  return *reg;
}

struct Inputs {
  std::vector<float> target, draft;
  std::vector<int32_t> drafts, num_drafted, out, accepted;
  std::vector<uint64_t> seeds, steps;

  explicit Inputs(int32_t b)
      : target(static_cast<size_t>(b) * (kK + 1) * kVocab),
        draft(static_cast<size_t>(b) * kK * kVocab),
        drafts(static_cast<size_t>(b) * kK),
        num_drafted(static_cast<size_t>(b), kK),
        out(static_cast<size_t>(b) * (kK + 1)),
        accepted(static_cast<size_t>(b)),
        seeds(static_cast<size_t>(b)),
        steps(static_cast<size_t>(b), 0) {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> normal;
    std::vector<double> w(kVocab);
    for (int32_t i = 0; i < b; ++i) {
      seeds[static_cast<size_t>(i)] = 1000 + static_cast<uint64_t>(i);
      for (int32_t pos = 0; pos <= kK; ++pos) {
        float* p = target.data() + (static_cast<size_t>(i) * (kK + 1) + pos) * kVocab;
        double total = 0.0;
        for (auto& x : w) total += (x = std::exp(2.0 * normal(rng)));
        for (int32_t t = 0; t < kVocab; ++t) p[t] = static_cast<float>(w[static_cast<size_t>(t)] / total);
        if (pos == kK) break;
        float* q = draft.data() + (static_cast<size_t>(i) * kK + pos) * kVocab;
        total = 0.0;
        for (int32_t t = 0; t < kVocab; ++t) total += (w[static_cast<size_t>(t)] = std::pow(p[t], 1.25));
        for (int32_t t = 0; t < kVocab; ++t) q[t] = static_cast<float>(w[static_cast<size_t>(t)] / total);
        std::discrete_distribution<int32_t> sample_q(q, q + kVocab);
        drafts[static_cast<size_t>(i) * kK + pos] = sample_q(rng);
      }
    }
  }

  specd_verify_batch view(int32_t b, bool with_draft_probs) {
    specd_verify_batch v{};
    v.struct_size = sizeof(v);
    v.device = {SPECD_DEVICE_CPU, 0};
    v.num_seqs = b;
    v.k_max = kK;
    v.vocab_size = kVocab;
    v.num_drafted = num_drafted.data();
    v.draft_tokens = drafts.data();
    v.target_probs = target.data();
    v.draft_probs = with_draft_probs ? draft.data() : nullptr;
    v.seeds = seeds.data();
    v.steps = steps.data();
    v.out_tokens = out.data();
    v.num_accepted = accepted.data();
    return v;
  }
};

void bm_verify(benchmark::State& state, const char* name) {
  const auto b = static_cast<int32_t>(state.range(0));
  Inputs inputs(b);
  auto verifier = registry().create_verifier(name, specd::plugin::Params());
  const specd_verify_batch batch = inputs.view(b, verifier->capabilities().needs_draft_probs != 0);
  int64_t accepted = 0;
  for (auto _ : state) {
    verifier->verify(batch);
    for (int32_t a : inputs.accepted) accepted += a;
    benchmark::ClobberMemory();
  }
  state.counters["seqs/s"] = benchmark::Counter(static_cast<double>(b), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["accepted/draft"] = static_cast<double>(accepted) / (static_cast<double>(state.iterations()) * b * kK);
}

BENCHMARK_CAPTURE(bm_verify, rejection, "rejection")->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_verify, typical_acceptance, "typical_acceptance")
    ->Arg(1)
    ->Arg(16)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_verify, greedy, "greedy")->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
