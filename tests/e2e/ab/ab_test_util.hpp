// Helpers of the A/B end-to-end tests: a fixture target, configs with arms, and a runner that
// returns the outputs and the A/B log's records.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ab/report.hpp"
#include "config/config.hpp"
#include "e2e/spec/spec_test_util.hpp"
#include "specd/engine.hpp"

namespace specd::ab_test {

namespace fs = std::filesystem;

inline fs::path work_dir() {
  const fs::path d = fs::path(SPECD_TEST_WORK_DIR) / "ab";
  fs::create_directories(d);
  return d;
}

// The tiny fixture target with a 1-layer self-draft (greedy drafts), `arms` as a YAML flow
// list, `shadow` (YAML: all or a list; "" = none) and the A/B log at `log`. Static k (dynamic
// off): every step drafts, and runs repeat token for token (the dynamic policy's choices follow
// measured step times, and a different k consumes the sampler's random numbers differently).
inline config::EngineConfig ab_config(const std::string& arms, const std::string& shadow, const fs::path& log,
                                      int k = 3, const config::Overrides& extra = {}) {
  config::Overrides o{{"speculative.num_speculative_tokens", std::to_string(k)},
                      {"speculative.dynamic", "false"},
                      {"speculative.proposer.name", "draft_model"},
                      {"speculative.proposer.layers", "1"},
                      {"speculative.arms", arms},
                      {"speculative.ab_log", log.string()},
                      {"kv_cache.memory_mib", "64"},
                      {"model.num_threads", "1"}};
  if (!shadow.empty()) o.push_back({"speculative.shadow", shadow});
  o.insert(o.end(), extra.begin(), extra.end());
  return config::for_model_dir(spec_test::target_fixture(false, 0.02).string(), o);
}

// `n` sampled requests (seeded, ignore_eos) over a few prompts.
inline std::vector<Request> sampled_requests(int n, float temperature, int max_tokens, uint64_t seed0) {
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 450, 4996, 17354, 1701, 432, 29871, 13}, {1, 3118, 2501, 263, 931}, {1, 910, 338, 263, 1243, 310}};
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.prompt_ids = prompts[static_cast<size_t>(i) % prompts.size()];
    r.sampling.temperature = temperature;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.sampling.seed = seed0 + static_cast<uint64_t>(i);
    out.push_back(std::move(r));
  }
  return out;
}

struct AbRun {
  std::vector<RequestOutput> finals;           // the finished output of each request, in order
  std::vector<std::vector<int32_t>> tokens;    // every token each request received, in order
  std::vector<speculative::AbRecord> records;  // the A/B log, in finishing order
  std::map<uint64_t, size_t> record_of;        // request index -> records index
  EngineInfo info;
  std::vector<spec::ArmMetrics> arms;  // Engine::arm_metrics() at the end
  spec::SpecMetrics spec;              // Engine::spec_metrics() at the end
};

// Adds every request at once (ids 1..n), runs the engine to the end, destroys it (the log's
// writer flushes) and reads the log, which is removed first.
inline AbRun run_ab(const config::EngineConfig& cfg, const std::vector<Request>& requests) {
  fs::remove(cfg.speculative.ab_log);
  AbRun run;
  run.finals.resize(requests.size());
  run.tokens.resize(requests.size());
  {
    auto engine = std::make_unique<Engine>(cfg);
    run.info = engine->info();
    for (size_t i = 0; i < requests.size(); ++i) engine->add_request(static_cast<RequestId>(i + 1), requests[i]);
    while (engine->has_unfinished())
      for (RequestOutput& out : engine->step()) {
        const auto i = static_cast<size_t>(out.id - 1);
        run.tokens[i].insert(run.tokens[i].end(), out.new_token_ids.begin(), out.new_token_ids.end());
        if (out.finished) run.finals[i] = std::move(out);
      }
    run.arms = engine->arm_metrics();
    run.spec = engine->spec_metrics();
  }
  run.records = ab::read_ab_logs({cfg.speculative.ab_log});
  for (size_t i = 0; i < run.records.size(); ++i) run.record_of[run.records[i].id - 1] = i;
  return run;
}

}  // namespace specd::ab_test
