// The ngram proposer plugin: longest-suffix prompt lookup, checked against a brute-force
// reference at every step while the sequence grows, including a 32k-token sequence.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <vector>

#include "plugin/registry.hpp"
#include "specd/error.hpp"

namespace {

using specd::plugin::Params;
using specd::plugin::Registry;

const std::filesystem::path kPlugin = std::filesystem::path(SPECD_PLUGIN_BUILD_DIR) / "specd_proposer_ngram.so";

// Reference: longest n first, most recent earlier occurrence, up to k following tokens.
std::vector<int32_t> brute_force(const std::vector<int32_t>& t, int64_t min_n, int64_t max_n, int32_t k) {
  const int64_t len = static_cast<int64_t>(t.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    for (int64_t e = len - 1; e >= n; --e) {
      if (std::equal(t.begin() + (e - n), t.begin() + e, t.end() - n)) {
        const int64_t count = std::min<int64_t>(k, len - e);
        return {t.begin() + e, t.begin() + e + count};
      }
    }
  }
  return {};
}

class Ngram {
 public:
  explicit Ngram(const std::vector<std::pair<std::string, std::string>>& params = {}) {
    reg_.load(kPlugin);
    p_ = reg_.create_proposer("ngram", Params::from_pairs(params));
  }
  // Proposes for several sequences in one batch.
  std::vector<std::vector<int32_t>> propose(const std::vector<const std::vector<int32_t>*>& seqs,
                                            const std::vector<int32_t>& k, const std::vector<uint64_t>& ids) {
    const int32_t k_max = std::max(1, *std::max_element(k.begin(), k.end()));
    std::vector<specd_sequence> raw(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      raw[i].struct_size = sizeof(specd_sequence);
      raw[i].seq_id = ids[i];
      raw[i].tokens = {seqs[i]->data(), static_cast<int64_t>(seqs[i]->size())};
    }
    std::vector<int32_t> drafts(seqs.size() * k_max, -1), counts(seqs.size(), 0);
    specd_propose_batch b{};
    b.struct_size = sizeof(b);
    b.num_seqs = static_cast<int32_t>(seqs.size());
    b.seqs = raw.data();
    b.max_draft = k.data();
    b.k_max = k_max;
    b.vocab_size = 1 << 20;
    b.draft_tokens = drafts.data();
    b.num_drafted = counts.data();
    p_->propose(b);
    std::vector<std::vector<int32_t>> out(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i)
      out[i].assign(drafts.begin() + i * k_max, drafts.begin() + i * k_max + counts[i]);
    return out;
  }
  std::vector<int32_t> propose1(const std::vector<int32_t>& seq, int32_t k, uint64_t id = 1) {
    return propose({&seq}, {k}, {id})[0];
  }
  specd::plugin::ProposerInstance& instance() { return *p_; }

 private:
  Registry reg_;
  std::unique_ptr<specd::plugin::ProposerInstance> p_;
};

TEST(NgramProposer, ContinuesTheLongestEarlierMatch) {
  Ngram ng({{"prompt_lookup_min", "1"}, {"prompt_lookup_max", "3"}});
  EXPECT_EQ(ng.propose1({1, 2, 3, 4, 9, 1, 2, 3}, 3), (std::vector<int32_t>{4, 9, 1}));
  // "1 2 3" (n=3) → 70 beats the more recent "3" (n=1) → 80.
  EXPECT_EQ(ng.propose1({1, 2, 3, 70, 9, 9, 3, 80, 1, 2, 3}, 2, 2), (std::vector<int32_t>{70, 9}));
  // Among equal lengths the most recent occurrence wins.
  EXPECT_EQ(ng.propose1({5, 1, 5, 2, 5}, 1, 3), (std::vector<int32_t>{2}));
  // The continuation may run into the suffix itself, and stops at the end of the sequence.
  EXPECT_EQ(ng.propose1({7, 7, 7}, 5, 4), (std::vector<int32_t>{7}));
}

TEST(NgramProposer, NoMatchOrNoBudgetProposesNothing) {
  Ngram ng;
  EXPECT_TRUE(ng.propose1({1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(ng.propose1({9}, 4, 2).empty());
  EXPECT_TRUE(ng.propose1({1, 2, 1}, 0, 3).empty());
}

TEST(NgramProposer, MinimumLengthIsRespected) {
  Ngram ng({{"prompt_lookup_min", "2"}, {"prompt_lookup_max", "4"}});
  EXPECT_TRUE(ng.propose1({5, 1, 9, 2, 5}, 3).empty());  // only a 1-gram matches
  EXPECT_EQ(ng.propose1({5, 1, 9, 2, 5, 1}, 3, 2), (std::vector<int32_t>{9, 2, 5}));
}

TEST(NgramProposer, PerSequenceProposalLengthsInOneBatch) {
  Ngram ng;
  const std::vector<int32_t> a{1, 2, 3, 1, 2}, b{4, 5, 6, 4}, c{7, 8, 7};
  const auto out = ng.propose({&a, &b, &c}, {2, 0, 5}, {10, 11, 12});
  EXPECT_EQ(out[0], (std::vector<int32_t>{3, 1}));
  EXPECT_TRUE(out[1].empty());
  EXPECT_EQ(out[2], (std::vector<int32_t>{8, 7}));
}

// Grows sequences a few tokens at a time (as accepted runs do) and compares with brute force.
void check_incremental(int64_t min_n, int64_t max_n, int vocab, int64_t length, int check_every, uint64_t seed) {
  Ngram ng({{"prompt_lookup_min", std::to_string(min_n)}, {"prompt_lookup_max", std::to_string(max_n)}});
  std::mt19937_64 rng(seed);
  std::vector<int32_t> seq;
  int step = 0;
  while (static_cast<int64_t>(seq.size()) < length) {
    const int add = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < add; ++i) seq.push_back(static_cast<int32_t>(rng() % vocab));
    const int32_t k = 1 + static_cast<int32_t>(rng() % 6);
    const auto got = ng.propose1(seq, k, seed);
    if (++step % check_every == 0 || static_cast<int64_t>(seq.size()) >= length) {
      ASSERT_EQ(got, brute_force(seq, min_n, max_n, k)) << "length " << seq.size() << " k " << k;
    }
  }
}

TEST(NgramProposer, IncrementalIndexMatchesBruteForce) {
  check_incremental(1, 4, 3, 2000, 1, 1);
  check_incremental(2, 5, 5, 2000, 1, 2);
  check_incremental(3, 3, 2, 1500, 1, 3);
}

TEST(NgramProposer, LongSequence32k) {
  // Vocabulary 50: long matches are rare, so the brute force is the slow part; sampled checks.
  check_incremental(1, 4, 50, 32768, 500, 4);
}

TEST(NgramProposer, ReusedSequenceIdWithNewHistoryStartsOver) {
  Ngram ng;
  EXPECT_EQ(ng.propose1({1, 2, 3, 1, 2}, 2, 99), (std::vector<int32_t>{3, 1}));
  ng.instance().on_release(99);
  EXPECT_EQ(ng.propose1({4, 4, 6, 4}, 2, 99), (std::vector<int32_t>{6, 4}));
  // Without a release, a shorter or different history is detected too.
  EXPECT_EQ(ng.propose1({8, 1, 9, 1}, 2, 99), (std::vector<int32_t>{9, 1}));
}

TEST(NgramProposer, ParameterErrors) {
  Registry reg;
  reg.load(kPlugin);
  auto params = [](const std::string& y) {
    return Params::from_yaml(YAML::Load(y), "ng.yaml", "speculative.proposer");
  };
  try {
    reg.validate(specd::plugin::ComponentKind::kProposer, "ngram",
                 params("name: ngram\nprompt_lookup_min: 5\nprompt_lookup_max: 3\nwindow: 2\n"));
    FAIL();
  } catch (const specd::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ng.yaml:2: speculative.proposer.prompt_lookup_min: must be <= prompt_lookup_max (3), got 5"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("ng.yaml:4: speculative.proposer.window: unknown key"), std::string::npos) << msg;
  }
  EXPECT_THROW(reg.validate(specd::plugin::ComponentKind::kProposer, "ngram", params("prompt_lookup_max: 0")),
               specd::Error);
  EXPECT_NO_THROW(reg.validate(specd::plugin::ComponentKind::kProposer, "ngram", params("prompt_lookup_max: 8")));
}

}  // namespace
