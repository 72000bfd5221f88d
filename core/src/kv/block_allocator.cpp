#include "kv/block_allocator.hpp"

#include <string>

#include "specd/error.hpp"

namespace specd::kv {

BlockAllocator::BlockAllocator(int32_t num_blocks) {
  SPECD_CHECK(num_blocks >= 0, ErrorCode::kInvalidArgument,
              "block pool size must be >= 0, got " + std::to_string(num_blocks));
  const auto n = static_cast<size_t>(num_blocks);
  refs_.assign(n, 0);
  cached_.assign(n, 0);
  prev_.assign(n, -1);
  next_.assign(n, -1);
  free_list_.reserve(n);
  // Low ids on top of the stack so that a fresh pool hands out 0, 1, 2, ...
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

void BlockAllocator::lru_push(int32_t b) {
  const auto i = static_cast<size_t>(b);
  prev_[i] = tail_;
  next_[i] = -1;
  if (tail_ >= 0) {
    next_[static_cast<size_t>(tail_)] = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  ++num_lru_;
}

void BlockAllocator::lru_unlink(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (prev_[i] >= 0) {
    next_[static_cast<size_t>(prev_[i])] = next_[i];
  } else {
    head_ = next_[i];
  }
  if (next_[i] >= 0) {
    prev_[static_cast<size_t>(next_[i])] = prev_[i];
  } else {
    tail_ = prev_[i];
  }
  prev_[i] = next_[i] = -1;
  --num_lru_;
}

bool BlockAllocator::allocate(int32_t n, std::vector<int32_t>& out, std::vector<int32_t>& evicted) {
  if (n <= 0) return true;
  if (n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t b = 0;
    if (!free_list_.empty()) {
      b = free_list_.back();
      free_list_.pop_back();
    } else {
      b = head_;
      lru_unlink(b);
      cached_[static_cast<size_t>(b)] = 0;
      evicted.push_back(b);
    }
    refs_[static_cast<size_t>(b)] = 1;
    out.push_back(b);
  }
  return true;
}

void BlockAllocator::check(int32_t block, const char* what) const {
  SPECD_CHECK(
      block >= 0 && block < num_blocks(), ErrorCode::kInternal,
      std::string(what) + " block " + std::to_string(block) + " outside the pool of " + std::to_string(num_blocks()));
  SPECD_CHECK(refs_[static_cast<size_t>(block)] != 0, ErrorCode::kInternal,
              std::string(what) + " KV block " + std::to_string(block) + ", which is free (double free?)");
}

void BlockAllocator::share(int32_t block) {
  if (block >= 0 && block < num_blocks() && refs_[static_cast<size_t>(block)] == 0 && cached(block)) {
    lru_unlink(block);  // a cached block found again: back in use
  } else {
    check(block, "sharing");
  }
  ++refs_[static_cast<size_t>(block)];
}

void BlockAllocator::free(int32_t block) {
  check(block, "freeing");
  if (--refs_[static_cast<size_t>(block)] != 0) return;
  if (cached(block)) {
    lru_push(block);
  } else {
    free_list_.push_back(block);
  }
}

void BlockAllocator::mark_cached(int32_t block) {
  check(block, "caching");
  cached_[static_cast<size_t>(block)] = 1;
}

}  // namespace specd::kv
