// `specd bench --scorers mqa,batch_expansion`: the speculative decode benchmark once per scorer
// (speculative.scorer), on the same prompts, engines side by side with their runs interleaved so
// that noise from other processes spreads over every scorer. Reports per batch size the step
// time, the scoring time per step, throughput, acceptance, each scorer's time relative to the
// first, and whether its greedy tokens equal the first scorer's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace specd::cli {

struct ScorerBenchOptions {
  std::vector<std::string> scorers;
  std::vector<int32_t> batches;
  int32_t prompt_tokens = 128;
  int32_t gen_tokens = 32;
  int32_t repeats = 2;
  bool json = false;
};

// Throws specd::Error when the config has no `speculative` section or a scorer cannot be created.
void bench_scorers(const config::EngineConfig& cfg, const ScorerBenchOptions& options);

// `n` pseudo-random token ids in [3, vocab) from `salt` (shared by the bench runs).
std::vector<int32_t> synthetic_prompt(int32_t n, int64_t vocab, uint64_t salt);

}  // namespace specd::cli
