// Speculative decoding on the model families beyond dense full attention: greedy output equals
// the target-only output token for token.
//  - Mixture-of-experts targets (Mixtral, Qwen3-MoE): the k+1 scored rows of a step route to
//    different experts and each expert runs once over all rows that chose it, in every dtype,
//    batch size and proposer here (a row's result does not depend on which rows share its experts).
//  - Phi-3 (fused projections, a window), Gemma 2 (soft caps, GELU, sandwich norms, a window on the
//    even layers) and Gemma 3 (q/k norms, local and global RoPE bases).
//  - Sliding-window attention (Mistral's sliding_window): drafts scored as a chain or a tree, the
//    prompts and outputs longer than the window.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spec_test_util.hpp"

namespace fs = std::filesystem;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;

namespace {

fs::path family_target(const std::string& preset, double layer_std) {
  specd::fixture::Options o;
  o.preset = preset;
  o.seed = 17;
  o.embed_std = 0.5;
  o.layer_std = layer_std;
  return specd::fixture::write(o, specd::spec_test::work_dir() / (preset + (layer_std < 0.01 ? "-markov" : "")));
}

struct Case {
  std::string preset;    // tiny-mixtral | tiny-qwen3-moe | tiny-phi3 | tiny-gemma2 | tiny-gemma3
  std::string dtype;     // f32 | bf16 | q8_0 | q4_0
  std::string proposer;  // ngram | draft_model
  std::string verifier;  // greedy | rejection
  int batch;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* d : {"f32", "q8_0", "q4_0"})
    for (const char* p : {"ngram", "draft_model"})
      for (int b : {1, 6}) cases.push_back({"tiny-mixtral", d, p, "greedy", b});
  cases.push_back({"tiny-mixtral", "q8_0", "draft_model", "rejection", 6});
  cases.push_back({"tiny-qwen3-moe", "f32", "draft_model", "greedy", 4});
  cases.push_back({"tiny-qwen3-moe", "q4_0", "ngram", "greedy", 4});
  cases.push_back({"tiny-phi3", "f32", "draft_model", "greedy", 4});
  cases.push_back({"tiny-phi3", "q8_0", "ngram", "greedy", 4});
  cases.push_back({"tiny-phi3-longrope", "f32", "draft_model", "greedy", 4});  // served at 4096: long factors
  cases.push_back({"tiny-gemma2", "f32", "draft_model", "greedy", 4});
  cases.push_back({"tiny-gemma2", "q8_0", "ngram", "rejection", 4});
  cases.push_back({"tiny-gemma3", "bf16", "draft_model", "greedy", 4});
  cases.push_back({"tiny-gemma3", "q4_0", "ngram", "greedy", 1});
  return cases;
}

class SpecFamilyGreedyEquality : public testing::TestWithParam<Case> {};

TEST_P(SpecFamilyGreedyEquality, SameTokensAsTargetAlone) {
  const Case& c = GetParam();
  const bool ngram = c.proposer == "ngram";
  const fs::path target = family_target(c.preset, ngram ? 0.004 : 0.02);
  auto requests = specd::spec_test::mixed_requests(c.batch, /*seed=*/5000 + c.batch);
  if (ngram) specd::spec_test::plant_continuations(requests, target, 6000 + c.batch);
  const specd::config::Overrides dtype = {{"model.dtype", c.dtype}};

  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string(), dtype), requests);
  specd::spec::SpecMetrics metrics;
  const std::vector<Generation> spec =
      run_engine(specd::spec_test::spec_config(target, c.proposer, c.verifier, 3, dtype), requests, &metrics);
  EXPECT_GT(metrics.draft_tokens, 0u);
  EXPECT_GT(metrics.accepted_tokens, 0u);
  specd::spec_test::expect_same_generations(plain, spec);
}

INSTANTIATE_TEST_SUITE_P(Families, SpecFamilyGreedyEquality, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<Case>& i) {
                           const Case& c = i.param;
                           std::string n = c.preset + "_" + c.dtype + "_" + c.proposer + "_" + c.verifier + "_b" +
                                           std::to_string(c.batch);
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

}  // namespace

namespace {

// The engine's MoE counters: every routed (token, expert) pair is counted, and an expert chosen
// by several rows of one forward is read once. With k = 3 drafts scored per step (4 rows of
// one sequence) rows share experts, so fewer experts are read than rows route to; a dense model
// reports nothing.
TEST(SpecMoeStats, ExpertsAreReadOncePerForwardForAllTheirRows) {
  const fs::path target = family_target("tiny-mixtral", 0.02);
  auto requests = specd::spec_test::mixed_requests(1, 77);
  specd::Engine engine(specd::spec_test::spec_config(target, "draft_model", "greedy", 3));
  specd::spec_test::add_request(engine, requests[0]);
  while (engine.has_unfinished()) engine.step();
  const specd::EngineStats s = engine.stats();
  const int64_t layers = 2, k = 2, experts = 4;
  EXPECT_EQ(s.moe_experts_per_token, k);
  EXPECT_GT(s.moe_layer_passes, 0u);
  EXPECT_EQ(s.moe_layer_passes % layers, 0u);
  EXPECT_GE(s.moe_expert_rows, s.moe_layer_passes * k);
  EXPECT_LE(s.moe_experts_read, s.moe_layer_passes * experts);
  EXPECT_GE(s.moe_experts_read, s.moe_layer_passes * k);
  EXPECT_LT(s.moe_experts_read, s.moe_expert_rows) << "rows of one forward that share an expert read it once";

  specd::Engine dense(specd::config::for_model_dir(specd::spec_test::target_fixture().string()));
  specd::spec_test::add_request(dense, requests[0]);
  while (dense.has_unfinished()) dense.step();
  EXPECT_EQ(dense.stats().moe_layer_passes, 0u);
  EXPECT_EQ(dense.stats().moe_experts_per_token, 0);
}

}  // namespace

namespace {

TEST(SpecSlidingWindow, GreedyOutputEqualsTargetAloneForChainsAndTrees) {
  specd::fixture::Options o;
  o.preset = "tiny-mistral-swa";  // a window of 8
  o.seed = 19;
  o.layer_std = 0.02;
  const fs::path target = specd::fixture::write(o, specd::spec_test::work_dir() / "tiny-mistral-swa");
  auto requests = specd::spec_test::mixed_requests(4, 7100);
  const auto plain = run_engine(specd::config::for_model_dir(target.string()), requests);
  const specd::config::Overrides tree = {{"speculative.proposer.tree.depth", "3"},
                                         {"speculative.proposer.tree.top_k", "2"}};
  for (const auto& [name, extra] : {std::pair{"chain", specd::config::Overrides{}}, std::pair{"tree", tree}}) {
    specd::spec::SpecMetrics m;
    const auto spec =
        run_engine(specd::spec_test::spec_config(target, "draft_model", "greedy", 6, extra), requests, &m);
    EXPECT_GT(m.accepted_tokens, 0u) << name;
    specd::spec_test::expect_same_generations(plain, spec, name);
  }
}

}  // namespace

namespace {

// Every family under every proposer that needs no extra checkpoint (n-gram, suffix, self-draft)
// and MTP (the fixtures' MTP modules are dense blocks), in sync, async and multi-step scheduling.
struct ModeCase {
  std::string preset;
  std::string proposer;
  std::string mode;  // sync | async (async scheduling, 2 steps) | multistep (4 scheduler steps)
};

std::vector<ModeCase> mode_cases() {
  std::vector<ModeCase> cases;
  for (const char* f :
       {"tiny-mixtral", "tiny-qwen3-moe", "tiny-phi3", "tiny-gemma2", "tiny-gemma3", "tiny-mistral-swa"})
    for (const char* p : {"ngram", "suffix", "draft_model", "mtp"})
      for (const char* m : {"sync", "async", "multistep"}) cases.push_back({f, p, m});
  return cases;
}

class SpecFamilyModes : public testing::TestWithParam<ModeCase> {};

TEST_P(SpecFamilyModes, SameTokensAsTargetAlone) {
  const ModeCase& c = GetParam();
  const bool text = c.proposer == "ngram" || c.proposer == "suffix";
  specd::fixture::Options o;
  o.preset = c.preset;
  o.seed = 23;
  o.layer_std = text ? 0.004 : 0.02;
  o.mtp_modules = c.proposer == "mtp" ? 2 : 0;
  o.mtp_identity = c.proposer == "mtp";
  const fs::path target = specd::fixture::write(
      o, specd::spec_test::work_dir() / (c.preset + (text ? "-markov" : "") + (o.mtp_modules > 0 ? "-mtp" : "")));
  auto requests = specd::spec_test::mixed_requests(3, 8100);
  if (text) specd::spec_test::plant_continuations(requests, target, 8200);
  const auto plain = run_engine(specd::config::for_model_dir(target.string()), requests);
  const bool async = c.mode == "async";
  const specd::config::Overrides mode = {{"scheduler.async_scheduling", async ? "true" : "false"},
                                         {"scheduler.num_scheduler_steps", async                   ? "2"
                                                                           : c.mode == "multistep" ? "4"
                                                                                                   : "1"}};
  specd::spec::SpecMetrics m;
  const auto spec = run_engine(specd::spec_test::spec_config(target, c.proposer, "greedy", 3, mode), requests, &m);
  EXPECT_GT(m.draft_tokens, 0u);
  specd::spec_test::expect_same_generations(plain, spec);
}

INSTANTIATE_TEST_SUITE_P(Families, SpecFamilyModes, testing::ValuesIn(mode_cases()),
                         [](const testing::TestParamInfo<ModeCase>& i) {
                           std::string n = i.param.preset + "_" + i.param.proposer + "_" + i.param.mode;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

}  // namespace
