// Compiled constraints and the per-sequence state (constraint.hpp).
#include "constrain/constraint.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "common/untrusted.hpp"
#include "constrain/json_schema.hpp"
#include "constrain/regex_gbnf.hpp"
#include "specd/error.hpp"

namespace specd::constrain {
namespace {

const char* kind_name(StructuredOutput::Kind k) {
  switch (k) {
    case StructuredOutput::Kind::kJsonObject:
      return "json_object";
    case StructuredOutput::Kind::kJsonSchema:
      return "json_schema";
    case StructuredOutput::Kind::kRegex:
      return "regex";
    case StructuredOutput::Kind::kChoice:
      return "choice";
    case StructuredOutput::Kind::kGrammar:
      return "grammar";
    case StructuredOutput::Kind::kNone:
      break;
  }
  return "none";
}

bool is_stop(int32_t token, std::span<const int32_t> stop_ids) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

bool state_can_end(const MatchState& state) {
  return state.need == 0 &&
         std::any_of(state.stacks.begin(), state.stacks.end(), [](const Stack& s) { return s.empty(); });
}

// The constraint's own grammar, start rule `root`.
std::string unwrapped_gbnf(const StructuredOutput& so) {
  switch (so.kind) {
    case StructuredOutput::Kind::kJsonObject:
      return json_object_gbnf();
    case StructuredOutput::Kind::kJsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = parse_ordered_json(so.spec);  // nesting at most 64, as every request body
      } catch (const Error& e) {
        throw Error(ErrorCode::kInvalidArgument, std::string("json_schema: ") + e.what());
      }
      return json_schema_to_gbnf(schema);
    }
    case StructuredOutput::Kind::kRegex:
      return regex_to_gbnf_grammar(so.spec);
    case StructuredOutput::Kind::kChoice:
      if (so.choices.empty()) throw Error(ErrorCode::kInvalidArgument, "choice: the list of choices is empty");
      return choice_to_gbnf(so.choices);
    case StructuredOutput::Kind::kGrammar:
      return so.spec;
    case StructuredOutput::Kind::kNone:
      break;
  }
  throw Error(ErrorCode::kInternal, "to_gbnf: no constraint");
}

constexpr std::string_view kWrappedRule = "specd-wrapped";

}  // namespace

std::string to_gbnf(const StructuredOutput& so) {
  std::string text = unwrapped_gbnf(so);
  if (so.prefix.empty() && so.suffix.empty()) return text;
  text += '\n';
  text += kWrappedRule;
  text += " ::= ";
  if (!so.prefix.empty()) {
    text += gbnf_literal(so.prefix);
    text += ' ';
  }
  text += "root";
  if (!so.suffix.empty()) {
    text += ' ';
    text += gbnf_literal(so.suffix);
  }
  text += '\n';
  return text;
}

std::string_view start_rule(const StructuredOutput& so) {
  return so.prefix.empty() && so.suffix.empty() ? std::string_view("root") : kWrappedRule;
}

std::shared_ptr<const Grammar> compile_structured(const StructuredOutput& so) {
  return compile_gbnf(to_gbnf(so), kind_name(so.kind), start_rule(so));
}

std::shared_ptr<const CompiledConstraint> ConstraintCompiler::compile(const StructuredOutput& so) {
  std::string key = kind_name(so.kind);
  key += '\n';
  key += so.spec;
  key += '\x1e';
  key += so.prefix;
  key += '\x1e';
  key += so.suffix;
  for (const std::string& c : so.choices) {
    key += '\x1f';
    key += c;
  }
  {
    const std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first != key) continue;
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().second;
    }
  }
  auto c = std::make_shared<CompiledConstraint>();
  c->grammar = compile_structured(so);
  c->masks = std::make_shared<MaskCache>(trie_);
  c->description = kind_name(so.kind);
  Matcher probe(c->grammar);  // a grammar ambiguous from its first character fails here
  const std::lock_guard<std::mutex> lock(mu_);
  lru_.emplace_front(std::move(key), c);
  if (lru_.size() > kMaxCached) {
    const MaskCache::Stats s = lru_.back().second->masks->stats();
    retired_.hits += s.hits;
    retired_.misses += s.misses;
    retired_.compute_seconds += s.compute_seconds;
    lru_.pop_back();
  }
  return c;
}

MaskCache::Stats ConstraintCompiler::mask_stats() const {
  const std::lock_guard<std::mutex> lock(mu_);
  MaskCache::Stats total = retired_;
  for (const auto& [key, c] : lru_) {
    const MaskCache::Stats s = c->masks->stats();
    total.hits += s.hits;
    total.misses += s.misses;
    total.compute_seconds += s.compute_seconds;
  }
  return total;
}

SequenceConstraint::SequenceConstraint(std::shared_ptr<const CompiledConstraint> c)
    : c_(std::move(c)), matcher_(c_->grammar) {}

bool SequenceConstraint::advance_token(MatchState& state, int32_t token) const {
  const TokenTrie& trie = c_->masks->trie();
  if (state.dead() || token < 0 || static_cast<size_t>(token) >= trie.vocab_size()) return false;
  const std::string& bytes = trie.bytes(token);
  if (bytes.empty() || bytes.size() > TokenTrie::kMaxTokenBytes) return false;
  MatchState next;
  for (const char ch : bytes) {
    matcher_.advance(state, static_cast<uint8_t>(ch), next);
    if (next.dead()) return false;
    std::swap(state, next);
  }
  return true;
}

MatchState SequenceConstraint::state_after(std::span<const int32_t> tokens) const {
  MatchState state = matcher_.state();
  for (const int32_t t : tokens)
    if (!advance_token(state, t)) return {};
  return state;
}

void SequenceConstraint::mask_logits(std::span<float> logits, std::span<const int32_t> drafts,
                                     std::span<const int32_t> stop_ids) const {
  MatchState state;
  try {
    state = state_after(drafts);
  } catch (const Error&) {
    return;  // too ambiguous here: commit() fails the sequence with the reason
  }
  if (state.dead()) return;
  const bool ends = state_can_end(state);
  std::shared_ptr<const std::vector<uint64_t>> mask;
  try {
    mask = c_->masks->mask(matcher_, state);
  } catch (const Error&) {
    return;
  }
  const auto in_range = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < logits.size(); };
  bool any = false;
  for (const uint64_t w : *mask) any = any || w != 0;
  if (ends)
    for (const int32_t id : stop_ids) any = any || in_range(id);
  if (!any) return;
  // Stop ids are allowed exactly where the text can end, whatever their bytes.
  thread_local std::vector<float> stop_logits;
  stop_logits.clear();
  for (const int32_t id : stop_ids) stop_logits.push_back(in_range(id) ? logits[static_cast<size_t>(id)] : 0.0f);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), mask->size() * 64);
  for (size_t w = 0; w * 64 < n; ++w) {  // a word at a time: most are all allowed or none
    const uint64_t bits = (*mask)[w];
    const size_t end = std::min(n, w * 64 + 64);
    if (bits == ~uint64_t{0} && end == w * 64 + 64) continue;
    for (size_t i = w * 64; i < end; ++i)
      if ((bits >> (i & 63) & 1) == 0) logits[i] = kNegInf;
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = kNegInf;
  for (size_t j = 0; j < stop_ids.size(); ++j) {
    if (!in_range(stop_ids[j])) continue;
    logits[static_cast<size_t>(stop_ids[j])] = ends ? stop_logits[j] : kNegInf;
  }
}

void SequenceConstraint::allowed_mask(std::span<const int32_t> prefix, std::span<const int32_t> stop_ids,
                                      std::span<uint64_t> mask) const {
  std::fill(mask.begin(), mask.end(), 0);
  MatchState state;
  std::shared_ptr<const std::vector<uint64_t>> allowed;
  try {
    state = state_after(prefix);
    if (state.dead()) return;
    allowed = c_->masks->mask(matcher_, state);
  } catch (const Error&) {
    return;  // nothing allowed: the draft ends here
  }
  std::copy_n(allowed->begin(), std::min(allowed->size(), mask.size()), mask.begin());
  const bool can_end = state.need == 0 &&
                       std::any_of(state.stacks.begin(), state.stacks.end(), [](const Stack& s) { return s.empty(); });
  if (!can_end) return;
  for (const int32_t id : stop_ids) {
    const auto u = static_cast<size_t>(id);
    if (id >= 0 && u / 64 < mask.size()) mask[u / 64] |= uint64_t{1} << (u % 64);
  }
}

std::vector<int32_t> SequenceConstraint::forced_drafts(std::span<const int32_t> prefix, size_t max_tokens) const {
  std::vector<int32_t> out;
  try {
    const MatchState state = state_after(prefix);
    if (state.dead()) return out;
    const std::string text = matcher_.forced_text(state, 256);
    const TokenTrie& trie = c_->masks->trie();
    for (size_t at = 0; at < text.size() && out.size() < max_tokens;) {
      const auto [id, len] = trie.longest_token(std::string_view(text).substr(at));
      if (id < 0) break;
      out.push_back(id);
      at += len;
    }
  } catch (const Error&) {
    out.clear();
  }
  return out;
}

size_t SequenceConstraint::allowed_prefix(std::span<const int32_t> drafts, std::span<const int32_t> stop_ids) const {
  MatchState state = matcher_.state();
  for (size_t j = 0; j < drafts.size(); ++j) {
    try {
      // A stop token where the text may end is the chain's last draft; anywhere else it is cut.
      if (is_stop(drafts[j], stop_ids)) return state_can_end(state) ? j + 1 : j;
      if (!advance_token(state, drafts[j])) return j;
    } catch (const Error&) {
      return j;
    }
  }
  return drafts.size();
}

void SequenceConstraint::allowed_nodes(std::span<const int32_t> tokens, std::span<const int32_t> parents,
                                       std::span<const int32_t> stop_ids, std::vector<char>& keep) const {
  keep.assign(tokens.size(), 0);
  std::vector<MatchState> states(tokens.size());
  std::vector<char> leaf(tokens.size(), 0);  // a stop token: nothing may follow it
  for (size_t j = 0; j < tokens.size(); ++j) {
    const int32_t p = parents[j];
    if (p >= 0 && (!keep[static_cast<size_t>(p)] || leaf[static_cast<size_t>(p)])) continue;
    states[j] = p < 0 ? matcher_.state() : states[static_cast<size_t>(p)];
    try {
      if (is_stop(tokens[j], stop_ids)) {
        keep[j] = leaf[j] = state_can_end(states[j]) ? 1 : 0;
      } else {
        keep[j] = advance_token(states[j], tokens[j]) ? 1 : 0;
      }
    } catch (const Error&) {
      keep[j] = 0;
    }
  }
}

std::string SequenceConstraint::commit(int32_t token) {
  MatchState state = matcher_.state();
  try {
    if (!advance_token(state, token))
      return "structured output: the grammar forbids token " + std::to_string(token) + " here (an engine bug)";
  } catch (const Error& e) {
    return std::string("structured output: ") + e.what();
  }
  matcher_.set_state(std::move(state));
  return "";
}

}  // namespace specd::constrain
