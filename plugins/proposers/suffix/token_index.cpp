#include "token_index.hpp"

#include <algorithm>

namespace specd::suffix {
namespace {

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// The hash of `length` tokens given by get(0..length-1), oldest first.
template <class Get>
uint64_t hash_of(int32_t length, Get get) {
  uint64_t h = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(length);
  for (int32_t i = 0; i < length; ++i) h = (h ^ static_cast<uint32_t>(get(i))) * 0x100000001b3ull;
  return mix(h);
}

size_t pow2_at_least(size_t n) {
  size_t b = 1;
  while (b < n) b <<= 1;
  return b;
}

}  // namespace

uint64_t TokenIndex::key_hash(int64_t last, int32_t length) const {
  return hash_of(length, [&](int32_t i) { return at(last - length + 1 + i); });
}

bool TokenIndex::key_valid(int64_t last, int32_t length) const {
  if (last - length + 1 < base_) return false;
  for (int64_t p = last - length + 1; p <= last; ++p)
    if (at(p) == kSeparator) return false;
  return true;
}

void TokenIndex::index_position(int64_t p) {
  const auto off = static_cast<size_t>(p - base_);
  for (size_t k = 0; k < kKeys; ++k) {
    prev_[k][off] = 0;
    if (!key_valid(p, kKeyLengths[k])) continue;
    int64_t& head = head_[k][key_hash(p, kKeyLengths[k]) & mask_];
    if (head > 0 && p - (head - 1) <= int64_t{UINT32_MAX}) prev_[k][off] = static_cast<uint32_t>(p - (head - 1));
    head = p + 1;
  }
}

void TokenIndex::rebuild(size_t buckets) {
  mask_ = buckets - 1;
  for (size_t k = 0; k < kKeys; ++k) {
    head_[k].assign(buckets, 0);
    head_[k].shrink_to_fit();
  }
  for (int64_t p = base_; p < end(); ++p) index_position(p);
}

void TokenIndex::append(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    tokens_.push_back(t);
    for (auto& prev : prev_) prev.push_back(0);
    index_position(end() - 1);
  }
  if (static_cast<size_t>(size()) > mask_ + 1) rebuild(pow2_at_least(static_cast<size_t>(size()) + 1));
}

void TokenIndex::append_separator() {
  tokens_.push_back(kSeparator);
  for (auto& prev : prev_) prev.push_back(0);
}

void TokenIndex::evict_front(int64_t count) {
  count = std::min(count, size());
  tokens_.erase(tokens_.begin(), tokens_.begin() + count);
  for (auto& prev : prev_) prev.erase(prev.begin(), prev.begin() + count);
  base_ += count;
  if (tokens_.empty()) {
    tokens_.shrink_to_fit();
    for (auto& prev : prev_) prev.shrink_to_fit();
  }
  const size_t buckets = mask_ + 1;
  if (buckets > kMinBuckets && static_cast<size_t>(size()) * 4 < buckets)
    rebuild(std::max(kMinBuckets, pow2_at_least(static_cast<size_t>(size()) + 1)));
}

int32_t TokenIndex::match_length(int64_t last, std::span<const int32_t> context) const {
  const auto n = static_cast<int64_t>(context.size());
  int32_t len = 0;
  while (len < max_depth_ && len < n && last - len >= base_ && at(last - len) == context[n - 1 - len]) ++len;
  return len;
}

int32_t TokenIndex::find(std::span<const int32_t> context, int32_t max_visits, std::vector<int64_t>& starts) const {
  starts.clear();
  const auto n = static_cast<int64_t>(context.size());
  for (size_t k = 0; k < kKeys; ++k) {
    const int32_t length = kKeyLengths[k];
    if (n < length || length > max_depth_) continue;
    const uint64_t h = hash_of(length, [&](int32_t i) { return context[static_cast<size_t>(n - length + i)]; });
    int64_t q = head_[k][h & mask_] - 1;
    int32_t best = 0, visits = 0;
    while (q >= base_ && visits < max_visits) {
      ++visits;
      // A continuation must follow: position q + 1 holds a token of the same text.
      if (q + 1 < end() && at(q + 1) != kSeparator) {
        const int32_t len = match_length(q, context);
        if (len >= length) {
          if (len > best) {
            best = len;
            starts.clear();
          }
          if (len == best) starts.push_back(q + 1);
        }
      }
      const uint32_t d = prev_[k][static_cast<size_t>(q - base_)];
      if (d == 0) break;
      q -= d;
    }
    if (best > 0) return best;
  }
  return 0;
}

size_t TokenIndex::memory_bytes() const {
  size_t bytes = sizeof(*this) + tokens_.size() * sizeof(int32_t);
  for (size_t k = 0; k < kKeys; ++k)
    bytes += prev_[k].size() * sizeof(uint32_t) + head_[k].capacity() * sizeof(int64_t);
  return bytes;
}

}  // namespace specd::suffix
