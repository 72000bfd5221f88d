// The eagle3 proposer end to end, with an EAGLE-3 head in the public layout (random weights:
// specd::fixture::write_eagle3_head) for the tiny fixture target: greedy output equals the target
// alone's for chains and trees, under greedy and rejection verification, plain and async
// scheduling; a target too shallow for the default layers, and a directory that is not a head,
// are refused at load. (A random head's drafts are rarely accepted: the trained head for the
// bundled model, which shows acceptance, is not built yet.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixture.hpp"
#include "spec_test_util.hpp"
#include "specd/error.hpp"

namespace fs = std::filesystem;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;

namespace {

fs::path head_for(const fs::path& target, std::vector<int32_t> aux_layers, const std::string& tag) {
  specd::fixture::Eagle3Options o;
  o.seed = 3;
  o.draft_vocab = 2000;
  o.layer_std = 0.1;
  o.aux_layers = std::move(aux_layers);
  return specd::fixture::write_eagle3_head(target, o, specd::spec_test::work_dir() / ("eagle3-" + tag));
}

struct Eagle3Case {
  std::string verifier;
  bool tree;
  int batch;
  bool async = false;
};

class SpecEagle3 : public testing::TestWithParam<Eagle3Case> {};

TEST_P(SpecEagle3, GreedyOutputEqualsTheTargetAlone) {
  const Eagle3Case& c = GetParam();
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  const fs::path head = head_for(target, {0, 0, 1}, "tiny");  // SGLang ids: layers 1, 1, 2 here
  const auto requests = specd::spec_test::mixed_requests(c.batch, 4000 + c.batch);
  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string()), requests);
  specd::config::Overrides extra = {{"speculative.proposer.model", head.string()},
                                    {"scheduler.async_scheduling", c.async ? "true" : "false"},
                                    {"scheduler.num_scheduler_steps", c.async ? "2" : "1"}};
  if (c.tree) {
    extra.push_back({"speculative.proposer.tree.depth", "3"});
    extra.push_back({"speculative.proposer.tree.top_k", "2"});
  }
  specd::spec::SpecMetrics metrics;
  const std::vector<Generation> spec = run_engine(
      specd::spec_test::spec_config(target, "eagle3", c.verifier, c.tree ? 6 : 3, extra), requests, &metrics);
  EXPECT_GT(metrics.draft_tokens, 0u) << metrics.summary();
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_TRUE(spec[i].error.empty()) << spec[i].error;
  }
  RecordProperty("metrics", metrics.summary());
}

INSTANTIATE_TEST_SUITE_P(Head, SpecEagle3,
                         testing::Values(Eagle3Case{"greedy", false, 1}, Eagle3Case{"rejection", false, 4},
                                         Eagle3Case{"greedy", true, 1}, Eagle3Case{"rejection", true, 4},
                                         Eagle3Case{"rejection", true, 4, true}),
                         [](const testing::TestParamInfo<Eagle3Case>& info) {
                           const Eagle3Case& c = info.param;
                           return c.verifier + (c.tree ? "_tree" : "_chain") + "_b" + std::to_string(c.batch) +
                                  (c.async ? "_async" : "");
                         });

// A head that repeats the target's own prediction (fixture copy_target) drafts what the target
// emits whenever the output repeats a token. A tied-embedding target with faint layers predicts
// the token it just read, so its output repeats: drafts are accepted, and the head's positions are
// rolled back and fed again after each step; the output still equals the target alone's.
TEST(SpecEagle3Accept, AcceptedDraftsKeepTheOutputExact) {
  specd::fixture::Options t;
  t.preset = "tiny-tied";
  t.seed = 5;
  t.layer_std = 0.004;
  const fs::path target = specd::fixture::write(t, specd::spec_test::work_dir() / "tiny-tied-faint");
  specd::fixture::Eagle3Options o;
  o.copy_target = true;
  o.aux_layers = {1, 1, 1};  // SGLang ids: the output of layer 1 = the state before the final norm
  const fs::path head = specd::fixture::write_eagle3_head(target, o, specd::spec_test::work_dir() / "eagle3-copy");
  auto requests = specd::spec_test::mixed_requests(4, 77);
  for (auto& r : requests) r.sampling.max_tokens = 32;
  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string()), requests);
  // Chunked: prompts prefilled 8 tokens per step, so on_prefill feeds the head chunk by chunk
  // (each chunk's positions but its last, whose next token the next chunk brings).
  for (const bool chunked : {false, true})
    for (const bool tree : {false, true}) {
      specd::config::Overrides extra = {{"speculative.proposer.model", head.string()}};
      if (tree) {
        extra.push_back({"speculative.proposer.tree.depth", "4"});
        extra.push_back({"speculative.proposer.tree.top_k", "2"});
      }
      if (chunked) extra.push_back({"scheduler.max_num_batched_tokens", "8"});
      specd::spec::SpecMetrics m;
      const auto spec =
          run_engine(specd::spec_test::spec_config(target, "eagle3", "rejection", tree ? 8 : 4, extra), requests, &m);
      const std::string what = std::string(tree ? "tree" : "chain") + (chunked ? ", chunked prefill" : "");
      EXPECT_GT(m.accepted_tokens, 0u) << what << ": " << m.summary();
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_EQ(spec[i].tokens, plain[i].tokens) << what << ", request " << i;
        EXPECT_TRUE(spec[i].error.empty()) << what << ": " << spec[i].error;
      }
      RecordProperty(tree ? (chunked ? "tree_chunked" : "tree") : (chunked ? "chain_chunked" : "chain"), m.summary());
    }
}

TEST(SpecEagle3Load, ShallowTargetsAndNonHeadsAreRefused) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  auto refusal = [&](const fs::path& model) -> std::string {
    try {
      specd::Engine engine(specd::spec_test::spec_config(target, "eagle3", "greedy", 3,
                                                         {{"speculative.proposer.model", model.string()}}));
    } catch (const specd::Error& e) {
      return e.what();
    }
    return "";
  };
  // No layer ids in the head's config, and the 2-layer target has no layers 2, L/2, L-3.
  EXPECT_NE(refusal(head_for(target, {}, "tiny-default")).find("too shallow for the default layers"),
            std::string::npos);
  EXPECT_NE(refusal(target).find("is not an EAGLE-3 head"), std::string::npos) << refusal(target);
}

}  // namespace
