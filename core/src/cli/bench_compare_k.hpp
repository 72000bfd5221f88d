// `specd bench --compare-k plain,2,4,8,dynamic`: for a config with a `speculative` section, the
// decode benchmark once per arm with its runs interleaved (the order rotates every
// repeat, so noise from other processes spreads over every arm): plain decoding, static k
// (exactly k drafts every step) or dynamic (the policy picks 0..speculative.num_speculative_tokens
// per sequence and step). Reports per batch size each arm's tokens/s (the best of the repeats),
// tokens per step and acceptance, and the ratios of dynamic to plain and to the best other arm,
// both of the bests and as the median of per-repeat (paired) ratios. Racing: a static arm whose
// best falls below drop_below x the leading arm's stops repeating. interleave_steps: every arm
// gets an engine of its own and, in each repeat, the arms' runs advance one engine step each in
// turn, so load from other processes falls on every arm alike (memory: one engine per arm).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace specd::cli {

struct CompareKOptions {
  std::vector<std::string> arms;  // plain | 0 | k in [1, 32] | dynamic
  std::vector<int32_t> batches;
  int32_t prompt_tokens = 128;  // synthetic prompts of this length, unless `prompt` is given
  std::string prompt;           // --prompt / --prompt-file: every request's prompt
  int32_t gen_tokens = 32;
  int32_t repeats = 2;
  double drop_below = 0.75;       // racing: an arm below this x the leader's best stops repeating
  bool interleave_steps = false;  // --interleave steps (default runs)
  bool json = false;
};

// Throws specd::Error when the config has no `speculative` section or an arm is malformed.
void bench_compare_k(const config::EngineConfig& cfg, const CompareKOptions& options);

}  // namespace specd::cli
