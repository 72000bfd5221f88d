// specd bench's scoring measurement: score(k+1) against decode(1) on the target model alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/placement.hpp"
#include "specd/engine.hpp"

namespace specd::cli {

// The cost of scoring k+1 new tokens per sequence (a speculative step's target forward) against
// a one-token decode step, at the same context length and batch size, timed on the target
// model directly (a second LlamaModel over the same checkpoint, on `placement`, and its own
// small KV cache there):
// `batch` sequences are prefilled with `context` synthetic tokens, then each measurement
// reserves n slots, runs one forward of n new tokens per sequence (kLast for n = 1, kAll for
// n = k+1, as the engine does), and truncates the KV back. Median of `reps` runs after one
// warm-up. No proposer, verifier or sampling time is included in either number.
struct ScoringResult {
  int32_t batch = 0;
  double decode_ms = 0;  // forward of 1 new token per sequence
  double score_ms = 0;   // forward of k+1 new tokens per sequence, logits for all of them
};

std::vector<ScoringResult> measure_scoring(const EngineInfo& info, const std::string& dtype_setting,
                                           model::Placement placement, int32_t k, int32_t context,
                                           const std::vector<int32_t>& batches, int reps);

}  // namespace specd::cli
