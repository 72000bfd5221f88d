// `specd bench --multi-turn N`: a chat of N turns on one shared system prompt, each turn's
// prompt the whole conversation so far plus a new user message (what chat clients send), on two
// engines side by side: kv_cache.prefix_caching on and off, their turns interleaved so that noise
// from other processes falls on both. Reports per turn the prompt length, the tokens found in
// the prefix cache, the time to first token of each engine, and each TTFT over turn 1's; and
// whether both engines generated the same greedy tokens.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace specd::cli {

struct MultiTurnBenchOptions {
  int32_t turns = 10;
  int32_t system_tokens = 2000;  // the shared system prompt
  int32_t user_tokens = 32;      // each turn's new user message
  int32_t gen_tokens = 32;       // each turn's answer
  bool json = false;
};

// Throws specd::Error on options out of range or a conversation longer than the context.
void bench_multi_turn(const config::EngineConfig& cfg, const MultiTurnBenchOptions& options);

}  // namespace specd::cli
