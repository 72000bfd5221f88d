// A context-free grammar over Unicode code points, compiled for the matcher (matcher.hpp): the
// common form every constraint becomes (docs/structured-output.md). GBNF text (llama.cpp's
// grammar format) is parsed here; JSON Schema, regular expressions and choice lists are first
// translated to GBNF (json_schema.hpp, regex_gbnf.hpp), so one parser and one matcher serve all.
//
// Layout: every rule is a list of alternatives; an alternative is a run of elements in
// `elements` ended by a kEnd element. An element is a character set or a reference to a rule.
// Groups, repetitions and optional items become anonymous rules (`x*` is R ::= x R | empty,
// `x{2,4}` is x x R2 with R2 ::= x R1 | empty, R1 ::= x | empty).
//
// compile_gbnf refuses, with an error naming the rule (or line and column): syntax errors,
// undefined rules, a missing root, left recursion (a rule that can reach itself before
// consuming a character, e.g. through a repetition of something that may be empty), and
// grammars over the size limits below. Parsing and every check are iterative or bounded in
// depth (kMaxNesting), time and memory.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specd::constrain {

// A set of code points: sorted, merged ranges, optionally negated, with an ASCII bitmap.
struct CharSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive, sorted, disjoint
  bool negated = false;
  std::array<uint64_t, 2> ascii{};  // membership of code points 0..127 (negation applied)

  bool contains(uint32_t c) const;
  // Whether some code point in [lo, hi] is in the set.
  bool intersects(uint32_t lo, uint32_t hi) const;
  void finalize();  // sorts and merges ranges, fills ascii
};

enum class Op : uint8_t { kEnd, kChars, kRule };

struct Element {
  Op op = Op::kEnd;
  uint32_t arg = 0;  // kChars: index into charsets; kRule: rule index
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> rule_alts;  // rule → start index of each alternative
  std::vector<std::string> rule_names;           // "" for anonymous rules
  std::vector<CharSet> charsets;
  uint32_t root = 0;

  // Limits (a request's grammar is untrusted): text bytes, elements after expansion, nesting
  // of parentheses, and the count of a single repetition.
  static constexpr size_t kMaxTextBytes = 8u << 20;
  static constexpr size_t kMaxElements = 1u << 21;
  static constexpr int kMaxNesting = 128;
  static constexpr uint32_t kMaxRepeat = 10000;
};

// Parses GBNF text: rules `name ::= expr` (names of letters, digits, '-' and '_'); alternatives
// `|`; "literals" and [character classes] (ranges, ^ negation) with the escapes \n \r \t \\ \"
// \] \- \xHH \uHHHH \UHHHHHHHH; `.` (any code point); ( groups ); the postfixes * + ? {m} {m,}
// {m,n}; comments from # to the end of the line. A rule ends at a newline outside parentheses
// (newlines right after `::=` or `|` are skipped, and a line starting with `|` continues it). `root` names the start
// rule. `what` names the grammar in error messages (e.g. "guided_grammar"). Throws specd::Error (kInvalidArgument) with
// the line and column, or the rule, of the problem.
std::shared_ptr<const Grammar> compile_gbnf(std::string_view text, std::string_view what = "grammar",
                                            std::string_view root = "root");

// Quotes `text` as a GBNF string literal (escaping ", \ and control characters).
std::string gbnf_literal(std::string_view text);

}  // namespace specd::constrain
