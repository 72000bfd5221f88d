// Regular expressions → GBNF (grammar.hpp), so a regex constraint runs on the one grammar
// matcher. The grammar matches exactly the strings the regex matches in full (as
// std::regex_match or Python's re.fullmatch would).
//
// Supported (ECMAScript/Python common ground): literals (UTF-8); escapes \n \t \r \f \v \0 \xHH
// \uHHHH (a surrogate pair as two escapes is one code point) and any escaped punctuation;
// `.` (any code point but \n); classes [...] with ranges and ^ negation; \d \w \s \D \W \S in
// and out of classes with ASCII meaning (\d=[0-9], \w=[A-Za-z0-9_], \s=[ \t\n\r\f\v]); groups
// ( ), (?: ), named groups (?P<n> ) and (?<n> ) read as plain groups; alternation |;
// quantifiers * + ? {m} {m,} {m,n} and their lazy forms (the same language). A `{` that starts
// no quantifier is a literal. `^` at the start and `$` at the end of the regex (or of a
// top-level alternative) are accepted.
//
// Refused with specd::Error (kInvalidArgument) naming the construct and its byte offset:
// backreferences, lookaround, atomic groups, inline flags, word boundaries, Unicode property
// escapes, possessive quantifiers, `^`/`$` elsewhere, unbalanced parentheses, {n,m} with n > m,
// counts over Grammar::kMaxRepeat, {,n} (dialects disagree), a leading ']' in a class,
// groups nested deeper than 128, invalid UTF-8.
//
// Cost: the parser and the translation are linear in the regex (no recursion deeper than the
// group nesting bound). A repetition of something that can be empty, as in (a*)*, is rewritten
// to repeat only its non-empty strings, so the grammar has no empty loops (which compile_gbnf
// refuses as left recursion) and the matcher stays bounded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specd::constrain {

enum class RegexContext {
  // The grammar's text is the matched string itself; the regex is anchored at both ends.
  kText,
  // The grammar's text is the body of a JSON string literal (no quotes) whose *decoded* value
  // the regex must match, as for JSON Schema's `pattern`: `"` is generated only as \", `\` only
  // as \\, U+0000..U+001F only as escapes (\b \f \n \r \t or \u00XX); other characters as
  // themselves. The regex is a search, as `pattern` is: a top-level alternative not anchored
  // with ^ (or $) may be preceded (or followed) by any characters.
  kJsonString,
};

// Translates `regex` to a GBNF expression usable inside a rule's sequence (no top-level `|`).
// Helper rules, as whole lines "name ::= body", are appended to `rules`; their names are
// `rule_prefix` followed by "-" and a number, so a caller translating several regexes into one
// grammar gives each a different prefix (letters, digits, '-' only).
std::string regex_to_gbnf(std::string_view regex, std::string_view rule_prefix, std::vector<std::string>& rules,
                          RegexContext context = RegexContext::kText);

// A complete grammar whose `root` is regex_to_gbnf(regex) (for kJsonString: the string body,
// without the quotes).
std::string regex_to_gbnf_grammar(std::string_view regex, RegexContext context = RegexContext::kText);

}  // namespace specd::constrain
