#include "global_cache.hpp"

#include <algorithm>

namespace specd::suffix {

void GlobalCache::add(uint64_t tenant, std::span<const int32_t> output) {
  if (max_tokens_ <= 1 || output.empty()) return;
  if (shared_) tenant = 0;
  if (!shared_ && tenant == 0) return;  // nobody else may see it
  if (static_cast<int64_t>(output.size()) + 1 > max_tokens_) output = output.last(static_cast<size_t>(max_tokens_ - 1));
  const auto length = static_cast<int64_t>(output.size()) + 1;
  while (tokens_ + length > max_tokens_ && !fifo_.empty()) evict_oldest();
  std::unique_ptr<TokenIndex>& index = tenants_[tenant];
  if (index == nullptr) index = std::make_unique<TokenIndex>(max_depth_);
  index->append(output);
  index->append_separator();
  fifo_.push_back({tenant, length});
  tokens_ += length;
}

void GlobalCache::evict_oldest() {
  const Entry e = fifo_.front();
  fifo_.pop_front();
  tokens_ -= e.length;
  auto it = tenants_.find(e.tenant);
  if (it == tenants_.end()) return;
  // A tenant's outputs leave its index in the order they came, so its oldest is at the front.
  it->second->evict_front(e.length);
  if (it->second->size() == 0) tenants_.erase(it);
}

const TokenIndex* GlobalCache::index_for(uint64_t tenant) const {
  if (shared_) tenant = 0;
  if (!shared_ && tenant == 0) return nullptr;
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? nullptr : it->second.get();
}

size_t GlobalCache::memory_bytes() const {
  size_t bytes = sizeof(*this) + fifo_.size() * sizeof(Entry);
  for (const auto& [tenant, index] : tenants_) bytes += index->memory_bytes() + 64;  // + the map node
  return bytes;
}

}  // namespace specd::suffix
