// GlobalCache: the outputs of finished requests, for suffix decoding's lookups across requests.
//
// One TokenIndex per tenant (with share_across_requests every output goes to one shared index,
// tenant 0). A sequence of tenant 0 without sharing belongs to nobody else: its output is not
// kept. The cache holds at most `max_tokens` tokens over all tenants: when a new output would
// pass it, the oldest outputs go first (whichever tenant they belong to), and a tenant whose
// outputs are all gone is dropped with its index. An output longer than the whole budget keeps
// only its last max_tokens tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>

#include "token_index.hpp"

namespace specd::suffix {

class GlobalCache {
 public:
  GlobalCache(int64_t max_tokens, int32_t max_depth, bool shared)
      : max_tokens_(max_tokens), max_depth_(max_depth), shared_(shared) {}

  // Keeps `output` (a finished sequence's generated tokens) for `tenant`.
  void add(uint64_t tenant, std::span<const int32_t> output);
  // The index a sequence of `tenant` may draft from, or null.
  const TokenIndex* index_for(uint64_t tenant) const;

  int64_t tokens() const { return tokens_; }  // kept tokens (separators included)
  size_t num_tenants() const { return tenants_.size(); }
  size_t memory_bytes() const;

 private:
  struct Entry {
    uint64_t tenant;
    int64_t length;  // its tokens and separator
  };
  void evict_oldest();

  int64_t max_tokens_;
  int32_t max_depth_;
  bool shared_;
  int64_t tokens_ = 0;
  std::deque<Entry> fifo_;  // every kept output, oldest first
  std::unordered_map<uint64_t, std::unique_ptr<TokenIndex>> tenants_;
};

}  // namespace specd::suffix
