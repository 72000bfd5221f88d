// Token masks: which tokens of the vocabulary a grammar state allows next.
//
// TokenTrie holds the bytes every token adds to the text (Tokenizer::Impl::token_bytes) as a
// prefix trie laid out in depth-first order, each node with the index just past its subtree.
// A mask is one walk over that array: the matcher state at each depth is the parent's advanced
// by the node's byte, and a node whose state dies skips its whole subtree, so tokens sharing a
// prefix share its work (the vocabulary-trie walk of Outlines, llguidance and XGrammar).
// Special tokens and ids without a token have no bytes and are never allowed by the grammar;
// stop tokens are allowed where the grammar can end (sampling/constraint.hpp decides that).
//
// MaskCache remembers the masks of the states it has seen (a JSON string body, the space
// between object members: the same states come back every few tokens), bounded in memory.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "constrain/matcher.hpp"

namespace specd {
class Tokenizer;
}

namespace specd::constrain {

// Interned matcher states of one grammar and their byte transitions, memoized: most trie nodes
// take a transition some other node took before (every letter inside a JSON string leads back to
// the same state). Bounded: kMaxStates states of about 1.6 KiB each (transitions and chains:
// 6.5 MiB in all). Not thread-safe
// (MaskCache holds it under its lock).
class StateTable {
 public:
  static constexpr size_t kMaxStates = 4096;
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kFull = -2;

  int32_t intern(const MatchState& state);  // kFull when the table is full
  int32_t next(const Matcher& matcher, int32_t id, uint8_t byte);
  // The successor most ASCII bytes lead to and those bytes (bit b of word b / 64): inside a
  // JSON string every letter leads back to the same state (a loop); inside one of at most 20
  // characters, every letter leads to the next state of a chain. next kDead: none is alive.
  struct Uniform {
    int32_t next = kDead;
    std::array<uint64_t, 2> bytes{0, 0};
  };
  const Uniform& uniform(const Matcher& matcher, int32_t id);
  // Subtrees at most this high are taken whole along a chain of uniform successors.
  static constexpr size_t kMaxChain = 32;
  using Bytes = std::array<uint64_t, 2>;
  // The bytes that every one of the first h states of the uniform chain from `id` sends to its
  // uniform successor (empty from the depth where the chain dies), 1 <= h <= kMaxChain: a subtree
  // of height h whose bytes are all among them is allowed whole. Kept per state and extended as
  // deeper subtrees ask, so that the walk tests a subtree with one lookup instead of h.
  Bytes along(const Matcher& matcher, int32_t id, size_t h);
  void clear();
  size_t size() const { return states_.size(); }

 private:
  struct Hash {
    size_t operator()(const MatchState& s) const { return s.hash(); }
  };
  static constexpr int32_t kUnknown = INT32_MIN;
  std::vector<MatchState> states_;
  std::unordered_map<MatchState, int32_t, Hash> ids_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<Uniform> uniform_;
  std::vector<char> uniform_known_;
  struct Chain {
    std::array<Bytes, kMaxChain + 1> along;  // [h], h < known
    uint8_t known = 1;                       // along[0]: every byte
    int32_t end = 0;                         // the chain's state after known - 1 steps
  };
  std::vector<Chain> chain_;
};

class TokenTrie {
 public:
  // Tokens longer than this are never allowed by a grammar (no real vocabulary has one; a
  // hostile GGUF's 2 MB token must not make every mask walk 2 MB).
  static constexpr size_t kMaxTokenBytes = 1024;

  // bytes[id]: what token id adds to the text; empty = never allowed.
  explicit TokenTrie(std::vector<std::string> bytes);
  static std::shared_ptr<const TokenTrie> from_tokenizer(const Tokenizer& tokenizer);

  size_t vocab_size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  size_t num_nodes() const { return nodes_.size(); }

  // The longest token whose bytes start `text` (the lowest id among equals): its id and length,
  // or {-1, 0}.
  std::pair<int32_t, size_t> longest_token(std::string_view text) const;

  // Sets bit id of `mask` (vocab_size() bits, cleared first) for every token whose bytes the
  // state accepts.
  void allowed(const Matcher& matcher, const MatchState& state, std::span<uint64_t> mask) const;
  // The same through `table`: a subtree is allowed whole, without walking it, when each of its
  // bytes leads every state of its depths along one chain of uniform successors (a loop inside
  // a JSON string, a chain inside a bounded one). False (mask unspecified) when the table filled
  // up on the way.
  bool allowed(const Matcher& matcher, StateTable& table, const MatchState& state, std::span<uint64_t> mask) const;

 private:
  struct Node {
    uint8_t byte = 0;
    uint16_t depth = 0;  // 1 for a token's first byte
    uint32_t skip = 0;   // index just past this node's subtree
    uint32_t first = 0;  // tokens ending here: ids_[first, first + count)
    uint32_t count = 0;
    uint32_t subtree = 0;  // the subtree's tokens: ids_[subtree, nodes_[skip].subtree)
  };
  void mark_subtree(uint32_t node, std::span<uint64_t> mask) const;
  // Whether every token below `node` (ASCII bytes only) is allowed from state `from`.
  bool whole_subtree(const Matcher& matcher, StateTable& table, uint32_t node, int32_t from) const;
  uint32_t subtree_end(uint32_t node) const;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  // Per node, the bytes of its subtree: ASCII ones (bit b of word b / 64), and whether any is not.
  std::vector<std::array<uint64_t, 2>> alphabet_;
  std::vector<char> non_ascii_;
  std::vector<uint16_t> height_;  // the longest token below, in bytes from this node on
};

// Masks per matcher state for one grammar and vocabulary. Thread-safe.
class MaskCache {
 public:
  static constexpr size_t kMaxBytes = 8u << 20;

  explicit MaskCache(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}

  // The mask of `state` (bits per token id), computed on a miss.
  std::shared_ptr<const std::vector<uint64_t>> mask(const Matcher& matcher, const MatchState& state);
  const TokenTrie& trie() const { return *trie_; }

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    double compute_seconds = 0;
  };
  Stats stats() const;

 private:
  struct Hash {
    size_t operator()(const MatchState& s) const { return s.hash(); }
  };
  std::shared_ptr<const TokenTrie> trie_;
  mutable std::mutex mu_;
  StateTable table_;
  std::unordered_map<MatchState, std::shared_ptr<const std::vector<uint64_t>>, Hash> masks_;
  size_t bytes_ = 0;
  Stats stats_;
};

}  // namespace specd::constrain
