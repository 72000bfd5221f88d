// IncrementalDetokenizer: deltas are complete UTF-8 and concatenate to the full decode, for one
// or several ids per push, byte-fallback runs, split multi-byte characters, SentencePiece
// leading-space stripping, clean_up_tokenization_spaces and a prompt as context.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/components.hpp"
#include "tokenizer/tokenizer.hpp"
#include "unit/tokenizer/crafted.hpp"
#include "unit/tokenizer/oracle_util.hpp"

namespace specd::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

// Streams ids in chunks of `chunk`; checks every delta is valid UTF-8; returns the deltas.
std::vector<std::string> stream(const Tokenizer& tok, const Ids& ids, size_t chunk, bool skip, const Ids& prompt = {}) {
  IncrementalDetokenizer detok(tok, skip, prompt);
  std::vector<std::string> deltas;
  for (size_t i = 0; i < ids.size(); i += chunk) {
    const size_t n = std::min(chunk, ids.size() - i);
    deltas.push_back(detok.push(std::span<const int32_t>(ids).subspan(i, n)));
  }
  deltas.push_back(detok.flush());
  for (const auto& d : deltas) EXPECT_TRUE(detail::is_valid_utf8(d)) << testing::escaped(d);
  return deltas;
}

std::string concat(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += p;
  return out;
}

std::unique_ptr<Tokenizer> real(const std::string& name) {
  return Tokenizer::load(testing::real_tokenizer_dir(name));
}

class DetokenizerCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(DetokenizerCorpus, DeltasConcatenateToFullDecode) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = real(GetParam());
  const auto corpus = testing::read_corpus();
  size_t mismatches = 0, checked = 0;
  std::string first;
  for (const auto& text : corpus) {
    const Ids ids = tok->encode(text, {.add_special_tokens = true, .parse_special = true});
    for (const bool skip : {false, true}) {
      const std::string want = tok->decode(ids, skip);
      for (const size_t chunk : {1, 2, 3, 5, 8}) {
        ++checked;
        const std::string got = concat(stream(*tok, ids, chunk, skip));
        if (got != want && ++mismatches == 1)
          first = testing::escaped(text) + " chunk " + std::to_string(chunk) + " skip " + std::to_string(skip) +
                  ":\n  streamed " + testing::escaped(got) + "\n  decode   " + testing::escaped(want);
      }
    }
  }
  std::printf("%s: %zu streams checked, %zu mismatches\n", GetParam().c_str(), checked, mismatches);
  EXPECT_EQ(mismatches, 0u) << first;
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, DetokenizerCorpus, ::testing::Values("llama2", "llama3", "qwen3"),
                         [](const auto& info) { return info.param; });

TEST(Detokenizer, MultiByteCharacterSplitAcrossByteLevelTokens) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = real("llama3");
  const std::string text = "\U00020001\U00020001 ok";  // rare CJK: several byte tokens per character
  const Ids ids = tok->encode(text, {.add_special_tokens = false});
  ASSERT_GT(ids.size(), 4u);
  const auto deltas = stream(*tok, ids, 1, false);
  EXPECT_EQ(concat(deltas), text);
  for (const auto& d : deltas) EXPECT_EQ(d.find("\xEF\xBF\xBD"), std::string::npos) << "replacement char in a delta";
  EXPECT_EQ(deltas.front(), "") << "first byte token alone must not produce text";
}

TEST(Detokenizer, ByteFallbackRunSplitAcrossPushes) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = real("llama2");
  const Ids ids = tok->encode("a \U00020001", {.add_special_tokens = false});
  // "▁a", "▁", then four <0xHH> byte tokens.
  ASSERT_EQ(ids.size(), 6u);
  EXPECT_EQ(tok->id_to_token(ids[2]), "<0xF0>");
  const auto deltas = stream(*tok, ids, 1, false);
  EXPECT_EQ(deltas, (std::vector<std::string>{"a", " ", "", "", "", "\U00020001", ""}));
}

TEST(Detokenizer, SeveralTokensPerPush) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = real("qwen3");
  const std::string text =
      "Speculative steps accept up to k+1 tokens: \u4f60\u597d\U0001F468\u200d\U0001F469\u200d\U0001F467!";
  const Ids ids = tok->encode(text);
  for (const size_t chunk : {1, 4, 5, 100}) EXPECT_EQ(concat(stream(*tok, ids, chunk, false)), text) << chunk;
}

TEST(Detokenizer, SentencePieceLeadingSpace) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = real("llama2");
  const Ids ids = tok->encode("Hello world");  // <s> ▁Hello ▁world
  EXPECT_EQ(stream(*tok, ids, 1, true), (std::vector<std::string>{"", "Hello", " world", ""}));
  EXPECT_EQ(concat(stream(*tok, ids, 1, false)), tok->decode(ids));
  // A lone "▁" first: the strip applies to it, not to the word after it.
  const Ids spaced = tok->encode("  Hi", {.add_special_tokens = false});
  EXPECT_EQ(concat(stream(*tok, spaced, 1, false)), tok->decode(spaced));
}

TEST(Detokenizer, CleanUpTokenizationSpaces) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = real("llama3");  // clean_up_tokenization_spaces: true
  const Ids ids = tok->encode("Hello , world . I 'm here , do n't go ' now ' .", {.add_special_tokens = false});
  const std::string want = tok->decode(ids);
  // The rules apply in order: " ." first, so "' ." keeps its space.
  EXPECT_EQ(want, "Hello, world. I'm here, don't go'now '.");
  for (const size_t chunk : {1, 2, 3}) EXPECT_EQ(concat(stream(*tok, ids, chunk, false)), want) << chunk;
}

TEST(Detokenizer, InvalidByteSequenceIsReplacedOnce) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = real("llama2");
  const int32_t e4 = *tok->token_to_id("<0xE4>"), bd = *tok->token_to_id("<0xBD>");
  const Ids ids = {e4, *tok->token_to_id("A"), bd, *tok->token_to_id("\u2581B"), e4};
  const std::string want = tok->decode(ids);
  EXPECT_EQ(want,
            "\xEF\xBF\xBD"
            "A\xEF\xBF\xBD B\xEF\xBF\xBD");
  EXPECT_EQ(concat(stream(*tok, ids, 1, false)), want);
}

TEST(Detokenizer, PromptIsContext) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  for (const char* name : testing::kRealTokenizers) {
    const auto tok = real(name);
    const Ids all = tok->encode("Once upon a time, \u4f60\u597d, there was a tokenizer. The end.");
    for (size_t split = 1; split < all.size(); ++split) {
      const Ids prompt(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(split));
      const Ids gen(all.begin() + static_cast<std::ptrdiff_t>(split), all.end());
      const std::string full = tok->decode(all), head = tok->decode(prompt);
      if (!full.starts_with(head) || head.ends_with("\xEF\xBF\xBD")) continue;
      EXPECT_EQ(concat(stream(*tok, gen, 1, false, prompt)), full.substr(head.size())) << name << " split " << split;
    }
  }
}

TEST(Detokenizer, CraftedByteLevel) {
  const auto tok = Tokenizer::load(testing::write_tokenizer("detok", testing::byte_level_tokenizer_json()));
  const std::string text = "aaaa \xE4\xBD\xA0 \xF0\x9F\x98\x80!";
  const Ids ids = tok->encode(text);
  const auto deltas = stream(*tok, ids, 1, false);
  EXPECT_EQ(concat(deltas), text);
  // Byte tokens of one character produce nothing until the character is complete; the space
  // before it waits for clean-up (" ." would delete it).
  EXPECT_EQ(deltas, (std::vector<std::string>{"aaaa", "", "", "", " \xE4\xBD\xA0", "", "", "", "", " \xF0\x9F\x98\x80",
                                              "!", ""}));
}

}  // namespace
}  // namespace specd::tokenizer
