#include "kv/prefix_index.hpp"

#include <algorithm>

#include "common/hash.hpp"

namespace specd::kv {

PrefixIndex::PrefixIndex(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      keys_(static_cast<size_t>(num_blocks), kNone),
      parents_(static_cast<size_t>(num_blocks), 0),
      tokens_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), 0) {}

uint64_t PrefixIndex::chain(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = splitmix64(parent);
  for (const int32_t t : tokens) h = splitmix64(h ^ static_cast<uint32_t>(t));
  return h == kNone ? 1 : h;
}

int32_t PrefixIndex::find(uint64_t key, uint64_t parent, std::span<const int32_t> tokens) const {
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return -1;
  const auto b = static_cast<size_t>(it->second);
  const auto first = tokens_.begin() + static_cast<std::ptrdiff_t>(b * static_cast<size_t>(block_size_));
  if (parents_[b] != parent || !std::equal(tokens.begin(), tokens.end(), first)) return -1;
  return it->second;
}

bool PrefixIndex::insert(int32_t block, uint64_t key, uint64_t parent, std::span<const int32_t> tokens) {
  const auto b = static_cast<size_t>(block);
  if (keys_[b] != kNone || !by_key_.try_emplace(key, block).second) return false;
  keys_[b] = key;
  parents_[b] = parent;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<std::ptrdiff_t>(b * static_cast<size_t>(block_size_)));
  return true;
}

void PrefixIndex::erase(int32_t block) {
  const auto b = static_cast<size_t>(block);
  if (keys_[b] == kNone) return;
  by_key_.erase(keys_[b]);
  keys_[b] = kNone;
}

}  // namespace specd::kv
