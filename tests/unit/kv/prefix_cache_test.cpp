// Automatic prefix caching in the KV cache (kv/prefix_index.hpp): full blocks published by one
// sequence are found by the next one whose tokens start the same way, survive their sequence
// until the pool needs them (least recently freed first), are never written again, and never
// hold tokens a rollback dropped.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kv/block_allocator.hpp"
#include "kv/kv_cache.hpp"
#include "specd/error.hpp"

namespace specd::kv {
namespace {

constexpr int32_t kBlock = 4;

KvCache cache(int32_t num_blocks, bool caching = true) {
  KvCache c({1, 1, 4, kBlock}, num_blocks);
  c.set_prefix_caching(caching);
  return c;
}

std::vector<int32_t> tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// A sequence that computed `toks` (all of them committed) and published its full blocks.
void prefill(KvCache& c, SeqId seq, const std::vector<int32_t>& toks) {
  c.add_sequence(seq);
  ASSERT_TRUE(c.reserve(seq, static_cast<int32_t>(toks.size())));
  c.commit(seq, static_cast<int32_t>(toks.size()));
  c.publish(seq, toks);
}

std::vector<int32_t> table(const KvCache& c, SeqId seq) {
  const auto t = c.block_table(seq);
  return {t.begin(), t.end()};
}

float& k_at(KvCache& c, int32_t block) {  // first K element of a block (f32 cache, layer 0)
  return static_cast<float*>(c.k_layer(0))[static_cast<size_t>(block) * kBlock * 4];
}

TEST(PrefixCache, PublishedBlocksOutliveTheirSequenceAndAreFoundByTheirTokens) {
  KvCache c = cache(6);
  const std::vector<int32_t> prompt = tokens(10);
  prefill(c, 1, prompt);
  const std::vector<int32_t> first = table(c, 1);
  k_at(c, first[0]) = 42.0f;
  c.remove_sequence(1);
  EXPECT_EQ(c.num_free_blocks(), 6) << "cached blocks count as free";
  EXPECT_EQ(c.num_cached_free_blocks(), 2) << "the two full blocks are kept, the partial third is not";

  std::vector<int32_t> longer = tokens(12);
  c.add_sequence(2);
  EXPECT_EQ(c.match_prefix(2, longer, 11), 8);
  EXPECT_EQ(table(c, 2), std::vector<int32_t>(first.begin(), first.begin() + 2));
  EXPECT_EQ(c.num_tokens(2), 8);
  EXPECT_EQ(k_at(c, table(c, 2)[0]), 42.0f) << "the same storage, not a copy";
  EXPECT_EQ(c.num_cached_free_blocks(), 0) << "found blocks are in use again";
  ASSERT_TRUE(c.reserve(2, 4));
  c.commit(2, 4);
  EXPECT_EQ(table(c, 2).size(), 3u);
}

TEST(PrefixCache, OnlyTheSameTokensAtTheSamePositionsMatch) {
  KvCache c = cache(8);
  prefill(c, 1, tokens(8));
  c.remove_sequence(1);
  std::vector<int32_t> other_first = tokens(8);
  other_first[1] = 7;  // the second block's tokens are the same, behind a different first block
  c.add_sequence(2);
  EXPECT_EQ(c.match_prefix(2, other_first, 8), 0);
  std::vector<int32_t> other_second = tokens(8);
  other_second[6] = 7;
  c.add_sequence(3);
  EXPECT_EQ(c.match_prefix(3, other_second, 8), 4);
  c.add_sequence(4);
  EXPECT_EQ(c.match_prefix(4, tokens(8), 7), 4) << "at most max_tokens, whole blocks";
  c.add_sequence(5);
  EXPECT_EQ(c.match_prefix(5, tokens(8, 101), 8), 0) << "shifted tokens are other prefixes";
}

TEST(PrefixCache, EvictsTheLeastRecentlyFreedCachedBlocksOnlyWhenNothingElseIsFree) {
  KvCache c = cache(4);
  prefill(c, 1, tokens(8, 100));  // A: 2 blocks
  c.remove_sequence(1);
  prefill(c, 2, tokens(8, 200));  // B: 2 blocks, freed after A
  c.remove_sequence(2);
  ASSERT_EQ(c.num_cached_free_blocks(), 4);
  c.add_sequence(3);
  ASSERT_TRUE(c.reserve(3, 8));  // takes A's blocks, the oldest
  EXPECT_EQ(c.num_cached_free_blocks(), 2);
  c.add_sequence(4);
  EXPECT_EQ(c.match_prefix(4, tokens(8, 100), 8), 0) << "A was evicted";
  c.add_sequence(5);
  EXPECT_EQ(c.match_prefix(5, tokens(8, 200), 8), 8) << "B is still cached";
  EXPECT_FALSE(c.reserve(4, 1)) << "B's blocks are in use again; nothing is left to evict";
}

TEST(PrefixCache, AWriteIntoAPublishedBlockCopiesItFirst) {
  KvCache c = cache(6);
  const std::vector<int32_t> prompt = tokens(8);
  prefill(c, 1, prompt);
  const int32_t published = table(c, 1)[1];
  k_at(c, published) = 5.0f;
  c.truncate(1, 6);  // back into the second block (its blocks stay published)
  ASSERT_TRUE(c.reserve(1, 2));
  EXPECT_NE(table(c, 1)[1], published) << "copy-on-write";
  EXPECT_EQ(k_at(c, table(c, 1)[1]), 5.0f) << "the copy holds the kept rows";
  k_at(c, table(c, 1)[1]) = 6.0f;
  EXPECT_EQ(k_at(c, published), 5.0f) << "the cached block is untouched";
  c.add_sequence(2);
  EXPECT_EQ(c.match_prefix(2, prompt, 8), 8);
  EXPECT_EQ(table(c, 2)[1], published);
}

TEST(PrefixCache, BlocksOfRejectedDraftsAreNeverPublished) {
  KvCache c = cache(6);
  std::vector<int32_t> toks = tokens(5);
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 9));
  c.commit(1, 9);    // 5 tokens and 4 drafts written
  c.truncate(1, 6);  // one draft accepted
  toks.push_back(900);
  toks.push_back(901);  // the accepted draft, then the correction (no K/V yet)
  c.publish(1, toks);
  c.remove_sequence(1);
  EXPECT_EQ(c.num_cached_free_blocks(), 1) << "only the full block of committed tokens";
  std::vector<int32_t> with_drafts = tokens(5);
  for (int32_t d : {900, 11, 12, 13}) with_drafts.push_back(d);
  c.add_sequence(2);
  EXPECT_EQ(c.match_prefix(2, with_drafts, 9), 4);
}

TEST(PrefixCache, TwoSequencesWithTheSamePrefixPublishItOnce) {
  KvCache c = cache(8);
  prefill(c, 1, tokens(8));
  prefill(c, 2, tokens(8));  // computed side by side, before either could find the other's
  c.remove_sequence(1);
  c.remove_sequence(2);
  EXPECT_EQ(c.num_cached_free_blocks(), 2) << "the second copy went back to the pool";
  EXPECT_EQ(c.num_free_blocks(), 8);
}

TEST(PrefixCache, ForkedChoicesShareCachedBlocksAndFreeThemOnce) {
  KvCache c = cache(6);
  prefill(c, 1, tokens(9));
  c.fork(1, 2, 8);
  c.remove_sequence(1);
  EXPECT_EQ(c.num_cached_free_blocks(), 0) << "the fork still holds both full blocks";
  c.remove_sequence(2);
  EXPECT_EQ(c.num_cached_free_blocks(), 2);
  EXPECT_EQ(c.num_free_blocks(), 6);
}

TEST(PrefixCache, CopyModeGivesTheSequenceItsOwnCopiesAndRecordsThem) {
  KvCache c({1, 1, 4, kBlock}, 6);
  c.set_prefix_caching(true, /*share=*/false);
  c.record_copies(true);
  prefill(c, 1, tokens(8));
  const std::vector<int32_t> published = table(c, 1);
  k_at(c, published[1]) = 3.0f;
  c.remove_sequence(1);
  (void)c.take_copies();
  c.add_sequence(2);
  EXPECT_EQ(c.match_prefix(2, tokens(9), 8), 8);
  const std::vector<int32_t> own = table(c, 2);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_NE(own[0], published[0]);
  EXPECT_NE(own[1], published[1]);
  EXPECT_EQ(k_at(c, own[1]), 3.0f);
  EXPECT_EQ(c.take_copies(), (std::vector<int32_t>{KvCache::kCopyBlock, published[0], own[0], KvCache::kCopyBlock,
                                                   published[1], own[1]}))
      << "followers repeat the copies";
  EXPECT_EQ(c.num_cached_free_blocks(), 2) << "the published blocks stay cached, unreferenced";
  ASSERT_TRUE(c.reserve(2, 4));  // the pool: one never-used block and the two cached ones
  c.add_sequence(3);
  EXPECT_EQ(c.match_prefix(3, tokens(8), 8), 4) << "room for one more copy only: the first block";
  EXPECT_EQ(c.num_free_blocks(), 2) << "the cached blocks were held, not evicted, while copying";
}

TEST(PrefixCache, OffPublishesNothingAndFindsNothing) {
  KvCache c = cache(4, false);
  prefill(c, 1, tokens(8));
  c.remove_sequence(1);
  EXPECT_EQ(c.num_cached_free_blocks(), 0);
  c.add_sequence(2);
  EXPECT_EQ(c.match_prefix(2, tokens(8), 8), 0);
}

TEST(BlockAllocator, CachedBlocksWaitInLruOrderAndAreReportedWhenEvicted) {
  BlockAllocator a(3);
  std::vector<int32_t> got, evicted;
  ASSERT_TRUE(a.allocate(3, got, evicted));
  for (int32_t b : got) a.mark_cached(b);
  a.free(2);
  a.free(0);
  a.free(1);
  EXPECT_EQ(a.num_free(), 3);
  EXPECT_EQ(a.num_cached_free(), 3);
  a.share(0);  // found again: out of the LRU list
  std::vector<int32_t> more;
  ASSERT_TRUE(a.allocate(2, more, evicted));
  EXPECT_EQ(more, (std::vector<int32_t>{2, 1})) << "least recently freed first";
  EXPECT_EQ(evicted, more);
  EXPECT_FALSE(a.cached(2));
  EXPECT_TRUE(a.cached(0));
  EXPECT_THROW(a.share(-1), Error);
}

}  // namespace
}  // namespace specd::kv
