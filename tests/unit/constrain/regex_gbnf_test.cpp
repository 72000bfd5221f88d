// regex → GBNF (core/src/constrain/regex_gbnf.hpp): full-match agreement with std::regex as an
// oracle, prefix answers, JSON-string mode, refusals, and hostile regexes in bounded time.
#include "constrain/regex_gbnf.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "constrain/grammar.hpp"
#include "constrain/matcher.hpp"
#include "specd/error.hpp"

namespace {

using specd::constrain::compile_gbnf;
using specd::constrain::full_match;
using specd::constrain::Matcher;
using specd::constrain::regex_to_gbnf;
using specd::constrain::regex_to_gbnf_grammar;
using specd::constrain::RegexContext;

std::shared_ptr<const specd::constrain::Grammar> compile_regex(const std::string& re) {
  return compile_gbnf(regex_to_gbnf_grammar(re), "regex_test");
}

// A grammar for a JSON string (quotes included) whose decoded value the pattern must match.
std::shared_ptr<const specd::constrain::Grammar> compile_json_pattern(const std::string& re) {
  std::vector<std::string> rules;
  std::string text = "root ::= \"\\\"\" ";
  text += regex_to_gbnf(re, "pat", rules, RegexContext::kJsonString);
  text += " \"\\\"\"\n";
  for (const auto& r : rules) text += r + "\n";
  return compile_gbnf(text, "regex_test");
}

std::string error_of(const std::string& re) {
  try {
    compile_regex(re);
  } catch (const specd::Error& e) {
    EXPECT_EQ(e.code(), specd::ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

// Every string over `alphabet` of length <= max_len.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out{""};
  for (size_t begin = 0, len = 1; len <= max_len; ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

struct OracleCase {
  const char* regex;
  const char* alphabet;
};

// Constructs std::regex (ECMAScript) reads the same way; dot avoids \r, where they differ.
const OracleCase kOracleCases[] = {
    {"abc", "abc"},
    {"a|b|", "abc"},
    {"a*", "ab"},
    {"a+b?", "ab"},
    {"(ab)*c", "abc"},
    {"(a|b)*abb", "ab"},
    {"a{3}", "ab"},
    {"a{2,}b", "ab"},
    {"a{1,3}b", "ab"},
    {"[a-c]+", "abcd"},
    {"[^ab]*", "abc\n"},
    {"\\d+", "a09"},
    {"\\w*\\s?", "a_ \n-"},
    {"[\\d-]+", "1-a"},
    {"(?:a|bc)+", "abc"},
    {"(a*)*", "ab"},
    {"(a|a)*b", "ab"},
    {"(a?){3}", "ab"},
    {"((a|)b?)*c", "abc"},
    {"(a*b*)*", "abc"},
    {"x(a?b?)+y", "abxy"},
    {"(a*|b)+c", "abc"},
    {".*", "a\n "},
    {"a.c", "abc\n"},
    {"\\.\\*[.]", ".*a"},
    {"a{0}b", "ab"},
    {"a{0,1}b{0}", "ab"},
    {"(|a)+", "ab"},
    {"()", "a"},
    {"", "a"},
    {"(a|b)*?c", "abc"},
    {"a+?b??", "ab"},
    {"\\x41\\u0042", "AB"},
    {"[^\\W_]+", "a_-1"},
    {"[\\S]", "a \t"},
    {"\\D\\W", "1a -"},
    {"^ab$", "ab"},
    {"(ab|a)(bc|c)", "abc"},
    {"[a-]+", "a-b"},
    {"[-a]", "a-b"},
    {"(a|b){2,3}(ab){1,2}", "ab"},
    {"((a{2}|b)c?){1,2}", "abc"},
    {"[\\s\\d]{2}", "1 a\n"},
    {"\\t\\n\\f\\v\\r\\0", "a"},
};

TEST(RegexGbnf, AgreesWithStdRegexOnFullMatches) {
  for (const OracleCase& c : kOracleCases) {
    SCOPED_TRACE(c.regex);
    const auto g = compile_regex(c.regex);
    const std::regex oracle(c.regex, std::regex::ECMAScript);
    for (const std::string& s : all_strings(c.alphabet, 5)) {
      ASSERT_EQ(full_match(g, s), std::regex_match(s, oracle)) << "string '" << s << "'";
    }
  }
}

// A random regex over {a, b} from a fixed seed (groups, alternation, every quantifier form,
// classes, `.`), kept with its structure so the test can match it by itself: std::regex
// backtracks exponentially on nested loops such as ((a|)+)*, so it cannot be the oracle here.
struct RandomRegex {
  enum class Kind { kChar, kSeq, kAlt, kRepeat } kind = Kind::kSeq;
  std::string chars;  // kChar: the characters of {a, b} it matches
  std::vector<RandomRegex> kids;
  int min = 1, max = 1;  // kRepeat; max < 0: unbounded
  std::string text;
};

RandomRegex random_regex(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return int(rng() % unsigned(n)); };
  using Kind = RandomRegex::Kind;
  RandomRegex seq;
  for (int i = 0, n = 1 + pick(3); i < n; ++i) {
    static const std::pair<const char*, const char*> kAtoms[] = {
        {"a", "a"}, {"b", "b"}, {"[ab]", "ab"}, {".", "ab"}, {"[^b]", "a"}};
    RandomRegex atom;
    const int what = depth > 0 ? pick(8) : pick(5);
    if (what < 5) {
      atom = RandomRegex{Kind::kChar, kAtoms[what].second, {}, 1, 1, kAtoms[what].first};
    } else {
      atom = RandomRegex{Kind::kAlt, "", {random_regex(rng, depth - 1)}, 1, 1, ""};
      if (what == 6) atom.kids.push_back(random_regex(rng, depth - 1));
      if (what == 7) atom.kids.push_back(RandomRegex{});  // an empty alternative
      atom.text = what == 6 ? "(?:" : "(";
      for (size_t k = 0; k < atom.kids.size(); ++k) atom.text += (k ? "|" : "") + atom.kids[k].text;
      atom.text += ")";
    }
    static const std::tuple<const char*, int, int> kQuantifiers[] = {
        {"", 1, 1},      {"*", 0, -1},    {"+", 1, -1},  {"?", 0, 1},     {"{2}", 2, 2},
        {"{0,2}", 0, 2}, {"{1,}", 1, -1}, {"*?", 0, -1}, {"{1,3}", 1, 3}, {"??", 0, 1}};
    const auto& [q, lo, hi] = kQuantifiers[pick(10)];
    if (*q) atom = RandomRegex{Kind::kRepeat, "", {atom}, lo, hi, atom.text + q};
    seq.text += atom.text;
    seq.kids.push_back(std::move(atom));
  }
  return seq;
}

// Bit i set: the regex can match s[start, i). `memo` holds answers for this `s`.
using EndsMemo = std::map<std::pair<const RandomRegex*, size_t>, uint32_t>;
uint32_t ends(const RandomRegex& r, const std::string& s, size_t start, EndsMemo& memo) {
  using Kind = RandomRegex::Kind;
  const auto [it, fresh] = memo.try_emplace({&r, start}, 0);
  if (!fresh) return it->second;
  uint32_t out = 0;
  auto from = [&](const RandomRegex& k, uint32_t starts) {
    uint32_t e = 0;
    for (size_t p = 0; p <= s.size(); ++p)
      if (starts >> p & 1) e |= ends(k, s, p, memo);
    return e;
  };
  switch (r.kind) {
    case Kind::kChar:
      if (start < s.size() && r.chars.find(s[start]) != std::string::npos) out = 1u << (start + 1);
      break;
    case Kind::kSeq:
      out = 1u << start;
      for (const auto& k : r.kids) out = from(k, out);
      break;
    case Kind::kAlt:
      for (const auto& k : r.kids) out |= ends(k, s, start, memo);
      break;
    case Kind::kRepeat: {
      uint32_t cur = 1u << start;
      if (r.min == 0) out = cur;
      const int rounds = r.max >= 0 ? r.max : r.min + int(s.size()) + 1;  // more cannot reach new ends
      for (int i = 1; i <= rounds && cur; ++i) {
        cur = from(r.kids[0], cur);
        if (i >= r.min) out |= cur;
      }
      break;
    }
  }
  memo[{&r, start}] = out;
  return out;
}

TEST(RegexGbnf, AgreesWithAReferenceMatcherOnRandomRegexes) {
  std::mt19937 rng(20240501);
  const std::vector<std::string> strings = all_strings("ab", 6);
  size_t matched = 0;
  for (int i = 0; i < 300; ++i) {
    const RandomRegex re = random_regex(rng, 3);
    SCOPED_TRACE(re.text);
    const auto g = compile_regex(re.text);
    for (const std::string& s : strings) {
      EndsMemo memo;
      const bool expected = (ends(re, s, 0, memo) >> s.size()) & 1;
      matched += expected;
      ASSERT_EQ(full_match(g, s), expected) << "'" << s << "'";
    }
  }
  EXPECT_GT(matched, 1000u);  // the regexes are not all trivially empty
}

TEST(RegexGbnf, EscapesOutsideTheOracleAlphabet) {
  const auto g = compile_regex("\\t\\n\\f\\v\\r\\0");
  EXPECT_TRUE(full_match(g, std::string("\t\n\f\v\r\0", 6)));
  const auto pair = compile_regex("\\uD83D\\uDE00|\\u00e9|[\\u4e00-\\u9fff]+");
  EXPECT_TRUE(full_match(pair, "\xF0\x9F\x98\x80"));  // U+1F600 from a surrogate pair
  EXPECT_TRUE(full_match(pair, "\xC3\xA9"));
  EXPECT_TRUE(full_match(pair, "\xE4\xB8\xAD\xE6\x96\x87"));
  EXPECT_FALSE(full_match(pair, "e"));
  const auto utf8 = compile_regex("caf\xC3\xA9.");
  EXPECT_TRUE(full_match(utf8, "caf\xC3\xA9\xE2\x82\xAC"));  // `.` is a code point, not a byte
  EXPECT_FALSE(full_match(utf8, "caf\xC3\xA9\n"));
  const auto brace = compile_regex("a{b}c{");  // a '{' that starts no quantifier is literal
  EXPECT_TRUE(full_match(brace, "a{b}c{"));
  const auto named = compile_regex("(?P<x>a)(?<y>b)");
  EXPECT_TRUE(full_match(named, "ab"));
}

TEST(RegexGbnf, AnswersPrefixQuestions) {
  const auto g = compile_regex("a{3}b");
  Matcher m(g);
  EXPECT_FALSE(m.accept("ab"));  // two a's then b: a{3}b can no longer match
  EXPECT_TRUE(m.accept("aa"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept("ab"));
  EXPECT_TRUE(m.closed());

  Matcher star(compile_regex("(a|b)*c"));
  EXPECT_TRUE(star.accept("abba"));
  EXPECT_FALSE(star.can_end());
  EXPECT_FALSE(star.accept("d"));
  EXPECT_TRUE(star.accept("c"));
  EXPECT_TRUE(star.closed());
}

TEST(RegexGbnf, JsonStringModeEscapesWhatJsonMustEscape) {
  const auto q = compile_json_pattern("^a\"b\\\\c$");  // the value a"b\c
  EXPECT_TRUE(full_match(q, R"("a\"b\\c")"));
  EXPECT_FALSE(full_match(q, R"("a"b\c")"));

  const auto dot = compile_json_pattern("^.$");
  for (const char* ok :
       {R"("x")", R"("\"")", R"("\\")", R"("\t")", R"("\u0009")", R"("\u001F")", R"("\b")", "\"\xC3\xA9\""}) {
    EXPECT_TRUE(full_match(dot, ok)) << ok;
  }
  for (const char* bad : {R"("\n")", R"("\u000a")", R"("\u000A")", "\"\t\"", R"(""")", R"("\")", R"("\x")", R"("")"}) {
    EXPECT_FALSE(full_match(dot, bad)) << bad;
  }

  const auto cls = compile_json_pattern("^[\\n\"a]+$");
  EXPECT_TRUE(full_match(cls, R"("a\n\"\u000Aa")"));
  EXPECT_FALSE(full_match(cls, "\"a\n\""));  // a raw newline is not JSON
  EXPECT_FALSE(full_match(cls, R"("\t")"));

  const auto neg = compile_json_pattern("^[^a]*$");
  EXPECT_TRUE(full_match(neg, R"("\"\\\n\r\u0000b")"));
  EXPECT_FALSE(full_match(neg, R"("ba")"));
}

TEST(RegexGbnf, JsonStringModeIsASearchUnlessAnchored) {
  const auto search = compile_json_pattern("\\d{3}");
  EXPECT_TRUE(full_match(search, R"("123")"));
  EXPECT_TRUE(full_match(search, R"("ab\n 1234 \"x")"));
  EXPECT_FALSE(full_match(search, R"("12a3")"));

  const auto start = compile_json_pattern("^ab");
  EXPECT_TRUE(full_match(start, R"("abxyz")"));
  EXPECT_FALSE(full_match(start, R"("xab")"));
  const auto end = compile_json_pattern("ab$");
  EXPECT_TRUE(full_match(end, R"("xyzab")"));
  EXPECT_FALSE(full_match(end, R"("abx")"));
  const auto either = compile_json_pattern("^a|b$");  // starts with a, or ends with b
  EXPECT_TRUE(full_match(either, R"("axx")"));
  EXPECT_TRUE(full_match(either, R"("xxb")"));
  EXPECT_FALSE(full_match(either, R"("xax")"));
  EXPECT_TRUE(full_match(compile_json_pattern(""), R"("any\nthing")"));
}

TEST(RegexGbnf, RefusesWhatItCannotExpressNamingItAndTheOffset) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "backreference"},
      {"(?P<n>a)(?P=n)", "backreference"},
      {"(?<n>a)\\k<n>", "backreference"},
      {"a(?=b)", "lookahead"},
      {"a(?!b)", "lookahead"},
      {"(?<=a)b", "lookbehind"},
      {"(?<!a)b", "lookbehind"},
      {"\\ba", "word boundary"},
      {"a\\B", "word boundary"},
      {"(?i)a", "inline flags"},
      {"(?>a)", "atomic"},
      {"a*+", "possessive"},
      {"a++", "possessive"},
      {"a{2}+", "possessive"},
      {"a**", "quantifier after a quantifier"},
      {"(a", "unbalanced"},
      {"a)", "unbalanced"},
      {"a{3,2}", "n > m"},
      {"a{10001}", "over 10000"},
      {"a{1,99999999999}", "over 10000"},
      {"a^", "'^'"},
      {"a$b", "'$'"},
      {"(^a)", "'^'"},
      {"(a$)", "'$'"},
      {"\\p{L}", "Unicode property"},
      {"*a", "nothing to repeat"},
      {"a|?", "nothing to repeat"},
      {"{2}", "nothing to repeat"},
      {"[b-a]", "reversed range"},
      {"[]a]", "']' first"},
      {"[a", "unterminated"},
      {"[\\d-z]", "range"},
      {"\\q", "unknown escape"},
      {"a\\", "trailing backslash"},
      {"\\x4", "\\x"},
      {"\\uD800", "surrogate"},
      {"a{,3}", "{,n}"},
      {"[[:alpha:]]", "POSIX"},
      {"\xC3", "UTF-8"},
  };
  for (const auto& [re, what] : cases) {
    const std::string err = error_of(re);
    EXPECT_NE(err.find(what), std::string::npos) << re << " → " << err;
    EXPECT_NE(err.find("offset"), std::string::npos) << re << " → " << err;
  }
  EXPECT_NE(error_of("ab(cd").find("offset 2"), std::string::npos);
}

TEST(RegexGbnf, NestingIsBoundedAndCheckedWithoutRecursion) {
  const std::string ok = std::string(128, '(') + "a" + std::string(128, ')') + "*";
  EXPECT_TRUE(full_match(compile_regex(ok), "aaa"));
  const std::string deep = std::string(129, '(') + "a" + std::string(129, ')');
  EXPECT_NE(error_of(deep).find("nested deeper than 128"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string hostile = std::string(100000, '(');
  EXPECT_NE(error_of(hostile).find("nested deeper"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(RegexGbnf, PathologicalRegexesMatchInBoundedTime) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string many_a(2000, 'a');
  const auto empty_loop = compile_regex("(a*)*");
  EXPECT_TRUE(full_match(empty_loop, many_a));
  EXPECT_FALSE(full_match(empty_loop, many_a + "b"));
  const auto twice = compile_regex("(a|a)*b");
  EXPECT_TRUE(full_match(twice, many_a + "b"));
  EXPECT_FALSE(full_match(twice, many_a));
  const auto nested = compile_regex("((a?)*)*(a+)+b");
  EXPECT_TRUE(full_match(nested, many_a + "b"));
  EXPECT_FALSE(full_match(nested, many_a + "c"));
  const auto empty_nest = compile_regex("(((((a?)?)?)?)*)*((((b*)*)*)*)*");
  EXPECT_TRUE(full_match(empty_nest, "aaabbb"));
  EXPECT_FALSE(full_match(empty_nest, "aba"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST(RegexGbnf, LargeRegexesTranslateInBoundedTime) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string literal(100 * 1024, 'x');
  for (size_t i = 0; i < literal.size(); i += 7) literal[i] = 'y';
  EXPECT_TRUE(full_match(compile_regex(literal), literal));
  std::string alts;  // 100 KB of alternatives and classes
  while (alts.size() < 100 * 1024) alts += "(?:[a-f]{1,3}|x\\d)|";
  alts += "z";
  const auto g = compile_regex(alts);
  EXPECT_TRUE(full_match(g, "x7"));
  EXPECT_TRUE(full_match(g, "z"));
  EXPECT_FALSE(full_match(g, "x"));
  const auto counted = compile_regex("((a{100}){100}){1,2}");  // 10,000 or 20,000 a's via rules
  EXPECT_TRUE(full_match(counted, std::string(20000, 'a')));
  EXPECT_FALSE(full_match(counted, std::string(19999, 'a')));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

}  // namespace
