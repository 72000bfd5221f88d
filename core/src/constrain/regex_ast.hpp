// The parsed form of a regular expression, shared by the parser (regex_parse.cpp) and the GBNF
// emitter (regex_gbnf.cpp). Internal to constrain/: callers use regex_gbnf.hpp.
//
// Nodes live in one arena and refer to each other by index; a node's children always have
// smaller indices than the node itself, so one ascending pass computes bottom-up properties
// (nullable) without recursion.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace specd::constrain::regex_detail {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kUnbounded = UINT32_MAX;  // RegexNode::max of `*`, `+`, `{m,}`
inline constexpr int kMaxGroupNesting = 128;        // parentheses; deeper is refused

// A set of code points: sorted, disjoint, non-adjacent inclusive ranges.
using CodeRanges = std::vector<std::pair<uint32_t, uint32_t>>;

void normalize(CodeRanges& r);  // sorts and merges
CodeRanges complement(const CodeRanges& r);
CodeRanges subtract(const CodeRanges& a, const CodeRanges& b);
CodeRanges intersect(const CodeRanges& a, const CodeRanges& b);
bool contains(const CodeRanges& r, uint32_t c);

enum class NodeKind : uint8_t {
  kEmpty,   // matches only the empty string
  kChars,   // one code point from `chars`
  kSeq,     // `kids` one after another
  kAlt,     // one of `kids`
  kRepeat,  // kids[0] repeated min..max times
};

struct RegexNode {
  NodeKind kind = NodeKind::kEmpty;
  CodeRanges chars;            // kChars
  std::vector<uint32_t> kids;  // kSeq, kAlt: in order; kRepeat: exactly one
  uint32_t min = 0;            // kRepeat
  uint32_t max = 0;            // kRepeat; kUnbounded for no upper bound
};

// One top-level alternative of the regex, with the anchors written around it (`^a|b$` has two).
struct TopAlternative {
  uint32_t node = 0;
  bool anchored_start = false;
  bool anchored_end = false;
};

struct RegexAst {
  std::vector<RegexNode> nodes;
  std::vector<TopAlternative> alternatives;  // at least one
};

// Parses `regex` (UTF-8). Throws specd::Error (kInvalidArgument) naming the construct and its
// byte offset for anything outside the supported subset (regex_gbnf.hpp lists it).
RegexAst parse_regex(std::string_view regex);

}  // namespace specd::constrain::regex_detail
