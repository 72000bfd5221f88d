// Fixed pool of KV blocks with a free list. Not thread-safe: owned by the engine's step thread.
#pragma once

#include <cstdint>
#include <vector>

namespace specd::kv {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }

  // Appends n block ids to `out`, all or nothing: returns false and takes none when fewer
  // than n are free. Recently freed blocks are handed out first (warm in cache).
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // Returns a block to the pool. Throws specd::Error(kInternal) on an id outside the pool or
  // a block that is not allocated (double free).
  void free(int32_t block);

 private:
  std::vector<int32_t> free_list_;  // a stack
  std::vector<uint8_t> in_use_;
};

}  // namespace specd::kv
