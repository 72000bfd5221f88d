// The GBNF parser, the matcher's prefix answers and the vocabulary-trie masks
// (core/src/constrain/).
#include "constrain/grammar.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "constrain/matcher.hpp"
#include "constrain/token_mask.hpp"
#include "specd/error.hpp"

namespace {

using specd::constrain::compile_gbnf;
using specd::constrain::full_match;
using specd::constrain::Matcher;

std::string error_of(const std::string& gbnf) {
  try {
    compile_gbnf(gbnf, "test");
  } catch (const specd::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, LiteralsClassesGroupsAndRepetitions) {
  const auto g = compile_gbnf(R"(
root ::= greeting (", " name)* "!"?   # a comment
greeting ::= "hello" | "hi"
name ::= [A-Z] [a-z]{1,5}
)");
  EXPECT_TRUE(full_match(g, "hello"));
  EXPECT_TRUE(full_match(g, "hi, Bob, Alice!"));
  EXPECT_FALSE(full_match(g, "hi, B"));         // [a-z]{1,5}: at least one
  EXPECT_FALSE(full_match(g, "hi, Bobbbbbb"));  // at most five
  EXPECT_FALSE(full_match(g, "hey"));
  EXPECT_FALSE(full_match(g, "hello!!"));
}

TEST(Gbnf, EscapesNegationAnyAndCounts) {
  const auto g = compile_gbnf(R"(root ::= "\x41\u00e9\n" [^"\\]* "\"" . x{2} x{1,} x{0,2}
x ::= [0-9])");
  EXPECT_TRUE(full_match(g, "A\xc3\xa9\nabc\"Z123"));
  EXPECT_TRUE(full_match(g,
                         "A\xc3\xa9\n\"\xe2\x82\xac"
                         "1234567"));
  EXPECT_FALSE(full_match(g, "A\xc3\xa9\na\\\"Z123"));  // a backslash is outside [^"\\]
  EXPECT_FALSE(full_match(g, "A\xc3\xa9\n\"Z12"));      // x{2} x{1,}: three digits at least
}

TEST(Gbnf, NewlinesEndRulesOutsideParentheses) {
  const auto g = compile_gbnf("root ::=\n  \"a\" (\n  \"b\"\n  | \"c\" )\n  | \"d\"\n");
  EXPECT_TRUE(full_match(g, "ab"));
  EXPECT_TRUE(full_match(g, "ac"));
  EXPECT_TRUE(full_match(g, "d"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  EXPECT_NE(error_of("root ::= foo").find("rule 'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= a \"x\"\na ::= \"\" | root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"\")*").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a").find("test:1:"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= [b-a]").find("below its start"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("m > n"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{10001}").find("repetition count"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
}

TEST(Gbnf, HostileGrammarsFailFastAndBounded) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')')).find("nested deeper"),
            std::string::npos);
  // 10^6 alternatives are refused by the size limits; 10^5 compile and match.
  std::string many = "root ::= \"x0\"";
  for (int i = 1; i < 1000000; ++i) {
    many += " | \"x";
    many += std::to_string(i);
    many += '"';
    if (i == 99999) {
      const auto g = compile_gbnf(many);
      EXPECT_TRUE(full_match(g, "x99999"));
      EXPECT_FALSE(full_match(g, "x100000"));
    }
  }
  const std::string err = error_of(many);
  EXPECT_NE(err.find("at most"), std::string::npos) << err;
  // Nested counted repetitions repeat references to the inner rule: 4000 elements, not 10^12.
  const auto nested = compile_gbnf("root ::= ((((\"a\"{1000}){1000}){1000}){1000})");
  EXPECT_LT(nested->elements.size(), 20000u);
  Matcher m(nested);
  EXPECT_TRUE(m.accept(std::string(5000, 'a')));
  EXPECT_FALSE(m.can_end());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

TEST(Matcher, AnswersWhetherAPrefixCanStillMatch) {
  const auto g = compile_gbnf(R"(root ::= "{" ws "\"a\"" ws ":" ws [0-9]+ ws "}"
ws ::= [ ]{0,3})");
  Matcher m(g);
  EXPECT_TRUE(m.accept("{ \"a"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept("b"));  // refused: the state is unchanged
  EXPECT_TRUE(m.accept("\":12"));
  EXPECT_FALSE(m.accept("    "));  // at most three spaces
  EXPECT_TRUE(m.accept(" }"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.closed());
}

TEST(Matcher, KeepsPartialUtf8WhileACompletionIsPossible) {
  const auto g = compile_gbnf(R"(root ::= [\u00e0-\u00ff] "!")");  // à..ÿ: C3 A0..C3 BF
  Matcher m(g);
  EXPECT_TRUE(m.accept("\xc3"));  // a lead byte whose completions meet the set
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept("\x80"));  // U+00C0 is outside
  EXPECT_TRUE(m.accept("\xa9!"));
  EXPECT_TRUE(m.can_end());
  Matcher n(g);
  EXPECT_FALSE(n.accept("\xe2"));  // a 3-byte code point can never be in the set
  EXPECT_FALSE(n.accept("\xff"));  // not UTF-8
  // Lead bytes whose payload bits are zero start only long code points, never ASCII.
  const auto ascii = compile_gbnf(R"(root ::= [@a-z])");
  for (const char* lead : {"\xf0", "\xe0", "\xc2", "\xf4\x90"}) EXPECT_FALSE(Matcher(ascii).accept(lead)) << lead;
}

TEST(Matcher, LongRepetitionsDoNotGrowTheStack) {
  const auto g = compile_gbnf("root ::= [a-z]* \".\"");
  Matcher m(g);
  EXPECT_TRUE(m.accept(std::string(100000, 'q')));
  for (const auto& s : m.state().stacks) EXPECT_LE(s.size(), 3u);
  EXPECT_TRUE(m.accept("."));
  EXPECT_TRUE(m.closed());
}

TEST(Matcher, AmbiguousGrammarsStayBounded) {
  // (a|a|a)* reads "aaa..." several ways at every step: the stacks are deduplicated.
  const auto g = compile_gbnf("root ::= (\"a\" | \"a\" | [a-c])* \"b\"");
  Matcher m(g);
  EXPECT_TRUE(m.accept(std::string(5000, 'a')));
  EXPECT_LE(m.state().stacks.size(), 4u);
  EXPECT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.can_end());
}

// The trie walk allows exactly the tokens whose bytes a copy of the matcher accepts.
TEST(TokenTrie, MaskEqualsCheckingEveryToken) {
  std::mt19937 rng(7);
  const std::string alphabet = "{}\":, abc019\xc3\xa9\xe2\x82\xac";
  std::vector<std::string> vocab(3000);
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (i % 97 == 0) continue;  // special tokens: no bytes
    const size_t len = 1 + rng() % 6;
    for (size_t j = 0; j < len; ++j) vocab[i] += alphabet[rng() % alphabet.size()];
  }
  vocab[5] = vocab[6];  // two ids with the same bytes
  specd::constrain::TokenTrie trie(vocab);
  const auto g = compile_gbnf(R"(root ::= "{" ( str ":" [0-9]+ ( "," str ":" [0-9]+ )* )? "}"
str ::= "\"" [a-c\u00e9\u20ac ]* "\"")");
  specd::constrain::StateTable table;  // shared by every prefix, as a MaskCache shares it
  for (const std::string& prefix : {std::string(""), std::string("{"), std::string("{\"a\xc3"),
                                    std::string("{\"ab\":1"), std::string("{\"\xe2\x82"), std::string("{}")}) {
    Matcher m(g);
    ASSERT_TRUE(m.accept(prefix)) << prefix;
    std::vector<uint64_t> mask((vocab.size() + 63) / 64), memo(mask.size());
    trie.allowed(m, m.state(), mask);
    ASSERT_TRUE(trie.allowed(m, table, m.state(), memo));  // memoized transitions, loops skipped
    EXPECT_EQ(memo, mask) << prefix;
    for (size_t id = 0; id < vocab.size(); ++id) {
      Matcher copy = m;
      const bool expect = !vocab[id].empty() && copy.accept(vocab[id]);
      EXPECT_EQ(((mask[id >> 6] >> (id & 63)) & 1) != 0, expect) << "prefix '" << prefix << "' token " << id;
    }
  }
}

// A MaskCache whose state table fills up (a bounded string has a state per position: twice the
// table's size here) starts the table over and keeps giving exact masks: the same as the walk
// without memoized transitions, at every position checked.
TEST(MaskCache, MasksStayExactWhenTheStateTableFillsUp) {
  constexpr int kLength = 2 * static_cast<int>(specd::constrain::StateTable::kMaxStates);
  std::mt19937 rng(11);
  std::vector<std::string> vocab(2000);
  for (auto& t : vocab) {
    const size_t len = 1 + rng() % 5;
    for (size_t j = 0; j < len; ++j) t += "ab\""[rng() % 3];
  }
  auto trie = std::make_shared<const specd::constrain::TokenTrie>(vocab);
  const auto g = compile_gbnf("root ::= \"\\\"\" [ab]{0," + std::to_string(kLength) + "} \"\\\"\"");
  specd::constrain::MaskCache cache(trie);
  Matcher m(g);
  ASSERT_TRUE(m.accept("\""));
  std::vector<uint64_t> want((vocab.size() + 63) / 64);
  for (int pos = 0; pos <= kLength; ++pos) {
    if (pos % 100 == 0 || pos >= kLength - 5) {
      trie->allowed(m, m.state(), want);
      const std::shared_ptr<const std::vector<uint64_t>> got = cache.mask(m, m.state());
      EXPECT_EQ(*got, want) << "position " << pos;
    } else {
      cache.mask(m, m.state());
    }
    if (pos < kLength) {
      ASSERT_TRUE(m.accept("a"));
    }
  }
  EXPECT_GT(cache.stats().misses, specd::constrain::StateTable::kMaxStates);
}

}  // namespace
