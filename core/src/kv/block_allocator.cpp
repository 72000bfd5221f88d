#include "kv/block_allocator.hpp"

#include <string>

#include "specd/error.hpp"

namespace specd::kv {

BlockAllocator::BlockAllocator(int32_t num_blocks) {
  SPECD_CHECK(num_blocks >= 0, ErrorCode::kInvalidArgument,
              "block pool size must be >= 0, got " + std::to_string(num_blocks));
  refs_.assign(static_cast<size_t>(num_blocks), 0);
  free_list_.reserve(static_cast<size_t>(num_blocks));
  // Low ids on top of the stack so that a fresh pool hands out 0, 1, 2, ...
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

bool BlockAllocator::allocate(int32_t n, std::vector<int32_t>& out) {
  if (n <= 0) return true;
  if (n > num_free()) return false;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = free_list_.back();
    free_list_.pop_back();
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
  check(block, "sharing");
  ++refs_[static_cast<size_t>(block)];
}

void BlockAllocator::free(int32_t block) {
  check(block, "freeing");
  if (--refs_[static_cast<size_t>(block)] == 0) free_list_.push_back(block);
}

}  // namespace specd::kv
