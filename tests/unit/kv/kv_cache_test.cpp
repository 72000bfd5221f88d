#include "kv/kv_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "kv/block_allocator.hpp"
#include "specd/error.hpp"

namespace specd::kv {
namespace {

TEST(BlockAllocator, AllocatesAllOrNothingAndReusesFreedBlocks) {
  BlockAllocator a(4);
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(3, got));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_FALSE(a.allocate(2, got));  // only one left: nothing taken
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(got.size(), 3u);
  a.free(1);
  std::vector<int32_t> more;
  ASSERT_TRUE(a.allocate(1, more));
  EXPECT_EQ(more, (std::vector<int32_t>{1}));  // the freed block comes back first
  EXPECT_TRUE(a.allocate(0, more));
}

TEST(BlockAllocator, RejectsDoubleFreeAndForeignIds) {
  BlockAllocator a(2);
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(1, got));
  a.free(got[0]);
  EXPECT_THROW(a.free(got[0]), Error);
  EXPECT_THROW(a.free(2), Error);
  EXPECT_THROW(a.free(-1), Error);
}

KvCacheShape small_shape(int32_t block_size = 4) {
  return {2, 2, 8, block_size};
}

TEST(KvCache, BudgetSizing) {
  const KvCacheShape s = small_shape();
  EXPECT_EQ(bytes_per_block(s), 2u * 4 * 2 * 4 * 2 * 8);
  EXPECT_EQ(blocks_for_budget(s, bytes_per_block(s) * 10 + 5), 10);
  EXPECT_EQ(blocks_for_budget(s, 3), 0);
}

TEST(KvCache, ReserveCommitAndBlockTables) {
  KvCache c(small_shape(), 5);
  c.add_sequence(7);
  c.add_sequence(9);
  EXPECT_EQ(c.blocks_needed(7, 5), 2);
  ASSERT_TRUE(c.reserve(7, 5));  // 2 blocks
  EXPECT_EQ(c.capacity(7), 8);
  c.commit(7, 5);
  EXPECT_EQ(c.num_tokens(7), 5);
  EXPECT_EQ(c.blocks_needed(7, 3), 0);  // fits in the second block
  ASSERT_TRUE(c.reserve(7, 3));
  EXPECT_EQ(c.num_free_blocks(), 3);
  ASSERT_TRUE(c.reserve(9, 1));
  const auto t7 = c.block_table(7);
  const auto t9 = c.block_table(9);
  EXPECT_EQ(t7.size(), 2u);
  EXPECT_EQ(t9.size(), 1u);
  std::set<int32_t> ids(t7.begin(), t7.end());
  ids.insert(t9.begin(), t9.end());
  EXPECT_EQ(ids.size(), 3u);  // no block shared
  EXPECT_EQ(c.slot(7, 6), static_cast<int64_t>(t7[1]) * 4 + 2);
  EXPECT_THROW(c.commit(7, 4), Error);  // beyond the reserved 8
  EXPECT_THROW(c.add_sequence(7), Error);
}

TEST(KvCache, OutOfBlocksIsAResultNotAnException) {
  KvCache c(small_shape(), 3);
  c.add_sequence(1);
  c.add_sequence(2);
  ASSERT_TRUE(c.reserve(1, 9));  // 3 blocks: the whole pool
  EXPECT_EQ(c.num_free_blocks(), 0);
  EXPECT_FALSE(c.reserve(2, 1));
  EXPECT_EQ(c.capacity(2), 0);
  EXPECT_FALSE(c.reserve(1, 13));  // would need a fourth block; nothing changes
  EXPECT_EQ(c.capacity(1), 12);
  c.remove_sequence(1);
  EXPECT_EQ(c.num_free_blocks(), 3);
  EXPECT_TRUE(c.reserve(2, 1));
}

TEST(KvCache, TruncateFreesBlocksNoLongerNeeded) {
  KvCache c(small_shape(), 6);
  c.add_sequence(3);
  ASSERT_TRUE(c.reserve(3, 13));  // 4 blocks
  c.commit(3, 13);
  EXPECT_EQ(c.num_free_blocks(), 2);
  c.truncate(3, 9);  // 3 blocks needed
  EXPECT_EQ(c.num_tokens(3), 9);
  EXPECT_EQ(c.block_table(3).size(), 3u);
  EXPECT_EQ(c.num_free_blocks(), 3);
  c.truncate(3, 8);  // exactly two blocks
  EXPECT_EQ(c.block_table(3).size(), 2u);
  c.truncate(3, 0);
  EXPECT_EQ(c.block_table(3).size(), 0u);
  EXPECT_EQ(c.num_free_blocks(), 6);
  EXPECT_THROW(c.truncate(3, 1), Error);  // cannot grow by truncating
}

TEST(KvCache, RejectsBadShapes) {
  EXPECT_THROW(KvCache(small_shape(3), 4), Error);
  EXPECT_THROW(KvCache(KvCacheShape{0, 2, 8, 4}, 4), Error);
}

// Tensor parallelism: a follower's cache mirrors rank 0's tables, not its data, so rank 0's
// copy-on-write copies (reserve after fork, n > 1) must be repeated there. A follower that
// repeats the recorded copies holds the same K/V in the child's blocks as rank 0.
TEST(KvCache, RecordedCopyOnWriteCopiesReproduceTheDataOnAFollower) {
  const KvCacheShape shape = small_shape();
  KvCache leader(shape, 6);
  KvCache follower(shape, 6);
  leader.record_copies(true);
  leader.add_sequence(1);
  ASSERT_TRUE(leader.reserve(1, 6));  // blocks 2: the second partly filled
  leader.commit(1, 6);
  // A forward's writes, on both ranks (each rank writes its own shard; here the same bytes).
  const size_t layer_elems = static_cast<size_t>(6 * shape.block_size) * static_cast<size_t>(leader.row_elems());
  for (KvCache* c : {&leader, &follower}) {
    for (int32_t l = 0; l < shape.num_layers; ++l) {
      auto* k = static_cast<float*>(c->k_layer(l));
      auto* v = static_cast<float*>(c->v_layer(l));
      for (size_t i = 0; i < layer_elems; ++i) {
        k[i] = static_cast<float>(i + 1000 * l);
        v[i] = -static_cast<float>(i + 1000 * l);
      }
    }
  }
  leader.fork(1, 2, 5);
  EXPECT_TRUE(leader.take_copies().empty());  // sharing copies nothing
  ASSERT_TRUE(leader.reserve(2, 1));          // the shared partial block is copied first
  const std::vector<int32_t> copies = leader.take_copies();
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0], KvCache::kCopyBlock);
  EXPECT_EQ(copies[1], leader.block_table(1)[1]);
  EXPECT_EQ(copies[2], leader.block_table(2)[1]);
  EXPECT_TRUE(leader.take_copies().empty());  // taken once
  follower.repeat_copies(copies);
  const size_t block_elems = static_cast<size_t>(shape.block_size) * static_cast<size_t>(leader.row_elems());
  const auto to = static_cast<size_t>(copies[2]);
  for (int32_t l = 0; l < shape.num_layers; ++l) {
    for (size_t i = 0; i < block_elems; ++i) {
      ASSERT_EQ(static_cast<float*>(follower.k_layer(l))[to * block_elems + i],
                static_cast<float*>(leader.k_layer(l))[to * block_elems + i]);
      ASSERT_EQ(static_cast<float*>(follower.v_layer(l))[to * block_elems + i],
                static_cast<float*>(leader.v_layer(l))[to * block_elems + i]);
    }
  }
  EXPECT_THROW(follower.repeat_copies(std::vector<int32_t>{0, 1}), Error);
  EXPECT_THROW(follower.repeat_copies(std::vector<int32_t>{0, 0, 6}), Error);
  EXPECT_THROW(follower.repeat_copies(std::vector<int32_t>{2, 0, 1}), Error);
  // Without record_copies (TP 1), nothing accumulates.
  KvCache plain(shape, 6);
  plain.add_sequence(1);
  ASSERT_TRUE(plain.reserve(1, 6));
  plain.commit(1, 6);
  plain.fork(1, 2, 5);
  ASSERT_TRUE(plain.reserve(2, 1));
  EXPECT_TRUE(plain.take_copies().empty());
}

// Draft trees: compact() moves the accepted path's rows down in every layer, and a follower
// that repeats the recorded row copies holds the same K/V.
TEST(KvCache, CompactMovesRowsAndIsRepeatedOnAFollower) {
  const KvCacheShape shape = small_shape();
  KvCache leader(shape, 6), follower(shape, 6);
  leader.record_copies(true);
  leader.add_sequence(1);
  ASSERT_TRUE(leader.reserve(1, 10));
  leader.commit(1, 10);
  const int64_t row = leader.row_elems();
  for (KvCache* c : {&leader, &follower})
    for (int32_t l = 0; l < shape.num_layers; ++l)
      for (int32_t pos = 0; pos < 10; ++pos)
        for (int64_t e = 0; e < row; ++e) {
          const int64_t at = leader.slot(1, pos) * row + e;
          static_cast<float*>(c->k_layer(l))[at] = static_cast<float>(100 * pos + l);
          static_cast<float*>(c->v_layer(l))[at] = -static_cast<float>(100 * pos + l);
        }
  const std::vector<int32_t> keep = {0, 2, 5};  // positions 3+0, 3+2, 3+5 -> 3, 4, 5
  leader.compact(1, 3, keep);
  const std::vector<int32_t> copies = leader.take_copies();
  EXPECT_EQ(copies.size(), 6u);  // two moves; position 3 stays
  follower.repeat_copies(copies);
  for (KvCache* c : {&leader, &follower})
    for (int32_t l = 0; l < shape.num_layers; ++l)
      for (int32_t i = 0; i < 3; ++i) {
        const int64_t at = leader.slot(1, 3 + i) * row;
        EXPECT_EQ(static_cast<float*>(c->k_layer(l))[at], 100.0f * (3 + keep[i]) + l);
        EXPECT_EQ(static_cast<float*>(c->v_layer(l))[at], -(100.0f * (3 + keep[i]) + l));
      }
  EXPECT_EQ(static_cast<float*>(leader.k_layer(0))[leader.slot(1, 2) * row], 200.0f);  // before base: untouched
  EXPECT_THROW(leader.compact(1, 3, std::vector<int32_t>{1, 1}), Error);               // not increasing
  EXPECT_THROW(leader.compact(1, 3, std::vector<int32_t>{7}), Error);                  // past the sequence
}

}  // namespace
}  // namespace specd::kv
