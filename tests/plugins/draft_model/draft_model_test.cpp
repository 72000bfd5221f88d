// The draft_model proposer plugin against a fake model runtime: greedy drafts equal the draft
// model's own continuation, one batched forward per draft step, exact KV rollback after
// partial/full/zero acceptance, sampled drafts with their probability rows, and clear errors.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "plugins/fake_model_services.hpp"
#include "specd/error.hpp"
#include "specd/sdk/philox.hpp"

namespace {

using specd::testing::FakeCheckpoint;
using specd::testing::FakeModel;
using specd::testing::FakeModels;
using specd::testing::ProposerHarness;
using specd::testing::TestSeq;

const std::filesystem::path kPlugin = std::filesystem::path(SPECD_PLUGIN_BUILD_DIR) / "specd_proposer_draft_model.so";
constexpr int32_t kVocab = 50;
const std::string kDraftPath = "/fake/draft";

FakeCheckpoint target_ckpt() {
  return {kVocab, 4, 6, 1 << 20, 0};
}
FakeCheckpoint draft_ckpt(int32_t vocab = kVocab, int32_t max_context = 1 << 20) {
  return {vocab, 4, 2, max_context, 0};
}

// The draft model's greedy continuation of ctx, k tokens.
std::vector<int32_t> greedy_continuation(uint64_t salt, std::vector<int32_t> ctx, int32_t k) {
  std::vector<int32_t> out;
  for (int32_t j = 0; j < k; ++j) {
    out.push_back(FakeModels::greedy_next(salt, ctx, kVocab));
    ctx.push_back(out.back());
  }
  return out;
}

TestSeq make_seq(uint64_t id, int64_t length, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  TestSeq s;
  s.id = id;
  for (int64_t i = 0; i < length; ++i) s.tokens.push_back(static_cast<int32_t>(rng() % kVocab));
  s.num_prompt = length;
  s.seed = seed;
  return s;
}

struct Fixture {
  FakeModels fake{target_ckpt()};
  Fixture() { fake.add_checkpoint(kDraftPath, draft_ckpt()); }
  FakeModel* draft() const { return fake.live_causal(kDraftPath, 0); }
};

TEST(DraftModelProposer, CapabilitiesFollowTemperature) {
  Fixture f;
  ProposerHarness greedy(kPlugin, "draft_model", {{"model", kDraftPath}}, f.fake.services());
  EXPECT_EQ(greedy.caps().produces_draft_probs, 0);
  EXPECT_EQ(greedy.caps().needs_target_hidden, 0);
  EXPECT_EQ(greedy.caps().keeps_state, 1);
  EXPECT_EQ(greedy.caps().supports_variable_k, 1);
  ProposerHarness sampled(kPlugin, "draft_model", {{"model", kDraftPath}, {"temperature", "0.7"}}, f.fake.services());
  EXPECT_EQ(sampled.caps().produces_draft_probs, 1);
}

TEST(DraftModelProposer, GreedyDraftsMatchTheDraftModelWithVariableKInOneBatch) {
  Fixture f;
  ProposerHarness h(kPlugin, "draft_model", {{"model", kDraftPath}}, f.fake.services());
  FakeModel* draft = f.draft();
  ASSERT_NE(draft, nullptr);
  std::vector<TestSeq> seqs{make_seq(10, 5, 1), make_seq(11, 9, 2), make_seq(12, 3, 3), make_seq(13, 12, 4)};
  h.prefill({&seqs[0], &seqs[1], &seqs[2], &seqs[3]}, {5, 9, 3, 12});
  ASSERT_EQ(draft->forwards.size(), 1u) << "prefill is one batched forward";
  EXPECT_EQ(draft->forwards[0].num_new, (std::vector<int32_t>{4, 8, 2, 11}));
  for (const auto& s : seqs) {
    // Every prompt token but the last: propose feeds that one and gets its logits.
    EXPECT_EQ(FakeModels::cached_tokens(draft, s.id), std::vector<int32_t>(s.tokens.begin(), s.tokens.end() - 1));
  }

  const std::vector<int32_t> k{0, 1, 3, 5};
  const auto out = h.propose({&seqs[0], &seqs[1], &seqs[2], &seqs[3]}, k, kVocab);
  ASSERT_EQ(draft->forwards.size(), 1u + 5u) << "k_max forwards per propose";
  EXPECT_EQ(draft->forwards[1].seq_ids, (std::vector<uint64_t>{11, 12, 13}));
  EXPECT_EQ(draft->forwards[1].num_new, (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(draft->forwards[2].seq_ids, (std::vector<uint64_t>{12, 13}));
  EXPECT_EQ(draft->forwards[4].seq_ids, (std::vector<uint64_t>{13}));
  for (const auto& rec : draft->forwards) EXPECT_EQ(rec.all_logits, 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(out.drafts[i], greedy_continuation(draft->salt, seqs[i].tokens, k[i])) << "sequence " << i;
  }
  // The draft holds context + d0..d_{k-2}; the k=0 sequence was left alone.
  EXPECT_EQ(FakeModels::cached(draft, 10), 4);
  EXPECT_EQ(FakeModels::cached(draft, 11), 9);
  EXPECT_EQ(FakeModels::cached(draft, 12), 3 + 2);
  EXPECT_EQ(FakeModels::cached(draft, 13), 12 + 4);
}

TEST(DraftModelProposer, RollbackKeepsContextPlusAcceptedDrafts) {
  Fixture f;
  ProposerHarness h(kPlugin, "draft_model", {{"model", kDraftPath}}, f.fake.services());
  FakeModel* draft = f.draft();
  TestSeq s = make_seq(1, 6, 9);
  h.prefill({&s}, {6});

  // Partial acceptance: 2 of 4.
  auto out = h.propose({&s}, {4}, kVocab);
  ASSERT_EQ(out.drafts[0].size(), 4u);
  int64_t len = static_cast<int64_t>(s.tokens.size());
  h.accept(s, out.drafts[0], 2, (out.drafts[0][2] + 1) % kVocab);
  EXPECT_EQ(FakeModels::cached(draft, s.id), len + 2);
  EXPECT_EQ(FakeModels::cached_tokens(draft, s.id), std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + len + 2));

  // The next propose catches up on the target's token in its first forward.
  size_t before = draft->forwards.size();
  out = h.propose({&s}, {3}, kVocab);
  ASSERT_EQ(draft->forwards.size(), before + 3);
  EXPECT_EQ(draft->forwards[before].num_new, (std::vector<int32_t>{1}));
  EXPECT_EQ(out.drafts[0], greedy_continuation(draft->salt, s.tokens, 3));

  // Full acceptance: the cache holds context + d0..d1; catch-up is d2 plus the bonus token.
  len = static_cast<int64_t>(s.tokens.size());
  h.accept(s, out.drafts[0], 3, 17);
  EXPECT_EQ(FakeModels::cached(draft, s.id), len + 2);
  before = draft->forwards.size();
  out = h.propose({&s}, {2}, kVocab);
  ASSERT_EQ(draft->forwards.size(), before + 2);
  EXPECT_EQ(draft->forwards[before].num_new, (std::vector<int32_t>{2}));
  EXPECT_EQ(out.drafts[0], greedy_continuation(draft->salt, s.tokens, 2));

  // Zero acceptance: only the context stays.
  len = static_cast<int64_t>(s.tokens.size());
  h.accept(s, out.drafts[0], 0, (out.drafts[0][0] + 3) % kVocab);
  EXPECT_EQ(FakeModels::cached(draft, s.id), len);
  out = h.propose({&s}, {1}, kVocab);
  EXPECT_EQ(out.drafts[0], greedy_continuation(draft->salt, s.tokens, 1));
  EXPECT_EQ(FakeModels::cached(draft, s.id), static_cast<int64_t>(s.tokens.size()));
}

// Many steps over several sequences with random k (including 0) and random acceptance: the
// draft's cache is always a prefix of the sequence and drafts always equal the reference.
TEST(DraftModelProposer, RandomAcceptanceKeepsTheCacheExact) {
  Fixture f;
  ProposerHarness h(kPlugin, "draft_model", {{"model", kDraftPath}}, f.fake.services());
  FakeModel* draft = f.draft();
  std::vector<TestSeq> seqs{make_seq(1, 4, 1), make_seq(2, 7, 2), make_seq(3, 2, 3)};
  h.prefill({&seqs[0], &seqs[1], &seqs[2]}, {4, 7, 2});
  std::mt19937 rng(5);
  for (int step = 0; step < 40; ++step) {
    std::vector<int32_t> k;
    for (size_t i = 0; i < seqs.size(); ++i) k.push_back(static_cast<int32_t>(rng() % 6));
    const size_t before = draft->forwards.size();
    const auto out = h.propose({&seqs[0], &seqs[1], &seqs[2]}, k, kVocab);
    EXPECT_EQ(draft->forwards.size() - before, static_cast<size_t>(*std::max_element(k.begin(), k.end())));
    for (size_t i = 0; i < seqs.size(); ++i) {
      ASSERT_EQ(out.drafts[i], greedy_continuation(draft->salt, seqs[i].tokens, k[i])) << "step " << step;
      if (k[i] == 0) {  // decoded normally: one token, no on_accept
        seqs[i].tokens.push_back(static_cast<int32_t>(rng() % kVocab));
        continue;
      }
      const int32_t n = static_cast<int32_t>(rng() % (static_cast<uint32_t>(k[i]) + 1));
      const int32_t target = n < k[i] ? (out.drafts[i][n] + 1) % kVocab : static_cast<int32_t>(rng() % kVocab);
      h.accept(seqs[i], out.drafts[i], n, target);
      const auto cached = FakeModels::cached_tokens(draft, seqs[i].id);
      ASSERT_LT(cached.size(), seqs[i].tokens.size());
      ASSERT_TRUE(std::equal(cached.begin(), cached.end(), seqs[i].tokens.begin())) << "step " << step;
    }
  }
}

TEST(DraftModelProposer, SampledDraftsCarryTheirSoftmaxAndFollowPhilox) {
  constexpr float kTemperature = 0.8f;
  auto run = [&](uint64_t seed_offset) {
    Fixture f;
    ProposerHarness h(kPlugin, "draft_model", {{"model", kDraftPath}, {"temperature", "0.8"}}, f.fake.services());
    FakeModel* draft = f.draft();
    std::vector<TestSeq> seqs{make_seq(1, 5, 11), make_seq(2, 8, 12)};
    for (auto& s : seqs) {
      s.seed += seed_offset;
      s.step = 3;
    }
    h.prefill({&seqs[0], &seqs[1]}, {5, 8});
    const auto out = h.propose({&seqs[0], &seqs[1]}, {4, 3}, kVocab);
    for (size_t i = 0; i < seqs.size(); ++i) {
      std::vector<int32_t> ctx = seqs[i].tokens;
      for (int32_t j = 0; j < static_cast<int32_t>(out.drafts[i].size()); ++j) {
        const auto logits = FakeModels::causal_logits(draft->salt, ctx, kVocab);
        const auto row = out.row(i, j);
        double max = logits[0], sum = 0, total = 0;
        for (float l : logits) max = std::max<double>(max, l);
        for (float l : logits) sum += std::exp((l - max) / kTemperature);
        for (int32_t v = 0; v < kVocab; ++v) {
          EXPECT_NEAR(row[v], std::exp((logits[v] - max) / kTemperature) / sum, 1e-6);
          total += row[v];
        }
        EXPECT_NEAR(total, 1.0, 1e-5);
        // Inverse CDF of the row at the Philox uniform (lane 2, position j).
        const double u = specd::sdk::philox_uniform(seqs[i].seed, seqs[i].step, static_cast<uint32_t>(j), 2);
        const int32_t x = out.drafts[i][j];
        double below = 0;
        for (int32_t v = 0; v < x; ++v) below += row[v];
        EXPECT_LE(below, u + 1e-5) << "token " << x;
        EXPECT_GT(below + row[x], u - 1e-5) << "token " << x;
        ctx.push_back(x);
      }
    }
    return out;
  };
  const auto a = run(0), b = run(0), c = run(1000);
  EXPECT_EQ(a.drafts, b.drafts);
  EXPECT_EQ(a.probs, b.probs);
  EXPECT_NE(a.drafts, c.drafts) << "another seed draws other tokens";
}

TEST(DraftModelProposer, SelfDraftUsesTheTargetsFirstLayers) {
  Fixture f;
  ProposerHarness h(kPlugin, "draft_model", {{"layers", "2"}, {"dtype", "bf16"}}, f.fake.services());
  FakeModel* draft = f.fake.live_causal("", 2);
  ASSERT_NE(draft, nullptr);
  EXPECT_EQ(f.fake.live_models(), 1) << "the target handle used for its info is released";
  TestSeq s = make_seq(4, 6, 4);
  h.prefill({&s}, {6});
  const auto out = h.propose({&s}, {3}, kVocab);
  EXPECT_EQ(out.drafts[0], greedy_continuation(FakeModels::causal_salt("", 2), s.tokens, 3));
}

TEST(DraftModelProposer, ClampsDraftsToTheDraftsContext) {
  FakeModels fake(target_ckpt());
  fake.add_checkpoint(kDraftPath, draft_ckpt(kVocab, 12));
  ProposerHarness h(kPlugin, "draft_model", {{"model", kDraftPath}}, fake.services());
  TestSeq s = make_seq(1, 10, 1);
  h.prefill({&s}, {10});
  const auto out = h.propose({&s}, {5}, kVocab);
  EXPECT_EQ(out.drafts[0].size(), 3u) << "10 tokens + 3 drafts - 1 = 12 cached";
}

TEST(DraftModelProposer, ReleaseDropsTheSequenceAndDestructionReleasesTheModel) {
  Fixture f;
  {
    ProposerHarness h(kPlugin, "draft_model", {{"model", kDraftPath}}, f.fake.services());
    FakeModel* draft = f.draft();
    TestSeq a = make_seq(1, 5, 1), b = make_seq(2, 5, 2);
    h.prefill({&a, &b}, {5, 5});
    h.propose({&a, &b}, {2, 2}, kVocab);
    h.instance().on_release(1);
    EXPECT_EQ(draft->kv.count(1), 0u);
    EXPECT_EQ(draft->kv.count(2), 1u);
  }
  EXPECT_EQ(f.fake.live_models(), 0);
  for (const auto& m : f.fake.models()) EXPECT_EQ(m->release_calls, 1);
}

std::string create_error(FakeModels& fake, const std::vector<std::pair<std::string, std::string>>& params,
                         bool with_services = true) {
  try {
    ProposerHarness h(kPlugin, "draft_model", params, with_services ? fake.services() : nullptr);
  } catch (const specd::Error& e) {
    return e.what();
  }
  return "";
}

TEST(DraftModelProposer, Errors) {
  FakeModels fake(target_ckpt());
  fake.add_checkpoint("/fake/other-vocab", draft_ckpt(60));
  const std::string vocab = create_error(fake, {{"model", "/fake/other-vocab"}});
  EXPECT_NE(vocab.find("draft's vocabulary (60 tokens) differs from the target's (50 tokens)"), std::string::npos)
      << vocab;
  EXPECT_EQ(fake.live_models(), 0) << "a refused draft is released";

  const std::string both = create_error(fake, {{"model", "/fake/other-vocab"}, {"layers", "2"}});
  EXPECT_NE(both.find("layers: give either `model`"), std::string::npos) << both;
  const std::string neither = create_error(fake, {{"temperature", "0.5"}});
  EXPECT_NE(neither.find("model: required"), std::string::npos) << neither;
  const std::string none = create_error(fake, {{"layers", "2"}}, false);
  EXPECT_NE(none.find("needs the host's model services"), std::string::npos) << none;
  const std::string missing = create_error(fake, {{"model", "/fake/nowhere"}});
  EXPECT_NE(missing.find("no checkpoint at /fake/nowhere"), std::string::npos) << missing;
  const std::string too_deep = create_error(fake, {{"layers", "7"}});
  EXPECT_NE(too_deep.find("exceeds the target's 6 layers"), std::string::npos) << too_deep;
  EXPECT_EQ(fake.live_models(), 0);

  // Parameter errors are collected with file:line, before anything is loaded.
  specd::plugin::Registry reg;
  reg.load(kPlugin);
  const auto params = specd::plugin::Params::from_yaml(
      YAML::Load("name: draft_model\nlayers: 0\ntemperature: -1\ndtype: f8\nwindow: 3\n"), "d.yaml",
      "speculative.proposer");
  try {
    reg.validate(specd::plugin::ComponentKind::kProposer, "draft_model", params);
    FAIL() << "expected parameter errors";
  } catch (const specd::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("d.yaml:2: speculative.proposer.layers: expected integer in [1,"), std::string::npos) << msg;
    EXPECT_NE(msg.find("d.yaml:3: speculative.proposer.temperature: expected number"), std::string::npos) << msg;
    EXPECT_NE(msg.find("d.yaml:4: speculative.proposer.dtype: expected one of auto, f32, f16, bf16"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("d.yaml:5: speculative.proposer.window: unknown key"), std::string::npos) << msg;
  }
  try {
    ProposerHarness h(kPlugin, "draft_model", {{"model", kDraftPath}, {"windo", "1"}}, fake.services());
    FAIL() << "unknown key accepted";
  } catch (const specd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("windo: unknown key"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fake.live_models(), 0);
  EXPECT_NO_THROW(reg.validate(specd::plugin::ComponentKind::kProposer, "draft_model",
                               specd::plugin::Params::from_pairs({{"layers", "3"}})));
}

}  // namespace
