#include "cli/bench_scorers.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "specd/engine.hpp"
#include "specd/error.hpp"

namespace specd::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ScorerRun {
  double step_ms = 0;   // mean engine step once every request decodes
  double score_ms = 0;  // mean scorer time per speculative step
  double tokens_per_s = 0;
  double acceptance = 0;
  std::vector<std::vector<int32_t>> tokens;  // per request
};

// `batch` greedy requests decoded together; timing starts once each has its first token.
ScorerRun decode(Engine& engine, int32_t batch, const ScorerBenchOptions& o, uint64_t salt) {
  const spec::SpecMetrics before = engine.spec_metrics();
  for (int32_t b = 0; b < batch; ++b) {
    Request r;
    r.prompt_ids = synthetic_prompt(o.prompt_tokens, engine.info().vocab_size, salt + static_cast<uint64_t>(b));
    r.sampling.temperature = 0;
    r.sampling.max_tokens = o.gen_tokens;
    r.sampling.ignore_eos = true;
    engine.add_request(static_cast<RequestId>(b) + 1, r);
  }
  ScorerRun run;
  run.tokens.resize(static_cast<size_t>(batch));
  int32_t started = 0;
  int64_t tokens = 0, steps = 0;
  Clock::time_point t0;
  spec::SpecMetrics at_start;
  while (engine.has_unfinished()) {
    const bool timing = started == batch;
    for (const RequestOutput& out : engine.step()) {
      if (out.finish_reason == FinishReason::kError)
        throw Error(ErrorCode::kInternal, "bench request failed: " + out.error);
      auto& t = run.tokens[out.id - 1];
      t.insert(t.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      if (timing) tokens += static_cast<int64_t>(out.new_token_ids.size());
      if (!timing && out.num_generated_tokens == 1) ++started;  // the first token comes alone
    }
    if (timing) ++steps;
    if (!timing && started == batch) {
      t0 = Clock::now();
      at_start = engine.spec_metrics();
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  const spec::SpecMetrics after = engine.spec_metrics();
  if (steps > 0 && s > 0) {
    run.step_ms = s * 1e3 / static_cast<double>(steps);
    run.tokens_per_s = static_cast<double>(tokens) / s;
  }
  const uint64_t spec_steps = after.num_steps - at_start.num_steps;
  if (spec_steps > 0)
    run.score_ms = (after.score_seconds - at_start.score_seconds) * 1e3 / static_cast<double>(spec_steps);
  const uint64_t drafted = after.draft_tokens - before.draft_tokens;
  if (drafted > 0) run.acceptance = static_cast<double>(after.accepted_tokens - before.accepted_tokens) / drafted;
  return run;
}

struct Row {
  int32_t batch = 0;
  std::vector<ScorerRun> runs;  // per scorer: the best of the repeats
};

void print(const config::EngineConfig& cfg, const ScorerBenchOptions& o, const std::vector<Row>& rows) {
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const Row& row : rows)
      for (size_t s = 0; s < o.scorers.size(); ++s) {
        const ScorerRun& r = row.runs[s];
        j.push_back({{"batch", row.batch},
                     {"scorer", o.scorers[s]},
                     {"step_ms", r.step_ms},
                     {"score_ms_per_step", r.score_ms},
                     {"tokens_per_s", r.tokens_per_s},
                     {"acceptance_rate", r.acceptance},
                     {"step_vs_first", row.runs[0].step_ms > 0 ? r.step_ms / row.runs[0].step_ms : 0.0},
                     {"same_tokens_as_first", r.tokens == row.runs[0].tokens}});
      }
    std::cout << nlohmann::json{{"k", cfg.speculative.num_speculative_tokens},
                                {"proposer", cfg.speculative.proposer.name},
                                {"verifier", cfg.speculative.verifier.name},
                                {"prompt_tokens", o.prompt_tokens},
                                {"gen_tokens", o.gen_tokens},
                                {"scorers", j}}
                     .dump(2)
              << "\n";
    return;
  }
  std::printf("scorers: proposer %s, verifier %s, k=%d, %d-token prompts, %d tokens per request, greedy\n",
              cfg.speculative.proposer.name.c_str(), cfg.speculative.verifier.name.c_str(),
              cfg.speculative.num_speculative_tokens, o.prompt_tokens, o.gen_tokens);
  std::printf("%-6s %-18s %10s %14s %11s %11s %14s %13s\n", "batch", "scorer", "step ms", "score ms/step", "tokens/s",
              "acceptance", "step vs first", "same tokens");
  for (const Row& row : rows)
    for (size_t s = 0; s < o.scorers.size(); ++s) {
      const ScorerRun& r = row.runs[s];
      std::printf("%-6d %-18s %10.2f %14.2f %11.1f %11.3f %13.2fx %13s\n", row.batch, o.scorers[s].c_str(), r.step_ms,
                  r.score_ms, r.tokens_per_s, r.acceptance,
                  row.runs[0].step_ms > 0 ? r.step_ms / row.runs[0].step_ms : 0.0,
                  r.tokens == row.runs[0].tokens ? "yes" : "NO");
    }
}

}  // namespace

std::vector<int32_t> synthetic_prompt(int32_t n, int64_t vocab, uint64_t salt) {
  std::vector<int32_t> ids;
  uint64_t x = 0x9E3779B97F4A7C15ull * (salt + 1);
  for (int32_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ids.push_back(static_cast<int32_t>(3 + x % static_cast<uint64_t>(vocab - 3)));
  }
  return ids;
}

void bench_scorers(const config::EngineConfig& cfg, const ScorerBenchOptions& o) {
  if (!cfg.speculative.enabled)
    throw Error(ErrorCode::kInvalidArgument,
                "--scorers compares speculative scorers: the config needs a `speculative` section");
  if (o.scorers.empty()) throw Error(ErrorCode::kInvalidArgument, "--scorers needs at least one scorer name");
  std::vector<std::unique_ptr<Engine>> engines;
  for (const std::string& name : o.scorers) {
    config::EngineConfig c = cfg;
    c.speculative.scorer.name = name;
    c.speculative.scorer.params = plugin::Params::from_pairs({}, c.source_file, "speculative.scorer");
    engines.push_back(std::make_unique<Engine>(c));
  }
  std::vector<Row> rows;
  for (int32_t batch : o.batches) {
    Row row{batch, std::vector<ScorerRun>(o.scorers.size())};
    for (int rep = 0; rep < std::max(1, o.repeats); ++rep)
      for (size_t s = 0; s < engines.size(); ++s) {
        ScorerRun r = decode(*engines[s], batch, o, 1000 * static_cast<uint64_t>(batch));
        if (row.runs[s].tokens.empty() || r.step_ms < row.runs[s].step_ms) row.runs[s] = std::move(r);
      }
    rows.push_back(std::move(row));
  }
  print(cfg, o, rows);
}

}  // namespace specd::cli
