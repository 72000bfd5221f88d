// The decode run every `specd bench` mode shares: `batch` greedy requests decoded together on
// one engine, timed once every request has its first token (so prefill is excluded). A second
// figure covers only the steps run while all `batch` requests were decoding (up to and including
// the step in which the first one finished): the rate at that concurrency, without the drain at
// the end, when the rows that got ahead have finished and the last ones decode in a smaller batch.
#pragma once

#include <cstdint>
#include <vector>

#include "specd/engine.hpp"

namespace specd::cli {

struct DecodeResult {
  int32_t batch = 0;
  double tokens_per_s = 0;
  double step_ms = 0;  // mean time of one engine step in the timed region
  int64_t tokens = 0;  // tokens emitted in the timed region
  int64_t steps = 0;
  double full_batch_tokens_per_s = 0;  // over the steps with every request decoding
  spec::SpecMetrics spec;              // Engine::spec_metrics() delta over the whole run
  StepStats timing;                    // Engine::step_stats() delta over the whole run
};

// One decode run driven a step at a time, so that runs on several engines can interleave step by
// step (`bench --compare-k --interleave steps`). The timed region is the sum of the durations of
// the steps run once every request has its first token.
class DecodeRun {
 public:
  // `prompt` non-empty: every request uses it; otherwise synthetic prompts of prompt_tokens from
  // `salt`. `speculative` is every request's Request.speculative.
  DecodeRun(Engine& engine, int32_t batch, int32_t prompt_tokens, int32_t gen_tokens, uint64_t salt,
            const std::vector<int32_t>& prompt, const SpeculativeOptions& speculative);
  bool done() const { return !engine_.has_unfinished(); }
  // One engine step. Throws specd::Error when a request fails.
  void step();
  DecodeResult result() const;

 private:
  Engine& engine_;
  int32_t batch_;
  spec::SpecMetrics spec_before_;
  StepStats timing_before_;
  int32_t started_ = 0, finished_ = 0;
  int64_t tokens_ = 0, steps_ = 0, full_tokens_ = 0;
  double seconds_ = 0, full_seconds_ = 0;
};

// A whole DecodeRun on its own.
DecodeResult bench_decode(Engine& engine, int32_t batch, int32_t prompt_tokens, int32_t gen_tokens, uint64_t salt,
                          const std::vector<int32_t>& prompt, const SpeculativeOptions& speculative);

}  // namespace specd::cli
