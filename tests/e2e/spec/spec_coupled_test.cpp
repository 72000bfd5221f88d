// Coupled verification (speculative.verifier.name: coupled, model.sampler: gumbel): a seeded
// request at temperature > 0 emits exactly what plain decoding with the Gumbel-max sampler emits,
// token for token, over 1,000 seeded requests (200 for EAGLE-3 and the other targets), for the draft model,
// EAGLE-3 (chains and trees), n-gram lookup and MTP, several k and scheduling modes. Its
// acceptance rate is reported next to rejection sampling's on the same drafts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixture.hpp"
#include "spec_test_util.hpp"
#include "specd/error.hpp"

namespace specd {
namespace {

namespace fs = std::filesystem;

// `count` requests at temperature 1, each with its own seed, some filtered by top-k, 8 tokens
// each: the spec tests' mixed prompts (repeated segments, and planted continuations of the
// target's own for `target`, so that n-gram lookup finds drafts the target draws again).
std::vector<Request> seeded_requests(int count, const fs::path& target) {
  std::vector<Request> out = spec_test::mixed_requests(count, 21);
  spec_test::plant_continuations(out, target, 22);
  for (size_t i = 0; i < out.size(); ++i) {
    Request& r = out[i];
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = i % 3 == 0 ? 40 : 0;  // some requests filter, some sample the whole vocabulary
    r.sampling.seed = 1000 + i;
    r.sampling.max_tokens = 8;
  }
  return out;
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<spec_test::Generation>& g) {
  std::vector<std::vector<int32_t>> out;
  for (const spec_test::Generation& x : g) out.push_back(x.tokens);
  return out;
}

double acceptance(const spec::SpecMetrics& m) {
  return m.draft_tokens > 0 ? static_cast<double>(m.accepted_tokens) / static_cast<double>(m.draft_tokens) : 0.0;
}

// The draft model's drafts sampled at temperature 1 with the coupled noise (draft_sampler: gumbel).
config::Overrides gumbel_drafts(config::Overrides o = {}) {
  o.push_back({"speculative.proposer.temperature", "1"});
  o.push_back({"speculative.proposer.draft_sampler", "gumbel"});
  return o;
}

// An EAGLE-3 head with random weights for the usual fixture (its drafts are seldom accepted: the
// case checks equality, chains and trees, not acceptance).
fs::path eagle3_head(const fs::path& target) {
  fixture::Eagle3Options o;
  o.seed = 3;
  o.draft_vocab = 2000;
  o.layer_std = 0.1;
  o.aux_layers = {0, 0, 1};
  return fixture::write_eagle3_head(target, o, spec_test::work_dir() / "eagle3-coupled");
}

TEST(CoupledVerifier, SameSeedSameOutputWithSpeculationOnOrOffForEveryProposerKAndMode) {
  struct Case {
    std::string proposer;
    int k;
    spec_test::Mode mode;
    config::Overrides extra = {};
    bool accepts = true;  // the case is meant to accept drafts
    size_t requests = 0;  // the first this many requests; 0 = all
  };
  // The draft model and EAGLE-3 (chain and tree) on the usual fixture; n-gram lookup on the
  // near-Markov one, whose sampled continuations repeat what the prompt holds often enough to
  // accept drafts; MTP on the fixture with MTP modules.
  enum Target { kUsual, kMarkov, kMtp };
  for (const Target t : {kUsual, kMarkov, kMtp}) {
    const fs::path target = spec_test::target_fixture(t == kMtp, t == kMarkov ? 0.004 : 0.02);
    const std::vector<Request> requests = seeded_requests(t == kUsual ? 1000 : 200, target);
    const auto plain = tokens_of(spec_test::run_engine(
        config::for_model_dir(target.string(), {{"model.sampler", "gumbel"}, {"kv_cache.memory_mib", "64"}}),
        requests));
    std::vector<Case> cases;
    if (t == kUsual) {
      const std::string head = eagle3_head(target).string();
      cases = {{"draft_model", 3, {false, 1}},
               {"draft_model", 1, {true, 4}},
               {"draft_model", 4, {true, 1}},
               {"eagle3", 3, {false, 1}, {{"speculative.proposer.model", head}}, false, 200},
               {"eagle3",
                6,
                {true, 1},
                {{"speculative.proposer.model", head},
                 {"speculative.proposer.tree.depth", "3"},
                 {"speculative.proposer.tree.top_k", "2"}},
                false,
                200}};
    } else if (t == kMarkov) {
      cases = {{"ngram", 3, {false, 1}}, {"ngram", 5, {true, 4}}};
    } else {
      cases = {{"mtp", 2, {false, 1}}, {"mtp", 1, {true, 4}}};
    }
    for (const Case& c : cases) {
      const std::string what = c.proposer + " k=" + std::to_string(c.k) + " " + spec_test::mode_name(c.mode) +
                               (c.extra.size() > 1 ? " tree" : "");
      config::Overrides o = spec_test::scheduling(c.mode, c.extra);
      if (c.proposer == "draft_model" || c.proposer == "mtp") o = gumbel_drafts(o);
      spec::SpecMetrics m;
      const size_t n = c.requests > 0 ? c.requests : requests.size();
      const std::vector<Request> some(requests.begin(), requests.begin() + static_cast<std::ptrdiff_t>(n));
      const auto spec =
          tokens_of(spec_test::run_engine(spec_test::spec_config(target, c.proposer, "coupled", c.k, o), some, &m));
      ASSERT_EQ(spec.size(), n);
      int differ = 0;
      for (size_t i = 0; i < n; ++i) differ += spec[i] != plain[i];
      EXPECT_EQ(differ, 0) << what << ": requests whose tokens differ from plain decoding";
      EXPECT_GT(m.draft_tokens, 0u) << what;
      if (c.accepts) {
        EXPECT_GT(m.accepted_tokens, 0u) << what << ": the case is meant to accept drafts";
      }
    }
  }
}

// The coupled verifier's acceptance next to rejection sampling's, on the same self-draft drawing
// at temperature 1 with the shared noise. Both are recorded (the note quotes them); rejection
// sampling's is the larger (it is the optimal coupling), and the coupled one is not far behind.
TEST(CoupledVerifier, AcceptanceNextToRejectionSampling) {
  const fs::path target = spec_test::target_fixture();
  const std::vector<Request> requests = seeded_requests(300, target);
  spec::SpecMetrics coupled, rejection;
  const auto with_coupled = tokens_of(spec_test::run_engine(
      spec_test::spec_config(target, "draft_model", "coupled", 4, gumbel_drafts()), requests, &coupled));
  const auto with_rejection = tokens_of(spec_test::run_engine(
      spec_test::spec_config(target, "draft_model", "rejection", 4, gumbel_drafts()), requests, &rejection));
  // Negative control: rejection sampling is lossless in distribution, not in realisation, so its
  // tokens differ from the coupled ones (the equality above is not a property of any verifier).
  int differ = 0;
  for (size_t i = 0; i < requests.size(); ++i) differ += with_coupled[i] != with_rejection[i];
  EXPECT_GT(differ, 30) << "rejection sampling drew the same tokens as the coupled verifier";
  const double a = acceptance(coupled), b = acceptance(rejection);
  RecordProperty("coupled_acceptance", std::to_string(a));
  RecordProperty("rejection_acceptance", std::to_string(b));
  std::printf("acceptance: coupled %.3f, rejection %.3f (%llu / %llu drafts)\n", a, b,
              static_cast<unsigned long long>(coupled.draft_tokens),
              static_cast<unsigned long long>(rejection.draft_tokens));
  EXPECT_GT(a, 0.0);
  EXPECT_GE(b + 0.05, a) << "rejection sampling is the optimal coupling";
  EXPECT_GT(a, 0.5 * b) << "the shared noise keeps the coupled acceptance close";
}

// The coupled verifier needs the engine to sample as it does: model.sampler inverse_cdf is refused.
TEST(CoupledVerifier, NeedsTheGumbelSampler) {
  const fs::path target = spec_test::target_fixture();
  try {
    spec_test::spec_config(target, "ngram", "coupled", 3, {{"model.sampler", "inverse_cdf"}});
    ADD_FAILURE() << "inverse_cdf with the coupled verifier was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.sampler"), std::string::npos) << e.what();
  }
  EXPECT_EQ(spec_test::spec_config(target, "ngram", "coupled", 3).model.sampler, "gumbel") << "auto";
  EXPECT_EQ(spec_test::spec_config(target, "ngram", "rejection", 3).model.sampler, "inverse_cdf") << "auto";
}

}  // namespace
}  // namespace specd
