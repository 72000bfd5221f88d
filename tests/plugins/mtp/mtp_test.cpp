// The mtp proposer plugin against a fake model runtime whose MTP modules are deterministic
// functions of their whole KV (tokens and input hidden states). A from-scratch reference
// computes the DeepSeek-V3 MTP chain — module i's entry p is (i == 0 ? h_p : out_{i-1}(p),
// tok_{p+1+i}) — and every draft and every module's KV is compared with it exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "plugins/fake_model_services.hpp"
#include "specd/error.hpp"
#include "specd/sdk/philox.hpp"

namespace {

using specd::testing::FakeCheckpoint;
using specd::testing::FakeEntry;
using specd::testing::FakeModel;
using specd::testing::FakeModels;
using specd::testing::ProposerHarness;
using specd::testing::TestSeq;

const std::filesystem::path kPlugin = std::filesystem::path(SPECD_PLUGIN_BUILD_DIR) / "specd_proposer_mtp.so";
constexpr int32_t kVocab = 40;
constexpr int32_t kHidden = 4;
constexpr uint64_t kTargetSalt = 0x7a7a7a;

FakeCheckpoint target_ckpt(int32_t mtp_modules) {
  return {kVocab, kHidden, 4, 1 << 20, mtp_modules};
}

// The target's final hidden state at position p of `tok` (a function of tok[0..p]).
std::vector<float> target_hidden(const std::vector<int32_t>& tok, int64_t p) {
  return FakeModels::hidden_from_hash(
      FakeModels::context_hash(kTargetSalt, std::span<const int32_t>(tok.data(), static_cast<size_t>(p + 1))), kHidden);
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Each module's committed entries for a sequence: module i holds p in [0, L-1-i).
std::vector<std::vector<FakeEntry>> committed_entries(const std::vector<int32_t>& tok, int32_t modules) {
  const int64_t len = static_cast<int64_t>(tok.size());
  std::vector<std::vector<FakeEntry>> entries(static_cast<size_t>(modules));
  std::vector<std::vector<std::vector<float>>> outs(static_cast<size_t>(modules));
  for (int32_t i = 0; i < modules; ++i) {
    for (int64_t p = 0; p < len - 1 - i; ++p) {
      FakeEntry e;
      e.token = tok[static_cast<size_t>(p + 1 + i)];
      e.x = i == 0 ? target_hidden(tok, p) : outs[static_cast<size_t>(i - 1)][static_cast<size_t>(p)];
      entries[static_cast<size_t>(i)].push_back(e);
      outs[static_cast<size_t>(i)].push_back(
          FakeModels::mtp_eval(i, entries[static_cast<size_t>(i)], kVocab, kHidden).hidden);
    }
  }
  return entries;
}

// The draft chain: d_j from module min(j, M-1); the last module recursive past M. choose(j,
// logits) picks the token (argmax for greedy).
std::vector<int32_t> mtp_chain(const std::vector<int32_t>& tok, int32_t modules, int32_t k,
                               const std::function<int32_t(int32_t, const std::vector<float>&)>& choose) {
  const int64_t len = static_cast<int64_t>(tok.size());
  std::vector<int32_t> ext = tok;
  std::vector<FakeEntry> entries;  // the current module's entries
  std::vector<std::vector<float>> prev_outs, outs;
  std::vector<float> last_out;
  for (int32_t j = 0; j < k; ++j) {
    specd::testing::MtpOutput ev;
    if (j < modules) {
      entries.clear();
      outs.clear();
      for (int64_t p = 0; p <= len - 2; ++p) {
        FakeEntry e;
        e.token = ext[static_cast<size_t>(p + 1 + j)];
        e.x = j == 0 ? target_hidden(tok, p) : prev_outs[static_cast<size_t>(p)];
        entries.push_back(e);
        ev = FakeModels::mtp_eval(j, entries, kVocab, kHidden);
        outs.push_back(ev.hidden);
      }
      prev_outs = outs;
    } else {
      entries.push_back({ext.back(), last_out});
      ev = FakeModels::mtp_eval(modules - 1, entries, kVocab, kHidden);
    }
    last_out = ev.hidden;
    ext.push_back(choose(j, ev.logits));
  }
  return {ext.begin() + len, ext.end()};
}

std::vector<int32_t> greedy_chain(const std::vector<int32_t>& tok, int32_t modules, int32_t k) {
  return mtp_chain(tok, modules, k, [](int32_t, const std::vector<float>& l) { return argmax(l); });
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

// Feeds the plugin the target hidden states the engine would: every chunk position in
// prefill, and in propose the positions [given, L-1) committed since.
class MtpDriver {
 public:
  MtpDriver(FakeModels& fake, const std::vector<std::pair<std::string, std::string>>& params)
      : h(kPlugin, "mtp", params, fake.services()) {}

  void prefill(const std::vector<TestSeq*>& seqs, const std::vector<int32_t>& num_new) {
    std::vector<float> hidden;
    std::vector<const TestSeq*> cseqs(seqs.begin(), seqs.end());
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int64_t len = static_cast<int64_t>(seqs[i]->tokens.size());
      for (int64_t p = len - num_new[i]; p < len; ++p) {
        const auto row = target_hidden(seqs[i]->tokens, p);
        hidden.insert(hidden.end(), row.begin(), row.end());
      }
      given_[seqs[i]->id] = len;
    }
    h.prefill(cseqs, num_new, hidden, kHidden);
  }

  specd::testing::ProposeResult propose(const std::vector<TestSeq*>& seqs, const std::vector<int32_t>& k) {
    std::vector<float> hidden;
    std::vector<int32_t> num_hidden;
    std::vector<const TestSeq*> cseqs(seqs.begin(), seqs.end());
    for (TestSeq* s : seqs) {
      const int64_t len = static_cast<int64_t>(s->tokens.size());
      int64_t& given = given_[s->id];
      num_hidden.push_back(static_cast<int32_t>(len - 1 - given));
      for (int64_t p = given; p < len - 1; ++p) {
        const auto row = target_hidden(s->tokens, p);
        hidden.insert(hidden.end(), row.begin(), row.end());
      }
      given = len - 1;
    }
    return h.propose(cseqs, k, kVocab, num_hidden, hidden, kHidden);
  }

  ProposerHarness h;

 private:
  std::map<uint64_t, int64_t> given_;
};

std::vector<FakeEntry> kv_of(const FakeModel* m, uint64_t seq) {
  auto it = m->kv.find(seq);
  return it == m->kv.end() ? std::vector<FakeEntry>{} : it->second;
}

std::vector<FakeEntry> prefix(const std::vector<FakeEntry>& v, int64_t n) {
  return {v.begin(), v.begin() + std::min<int64_t>(n, static_cast<int64_t>(v.size()))};
}

TEST(MtpProposer, Capabilities) {
  FakeModels fake(target_ckpt(2));
  ProposerHarness h(kPlugin, "mtp", {}, fake.services());
  EXPECT_EQ(h.caps().needs_target_hidden, 1);
  EXPECT_EQ(h.caps().keeps_state, 1);
  EXPECT_EQ(h.caps().supports_variable_k, 1);
  EXPECT_EQ(h.caps().produces_draft_probs, 0);
  EXPECT_NE(fake.live_mtp(0), nullptr);
  EXPECT_NE(fake.live_mtp(1), nullptr) << "default: every module the target has";
  ProposerHarness sampled(kPlugin, "mtp", {{"temperature", "0.5"}, {"num_modules", "1"}}, fake.services());
  EXPECT_EQ(sampled.caps().produces_draft_probs, 1);
}

TEST(MtpProposer, PrefillFeedsEveryCommittedPositionOfEveryModule) {
  FakeModels fake(target_ckpt(2));
  MtpDriver d(fake, {});
  FakeModel* m0 = fake.live_mtp(0);
  FakeModel* m1 = fake.live_mtp(1);
  TestSeq a = make_seq(1, 9, 1), b = make_seq(2, 5, 2);
  // a arrives in two chunks (4 + 5 tokens), b in one, sharing the second prefill call.
  TestSeq a_first = a;
  a_first.tokens.resize(4);
  d.prefill({&a_first}, {4});
  EXPECT_EQ(kv_of(m0, 1), committed_entries(a_first.tokens, 2)[0]);
  EXPECT_EQ(kv_of(m1, 1), committed_entries(a_first.tokens, 2)[1]);
  d.prefill({&a, &b}, {5, 5});
  for (const TestSeq* s : {&a, &b}) {
    const auto ref = committed_entries(s->tokens, 2);
    EXPECT_EQ(ref[0].size(), s->tokens.size() - 1);
    EXPECT_EQ(kv_of(m0, s->id), ref[0]) << "module 0 holds (h_p, tok_{p+1}) for every p < L-1";
    EXPECT_EQ(kv_of(m1, s->id), ref[1]) << "module 1 holds (out_0(p), tok_{p+2}) for every p < L-2";
  }
  // One forward per module per prefill call; module 0 returns every hidden row (module 1 needs
  // them). A prefill drafts nothing: no module computes logits (ABI 1.7).
  ASSERT_EQ(m0->forwards.size(), 2u);
  ASSERT_EQ(m1->forwards.size(), 2u);
  EXPECT_EQ(m0->forwards[1].num_new, (std::vector<int32_t>{5, 4}));
  EXPECT_EQ(m0->forwards[1].all_logits, 0);
  EXPECT_TRUE(m0->forwards[1].hidden_all);
  EXPECT_EQ(m1->forwards[1].num_new, (std::vector<int32_t>{5, 3}));
  EXPECT_FALSE(m1->forwards[1].hidden_all);
  for (const FakeModel* m : {m0, m1})
    for (const auto& rec : m->forwards) EXPECT_FALSE(rec.logits) << "an LM head in a prefill";
}

TEST(MtpProposer, DraftsFollowTheModuleChainAndReuseTheLastModule) {
  FakeModels fake(target_ckpt(2));
  MtpDriver d(fake, {});
  FakeModel* m0 = fake.live_mtp(0);
  FakeModel* m1 = fake.live_mtp(1);
  std::vector<TestSeq> seqs{make_seq(1, 6, 1), make_seq(2, 8, 2), make_seq(3, 4, 3), make_seq(4, 7, 4)};
  d.prefill({&seqs[0], &seqs[1], &seqs[2], &seqs[3]}, {6, 8, 4, 7});
  for (auto& s : seqs) s.tokens.push_back(static_cast<int32_t>(s.id * 7 % kVocab));  // first sampled token
  const size_t f0 = m0->forwards.size(), f1 = m1->forwards.size();
  const std::vector<int32_t> k{0, 1, 2, 5};
  const auto out = d.propose({&seqs[0], &seqs[1], &seqs[2], &seqs[3]}, k);
  for (size_t i = 0; i < seqs.size(); ++i)
    EXPECT_EQ(out.drafts[i], greedy_chain(seqs[i].tokens, 2, k[i])) << "sequence " << i;
  // k_max forward calls: module 0 once, module 1 for step 1 and the three recursive steps.
  ASSERT_EQ(m0->forwards.size() - f0, 1u);
  ASSERT_EQ(m1->forwards.size() - f1, 4u);
  EXPECT_EQ(m0->forwards[f0].seq_ids.size(), 4u) << "the k=0 sequence catches up too";
  EXPECT_EQ(m1->forwards[f1].seq_ids.size(), 4u);
  EXPECT_EQ(m1->forwards[f1 + 1].seq_ids, (std::vector<uint64_t>{4}));
  EXPECT_EQ(m1->forwards[f1 + 1].num_new, (std::vector<int32_t>{1}));
}

TEST(MtpProposer, OneModuleIsAppliedRecursively) {
  FakeModels fake(target_ckpt(2));
  MtpDriver d(fake, {{"num_modules", "1"}});
  EXPECT_EQ(fake.live_mtp(1), nullptr);
  FakeModel* m0 = fake.live_mtp(0);
  TestSeq s = make_seq(1, 7, 5);
  d.prefill({&s}, {7});
  s.tokens.push_back(3);
  const size_t f0 = m0->forwards.size();
  const auto out = d.propose({&s}, {4});
  EXPECT_EQ(out.drafts[0], greedy_chain(s.tokens, 1, 4));
  EXPECT_EQ(m0->forwards.size() - f0, 4u);
  EXPECT_EQ(FakeModels::cached(m0, s.id), static_cast<int64_t>(s.tokens.size()) - 1 + 3);
  d.h.accept(s, out.drafts[0], 4, 9);
  EXPECT_EQ(kv_of(m0, s.id), prefix(committed_entries(s.tokens, 1)[0], 7)) << "recursive entries are always dropped";
  const auto next = d.propose({&s}, {2});
  EXPECT_EQ(next.drafts[0], greedy_chain(s.tokens, 1, 2));
}

// Many rounds with random k (including 0 and k > modules) and random acceptance: drafts match
// the reference and after every on_accept each module holds exactly the entries that stay
// valid, equal to the reference's committed entries.
void random_rounds(int32_t modules, uint32_t seed) {
  FakeModels fake(target_ckpt(modules));
  MtpDriver d(fake, {});
  std::vector<FakeModel*> mods;
  for (int32_t m = 0; m < modules; ++m) mods.push_back(fake.live_mtp(m));
  std::vector<TestSeq> seqs{make_seq(1, 5, seed), make_seq(2, 3, seed + 1), make_seq(3, 8, seed + 2)};
  d.prefill({&seqs[0], &seqs[1], &seqs[2]}, {5, 3, 8});
  std::mt19937 rng(seed);
  for (auto& s : seqs) s.tokens.push_back(static_cast<int32_t>(rng() % kVocab));
  for (int round = 0; round < 25; ++round) {
    std::vector<int32_t> k;
    for (size_t i = 0; i < seqs.size(); ++i) k.push_back(static_cast<int32_t>(rng() % 6));
    const auto out = d.propose({&seqs[0], &seqs[1], &seqs[2]}, k);
    for (size_t i = 0; i < seqs.size(); ++i) {
      TestSeq& s = seqs[i];
      ASSERT_EQ(out.drafts[i], greedy_chain(s.tokens, modules, k[i])) << "round " << round << " seq " << i;
      const int64_t len = static_cast<int64_t>(s.tokens.size());
      if (k[i] == 0) {
        s.tokens.push_back(static_cast<int32_t>(rng() % kVocab));
        continue;
      }
      const int32_t n = static_cast<int32_t>(rng() % (static_cast<uint32_t>(k[i]) + 1));
      const int32_t target = n < k[i] ? (out.drafts[i][n] + 1) % kVocab : static_cast<int32_t>(rng() % kVocab);
      d.h.accept(s, out.drafts[i], n, target);
      const auto ref = committed_entries(s.tokens, modules);
      for (int32_t m = 0; m < modules; ++m) {
        const int64_t keep = m < k[i] ? len - 1 - std::max(0, m - n) : len - 1 - m;
        ASSERT_EQ(kv_of(mods[static_cast<size_t>(m)], s.id), prefix(ref[static_cast<size_t>(m)], keep))
            << "round " << round << " seq " << i << " module " << m << " k " << k[i] << " accepted " << n;
        ASSERT_EQ(FakeModels::cached(mods[static_cast<size_t>(m)], s.id), std::max<int64_t>(keep, 0));
      }
    }
  }
}

TEST(MtpProposer, RandomAcceptanceOneModule) {
  random_rounds(1, 11);
}
TEST(MtpProposer, RandomAcceptanceTwoModules) {
  random_rounds(2, 22);
}
TEST(MtpProposer, RandomAcceptanceThreeModules) {
  random_rounds(3, 33);
}

TEST(MtpProposer, LongPrefillIsSplitAcrossForwardsAndStaysExact) {
  FakeModels fake(target_ckpt(2));
  MtpDriver d(fake, {});
  TestSeq a = make_seq(1, 600, 8), b = make_seq(2, 30, 9);
  d.prefill({&a, &b}, {600, 30});
  EXPECT_GT(fake.live_mtp(0)->forwards.size(), 1u) << "row cap (512) on forwards that return every hidden state";
  for (const TestSeq* s : {&a, &b}) {
    const auto ref = committed_entries(s->tokens, 2);
    EXPECT_EQ(kv_of(fake.live_mtp(0), s->id), ref[0]);
    EXPECT_EQ(kv_of(fake.live_mtp(1), s->id), ref[1]);
  }
  a.tokens.push_back(1);
  b.tokens.push_back(2);
  const auto out = d.propose({&a, &b}, {3, 3});
  EXPECT_EQ(out.drafts[0], greedy_chain(a.tokens, 2, 3));
  EXPECT_EQ(out.drafts[1], greedy_chain(b.tokens, 2, 3));
}

TEST(MtpProposer, SampledDraftsCarryTheirSoftmaxAndFollowPhilox) {
  constexpr float kTemperature = 0.5f;
  FakeModels fake(target_ckpt(2));
  MtpDriver d(fake, {{"temperature", "0.5"}});
  TestSeq s = make_seq(1, 6, 77);
  s.step = 4;
  d.prefill({&s}, {6});
  s.tokens.push_back(5);
  const auto out = d.propose({&s}, {4});
  ASSERT_EQ(out.drafts[0].size(), 4u);
  // Walk the reference chain with the plugin's own choices, checking each row on the way.
  const auto chain = mtp_chain(s.tokens, 2, 4, [&](int32_t j, const std::vector<float>& logits) {
    const auto row = out.row(0, j);
    const double max = *std::max_element(logits.begin(), logits.end());
    double sum = 0, total = 0;
    for (float l : logits) sum += std::exp((l - max) / kTemperature);
    for (int32_t v = 0; v < kVocab; ++v) {
      EXPECT_NEAR(row[v], std::exp((logits[v] - max) / kTemperature) / sum, 1e-6);
      total += row[v];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
    const double u = specd::sdk::philox_uniform(s.seed, s.step, static_cast<uint32_t>(j), 2);
    const int32_t x = out.drafts[0][j];
    double below = 0;
    for (int32_t v = 0; v < x; ++v) below += row[v];
    EXPECT_LE(below, u + 1e-5);
    EXPECT_GT(below + row[x], u - 1e-5);
    return x;
  });
  EXPECT_EQ(chain, out.drafts[0]);
}

TEST(MtpProposer, ReleaseDropsEveryModulesSequence) {
  FakeModels fake(target_ckpt(2));
  {
    MtpDriver d(fake, {});
    TestSeq a = make_seq(1, 6, 1), b = make_seq(2, 6, 2);
    d.prefill({&a, &b}, {6, 6});
    d.h.instance().on_release(1);
    EXPECT_EQ(fake.live_mtp(0)->kv.count(1), 0u);
    EXPECT_EQ(fake.live_mtp(1)->kv.count(1), 0u);
    EXPECT_EQ(fake.live_mtp(1)->kv.count(2), 1u);
  }
  EXPECT_EQ(fake.live_models(), 0) << "modules and the target handle are released";
  for (const auto& m : fake.models()) EXPECT_EQ(m->release_calls, 1);
}

std::string create_error(FakeModels* fake, const std::vector<std::pair<std::string, std::string>>& params) {
  try {
    ProposerHarness h(kPlugin, "mtp", params, fake != nullptr ? fake->services() : nullptr);
  } catch (const specd::Error& e) {
    return e.what();
  }
  return "";
}

TEST(MtpProposer, Errors) {
  FakeModels plain(target_ckpt(0));
  const std::string none = create_error(&plain, {});
  EXPECT_NE(none.find("target model has no MTP modules (mtp.* tensors)"), std::string::npos) << none;
  EXPECT_EQ(plain.live_models(), 0);

  FakeModels two(target_ckpt(2));
  const std::string too_many = create_error(&two, {{"num_modules", "3"}});
  EXPECT_NE(too_many.find("num_modules = 3 but the target has only 2 MTP modules"), std::string::npos) << too_many;
  const std::string zero = create_error(&two, {{"num_modules", "0"}});
  EXPECT_NE(zero.find("num_modules: expected integer in [1,"), std::string::npos) << zero;
  const std::string unknown = create_error(&two, {{"k", "3"}});
  EXPECT_NE(unknown.find("k: unknown key"), std::string::npos) << unknown;
  const std::string no_services = create_error(nullptr, {});
  EXPECT_NE(no_services.find("needs the host's model services"), std::string::npos) << no_services;
  EXPECT_EQ(two.live_models(), 0);

  // Hidden states must arrive without gaps.
  MtpDriver d(two, {});
  TestSeq s = make_seq(1, 6, 1);
  d.prefill({&s}, {6});
  s.tokens.insert(s.tokens.end(), {1, 2, 3});
  std::vector<float> rows(kHidden, 1.0f);  // one row for position 7, but 6 was never given
  EXPECT_THROW(d.h.propose({&s}, {2}, kVocab, {1}, rows, kHidden), specd::Error);
  EXPECT_THROW(d.h.propose({&s}, {2}, kVocab, {2}, std::vector<float>(2 * 3, 1.0f), 3), specd::Error)
      << "wrong hidden width";
}

}  // namespace
