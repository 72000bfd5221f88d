// The suffix proposer plugin (suffix decoding): its index against a brute-force search, the
// frequency-weighted continuation, draft length from the match length, chains and trees, the
// global cache of finished outputs, tenant isolation, and the cache's memory bound over 10,000
// finished requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <vector>

#include "global_cache.hpp"
#include "plugin/registry.hpp"
#include "token_index.hpp"

namespace {

using specd::plugin::Params;
using specd::plugin::Registry;

const std::filesystem::path kPlugin = std::filesystem::path(SPECD_PLUGIN_BUILD_DIR) / "specd_proposer_suffix.so";

using Opts = std::vector<std::pair<std::string, std::string>>;

struct Drafted {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;   // trees only
  std::vector<float> confidence;  // when asked for (ABI 1.6)
};

class Suffix {
 public:
  explicit Suffix(Opts params = {}) {
    reg_.load(kPlugin);
    p_ = reg_.create_proposer("suffix", Params::from_pairs(params));
  }
  Drafted propose(const std::vector<int32_t>& tokens, int32_t k, uint64_t id = 1, uint64_t tenant = 0,
                  bool confidence = false) {
    const bool trees = p_->capabilities().drafts_trees != 0;
    specd_sequence raw{};
    raw.struct_size = sizeof(raw);
    raw.seq_id = id;
    raw.tokens = {tokens.data(), static_cast<int64_t>(tokens.size())};
    raw.tenant = tenant;
    std::vector<int32_t> drafts(static_cast<size_t>(k), -1), parents(static_cast<size_t>(k)), count(1, 0);
    for (int32_t j = 0; j < k; ++j) parents[static_cast<size_t>(j)] = j - 1;
    specd_propose_batch b{};
    b.struct_size = sizeof(b);
    b.num_seqs = 1;
    b.seqs = &raw;
    b.max_draft = &k;
    b.k_max = k;
    b.vocab_size = 1 << 20;
    b.draft_tokens = drafts.data();
    b.num_drafted = count.data();
    b.draft_parents = trees ? parents.data() : nullptr;
    std::vector<float> conf(static_cast<size_t>(k), -1.0f);
    b.draft_confidence = confidence ? conf.data() : nullptr;
    p_->propose(b);
    Drafted d;
    d.tokens.assign(drafts.begin(), drafts.begin() + count[0]);
    if (confidence) d.confidence.assign(conf.begin(), conf.begin() + count[0]);
    if (trees) d.parents.assign(parents.begin(), parents.begin() + count[0]);
    return d;
  }
  // A finished request: prompt, then output.
  void finish(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output, uint64_t id, uint64_t tenant) {
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), output.begin(), output.end());
    specd_sequence raw{};
    raw.struct_size = sizeof(raw);
    raw.seq_id = id;
    raw.tokens = {all.data(), static_cast<int64_t>(all.size())};
    raw.num_prompt = static_cast<int64_t>(prompt.size());
    raw.tenant = tenant;
    p_->on_finish(raw);
    p_->on_release(id);
  }
  bool reports_confidence() const { return p_->capabilities().reports_confidence != 0; }
  void accepted(uint64_t id, int32_t n) { p_->on_accept(id, n, specd_token_view{nullptr, 0}); }
  uint64_t observed(const std::string& name) const {
    for (const auto& s : p_->context().observations().snapshot())
      if (s.name == name) return s.count;
    return 0;
  }

 private:
  Registry reg_;
  std::unique_ptr<specd::plugin::ProposerInstance> p_;
};

TEST(SuffixProposer, ContinuesTheLongestEarlierMatch) {
  Suffix s(Opts{{"max_spec_factor", "4"}});
  // "1 2 3" (length 3) -> 4 9 beats the more recent "3" (length 1) -> 80.
  EXPECT_EQ(s.propose({1, 2, 3, 4, 9, 7, 3, 80, 1, 2, 3}, 4).tokens, (std::vector<int32_t>{4, 9, 7, 3}));
  EXPECT_TRUE(s.propose({5, 6, 7}, 4, 2).tokens.empty()) << "no earlier occurrence";
  EXPECT_EQ(s.observed("lookups"), 2u);
  EXPECT_EQ(s.observed("hits"), 1u);
}

TEST(SuffixProposer, TheMostFrequentContinuationWins) {
  Suffix s(Opts{{"max_spec_factor", "4"}, {"min_token_prob", "0.2"}});
  // After "5 6": 7 twice (the older ones), 8 once (the most recent).
  EXPECT_EQ(s.propose({5, 6, 7, 1, 5, 6, 7, 2, 5, 6, 8, 3, 5, 6}, 1).tokens, (std::vector<int32_t>{7}));
  // min_token_prob cuts a token seen in too few continuations: after "5 6 7", 1 and 2 are half each.
  Suffix strict(Opts{{"max_spec_factor", "4"}, {"min_token_prob", "0.6"}});
  EXPECT_EQ(strict.propose({5, 6, 7, 1, 5, 6, 7, 2, 5, 6, 7}, 4).tokens, std::vector<int32_t>{});
}

TEST(SuffixProposer, DraftLengthFollowsTheMatchLength) {
  const std::vector<int32_t> text = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1, 2, 10, 11};  // match "10 11"
  EXPECT_EQ(Suffix().propose(text, 8).tokens.size(), 2u) << "factor 1: as long as the match";
  EXPECT_EQ(Suffix(Opts{{"max_spec_factor", "2"}}).propose(text, 8).tokens.size(), 4u);
  EXPECT_EQ(Suffix(Opts{{"max_spec_factor", "2"}, {"max_spec_offset", "1"}}).propose(text, 8).tokens.size(), 5u);
  EXPECT_EQ(Suffix(Opts{{"max_spec_factor", "8"}}).propose(text, 3).tokens.size(), 3u) << "k caps it";
}

// ABI 1.6: each chain token's confidence is its share of the continuations through its parent,
// counting one more that does not: n agreeing continuations say n / (n + 1).
TEST(SuffixProposer, ReportsEachDraftsShareAsItsConfidence) {
  Suffix s(Opts{{"max_spec_factor", "4"}, {"min_token_prob", "0.2"}});
  EXPECT_TRUE(s.reports_confidence());
  EXPECT_FALSE(Suffix(Opts{{"tree", "true"}}).reports_confidence()) << "trees carry no confidence";
  EXPECT_FALSE(Suffix(Opts{{"report_confidence", "false"}}).reports_confidence());
  // After "5 6" (three times): 7 1 5 6 twice, then 7 and 8 once each (a tie: the most recent
  // wins); and 8 3 5 6 once.
  const Drafted d = s.propose({5, 6, 7, 1, 5, 6, 7, 1, 5, 6, 8, 3, 5, 6}, 8, 1, 0, true);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{7, 1, 5, 6, 8, 3, 5, 6}));
  const std::vector<float> want = {2 / 4.f, 2 / 3.f, 2 / 3.f, 2 / 3.f, 1 / 3.f, 1 / 2.f, 1 / 2.f, 1 / 2.f};
  ASSERT_EQ(d.confidence.size(), want.size());
  for (size_t j = 0; j < want.size(); ++j) EXPECT_FLOAT_EQ(d.confidence[j], want[j]) << "draft " << j;
}

// Where the host takes confidences it cuts the chain itself: the proposer's own scaling by
// accepted / drafted would then shorten drafts for the host's cuts. Without them it still scales.
TEST(SuffixProposer, TheHostsCutsDoNotShortenLaterDrafts) {
  const std::vector<int32_t> text = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 1, 2, 10, 11};  // match "10 11"
  for (const bool host_cuts : {false, true}) {
    Suffix s(Opts{{"max_spec_factor", "4"}});
    EXPECT_EQ(s.propose(text, 8, 1, 0, host_cuts).tokens.size(), 8u);
    s.accepted(1, 0);  // acceptance 1 -> 0.7
    EXPECT_EQ(s.propose(text, 8, 1, 0, host_cuts).tokens.size(), host_cuts ? 8u : 5u) << host_cuts;
  }
}

TEST(SuffixProposer, DraftsATreeOfTheLikelierContinuations) {
  Suffix s(Opts{{"tree", "true"}, {"max_spec_factor", "4"}, {"min_token_prob", "0.4"}});
  // After "5 6": 7 8 twice, 9 4 twice, then each once (a share of 0.25, below 0.4).
  const Drafted d = s.propose({5, 6, 7, 8, 1, 5, 6, 9, 4, 2, 5, 6, 7, 8, 3, 5, 6, 9, 4, 0, 5, 6}, 8);
  // Equal shares: the most recent continuation first.
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{9, 7, 4, 8}));
  EXPECT_EQ(d.parents, (std::vector<int32_t>{-1, -1, 0, 1}));
}

TEST(SuffixProposer, FinishedOutputsDraftForLaterRequests) {
  Suffix s(Opts{{"max_spec_factor", "4"}});
  const std::vector<int32_t> output = {40, 41, 42, 43, 44, 45};
  EXPECT_TRUE(s.propose({1, 2, 40, 41}, 4, 7).tokens.empty());
  s.finish({1, 2, 3}, output, 1, 0);
  EXPECT_EQ(s.propose({1, 2, 40, 41}, 4, 7).tokens, (std::vector<int32_t>{42, 43, 44, 45}));
  EXPECT_EQ(s.observed("global_hits"), 1u);
  // The prompt of a finished request is not kept: only its output.
  EXPECT_TRUE(s.propose({9, 1, 2}, 4, 8).tokens.empty());
}

TEST(SuffixProposer, TenantsDoNotSeeEachOthersOutputs) {
  Suffix s(Opts{{"share_across_requests", "false"}, {"max_spec_factor", "4"}});
  const std::vector<int32_t> secret = {70, 71, 72, 73, 74, 75, 76};
  s.finish({1}, secret, 1, /*tenant=*/111);
  s.finish({1}, {80, 81, 82, 83}, 2, /*tenant=*/0);  // an anonymous request shares with nobody
  // Another tenant, and an anonymous request, whose text leads into the secret: no draft of it.
  EXPECT_TRUE(s.propose({5, 70, 71, 72}, 4, 10, 222).tokens.empty());
  EXPECT_TRUE(s.propose({5, 70, 71, 72}, 4, 11, 0).tokens.empty());
  EXPECT_TRUE(s.propose({5, 80, 81}, 4, 12, 0).tokens.empty());
  EXPECT_TRUE(s.propose({5, 80, 81}, 4, 13, 111).tokens.empty());
  // The owner gets it.
  EXPECT_EQ(s.propose({5, 70, 71, 72}, 4, 14, 111).tokens, (std::vector<int32_t>{73, 74, 75, 76}));
  // Shared (the default): everyone does.
  Suffix shared(Opts{{"max_spec_factor", "4"}});
  shared.finish({1}, secret, 1, 111);
  EXPECT_EQ(shared.propose({5, 70, 71, 72}, 4, 10, 222).tokens, (std::vector<int32_t>{73, 74, 75, 76}));
}

TEST(SuffixProposer, GlobalCacheOffKeepsNothing) {
  Suffix s(Opts{{"global_cache_tokens", "0"}, {"max_spec_factor", "4"}});
  s.finish({1}, {40, 41, 42, 43}, 1, 0);
  EXPECT_TRUE(s.propose({2, 40, 41}, 4, 5).tokens.empty());
}

// Brute force: the longest suffix of `context` (at most max_depth) that occurs in `store` with a
// following token that is not a separator, and where its continuations start.
int32_t brute_force(const std::vector<int32_t>& store, const std::vector<int32_t>& context, int32_t max_depth,
                    std::vector<int64_t>& starts) {
  starts.clear();
  int32_t best = 0;
  for (int64_t e = static_cast<int64_t>(store.size()) - 2; e >= 0; --e) {
    if (store[static_cast<size_t>(e + 1)] < 0) continue;
    int32_t len = 0;
    while (len < max_depth && len < static_cast<int32_t>(context.size()) && e - len >= 0 &&
           store[static_cast<size_t>(e - len)] == context[context.size() - 1 - static_cast<size_t>(len)])
      ++len;
    if (len > best) {
      best = len;
      starts.clear();
    }
    if (len == best && len > 0) starts.push_back(e + 1);
  }
  return best;
}

TEST(SuffixIndex, FindsWhatABruteForceSearchFinds) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    specd::suffix::TokenIndex index(16);
    std::vector<int32_t> store;
    const int32_t vocab = 3 + trial % 5;  // small vocabularies: many matches of every length
    for (int part = 0; part < 6; ++part) {
      std::vector<int32_t> text(20 + rng() % 60);
      for (int32_t& t : text) t = static_cast<int32_t>(rng() % vocab);
      index.append(text);
      store.insert(store.end(), text.begin(), text.end());
      if (part % 2 == 1) {
        index.append_separator();
        store.push_back(specd::suffix::kSeparator);
      }
    }
    for (int q = 0; q < 30; ++q) {
      std::vector<int32_t> context(1 + rng() % 24);
      for (int32_t& t : context) t = static_cast<int32_t>(rng() % vocab);
      std::vector<int64_t> want, got;
      const int32_t expect = brute_force(store, context, 16, want);
      const int32_t found = index.find(context, 1 << 20, got);
      ASSERT_EQ(found, expect) << "trial " << trial << " query " << q;
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << "trial " << trial << " query " << q;
    }
  }
}

TEST(SuffixIndex, EvictionForgetsTheOldestTokens) {
  specd::suffix::TokenIndex index(8);
  index.append(std::vector<int32_t>{1, 2, 3, 4});
  index.append_separator();
  index.append(std::vector<int32_t>{5, 6, 7});
  std::vector<int64_t> starts;
  EXPECT_EQ(index.find(std::vector<int32_t>{1, 2}, 64, starts), 2);
  index.evict_front(5);
  EXPECT_EQ(index.find(std::vector<int32_t>{1, 2}, 64, starts), 0);
  EXPECT_EQ(index.find(std::vector<int32_t>{5, 6}, 64, starts), 2);
  EXPECT_EQ(starts, (std::vector<int64_t>{7}));
}

// 10,000 finished requests from 100 tenants: the cache never holds more than its budget, its
// memory stays within the documented bound (docs/proposers.md: 150 bytes per cached token plus
// 2.6 KB per tenant), and what it still holds is the most recent outputs.
TEST(SuffixCache, MemoryStaysBoundedOverTenThousandRequests) {
  constexpr int64_t kBudget = 50000;
  specd::suffix::GlobalCache cache(kBudget, 32, /*shared=*/false);
  std::mt19937 rng(3);
  size_t peak = 0;
  for (int r = 0; r < 10000; ++r) {
    std::vector<int32_t> out(1 + rng() % 400);
    for (int32_t& t : out) t = static_cast<int32_t>(rng() % 32000);
    cache.add(1 + rng() % 100, out);
    ASSERT_LE(cache.tokens(), kBudget);
    peak = std::max(peak, cache.memory_bytes());
  }
  EXPECT_GT(cache.tokens(), kBudget / 2);
  EXPECT_LE(peak, static_cast<size_t>(kBudget) * 150 + 100 * 2600) << "peak " << peak;
  RecordProperty("peak_bytes_per_token", std::to_string(static_cast<double>(peak) / kBudget));
  // An output longer than the whole budget keeps its tail.
  std::vector<int32_t> huge(static_cast<size_t>(kBudget) * 2, 5);
  cache.add(1, huge);
  EXPECT_LE(cache.tokens(), kBudget);
}

}  // namespace
