// Fixed pool of KV blocks with a free list and a reference count per block: a block shared by
// several sequences (the prompt of a request with n > 1 choices) returns to the pool when the last
// of them frees it. Not thread-safe: owned by the engine's step thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specd::kv {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refs_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }

  // Appends n block ids to `out`, all or nothing: returns false and takes none when fewer
  // than n are free. Recently freed blocks are handed out first (warm in cache).
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // One more holder of an allocated block.
  void share(int32_t block);
  // Holders of a block (0 = free).
  int32_t refs(int32_t block) const { return refs_[static_cast<size_t>(block)]; }
  // Drops one holder; the block returns to the pool with its last. Throws specd::Error(kInternal)
  // on an id outside the pool or a block that is not allocated (double free).
  void free(int32_t block);

 private:
  void check(int32_t block, const char* what) const;
  std::vector<int32_t> free_list_;  // a stack
  std::vector<int32_t> refs_;
};

}  // namespace specd::kv
