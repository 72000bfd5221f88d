// A request's structured-output constraint inside the engine (docs/structured-output.md).
//
//   ConstraintCompiler   engine-wide: the vocabulary trie, and compiled constraints shared by the
//                        requests that ask for the same one (grammar + mask cache), LRU-bounded
//   SequenceConstraint   per sequence (a value: n > 1 choices each copy their own): the matcher
//                        after the committed tokens. Speculative positions try drafts on copies,
//                        so a rejected draft needs no rollback: the committed state only ever
//                        advances by tokens Scheduler::commit appends.
//
// Masks: the grammar allows a token when its bytes can continue the text; stop tokens (EOS,
// stop_token_ids) only where the text is a complete sentence; special tokens never otherwise.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrain/matcher.hpp"
#include "constrain/token_mask.hpp"
#include "specd/request.hpp"

namespace specd::constrain {

struct CompiledConstraint {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<MaskCache> masks;
  std::string description;  // e.g. "json_schema", for metrics and messages
};

// The GBNF text a request's structured output stands for (json_schema.hpp, regex_gbnf.hpp),
// and the rule it starts from (not `root` when a prefix or suffix wraps it). Throws
// kInvalidArgument naming the field and what is wrong.
std::string to_gbnf(const StructuredOutput& so);
std::string_view start_rule(const StructuredOutput& so);
// to_gbnf compiled from start_rule.
std::shared_ptr<const Grammar> compile_structured(const StructuredOutput& so);

class ConstraintCompiler {
 public:
  static constexpr size_t kMaxCached =
      16;  // compiled constraints kept for reuse (each up to ~15 MiB: masks and state table)

  explicit ConstraintCompiler(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}

  // Throws kInvalidArgument (the request fails with that message).
  std::shared_ptr<const CompiledConstraint> compile(const StructuredOutput& so);
  const TokenTrie& trie() const { return *trie_; }

  // Mask work of every constraint compiled so far (cached ones included).
  MaskCache::Stats mask_stats() const;

 private:
  std::shared_ptr<const TokenTrie> trie_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledConstraint>>> lru_;  // most recent first
  MaskCache::Stats retired_;  // stats of constraints dropped from the LRU
};

class SequenceConstraint {
 public:
  explicit SequenceConstraint(std::shared_ptr<const CompiledConstraint> c);

  // Sets the logits of every token the grammar forbids after `drafts` to -inf (stop ids are
  // allowed where the text can end). A position no token may take (past a draft the grammar
  // forbids, or past the end of a closed grammar) is left as it is: its output is never used
  // (Scheduler::commit ends the sequence where the grammar closes).
  void mask_logits(std::span<float> logits, std::span<const int32_t> drafts, std::span<const int32_t> stop_ids) const;

  // Bits (per token id, mask.size() * 64 >= the vocabulary) of the tokens allowed after `prefix`:
  // what the grammar allows, and stop ids where the text can end; all clear past a forbidden prefix.
  void allowed_mask(std::span<const int32_t> prefix, std::span<const int32_t> stop_ids, std::span<uint64_t> mask) const;
  // Drafts from the grammar itself: the text it forces after `prefix` (e.g. `"name": ` once an
  // object with that required key opens), split into at most max_tokens tokens by longest
  // match. They are drafts like any other: the verifier accepts what the target would emit.
  std::vector<int32_t> forced_drafts(std::span<const int32_t> prefix, size_t max_tokens) const;
  // How many of a chain's drafts the grammar allows in a row (a stop id where the text may end is
  // the last one).
  size_t allowed_prefix(std::span<const int32_t> drafts, std::span<const int32_t> stop_ids) const;
  // A tree: keep[j] = node j and every ancestor are allowed (parents[j] < j, -1 = root; a stop id
  // has no children).
  void allowed_nodes(std::span<const int32_t> tokens, std::span<const int32_t> parents,
                     std::span<const int32_t> stop_ids, std::vector<char>& keep) const;

  // Scheduler::commit: a generated token that is not a stop id. "" or why the sequence fails (the
  // grammar forbids the token, or is too ambiguous to follow: Matcher::kMaxStacks).
  std::string commit(int32_t token);
  // Complete and nothing may follow: the sequence ends here.
  bool closed() const { return matcher_.closed(); }
  bool can_end() const { return matcher_.can_end(); }
  size_t vocab_size() const { return c_->masks->trie().vocab_size(); }

 private:
  // Advances `state` by a token's bytes; false (state unspecified) if the grammar forbids it.
  bool advance_token(MatchState& state, int32_t token) const;
  // The state after `tokens` from the committed one; dead if one is forbidden.
  MatchState state_after(std::span<const int32_t> tokens) const;

  std::shared_ptr<const CompiledConstraint> c_;
  Matcher matcher_;
};

}  // namespace specd::constrain
