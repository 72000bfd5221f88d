// TokenIndex: a store of token ids with an index that finds, for any context, the earlier
// positions that continue the longest suffix of that context (suffix decoding's lookup).
//
// Tokens live at absolute positions [begin(), end()); evict_front drops the oldest, so the
// global cache can keep a window of recent outputs. A separator (append_separator) ends one text:
// no match and no continuation crosses it.
//
// The index is a set of hash chains, one per key length L in kKeyLengths: for every position p,
// the L tokens ending at p (inclusive) hash to a bucket; head[bucket] is the latest such p and
// prev[p] the distance to the previous p of the same bucket. find() walks the chain of the
// longest key length the context allows, verifies each candidate token by token (a shared
// bucket is never taken for a match), extends every verified match backwards up to max_depth
// tokens, and falls back to shorter keys only when the longer one found nothing. Work per find:
// at most max_visits chain entries per key length plus max_depth comparisons per verified match;
// it does not grow with the store.
//
// Memory: 4 bytes per token for the id and 4 per token and key length for prev, plus the bucket
// tables: 8 bytes per bucket and key length, at least 64 buckets, at most 2 per live token while
// the store grows and 4 after evictions (then it shrinks). memory_bytes() counts all of it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace specd::suffix {

inline constexpr std::array<int32_t, 4> kKeyLengths = {8, 4, 2, 1};  // longest first
inline constexpr int32_t kSeparator = -1;

class TokenIndex {
 public:
  explicit TokenIndex(int32_t max_depth) : max_depth_(max_depth) { rebuild(kMinBuckets); }

  // Appends tokens (ids >= 0), indexing the keys that end at each new position.
  void append(std::span<const int32_t> tokens);
  void append_separator();
  // Drops the oldest `count` positions (at most size()).
  void evict_front(int64_t count);

  int64_t begin() const { return base_; }
  int64_t end() const { return base_ + static_cast<int64_t>(tokens_.size()); }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int32_t at(int64_t pos) const { return tokens_[static_cast<size_t>(pos - base_)]; }

  // The longest suffix of `context` (at most max_depth tokens) that occurs here followed by at
  // least one token: returns its length (0: none) and, in `starts`, the positions where its
  // continuations start, most recent first (at most max_visits chain entries are looked at per
  // key length, so at most that many starts).
  int32_t find(std::span<const int32_t> context, int32_t max_visits, std::vector<int64_t>& starts) const;

  size_t memory_bytes() const;

 private:
  static constexpr size_t kMinBuckets = 64;
  static constexpr size_t kKeys = kKeyLengths.size();

  uint64_t key_hash(int64_t last, int32_t length) const;  // the `length` tokens ending at `last`
  bool key_valid(int64_t last, int32_t length) const;     // inside the store, no separator
  void index_position(int64_t p);
  void rebuild(size_t buckets);
  int32_t match_length(int64_t last, std::span<const int32_t> context) const;

  int32_t max_depth_;
  int64_t base_ = 0;
  std::deque<int32_t> tokens_;
  std::array<std::deque<uint32_t>, kKeys> prev_;  // distance back to the bucket's previous position; 0: none
  std::array<std::vector<int64_t>, kKeys> head_;  // bucket -> latest position + 1; 0: none
  size_t mask_ = 0;
};

}  // namespace specd::suffix
