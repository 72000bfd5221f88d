// Character sets and the checks every compiled grammar passes (grammar.hpp): undefined rules
// are caught by the parser; here nullable rules and left recursion, both iteratively.
#include "constrain/grammar.hpp"

#include <algorithm>
#include <string>

#include "constrain/grammar_build.hpp"
#include "specd/error.hpp"

namespace specd::constrain {

bool CharSet::contains(uint32_t c) const {
  if (c < 128) return ((ascii[c >> 6] >> (c & 63)) & 1) != 0;
  // Ranges are sorted: binary search for the last range starting at or before c.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                             [](uint32_t v, const std::pair<uint32_t, uint32_t>& r) { return v < r.first; });
  const bool in = it != ranges.begin() && c <= std::prev(it)->second;
  return in != negated;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& [a, b] : ranges)
      if (a <= hi && b >= lo) return true;
    return false;
  }
  // Negated: some point of [lo, hi] lies outside every range (they are merged and sorted).
  uint32_t next = lo;
  for (const auto& [a, b] : ranges) {
    if (b < next) continue;
    if (a > next) return true;
    if (b >= hi) return false;
    next = b + 1;
  }
  return next <= hi;
}

void CharSet::finalize() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges = std::move(merged);
  ascii = {0, 0};
  for (const auto& [a, b] : ranges)
    for (uint32_t c = a; c <= std::min<uint32_t>(b, 127); ++c) ascii[c >> 6] |= uint64_t{1} << (c & 63);
  if (negated) {
    ascii[0] = ~ascii[0];
    ascii[1] = ~ascii[1];
  }
}

namespace {

std::string rule_label(const Grammar& g, uint32_t r) {
  // Anonymous rules (groups, repetitions) are named after the rule whose text holds them.
  return g.rule_names[r].empty() ? "(anonymous " + std::to_string(r) + ")" : "'" + g.rule_names[r] + "'";
}

std::vector<char> nullable_rules(const Grammar& g) {
  std::vector<char> nullable(g.rule_alts.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rule_alts.size(); ++r) {
      if (nullable[r]) continue;
      for (const uint32_t start : g.rule_alts[r]) {
        bool all = true;
        for (uint32_t p = start; g.elements[p].op != Op::kEnd && all; ++p)
          all = g.elements[p].op == Op::kRule && nullable[g.elements[p].arg];
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

}  // namespace

void check_left_recursion(const Grammar& g, std::string_view what) {
  const std::vector<char> nullable = nullable_rules(g);
  // Left corners: the rules an alternative may start with before consuming a character.
  const size_t n = g.rule_alts.size();
  std::vector<std::vector<uint32_t>> corners(n);
  for (size_t r = 0; r < n; ++r) {
    for (const uint32_t start : g.rule_alts[r]) {
      for (uint32_t p = start; g.elements[p].op == Op::kRule; ++p) {
        corners[r].push_back(g.elements[p].arg);
        if (!nullable[g.elements[p].arg]) break;
      }
    }
  }
  // Iterative depth-first search for a cycle (0 = unseen, 1 = on the path, 2 = done).
  std::vector<uint8_t> color(n, 0);
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t s = 0; s < n; ++s) {
    if (color[s] != 0) continue;
    path.push_back({s, 0});
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == corners[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t next = corners[r][i++];
      if (color[next] == 1)
        throw Error(ErrorCode::kInvalidArgument,
                    std::string(what) + ": rule " + rule_label(g, next) +
                        " is left-recursive (it can reach itself before consuming a character; a repetition "
                        "of something that may be empty does this too)");
      if (color[next] == 0) {
        color[next] = 1;
        path.push_back({next, 0});
      }
    }
  }
}

std::string gbnf_literal(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;  // UTF-8 passes through as the code points it encodes
    }
  }
  out += '"';
  return out;
}

}  // namespace specd::constrain
