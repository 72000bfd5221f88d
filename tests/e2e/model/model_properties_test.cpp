// Invariants of the batched paged forward: however tokens are grouped into calls, batches and
// blocks, the logits are the same function of the token sequence.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime_test_util.hpp"
#include "specd/error.hpp"

namespace specd::model::test {
namespace {

constexpr double kTol = 2e-5;  // different GEMM shapes round differently; math is identical

class ForwardProperties : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    weights_ = load_weights(fixture(GetParam()));
    vocab_ = static_cast<int32_t>(weights_->config().vocab_size);
  }
  std::shared_ptr<const LlamaWeights> weights_;
  int32_t vocab_ = 0;
};

TEST_P(ForwardProperties, PrefillEqualsTokenByTokenDecode) {
  const auto tokens = some_tokens(21, vocab_, 2);
  Runner a(weights_), b(weights_);
  const auto prefill = a.append(1, tokens);
  std::vector<std::vector<float>> decode;
  for (int32_t t : tokens) decode.push_back(b.append(1, {t}, LogitsMode::kLast).at(0));
  EXPECT_LT(max_row_rel_error(decode, prefill), kTol);
}

TEST_P(ForwardProperties, BatchedEqualsOneAtATime) {
  const auto p1 = some_tokens(13, vocab_, 3), p2 = some_tokens(5, vocab_, 4), p3 = some_tokens(30, vocab_, 5);
  // Alone.
  Runner solo(weights_);
  const auto s1 = solo.append(1, p1), s2 = solo.append(2, p2), s3 = solo.append(3, p3);
  const auto s2_next = solo.append(2, {42, 43, 44});
  // Together: seq 20 already has p2 in its cache and scores 3 tokens while 10 and 30 prefill.
  Runner batch(weights_);
  batch.append(20, p2);
  for (kv::SeqId s : {10, 30}) batch.kv->add_sequence(s);
  ASSERT_TRUE(batch.kv->reserve(10, 13));
  ASSERT_TRUE(batch.kv->reserve(20, 3));
  ASSERT_TRUE(batch.kv->reserve(30, 30));
  const std::vector<int32_t> next = {42, 43, 44};
  ForwardBatch b;
  b.seqs = {{10, p1, LogitsMode::kAll}, {20, next, LogitsMode::kAll}, {30, p3, LogitsMode::kAll}};
  batch.model->forward(b, *batch.kv, batch.out);
  EXPECT_LT(max_row_rel_error(batch.rows(0), s1), kTol);
  EXPECT_LT(max_row_rel_error(batch.rows(1), s2_next), kTol);
  EXPECT_LT(max_row_rel_error(batch.rows(2), s3), kTol);
  (void)s2;
  // LogitsMode::kLast and kNone select rows per sequence.
  const std::vector<int32_t> one = {7}, two = {8, 9};
  b.seqs = {{10, one, LogitsMode::kLast}, {30, two, LogitsMode::kNone}};
  ASSERT_TRUE(batch.kv->reserve(10, 1));
  ASSERT_TRUE(batch.kv->reserve(30, 2));
  batch.model->forward(b, *batch.kv, batch.out);
  EXPECT_EQ(batch.out.row_start, (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(batch.kv->num_tokens(30), 32);
}

TEST_P(ForwardProperties, IndependentOfBlockSize) {
  const auto tokens = some_tokens(37, vocab_, 6);
  Runner base(weights_, 16, 64);
  const auto want = base.append(1, tokens);
  for (int32_t bs : {1, 2, 8, 64}) {
    Runner r(weights_, bs, 2048 / bs + 4);
    // Another sequence first so that block ids are not simply 0, 1, 2, ...
    r.append(9, some_tokens(3, vocab_, 7));
    EXPECT_LT(max_row_rel_error(r.append(1, tokens), want), kTol) << "block size " << bs;
  }
}

TEST_P(ForwardProperties, ScoringNTokensEqualsNDecodes) {
  const auto prompt = some_tokens(9, vocab_, 8), draft = some_tokens(5, vocab_, 9);
  Runner a(weights_, 4), b(weights_, 4);
  a.append(1, prompt, LogitsMode::kNone);
  b.append(1, prompt, LogitsMode::kNone);
  const auto scored = a.append(1, draft, LogitsMode::kAll);
  std::vector<std::vector<float>> seq;
  for (int32_t t : draft) seq.push_back(b.append(1, {t}, LogitsMode::kLast).at(0));
  EXPECT_LT(max_row_rel_error(scored, seq), kTol);
}

TEST_P(ForwardProperties, TruncateThenAppendReproducesLogits) {
  const auto prompt = some_tokens(10, vocab_, 10), good = some_tokens(6, vocab_, 11);
  const auto bad = some_tokens(7, vocab_, 12);
  Runner r(weights_, 4, 16);
  r.append(1, prompt, LogitsMode::kNone);
  const auto want = r.append(1, good);
  // Roll back, write different tokens (a rejected draft), roll back again, redo.
  r.kv->truncate(1, 10);
  EXPECT_EQ(r.kv->block_table(1).size(), 3u);
  r.append(1, bad);
  r.kv->truncate(1, 10);
  const auto again = r.append(1, good);
  EXPECT_LT(max_row_rel_error(again, want), 1e-6);
}

TEST_P(ForwardProperties, SelfDraftSharesWeightsAndEqualsTruncatedCheckpoint) {
  const auto dir = fixture(GetParam());
  const auto draft_dir = fixture::write_draft_of(
      dir, 1, std::filesystem::path(SPECD_TEST_WORK_DIR) / "runtime" / (GetParam() + "-draft1"));
  const auto tokens = some_tokens(12, vocab_, 13);
  Runner shared(weights_, 16, 64, 1);  // first layer of the full weights
  EXPECT_EQ(shared.model->num_layers(), 1);
  EXPECT_EQ(&shared.model->weights(), weights_.get());
  Runner separate(load_weights(draft_dir));
  EXPECT_LT(max_row_rel_error(shared.append(1, tokens), separate.append(1, tokens)), 1e-6);
}

// A draft tree in one forward: [last, nodes...] with tree attention. Each node's logits equal
// those of its path scored as a chain, and once the accepted path is compacted (KvCache::compact)
// and the rest truncated, decoding goes on exactly as after the chain.
TEST_P(ForwardProperties, TreeScoringEqualsEachPathAsAChain) {
  const auto prompt = some_tokens(9, vocab_, 15), nodes = some_tokens(9, vocab_, 16);
  // Region: the last prompt token (root) and 9 nodes; node i is region index i + 1.
  const std::vector<int32_t> tree = {-1, 0, 0, 1, 1, 2, 4, 4, 6, 0};
  std::vector<int32_t> inputs = {prompt.back()};
  inputs.insert(inputs.end(), nodes.begin(), nodes.end());
  const std::vector<int32_t> head(prompt.begin(), prompt.end() - 1);
  Runner t(weights_, 4);
  t.append(1, head, LogitsMode::kNone);
  ASSERT_TRUE(t.kv->reserve(1, static_cast<int32_t>(inputs.size())));
  ForwardBatch b;
  b.seqs.push_back({1, inputs, LogitsMode::kAll, tree});
  t.model->forward(b, *t.kv, t.out);
  const auto scored = t.rows(0);
  ASSERT_EQ(scored.size(), inputs.size());
  Runner c(weights_, 4);
  c.append(1, head, LogitsMode::kNone);
  for (int32_t r = 0; r < static_cast<int32_t>(tree.size()); ++r) {
    std::vector<int32_t> path;
    for (int32_t x = r; x >= 0; x = tree[static_cast<size_t>(x)]) path.insert(path.begin(), x);
    std::vector<int32_t> chain;
    for (int32_t x : path) chain.push_back(inputs[static_cast<size_t>(x)]);
    c.kv->truncate(1, static_cast<int32_t>(head.size()));
    EXPECT_EQ(c.append(1, chain).back(), scored[static_cast<size_t>(r)]) << "node " << r;
  }
  // Accept the path 0 -> 1 -> 4 -> 6 -> 8 (region indices), then decode one more token.
  const std::vector<int32_t> keep = {0, 1, 4, 6, 8};
  const auto base = static_cast<int32_t>(head.size());
  t.kv->compact(1, base, keep);
  t.kv->truncate(1, base + static_cast<int32_t>(keep.size()));
  c.kv->truncate(1, base);
  std::vector<int32_t> chain;
  for (int32_t x : keep) chain.push_back(inputs[static_cast<size_t>(x)]);
  c.append(1, chain, LogitsMode::kNone);
  EXPECT_EQ(t.append(1, {7}, LogitsMode::kLast), c.append(1, {7}, LogitsMode::kLast));
  // A bad tree is refused before anything is written.
  ASSERT_TRUE(t.kv->reserve(1, 2));
  const std::vector<int32_t> two = {3, 4}, bad = {-1, 1};
  b.seqs = {{1, two, LogitsMode::kAll, bad}};
  EXPECT_THROW(t.model->forward(b, *t.kv, t.out), Error);
  EXPECT_EQ(t.kv->num_tokens(1), base + static_cast<int32_t>(keep.size()) + 1);
}

// Auxiliary hidden states (EAGLE-3's features): layer l's entry is the residual stream entering
// layer l, so it equals the last entry (before the final norm) of the model cut to l layers, bit
// for bit (the same arithmetic); an entry does not depend on which others are asked for.
TEST_P(ForwardProperties, AuxHiddenStatesAreTheResidualStreamEnteringEachLayer) {
  const auto tokens = some_tokens(7, vocab_, 17);
  const auto L = static_cast<int32_t>(weights_->config().num_layers);
  const int64_t H = weights_->config().hidden_size;
  const std::vector<int32_t> layers = {0, 1, L};
  auto aux = [&](int64_t model_layers, std::span<const int32_t> which) {
    Runner r(weights_, 16, 64, model_layers);
    r.kv->add_sequence(1);
    EXPECT_TRUE(r.kv->reserve(1, static_cast<int32_t>(tokens.size())));
    ForwardBatch b;
    b.seqs.push_back({1, tokens, LogitsMode::kLast});
    b.return_hidden = true;
    b.hidden_all = true;
    b.aux_layers = which;
    r.model->forward(b, *r.kv, r.out);
    return r.out.aux_hidden;
  };
  const std::vector<float> full = aux(-1, layers);
  ASSERT_EQ(full.size(), tokens.size() * layers.size() * static_cast<size_t>(H));
  const std::vector<int32_t> one = {1};
  const std::vector<float> cut = aux(1, one);  // the 1-layer model's output before its final norm
  for (size_t t = 0; t < tokens.size(); ++t) {
    const float* row = full.data() + t * layers.size() * static_cast<size_t>(H);
    EXPECT_EQ(0, std::memcmp(row + H, cut.data() + t * static_cast<size_t>(H), static_cast<size_t>(H) * 4)) << t;
    EXPECT_NE(0, std::memcmp(row + H, row + 2 * H, static_cast<size_t>(H) * 4)) << t;  // layers differ
  }
  const std::vector<int32_t> zero = {0};
  const std::vector<float> emb = aux(-1, zero);
  EXPECT_EQ(0, std::memcmp(emb.data(), full.data(), static_cast<size_t>(H) * 4));
  const std::vector<int32_t> bad = {L + 1};
  EXPECT_THROW(aux(-1, bad), Error);
}

TEST_P(ForwardProperties, ErrorsLeaveTheCacheUnchanged) {
  Runner r(weights_, 4, 8);
  r.append(1, some_tokens(3, vocab_, 14));
  ForwardBatch b;
  const std::vector<int32_t> bad = {1, vocab_};
  ASSERT_TRUE(r.kv->reserve(1, 2));
  b.seqs = {{1, bad, LogitsMode::kLast}};
  EXPECT_THROW(r.model->forward(b, *r.kv, r.out), Error);
  EXPECT_EQ(r.kv->num_tokens(1), 3);
  const std::vector<int32_t> many(30, 5);  // not reserved
  b.seqs = {{1, many, LogitsMode::kLast}};
  EXPECT_THROW(r.model->forward(b, *r.kv, r.out), Error);
  EXPECT_EQ(r.kv->num_tokens(1), 3);
}

INSTANTIATE_TEST_SUITE_P(Flavours, ForwardProperties,
                         ::testing::Values("tiny", "tiny-qwen2", "tiny-qwen3-moe", "tiny-mixtral", "tiny-mistral-swa",
                                           "tiny-phi3", "tiny-gemma2", "tiny-gemma3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace specd::model::test
