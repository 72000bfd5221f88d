// Helpers for the speculative end-to-end tests: fixture checkpoints, request mixes, configs
// and a loop that runs an engine to completion.
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "fixture.hpp"
#include "specd/engine.hpp"
#include "test_paths.hpp"

namespace specd::spec_test {

// The scheduling modes whose output must be identical: sync / async scheduling, one / four
// scheduler steps per schedule.
struct Mode {
  bool async;
  int steps;
};
inline constexpr Mode kModes[] = {{false, 1}, {true, 1}, {false, 4}, {true, 4}};

inline std::string mode_name(Mode m) {
  return std::string(m.async ? "async" : "sync") + " n=" + std::to_string(m.steps);
}

inline specd::config::Overrides scheduling(Mode m, specd::config::Overrides extra = {}) {
  extra.push_back({"scheduler.async_scheduling", m.async ? "true" : "false"});
  extra.push_back({"scheduler.num_scheduler_steps", std::to_string(m.steps)});
  return extra;
}

namespace fs = std::filesystem;

// The tests own the request ids (the engine takes the caller's): a fresh id per request.
inline RequestId add_request(Engine& engine, const Request& request) {
  static RequestId next = 1;
  const RequestId id = next++;
  engine.add_request(id, request);
  return id;
}

inline fs::path work_dir() {
  return testing_paths::work_dir() / "spec";
}

// The tiny target (2 layers, hidden 64, Llama-2 tokenizer); with_mtp adds 2 MTP modules.
// layer_std 0.02: a 1-layer self-draft agrees with the target often but not always, so full,
// partial and zero acceptance all happen. layer_std 0.004: the model is nearly Markov (the
// next token is almost a function of the last one), which lets tests plant continuations
// that n-gram lookup will find.
inline fs::path target_fixture(bool with_mtp = false, double layer_std = 0.02) {
  fixture::Options o;
  o.preset = "tiny";
  o.seed = 11;
  o.embed_std = 0.5;
  o.layer_std = layer_std;
  o.mtp_modules = with_mtp ? 2 : 0;
  o.mtp_identity = with_mtp;  // heads that agree with the target often enough to accept drafts
  const std::string name = std::string(with_mtp ? "tiny-mtp" : "tiny") + (layer_std < 0.01 ? "-markov" : "");
  return fixture::write(o, work_dir() / name);
}

struct Generation {
  std::vector<int32_t> tokens;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
};

// A greedy request for `prompt` that generates exactly max_tokens tokens (EOS ignored).
inline Request greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = max_tokens;
  return r;
}

// `count` requests with mixed prompt lengths (3..48 tokens, some with repeated segments so
// that n-gram lookup finds matches), mixed max_tokens, greedy, ignore_eos.
inline std::vector<Request> mixed_requests(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < count; ++i) {
    Request r;
    const int len = 3 + static_cast<int>(rng() % 46);
    while (static_cast<int>(r.prompt_ids.size()) < len) {
      if (r.prompt_ids.size() > 4 && rng() % 3 == 0) {  // repeat an earlier segment
        const size_t from = rng() % (r.prompt_ids.size() - 2);
        const size_t n = std::min<size_t>(2 + rng() % 4, r.prompt_ids.size() - from);
        for (size_t j = 0; j < n; ++j) r.prompt_ids.push_back(r.prompt_ids[from + j]);
      } else {
        r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % 31990));
      }
    }
    r.prompt_ids.resize(static_cast<size_t>(len));
    r.prompt_ids[0] = 1;  // BOS
    r.sampling.temperature = 0.0f;
    r.sampling.ignore_eos = true;
    r.sampling.max_tokens = 5 + static_cast<int32_t>(rng() % 36);
    out.push_back(std::move(r));
  }
  return out;
}

// Rewrites each prompt to end with a token `a` whose greedy continuation under `target` (as
// generated from [BOS, a]) also appears earlier in the prompt right after an `a`: prompt
// lookup then has something real to find. Every other planted chain has a wrong third token,
// so lookup also proposes drafts the target rejects.
inline void plant_continuations(std::vector<Request>& requests, const fs::path& target, uint64_t seed);

// Target + speculative section for one proposer/verifier/k: static k (exactly k drafts every
// step, what the proposer finds) unless `extra` sets speculative.dynamic.
inline config::EngineConfig spec_config(const fs::path& target, const std::string& proposer,
                                        const std::string& verifier, int k, const config::Overrides& extra = {}) {
  config::Overrides o{{"speculative.num_speculative_tokens", std::to_string(k)},
                      {"speculative.proposer.name", proposer},
                      {"speculative.verifier.name", verifier},
                      {"speculative.dynamic", "false"},
                      {"kv_cache.memory_mib", "64"}};
  const bool own_draft = std::any_of(extra.begin(), extra.end(), [](const auto& kv) {
    return kv.first == "speculative.proposer.model" || kv.first == "speculative.proposer.layers";
  });
  if (proposer == "draft_model" && !own_draft) o.push_back({"speculative.proposer.layers", "1"});
  if (proposer == "ngram") o.push_back({"speculative.proposer.prompt_lookup_max", "3"});
  // Drafts as long as k allows once a match is found, as ngram's (the default factor 1 drafts
  // only as many tokens as matched: short drafts that the dynamic policy may find not worth it).
  if (proposer == "suffix") o.push_back({"speculative.proposer.max_spec_factor", "8"});
  o.insert(o.end(), extra.begin(), extra.end());
  return config::for_model_dir(target.string(), o);
}

// Speculative generations equal the plain ones: no errors, the same tokens and finish reasons.
inline void expect_same_generations(const std::vector<Generation>& plain, const std::vector<Generation>& spec,
                                    const std::string& what = "") {
  ASSERT_EQ(plain.size(), spec.size()) << what;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(spec[i].error.empty()) << what << " " << spec[i].error;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << what << " request " << i;
    EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << what << " request " << i;
  }
}

// Runs every request to completion on a fresh engine; results in request order.
inline std::vector<Generation> run_engine(const config::EngineConfig& cfg, const std::vector<Request>& requests,
                                          spec::SpecMetrics* metrics = nullptr) {
  auto engine = std::make_unique<Engine>(cfg);
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) index[add_request(*engine, requests[i])] = i;
  std::vector<Generation> out(requests.size());
  while (engine->has_unfinished()) {
    for (const RequestOutput& o : engine->step()) {
      Generation& g = out[index.at(o.id)];
      g.tokens.insert(g.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) {
        g.finish_reason = o.finish_reason;
        g.error = o.error;
      }
    }
  }
  if (metrics != nullptr) *metrics = engine->spec_metrics();
  return out;
}

inline void plant_continuations(std::vector<Request>& requests, const fs::path& target, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Request> probes;
  for (size_t i = 0; i < requests.size(); ++i) {
    Request r;
    r.prompt_ids = {1, 3 + static_cast<int32_t>(rng() % 31990)};
    r.sampling.temperature = 0.0f;
    r.sampling.ignore_eos = true;
    r.sampling.max_tokens = 6;
    probes.push_back(r);
  }
  const auto chains = run_engine(config::for_model_dir(target.string()), probes);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t>& p = requests[i].prompt_ids;
    const int32_t a = probes[i].prompt_ids[1];
    const size_t cut = std::min<size_t>(p.size(), 1 + rng() % 20);
    p.resize(cut);
    p.push_back(a);
    std::vector<int32_t> chain = chains[i].tokens;
    if (i % 2 == 0 && chain.size() > 2) chain[2] = 3 + static_cast<int32_t>(rng() % 31990);  // a wrong turn
    p.insert(p.end(), chain.begin(), chain.end());
    for (int j = 0; j < 3; ++j) p.push_back(3 + static_cast<int32_t>(rng() % 31990));
    p.push_back(a);
  }
}

}  // namespace specd::spec_test
