// Fixed pool of KV blocks with a free list and a reference count per block: a block shared by
// several sequences (the prompt of a request with n > 1 choices, a cached prefix) returns to the
// pool when the last of them frees it.
//
// Prefix caching (kv/prefix_index.hpp): a block marked cached keeps its contents when its last
// holder frees it. It waits in an LRU list, counted as free, until share() revives it for a
// sequence that found it or allocate() runs out of never-cached blocks and evicts the least
// recently freed one (reporting it, so that its owner unpublishes it first).
// Not thread-safe: owned by the engine's step thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specd::kv {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refs_.size()); }
  // Blocks allocate() can hand out: never-cached free ones and unreferenced cached ones.
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()) + num_lru_; }
  // Unreferenced cached blocks (a part of num_free()).
  int32_t num_cached_free() const { return num_lru_; }

  // Appends n block ids to `out`, all or nothing: returns false and takes none when fewer
  // than n are free. Recently freed blocks are handed out first (warm in cache); cached ones
  // only when no other is left, least recently freed first, each appended to `evicted` too.
  bool allocate(int32_t n, std::vector<int32_t>& out, std::vector<int32_t>& evicted);
  // The same for a pool whose owner publishes nothing (no block is ever cached).
  bool allocate(int32_t n, std::vector<int32_t>& out) {
    std::vector<int32_t> evicted;
    return allocate(n, out, evicted);
  }
  // One more holder of a block: an allocated one, or an unreferenced cached one (revived).
  void share(int32_t block);
  // Holders of a block (0 = free).
  int32_t refs(int32_t block) const { return refs_[static_cast<size_t>(block)]; }
  // Drops one holder; the block returns to the pool with its last (to the LRU list if cached).
  // Throws specd::Error(kInternal) on an id outside the pool or a block that is not allocated
  // (double free).
  void free(int32_t block);
  // Marks an allocated block as holding published contents (kept when freed) until evicted.
  void mark_cached(int32_t block);
  bool cached(int32_t block) const { return cached_[static_cast<size_t>(block)] != 0; }

 private:
  void check(int32_t block, const char* what) const;
  void lru_push(int32_t block);
  void lru_unlink(int32_t block);
  std::vector<int32_t> free_list_;  // a stack
  std::vector<int32_t> refs_;
  std::vector<uint8_t> cached_;
  // The LRU list of unreferenced cached blocks, oldest at the head; ids are indices, -1 ends.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1, num_lru_ = 0;
};

}  // namespace specd::kv
