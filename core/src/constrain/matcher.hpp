// Matcher: where a grammar (grammar.hpp) stands after some bytes of output, and which bytes may
// come next. It answers "can this prefix still be completed", which a plain matcher cannot.
//
// The state is a set of stacks of element positions (a pushdown automaton run on all
// alternatives at once, as llama.cpp's grammar engine does): the top of each stack is a
// character set the next code point may match, and an empty stack means the input so far is a
// complete sentence. Input arrives as bytes (tokens split code points): a partial UTF-8
// sequence is kept, and the state stays alive only while some stack can still accept a code
// point that starts with those bytes.
//
// States are values: copying one is how drafts are tried and rolled back. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "constrain/grammar.hpp"

namespace specd::constrain {

using Stack = std::vector<uint32_t>;

struct MatchState {
  std::vector<Stack> stacks;  // sorted, unique; empty set = dead
  uint32_t partial = 0;       // bits of a partial UTF-8 code point
  uint8_t need = 0;           // continuation bytes still to come (0 = none pending)
  uint8_t have = 0;           // bytes of the partial code point seen

  bool dead() const { return stacks.empty(); }
  bool operator==(const MatchState& o) const = default;
  size_t hash() const;
};

class Matcher {
 public:
  // The most stacks one state may hold; a grammar ambiguous enough to exceed it fails the
  // request with kInvalidArgument ("the grammar is too ambiguous").
  static constexpr size_t kMaxStacks = size_t{1} << 17;
  // The most rule expansions one character may take (the same error).
  static constexpr size_t kExpansionBudget = size_t{1} << 21;

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Consumes bytes; returns false and leaves the state unchanged if the grammar forbids them.
  bool accept(std::string_view bytes);
  // The input so far is a complete sentence (no partial code point pending).
  bool can_end() const;
  // Complete, and no further character is allowed: generation must stop here.
  bool closed() const;
  bool dead() const { return state_.dead(); }

  const MatchState& state() const { return state_; }
  // A state this matcher's grammar reached (advance(), or another matcher of the same grammar).
  void set_state(MatchState state) { state_ = std::move(state); }
  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }

  // The state after one more byte (out.dead() if the byte is not allowed). `in` and `out` must
  // differ. The building block of accept() and of the vocabulary walk (token_mask.hpp).
  void advance(const MatchState& in, uint8_t byte, MatchState& out) const;
  // The text the grammar forces from `state` (every way to continue starts with it), up to
  // max_bytes: characters while exactly one is allowed and the text cannot end there.
  std::string forced_text(const MatchState& state, size_t max_bytes) const;

 private:
  void expand(Stack stack, std::vector<Stack>& out, size_t& budget) const;
  void advance_code_point(const MatchState& in, uint32_t cp, MatchState& out) const;

  std::shared_ptr<const Grammar> grammar_;
  MatchState state_;
};

// Whether the whole of `text` is a sentence of the grammar (for tests and validation).
bool full_match(const std::shared_ptr<const Grammar>& grammar, std::string_view text);

}  // namespace specd::constrain
