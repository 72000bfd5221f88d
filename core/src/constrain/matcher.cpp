// The pushdown matcher (matcher.hpp).
#include "constrain/matcher.hpp"

#include <algorithm>

#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::constrain {

size_t MatchState::hash() const {
  size_t h = 0x9e3779b97f4a7c15ull ^ (static_cast<size_t>(partial) << 8) ^ (static_cast<size_t>(need) << 4) ^ have;
  for (const Stack& s : stacks) {
    h = (h ^ s.size()) * 0x100000001b3ull;
    for (const uint32_t p : s) h = (h ^ p) * 0x100000001b3ull;
  }
  return h;
}

namespace {

void normalize(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > Matcher::kMaxStacks)
    throw Error(ErrorCode::kInvalidArgument, "the grammar is too ambiguous: more than " +
                                                 std::to_string(Matcher::kMaxStacks) + " ways to read one prefix");
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  size_t budget = kExpansionBudget;
  for (const uint32_t start : grammar_->rule_alts[grammar_->root]) expand(Stack{start}, state_.stacks, budget);
  normalize(state_.stacks);
}

// Resolves the top of `stack` until it is a character set (or the stack is empty: complete),
// with every alternative of every rule on the way. Iterative; terminates because the grammar
// has no left recursion (grammar.cpp checks).
void Matcher::expand(Stack stack, std::vector<Stack>& out, size_t& budget) const {
  const Grammar& g = *grammar_;
  thread_local std::vector<Stack> work;  // stacks still to resolve (reused: no allocation per call)
  work.clear();
  work.push_back(std::move(stack));
  while (!work.empty()) {
    Stack s = std::move(work.back());
    work.pop_back();
    // Resolve s in place; a rule's other alternatives wait in `work`.
    while (true) {
      if (budget-- == 0)
        throw Error(ErrorCode::kInvalidArgument, "the grammar is too ambiguous: more than " +
                                                     std::to_string(kExpansionBudget) +
                                                     " expansions for one character");
      if (s.empty() || g.elements[s.back()].op == Op::kChars) {
        out.push_back(std::move(s));
        break;
      }
      const uint32_t p = s.back();
      const Element e = g.elements[p];
      s.pop_back();
      if (e.op == Op::kEnd) continue;  // the alternative is done: go on below it
      // A rule: continue after it once it is done (unless the alternative ends there: a tail
      // call, so `x*` does not grow the stack by one per repetition).
      if (g.elements[p + 1].op != Op::kEnd) s.push_back(p + 1);
      const std::vector<uint32_t>& alts = g.rule_alts[e.arg];
      if (alts.empty()) break;  // a rule without alternatives matches nothing
      for (size_t a = 0; a + 1 < alts.size(); ++a) {
        work.push_back(s);
        work.back().push_back(alts[a]);
      }
      s.push_back(alts.back());
    }
  }
}

void Matcher::advance_code_point(const MatchState& in, uint32_t cp, MatchState& out) const {
  const Grammar& g = *grammar_;
  out.stacks.clear();
  out.partial = 0;
  out.need = out.have = 0;
  size_t budget = kExpansionBudget;
  for (const Stack& s : in.stacks) {
    if (s.empty()) continue;
    const uint32_t p = s.back();
    if (!g.charsets[g.elements[p].arg].contains(cp)) continue;
    Stack next = s;
    next.back() = p + 1;
    expand(std::move(next), out.stacks, budget);
  }
  normalize(out.stacks);
}

void Matcher::advance(const MatchState& in, uint8_t byte, MatchState& out) const {
  const Grammar& g = *grammar_;
  if (in.need == 0) {
    if (byte < 0x80) return advance_code_point(in, byte, out);
    const int len = (byte >> 5) == 6 ? 2 : (byte >> 4) == 14 ? 3 : (byte >> 3) == 30 ? 4 : 0;
    out.stacks.clear();
    if (len == 0 || byte == 0xc0 || byte == 0xc1 || byte > 0xf4) return;  // not a lead byte
    out.partial = byte & (0x7fu >> len);
    out.need = static_cast<uint8_t>(len - 1);
    out.have = 1;
  } else {
    out.stacks.clear();
    if ((byte & 0xc0) != 0x80) return;
    const uint32_t partial = (in.partial << 6) | (byte & 0x3fu);
    if (in.need == 1) {
      const uint32_t cp = partial;
      const int len = in.have + 1;
      const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
      if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return;
      return advance_code_point(in, cp, out);
    }
    out.partial = partial;
    out.need = static_cast<uint8_t>(in.need - 1);
    out.have = static_cast<uint8_t>(in.have + 1);
  }
  // A partial code point: keep the stacks whose set meets the range of its completions (not
  // below the smallest code point of its length: shorter forms are overlong, not UTF-8).
  static constexpr uint32_t kSmallest[5] = {0, 0, 0x80, 0x800, 0x10000};
  const uint32_t lo = std::max(out.partial << (6 * out.need), kSmallest[out.have + out.need]);
  const uint32_t hi = std::min((out.partial << (6 * out.need)) | ((1u << (6 * out.need)) - 1), 0x10ffffu);
  if (lo > hi) {
    out.stacks.clear();
    return;
  }
  for (const Stack& s : in.stacks)
    if (!s.empty() && g.charsets[g.elements[s.back()].arg].intersects(lo, hi)) out.stacks.push_back(s);
}

std::string Matcher::forced_text(const MatchState& state, size_t max_bytes) const {
  const Grammar& g = *grammar_;
  std::string out;
  MatchState a = state, b;
  while (a.need == 0 && !a.dead() && out.size() + 4 <= max_bytes) {
    uint32_t forced = 0;
    bool one = true;
    for (const Stack& s : a.stacks) {
      if (s.empty()) return out;  // the text may end here
      const CharSet& set = g.charsets[g.elements[s.back()].arg];
      if (set.negated || set.ranges.size() != 1 || set.ranges[0].first != set.ranges[0].second ||
          (forced != 0 && forced != set.ranges[0].first)) {
        one = false;
        break;
      }
      forced = set.ranges[0].first;
    }
    if (!one || forced == 0) break;
    tokenizer::detail::append_utf8(out, forced);
    advance_code_point(a, forced, b);
    std::swap(a, b);
  }
  return out;
}

bool Matcher::accept(std::string_view bytes) {
  MatchState a = state_, b;
  for (const char c : bytes) {
    advance(a, static_cast<uint8_t>(c), b);
    if (b.dead()) return false;
    std::swap(a, b);
  }
  state_ = std::move(a);
  return true;
}

bool Matcher::can_end() const {
  return state_.need == 0 &&
         std::any_of(state_.stacks.begin(), state_.stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::closed() const {
  return can_end() && std::all_of(state_.stacks.begin(), state_.stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool full_match(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  Matcher m(grammar);
  return m.accept(text) && m.can_end();
}

}  // namespace specd::constrain
