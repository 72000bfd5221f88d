#include "cli/bench_multi_turn.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench_scorers.hpp"
#include "specd/engine.hpp"
#include "specd/error.hpp"

namespace specd::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Turn {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  double ttft_ms = 0;
  std::vector<int32_t> answer;
};

// One turn on `engine`: the request alone, from add_request to the end; the first token's time.
Turn run_turn(Engine& engine, RequestId id, const std::vector<int32_t>& prompt, int32_t gen_tokens) {
  Request r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = gen_tokens;
  r.sampling.ignore_eos = true;
  Turn t;
  t.prompt_tokens = static_cast<int32_t>(prompt.size());
  const Clock::time_point start = Clock::now();
  engine.add_request(id, r);
  while (engine.has_unfinished()) {
    for (const RequestOutput& out : engine.step()) {
      if (out.finish_reason == FinishReason::kError)
        throw Error(ErrorCode::kInternal, "bench request failed: " + out.error);
      if (t.answer.empty() && !out.new_token_ids.empty())
        t.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      t.answer.insert(t.answer.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      t.cached_tokens = out.num_cached_tokens;
    }
  }
  return t;
}

void print(const EngineInfo& info, const MultiTurnBenchOptions& o, const std::vector<Turn>& on,
           const std::vector<Turn>& off, bool same) {
  std::printf("model       %s (%s), %d threads, %s kernels on %s\n", info.model_dir.c_str(), info.weight_dtype.c_str(),
              info.num_threads, info.cpu_isa.c_str(), info.cpu_model.c_str());
  std::printf("chat        %d turns: %d-token system prompt, %d-token user messages, %d-token answers (greedy)\n",
              o.turns, o.system_tokens, o.user_tokens, o.gen_tokens);
  std::printf(
      "\n| turn | prompt tokens | cached | TTFT caching on (ms) | vs turn 1 | TTFT caching off (ms) | vs turn 1 |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (size_t i = 0; i < on.size(); ++i) {
    std::printf("| %zu | %d | %d | %.1f | %.2fx | %.1f | %.2fx |\n", i + 1, on[i].prompt_tokens, on[i].cached_tokens,
                on[i].ttft_ms, on[i].ttft_ms / on[0].ttft_ms, off[i].ttft_ms, off[i].ttft_ms / off[0].ttft_ms);
  }
  std::printf("\nsame greedy tokens with caching on and off: %s\n", same ? "yes" : "NO");
}

nlohmann::json turns_json(const std::vector<Turn>& turns) {
  nlohmann::json a = nlohmann::json::array();
  for (const Turn& t : turns)
    a.push_back({{"prompt_tokens", t.prompt_tokens}, {"cached_tokens", t.cached_tokens}, {"ttft_ms", t.ttft_ms}});
  return a;
}

}  // namespace

void bench_multi_turn(const config::EngineConfig& cfg, const MultiTurnBenchOptions& o) {
  if (o.turns < 1 || o.turns > 1000 || o.system_tokens < 1 || o.user_tokens < 1 || o.gen_tokens < 1)
    throw Error(ErrorCode::kInvalidArgument,
                "--multi-turn must be in [1, 1000], --system-tokens, --turn-tokens and --gen-tokens >= 1");
  config::EngineConfig with = cfg, without = cfg;
  with.kv_cache.prefix_caching = true;
  without.kv_cache.prefix_caching = false;
  Engine on(with), off(without);
  const int64_t total = int64_t{o.system_tokens} + int64_t{o.turns} * (o.user_tokens + o.gen_tokens);
  if (total > on.info().max_model_len)
    throw Error(ErrorCode::kInvalidArgument, "the conversation reaches " + std::to_string(total) +
                                                 " tokens, past the context length " +
                                                 std::to_string(on.info().max_model_len));
  if (!on.info().prefix_caching)
    throw Error(ErrorCode::kInvalidArgument,
                "prefix caching is off for this config (its proposer needs the target's hidden states)");
  const int64_t vocab = on.info().vocab_size;
  std::vector<int32_t> history_on = synthetic_prompt(o.system_tokens, vocab, 0x5157);
  std::vector<int32_t> history_off = history_on;
  std::vector<Turn> turns_on, turns_off;
  bool same = true;
  for (int32_t t = 0; t < o.turns; ++t) {
    const std::vector<int32_t> user = synthetic_prompt(o.user_tokens, vocab, 0x7000 + static_cast<uint64_t>(t));
    history_on.insert(history_on.end(), user.begin(), user.end());
    history_off.insert(history_off.end(), user.begin(), user.end());
    turns_on.push_back(run_turn(on, t + 1, history_on, o.gen_tokens));
    turns_off.push_back(run_turn(off, t + 1, history_off, o.gen_tokens));
    same = same && turns_on.back().answer == turns_off.back().answer;
    history_on.insert(history_on.end(), turns_on.back().answer.begin(), turns_on.back().answer.end());
    history_off.insert(history_off.end(), turns_off.back().answer.begin(), turns_off.back().answer.end());
  }
  if (o.json) {
    nlohmann::json j = {{"model", on.info().model_dir},
                        {"cpu_isa", on.info().cpu_isa},
                        {"cpu_model", on.info().cpu_model},
                        {"system_tokens", o.system_tokens},
                        {"user_tokens", o.user_tokens},
                        {"gen_tokens", o.gen_tokens},
                        {"caching_on", turns_json(turns_on)},
                        {"caching_off", turns_json(turns_off)},
                        {"same_tokens", same}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  print(on.info(), o, turns_on, turns_off, same);
}

}  // namespace specd::cli
