// Automatic prefix caching (docs/scheduling.md "Prefix caching"): full KV blocks published
// under a hash chain of their tokens, so that a new sequence whose prompt starts with the same
// tokens adopts those blocks instead of computing them again.
//
// A block's key is chain(parent, tokens): the key of the block before it in its sequence (kRoot
// for the first) mixed with the block's block_size tokens. Keys identify whole prefixes, so a
// block is found only behind the same earlier tokens, at the same positions. Every entry also
// keeps its parent key and its tokens, and find() compares both: a hit needs a 64-bit collision
// of two different prefixes' parent keys to be wrong, never a collision of one block's hash.
//
// The index holds published blocks, used or not; which of them are free to evict is the
// BlockAllocator's business (its LRU list). Not thread-safe: owned by the KvCache.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace specd::kv {

class PrefixIndex {
 public:
  static constexpr uint64_t kRoot = 0x5bd1e9955bd1e995ull;

  PrefixIndex(int32_t num_blocks, int32_t block_size);

  // The key of a block holding `tokens` (block_size of them) behind the block keyed `parent`.
  static uint64_t chain(uint64_t parent, std::span<const int32_t> tokens);

  // The published block holding `tokens` behind `parent` (its key is `key`), or -1.
  int32_t find(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const;
  // Publishes `block` under `key`. False (and no change) when another block holds that key
  // already or `block` is published.
  bool insert(int32_t block, uint64_t key, uint64_t parent, std::span<const int32_t> tokens);
  // Unpublishes `block` (evicted: its storage is about to be reused); no-op if not published.
  void erase(int32_t block);
  bool published(int32_t block) const { return keys_[static_cast<size_t>(block)] != kNone; }
  size_t size() const { return by_key_.size(); }

 private:
  static constexpr uint64_t kNone = 0;  // chain() never returns it (see prefix_index.cpp)
  int32_t block_size_;
  std::unordered_map<uint64_t, int32_t> by_key_;
  std::vector<uint64_t> keys_;     // per block: its key, kNone = unpublished
  std::vector<uint64_t> parents_;  // per block: its parent's key
  std::vector<int32_t> tokens_;    // per block: its block_size tokens
};

}  // namespace specd::kv
