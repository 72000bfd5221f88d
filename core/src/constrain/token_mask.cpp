// The vocabulary trie and its walk (token_mask.hpp).
#include "constrain/token_mask.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "specd/tokenizer.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace specd::constrain {

int32_t StateTable::intern(const MatchState& state) {
  if (const auto it = ids_.find(state); it != ids_.end()) return it->second;
  if (states_.size() >= kMaxStates) return kFull;
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back(state);
  ids_.emplace(state, id);
  next_.emplace_back().fill(kUnknown);
  uniform_.emplace_back();
  uniform_known_.push_back(0);
  chain_.emplace_back();
  chain_.back().along[0] = {~uint64_t{0}, ~uint64_t{0}};
  chain_.back().end = id;
  return id;
}

int32_t StateTable::next(const Matcher& matcher, int32_t id, uint8_t byte) {
  int32_t& slot = next_[static_cast<size_t>(id)][byte];
  if (slot != kUnknown) return slot;
  MatchState out;
  matcher.advance(states_[static_cast<size_t>(id)], byte, out);
  const int32_t to = out.dead() ? kDead : intern(out);
  if (to != kFull) next_[static_cast<size_t>(id)][byte] = to;  // (intern may have moved next_)
  return to;
}

const StateTable::Uniform& StateTable::uniform(const Matcher& matcher, int32_t id) {
  const auto u = static_cast<size_t>(id);
  if (!uniform_known_[u]) {
    int32_t to[128];
    for (uint32_t b = 0; b < 128; ++b) to[b] = next(matcher, id, static_cast<uint8_t>(b));
    Uniform best;
    int best_count = 0;
    for (uint32_t b = 0; b < 128; ++b) {
      if (to[b] < 0) continue;
      Uniform cand{to[b], {0, 0}};
      int count = 0;
      for (uint32_t c = 0; c < 128; ++c)
        if (to[c] == to[b]) {
          cand.bytes[c >> 6] |= uint64_t{1} << (c & 63);
          ++count;
        }
      if (count > best_count) {
        best = cand;
        best_count = count;
      }
    }
    uniform_[u] = best;  // (next may have grown uniform_)
    uniform_known_[u] = 1;
  }
  return uniform_[u];
}

StateTable::Bytes StateTable::along(const Matcher& matcher, int32_t id, size_t h) {
  const auto c = static_cast<size_t>(id);
  while (chain_[c].known <= h) {
    const size_t k = chain_[c].known;
    const int32_t s = chain_[c].end;
    Bytes next{0, 0};
    int32_t to = kDead;
    if (s >= 0) {
      const Uniform& u = uniform(matcher, s);  // may grow the table: chain_ is indexed after
      next = {chain_[c].along[k - 1][0] & u.bytes[0], chain_[c].along[k - 1][1] & u.bytes[1]};
      to = u.next;
    }
    chain_[c].along[k] = next;
    chain_[c].end = to;
    chain_[c].known = static_cast<uint8_t>(k + 1);
  }
  return chain_[c].along[h];
}

void StateTable::clear() {
  states_.clear();
  ids_.clear();
  next_.clear();
  uniform_.clear();
  uniform_known_.clear();
  chain_.clear();
}

TokenTrie::TokenTrie(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!bytes_[i].empty() && bytes_[i].size() <= kMaxTokenBytes) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  // In sorted order a token adds the nodes of its bytes past the prefix it shares with the
  // previous token: that is the trie in depth-first order.
  std::vector<uint32_t> open;  // the path of nodes to the current one
  const std::string* prev = nullptr;
  for (const int32_t id : order) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev != nullptr) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    while (open.size() > common) {
      nodes_[open.back()].skip = static_cast<uint32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      open.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(
          {static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), 0, 0, 0, static_cast<uint32_t>(ids_.size())});
    }
    Node& end = nodes_[open.back()];
    if (end.count == 0) end.first = static_cast<uint32_t>(ids_.size());
    ++end.count;
    ids_.push_back(id);
    prev = &s;
  }
  for (const uint32_t n : open) nodes_[n].skip = static_cast<uint32_t>(nodes_.size());
  // Subtree alphabets, children before parents: a node's parent is the nearest node before it
  // one level up.
  alphabet_.assign(nodes_.size(), {0, 0});
  non_ascii_.assign(nodes_.size(), 0);
  height_.assign(nodes_.size(), 1);
  std::vector<uint32_t> last_at_depth(kMaxTokenBytes + 1, 0);
  std::vector<uint32_t> parent(nodes_.size(), UINT32_MAX);
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const uint16_t d = nodes_[i].depth;
    if (d > 1) parent[i] = last_at_depth[d - 1u];
    last_at_depth[d] = i;
  }
  for (size_t i = nodes_.size(); i-- > 0;) {
    const uint8_t b = nodes_[i].byte;
    if (b < 128) {
      alphabet_[i][b >> 6] |= uint64_t{1} << (b & 63);
    } else {
      non_ascii_[i] = 1;
    }
    if (parent[i] == UINT32_MAX) continue;
    alphabet_[parent[i]][0] |= alphabet_[i][0];
    alphabet_[parent[i]][1] |= alphabet_[i][1];
    non_ascii_[parent[i]] |= non_ascii_[i];
    height_[parent[i]] = std::max<uint16_t>(height_[parent[i]], static_cast<uint16_t>(height_[i] + 1));
  }
}

uint32_t TokenTrie::subtree_end(uint32_t node) const {
  const uint32_t skip = nodes_[node].skip;
  return skip < nodes_.size() ? nodes_[skip].subtree : static_cast<uint32_t>(ids_.size());
}

void TokenTrie::mark_subtree(uint32_t node, std::span<uint64_t> mask) const {
  for (uint32_t t = nodes_[node].subtree, end = subtree_end(node); t < end; ++t) {
    const auto id = static_cast<size_t>(ids_[t]);
    mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

bool TokenTrie::whole_subtree(const Matcher& matcher, StateTable& table, uint32_t node, int32_t from) const {
  const uint16_t height = height_[node];
  if (height > StateTable::kMaxChain) return false;  // longer subtrees are walked
  const std::array<uint64_t, 2>& alpha = alphabet_[node];
  const StateTable::Bytes along = table.along(matcher, from, height);
  return (alpha[0] & ~along[0]) == 0 && (alpha[1] & ~along[1]) == 0;
}

bool TokenTrie::allowed(const Matcher& matcher, StateTable& table, const MatchState& state,
                        std::span<uint64_t> mask) const {
  std::fill(mask.begin(), mask.end(), 0);
  thread_local std::vector<int32_t> at_depth;  // at_depth[d]: the state id after d bytes
  at_depth.assign(kMaxTokenBytes + 1, 0);
  at_depth[0] = table.intern(state);
  if (at_depth[0] == StateTable::kFull) return false;
  for (uint32_t i = 0; i < nodes_.size();) {
    const Node& n = nodes_[i];
    const int32_t from = at_depth[n.depth - 1u];
    if (!non_ascii_[i] && whole_subtree(matcher, table, i, from)) {
      mark_subtree(i, mask);
      i = n.skip;
      continue;
    }
    const int32_t to = table.next(matcher, from, n.byte);
    if (to == StateTable::kFull) return false;
    if (to == StateTable::kDead) {
      i = n.skip;
      continue;
    }
    at_depth[n.depth] = to;
    for (uint32_t t = n.first; t < n.first + n.count; ++t) {
      const auto id = static_cast<size_t>(ids_[t]);
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  return true;
}

std::shared_ptr<const TokenTrie> TokenTrie::from_tokenizer(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.vocab_size()));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = tokenizer.impl().token_bytes(static_cast<int32_t>(i));
  return std::make_shared<TokenTrie>(std::move(bytes));
}

std::pair<int32_t, size_t> TokenTrie::longest_token(std::string_view text) const {
  std::pair<int32_t, size_t> best{-1, 0};
  // Children of a node follow it in order, each sibling after the previous one's subtree.
  uint32_t i = 0, end = static_cast<uint32_t>(nodes_.size());
  for (size_t depth = 0; depth < text.size() && i < end;) {
    const auto byte = static_cast<uint8_t>(text[depth]);
    while (i < end && nodes_[i].byte != byte) i = nodes_[i].skip;
    if (i >= end) break;
    const Node& n = nodes_[i];
    ++depth;
    if (n.count > 0) best = {*std::min_element(ids_.begin() + n.first, ids_.begin() + n.first + n.count), depth};
    end = n.skip;
    ++i;
  }
  return best;
}

void TokenTrie::allowed(const Matcher& matcher, const MatchState& state, std::span<uint64_t> mask) const {
  std::fill(mask.begin(), mask.end(), 0);
  thread_local std::vector<MatchState> at_depth;  // at_depth[d]: the state after d bytes
  if (at_depth.size() < kMaxTokenBytes + 1) at_depth.resize(kMaxTokenBytes + 1);
  at_depth[0] = state;
  for (uint32_t i = 0; i < nodes_.size();) {
    const Node& n = nodes_[i];
    matcher.advance(at_depth[n.depth - 1u], n.byte, at_depth[n.depth]);
    if (at_depth[n.depth].dead()) {
      i = n.skip;
      continue;
    }
    for (uint32_t t = n.first; t < n.first + n.count; ++t) {
      const auto id = static_cast<size_t>(ids_[t]);
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

std::shared_ptr<const std::vector<uint64_t>> MaskCache::mask(const Matcher& matcher, const MatchState& state) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (const auto it = masks_.find(state); it != masks_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  auto m = std::make_shared<std::vector<uint64_t>>((trie_->vocab_size() + 63) / 64);
  const std::lock_guard<std::mutex> lock(mu_);  // the state table is shared: one walk at a time
  const auto t0 = std::chrono::steady_clock::now();
  if (!trie_->allowed(matcher, table_, state, *m)) {
    // Full: start over with this state's walk alone (the states it needs are far fewer than the
    // table holds; walking without memoized transitions took 30-50 ms per mask on a 128k
    // vocabulary, most of a bounded-string schema's mask time), and only if even that one walk
    // fills the table, walk without it.
    table_.clear();
    if (!trie_->allowed(matcher, table_, state, *m)) {
      table_.clear();
      trie_->allowed(matcher, state, *m);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.misses;
  stats_.compute_seconds += s;
  const size_t cost = m->size() * sizeof(uint64_t) + sizeof(MatchState) + 64;
  if (bytes_ + cost > kMaxBytes) {  // full: start over (states seen recently come back first)
    masks_.clear();
    bytes_ = 0;
  }
  masks_.emplace(state, m);
  bytes_ += cost;
  return m;
}

MaskCache::Stats MaskCache::stats() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace specd::constrain
